package pyprof.jvm;

import com.sun.jna.Library;
import com.sun.jna.Native;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * pyprof's own threads in a service: named daemon threads; heavy work at the lowest priority, so
 * that it takes only what the service leaves idle. The JVM ignores {@link Thread#setPriority} on
 * Linux, so such a thread also sets its niceness to 19 (C: {@code setpriority(PRIO_PROCESS,
 * gettid(), 19)}, per thread there); without libc's {@code gettid}, the Java priority only.
 */
public final class Background {
  private Background() {}

  /** The libc functions that lower one thread's priority. */
  public interface LibC extends Library {
    int gettid();

    int setpriority(int which, int who, int prio);
  }

  /** Lowers the calling thread's priority to the lowest. */
  private static void lowerPriority() {
    Thread.currentThread().setPriority(Thread.MIN_PRIORITY);
    try {
      LibC c = Native.load("c", LibC.class);
      c.setpriority(0 /* PRIO_PROCESS */, c.gettid(), 19);
    } catch (Throwable t) {
      // no libc of that shape: the Java priority is all there is
    }
  }

  /** A single daemon thread named {@code name}, at the lowest priority, running tasks in order. */
  public static ExecutorService singleThread(String name) {
    return singleThread(name, true);
  }

  /**
   * A single daemon thread running tasks in order, at the lowest priority when {@code low} (the
   * saver), else at the process's (window boundaries, whose timing counts).
   */
  public static ExecutorService singleThread(String name, boolean low) {
    return Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(() -> {
        if (low) {
          lowerPriority();
        }
        r.run();
      }, name);
      t.setDaemon(true);
      return t;
    });
  }
}
