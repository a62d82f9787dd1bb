package pyprof.jvm;

import com.sun.jna.Library;
import com.sun.jna.Native;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * pyprof's own threads in a service: daemon threads with names that say whose they are, at the
 * lowest priority an unprivileged thread can take, so that cutting and saving windows uses at
 * most one core each and only what the service's threads leave idle. On Linux the JVM ignores
 * {@link Thread#setPriority} by default, so each thread also sets its own niceness to 19
 * (C: {@code setpriority(PRIO_PROCESS, gettid(), 19)}, which acts on one thread there);
 * elsewhere, or where libc lacks {@code gettid}, only the Java priority is set.
 */
public final class Background {
  private Background() {}

  /** The libc functions that lower one thread's priority. */
  public interface LibC extends Library {
    int gettid();

    int setpriority(int which, int who, int prio);
  }

  /** The niceness pyprof's threads take (the lowest priority). */
  public static final int NICENESS = 19;

  /** Lowers the calling thread's priority (niceness {@link #NICENESS}); true when the OS took it. */
  public static boolean lowerPriority() {
    Thread.currentThread().setPriority(Thread.MIN_PRIORITY);
    try {
      LibC c = Native.load("c", LibC.class);
      return c.setpriority(0 /* PRIO_PROCESS */, c.gettid(), NICENESS) == 0;
    } catch (Throwable t) { // no libc of that shape: the Java priority is all there is
      return false;
    }
  }

  /** A single daemon thread named {@code name}, at the lowest priority, running tasks in order. */
  public static ExecutorService singleThread(String name) {
    return singleThread(name, true);
  }

  /**
   * A single daemon thread named {@code name} running tasks in order, at the lowest priority when
   * {@code low} (heavy work: the saver), else at the process's (light work whose timing counts:
   * the JMX control thread takes window boundaries, a few C calls each).
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
