package pyprof.jvm.capi;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.IntSupplier;
import pyprof.jvm.PyprofException;

/**
 * The API gate of the JVM layer, as Python's {@code pyprof.native.gate} (which says why): the
 * calls of {@link LibMXNet} that run MXNet's API hooks hold the read side of one lock; those that
 * can change {@code IsProfiling(kAPI)} (config, state, a finished dump) hold the write side. Lock
 * order: the library load lock, a tracker or object lock, the peer gate (Python's, in a
 * JPype-hosted JVM), then this gate, which takes no other lock (docs/concurrency.md).
 */
public final class Gate {
  /** The gate a switch closes before this one (Python's, in a JPype-hosted JVM). */
  public interface Peer {
    void acquire();

    void release();
  }

  /** Default seconds a switch waits for calls in flight; {@code -Dpyprof.switchTimeoutSeconds}. */
  public static final long TIMEOUT_SECONDS = Long.getLong("pyprof.switchTimeoutSeconds", 60);

  private static final ReentrantReadWriteLock LOCK = new ReentrantReadWriteLock();
  private static volatile Peer peer;

  private Gate() {}

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
   * code. Throws {@link PyprofException} gate.switch_inside_call, gate.switch_timeout.
   */
  static void exclusive(IntSupplier call, String function) {
    Peer p = acquire(true);
    try {
      LibMXNet.check(call.getAsInt(), function);
    } finally {
      release(p);
    }
  }

  /** Closes only this gate, for Python, which closed its own first (then releaseForPeer). */
  public static void acquireForPeer() {
    acquire(false);
  }

  /** Opens the gate closed by {@link #acquireForPeer()}. */
  public static void releaseForPeer() {
    release(null);
  }

  /** Sets (null: clears) the gate a switch closes before this one (the JPype bridge's). */
  public static void setPeer(Peer p) {
    peer = p;
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
