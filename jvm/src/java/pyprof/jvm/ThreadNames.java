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
 * registered thread's {@link Thread#getName()} under its {@code pthread_t}. MXNet 1.9.1 stamps an
 * event with {@code std::hash<std::thread::id>} of the thread that made it, which libstdc++
 * computes from the thread's {@code pthread_t} ({@link #tid}); a window gets one
 * {@code thread_name} metadata event for each registered thread among its events
 * ({@link WindowCutter}).
 *
 * <p>A thread that calls MXNet through pyprof ({@code pyprof.jvm.capi.LibMXNet}) registers
 * itself on its first call ({@link #touch()}: one thread-local read afterwards). A thread of
 * another binding (DJL's workers) calls {@link #register()} itself ({@link Profiler#nameThread()}),
 * once, at its start; again after it renames itself. Registering costs one native call and one
 * map entry; nothing else runs on the caller's thread.
 *
 * <p>Linux only (glibc and libstdc++, as the MXNet wheels): elsewhere {@link #available()} is
 * false and nothing is registered. A {@code pthread_t} is reused once its thread ends: a new
 * thread that registers replaces the old name, an unregistered one with a reused id shows the
 * old name. At most {@link #LIMIT} threads are held: past it the ended ones are dropped, and a
 * thread that still finds no room is not named.
 */
public final class ThreadNames {
  /** The most threads held at once. */
  public static final int LIMIT = 4096;

  private static final ConcurrentHashMap<Long, Entry> NAMES = new ConcurrentHashMap<>();
  private static final ThreadLocal<Boolean> SEEN = new ThreadLocal<>();
  private static final boolean AVAILABLE = link();

  private ThreadNames() {}

  private static final class Entry {
    final String name;
    final WeakReference<Thread> thread;

    Entry(String name, Thread thread) {
      this.name = name;
      this.thread = new WeakReference<>(thread);
    }

    boolean ended() {
      Thread t = thread.get();
      return t == null || !t.isAlive();
    }
  }

  /** libc's {@code pthread_self}, bound by JNA's direct mapping. */
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

  /**
   * The calling thread's {@code pthread_t} ({@code pthread_self()}), an unsigned 64-bit value
   * held in a long; 0 where {@link #available()} is false.
   */
  public static long self() {
    return AVAILABLE ? C.pthread_self() : 0L;
  }

  /**
   * Registers the calling thread under its current {@link Thread#getName()} (again: its new
   * name) and returns its {@code pthread_t} ({@link #self()}); 0 when it cannot be named.
   */
  public static long register() {
    if (!AVAILABLE) {
      return 0L;
    }
    Thread t = Thread.currentThread();
    long id = C.pthread_self();
    if (NAMES.size() >= LIMIT && !NAMES.containsKey(id)) {
      NAMES.values().removeIf(Entry::ended);
      if (NAMES.size() >= LIMIT) {
        SEEN.set(Boolean.TRUE);
        return 0L;
      }
    }
    NAMES.put(id, new Entry(t.getName(), t));
    SEEN.set(Boolean.TRUE);
    return id;
  }

  /** Registers the calling thread unless it registered before: pyprof's own calls into MXNet. */
  public static void touch() {
    if (SEEN.get() == null) {
      register();
    }
  }

  /**
   * The registered threads now, by the {@code tid} MXNet writes for each ({@link #tid} with
   * {@code seed}; the unsigned value's bits in a long) to its name. A copy.
   */
  public static Map<Long, String> byTid(long seed) {
    Map<Long, String> out = new HashMap<>();
    for (Map.Entry<Long, Entry> e : NAMES.entrySet()) {
      out.put(tid(e.getKey(), seed), e.getValue().name);
    }
    return out;
  }

  /**
   * The {@code tid} MXNet 1.9.1 writes for the thread {@code pthread}:
   * {@code std::hash<std::thread::id>}, which libstdc++ computes as
   * {@code std::_Hash_bytes(&pthread, 8, seed)} (its 64-bit murmur hash; {@code seed} trace.json
   * {@code thread_names} {@code hash_seed}), an unsigned value's bits in a long.
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
