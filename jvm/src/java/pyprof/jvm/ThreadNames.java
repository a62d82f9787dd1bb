package pyprof.jvm;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Platform;
import java.lang.ref.WeakReference;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The Java threads whose MXNet calls a window names (trace.json {@code thread_names}): each
 * registered thread's name under its {@code pthread_t}, from which {@link #tid} computes the
 * {@code tid} MXNet 1.9.1 stamps on its events; {@link WindowCutter} writes one {@code
 * thread_name} event per registered thread among a window's events. A thread registers on its
 * first call through {@code LibMXNet} ({@link #touch()}), or itself ({@link #register()}, {@link
 * Profiler#nameThread()}: DJL's workers), again after it renames itself.
 *
 * <p>Linux only (glibc and libstdc++, as the MXNet wheels). A reused {@code pthread_t} keeps the
 * old name until its new thread registers. At most {@link #LIMIT} threads are held: past it the
 * ended ones are dropped, and a thread that still finds no room is not named.
 */
public final class ThreadNames {
  /** The most threads held at once. */
  public static final int LIMIT = 4096;

  /** pthread_t -> the thread's name when it registered, and the thread. */
  private static final ConcurrentHashMap<Long, Map.Entry<String, WeakReference<Thread>>> NAMES =
      new ConcurrentHashMap<>();
  private static final ThreadLocal<Boolean> SEEN = new ThreadLocal<>();
  private static final boolean AVAILABLE = link();

  private ThreadNames() {}

  private static final class C {
    static native long pthread_self();
  }

  private static boolean link() {
    if (!Platform.isLinux()) {
      return false;
    }
    try {
      Native.register(C.class, NativeLibrary.getInstance(Platform.C_LIBRARY_NAME));
      C.pthread_self();
      return true;
    } catch (LinkageError | RuntimeException e) {
      return false;
    }
  }

  /** Whether threads can be named here (Linux, libc's {@code pthread_self} bound). */
  public static boolean available() {
    return AVAILABLE;
  }

  /** The calling thread's {@code pthread_t} (unsigned, in a long); 0 where not available. */
  public static long self() {
    return AVAILABLE ? C.pthread_self() : 0L;
  }

  /** Registers the calling thread under its name now; its {@code pthread_t}, 0 if not named. */
  public static long register() {
    if (!AVAILABLE) {
      return 0L;
    }
    Thread t = Thread.currentThread();
    long id = C.pthread_self();
    if (NAMES.size() >= LIMIT && !NAMES.containsKey(id)) {
      NAMES.values().removeIf(e -> {
        Thread old = e.getValue().get();
        return old == null || !old.isAlive();
      });
      if (NAMES.size() >= LIMIT) {
        SEEN.set(Boolean.TRUE);
        return 0L;
      }
    }
    NAMES.put(id, Map.entry(t.getName(), new WeakReference<>(t)));
    SEEN.set(Boolean.TRUE);
    return id;
  }

  /** Registers the calling thread unless it registered before: pyprof's own calls into MXNet. */
  public static void touch() {
    if (SEEN.get() == null) {
      register();
    }
  }

  /** A copy of the registered threads' names by the {@code tid} ({@link #tid}) MXNet writes. */
  public static Map<Long, String> byTid(long seed) {
    Map<Long, String> out = new HashMap<>();
    for (Map.Entry<Long, Map.Entry<String, WeakReference<Thread>>> e : NAMES.entrySet()) {
      out.put(tid(e.getKey(), seed), e.getValue().getKey());
    }
    return out;
  }

  /**
   * The {@code tid} MXNet 1.9.1 writes for thread {@code pthread}: libstdc++'s
   * {@code std::hash<std::thread::id>}, {@code std::_Hash_bytes(&pthread, 8, seed)} (64-bit
   * murmur; {@code seed}: trace.json {@code thread_names.hash_seed}), unsigned in a long.
   */
  public static long tid(long pthread, long seed) {
    final long mul = (0xc6a4a793L << 32) + 0x5bd1e995L;
    long hash = seed ^ (8L * mul);
    hash ^= shiftMix(pthread * mul) * mul; // the one 8-byte block (little endian: the value)
    hash *= mul;
    hash = shiftMix(hash) * mul;
    return shiftMix(hash);
  }

  private static long shiftMix(long v) {
    return v ^ (v >>> 47);
  }
}
