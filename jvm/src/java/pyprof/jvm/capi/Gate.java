package pyprof.jvm.capi;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.IntSupplier;
import pyprof.jvm.PyprofException;

/**
 * The API gate of the JVM layer: no thread is inside an MXNet C API call while API profiling
 * switches.
 *
 * <p>MXNet 1.9.1 records each C API call on a per-thread stack only while
 * {@code IsProfiling(kAPI)} holds ({@code on_enter_api}/{@code on_exit_api}); a call that enters
 * before the predicate turns true and leaves after it aborts the process ({@code Check failed:
 * !thread_profiling_data.calls_.empty()}). Every C call of {@link LibMXNet} that runs those hooks
 * holds the read side of one {@link ReentrantReadWriteLock}; the calls that can change the
 * predicate (profiler config, state, a finished dump) hold the write side. The profiler-object
 * calls, which MXNet runs inside {@code IgnoreProfileCallScope}, need neither.
 *
 * <p>Lock order, for the whole JVM layer: the library load lock, then a tracker or object lock of
 * the caller, then the peer gate (Python's, when this JVM runs inside a Python process through
 * JPype), then this gate. Nothing that holds this gate takes another lock, calls back into
 * Python or loads the library.
 */
public final class Gate {
  /**
   * Another process-wide gate that a switch closes before this one: the Python layer's, when this
   * JVM runs inside a Python process. {@link #acquire()} waits until no Python thread is inside an
   * MXNet call and keeps new ones out until {@link #release()}; both run on the same thread.
   */
  public interface Peer {
    void acquire();

    void release();
  }

  /** Default seconds a switch waits for calls in flight; {@code -Dpyprof.switchTimeoutSeconds}. */
  public static final long TIMEOUT_SECONDS = Long.getLong("pyprof.switchTimeoutSeconds", 60);

  private static final ReentrantReadWriteLock LOCK = new ReentrantReadWriteLock();
  private static volatile Peer peer;

  private Gate() {}

  static void enterShared() {
    LOCK.readLock().lock();
  }

  static void exitShared() {
    LOCK.readLock().unlock();
  }

  /** Runs {@code call} as a reader and checks its return code. */
  static void shared(IntSupplier call, String function) {
    LOCK.readLock().lock();
    try {
      LibMXNet.check(call.getAsInt(), function);
    } finally {
      LOCK.readLock().unlock();
    }
  }

  /**
   * Runs the switch {@code call} with the peer gate and this one closed, and checks its return
   * code. Throws {@link PyprofException} of kind {@code invalid-state} when the calling thread is
   * itself inside a gated call, or when calls stay in flight for {@link #TIMEOUT_SECONDS}.
   */
  static void exclusive(IntSupplier call, String function) {
    Peer p = acquire(true);
    try {
      LibMXNet.check(call.getAsInt(), function);
    } finally {
      release(p);
    }
  }

  /**
   * Closes only this gate, for the Python layer, which has closed its own first (and must not be
   * asked again). Pair it with {@link #releaseForPeer()} on the same thread.
   */
  public static void acquireForPeer() {
    acquire(false);
  }

  /** Opens the gate closed by {@link #acquireForPeer()}. */
  public static void releaseForPeer() {
    release(null);
  }

  /**
   * Sets (or, with null, clears) the gate a switch closes before this one. The JPype bridge sets
   * the Python layer's here when it starts the JVM.
   */
  public static void setPeer(Peer p) {
    peer = p;
  }

  /** Threads inside a gated C call right now (an estimate, for tests and diagnostics). */
  public static int inFlight() {
    return LOCK.getReadLockCount();
  }

  private static Peer acquire(boolean withPeer) {
    if (LOCK.getReadHoldCount() > 0) {
      throw PyprofException.catalogue("gate.switch_inside_call");
    }
    Peer p = withPeer ? peer : null;
    if (p != null) {
      p.acquire();
    }
    boolean locked = false;
    try {
      locked = LOCK.writeLock().tryLock(TIMEOUT_SECONDS, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      if (!locked && p != null) {
        p.release();
      }
    }
    if (!locked) {
      throw PyprofException.catalogue("gate.switch_timeout",
          "calls", LOCK.getReadLockCount() + " call(s)", "seconds", TIMEOUT_SECONDS);
    }
    return p;
  }

  private static void release(Peer p) {
    LOCK.writeLock().unlock();
    if (p != null) {
      p.release();
    }
  }
}
