package pyprof.jvm.capi;

import com.sun.jna.Pointer;
import java.time.Instant;

/**
 * What a session that records shapes (pyprof.capture) is told of bound executors by {@link
 * LibMXNet}: each successful MXExecutorBind and MXExecutorForward, after the call, and each
 * MXExecutorFree, before it. Called outside the API gate; an implementation never throws.
 */
public interface ExecutorHook {
  /** MXExecutorBind made {@code executor} of {@code symbol} with these arguments and aux states. */
  void bound(Pointer executor, Pointer symbol, Pointer[] args, Pointer[] aux);

  /** MXExecutorForward of {@code executor} began and returned at these times (µs, epoch). */
  void forward(Pointer executor, long beginUs, long endUs);

  /** MXExecutorFree of {@code executor} is about to run. */
  void freed(Pointer executor);

  /** Now in microseconds since the epoch (MXNet's trace clock). */
  static long nowUs() {
    Instant i = Instant.now();
    return i.getEpochSecond() * 1_000_000L + i.getNano() / 1000;
  }
}
