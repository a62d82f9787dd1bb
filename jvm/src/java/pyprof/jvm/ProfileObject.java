package pyprof.jvm;

import com.sun.jna.Pointer;
import java.nio.charset.StandardCharsets;
import pyprof.jvm.capi.LibMXNet;

/**
 * A profiler task, frame, event or counter (ProfileHandle), with the semantics of
 * {@code pyprof.objects} (the Python reference):
 *
 * <ul>
 *   <li>{@link #start()} twice, or {@link #stop()} before {@link #start()}, throws: MXNet keeps one
 *       start time per handle, so both would record a wrong duration. Use one object per
 *       concurrent use.
 *   <li>A counter tracks its value as an unsigned 64-bit number: a set or an adjustment that would
 *       leave it below zero (MXNet would wrap to 18446744073709551615) or above 2^64-1 throws and
 *       leaves it unchanged.
 *   <li>{@link #close()} calls {@code MXProfileDestroyHandle} once, from any thread; it waits for a
 *       call in progress on this object, so a handle is never destroyed under a native call.
 * </ul>
 *
 * All methods are thread safe. Errors are {@link PyprofException} ({@code invalid-state},
 * {@code invalid-option}) or {@link MXNetException}.
 */
public final class ProfileObject extends NativeHandle {
  /** What the handle was created as; decides which calls make sense on it. */
  public enum Kind {
    TASK("Task"),
    FRAME("Frame"),
    EVENT("Event"),
    COUNTER("Counter");

    private final String display;

    Kind(String display) {
      this.display = display;
    }

    /** As the Python reference names it in errors: {@code "Task"}, ... */
    public String display() {
      return display;
    }
  }

  /** MXNet's profile_stat_string_t holds 128 bytes including the NUL. */
  public static final int NAME_BYTES = 127;

  private final Kind kind;
  private final String name;
  private boolean started; // guarded by this
  private long value; // unsigned; guarded by this

  public ProfileObject(Kind kind, String name, Pointer handle) {
    super(handle);
    this.kind = kind;
    this.name = name;
  }

  public Kind kind() {
    return kind;
  }

  public String name() {
    return name;
  }

  /**
   * Checks a task/frame/event/counter/marker/domain name as the Python reference does and returns
   * it: non-empty, at most 127 UTF-8 bytes, no quote, back slash or control character (MXNet
   * copies names unescaped into the JSON trace). Throws {@link PyprofException}
   * ({@code invalid-option}).
   */
  public static String checkName(String kind, Object name) {
    if (!(name instanceof String) || ((String) name).isEmpty()) {
      throw PyprofException.option(
          "invalid " + kind + " name " + repr(name) + ": expected a non-empty string");
    }
    String s = (String) name;
    int bytes = s.getBytes(StandardCharsets.UTF_8).length;
    if (bytes > NAME_BYTES) {
      throw PyprofException.option(kind + " name " + repr(s.substring(0, Math.min(40, s.length())))
          + "... is " + bytes + " bytes; MXNet keeps " + NAME_BYTES
          + " and would cut it. fix: use a shorter name");
    }
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\' || c < 0x20) {
        throw PyprofException.option(kind + " name " + repr(s) + " contains " + repr(String.valueOf(c))
            + "; MXNet writes names unescaped, so the trace would not be valid JSON. fix: leave"
            + " out quotes, back slashes and control characters");
      }
    }
    return s;
  }

  private static String repr(Object o) {
    return o instanceof String ? "'" + o + "'" : String.valueOf(o);
  }

  // ------------------------------------------------------------------ durations

  /** Begins the duration (C: MXProfileDurationStart). */
  public synchronized void start() {
    requireDuration("start");
    Pointer p = pointer();
    if (started) {
      throw PyprofException.state(describe() + " is already started; MXNet keeps one start time per"
          + " object. fix: stop() it first, or use one " + kind.display() + " per concurrent use");
    }
    LibMXNet.MXProfileDurationStart(p);
    started = true;
  }

  /** Ends the duration and records it (C: MXProfileDurationStop). */
  public synchronized void stop() {
    requireDuration("stop");
    Pointer p = pointer();
    if (!started) {
      throw PyprofException.state(describe() + " was not started. fix: start() first");
    }
    started = false;
    LibMXNet.MXProfileDurationStop(p);
  }

  public synchronized boolean isStarted() {
    return started;
  }

  // ------------------------------------------------------------------ counters

  /** The last value pyprof set, unsigned (see {@link Long#toUnsignedString(long)}). */
  public synchronized long value() {
    requireCounter("value");
    return value;
  }

  /** Sets the counter to {@code v} (0 ... 2^63-1 from Java) (C: MXProfileSetCounter). */
  public synchronized void setValue(long v) {
    requireCounter("setValue");
    if (v < 0) {
      throw PyprofException.state(describe() + " cannot be set to " + v
          + ": MXNet counters hold 0 ... 2**64-1. fix: keep the value in that range");
    }
    LibMXNet.MXProfileSetCounter(pointer(), v);
    value = v;
  }

  /** Adds {@code delta}, which may be negative (C: MXProfileAdjustCounter). */
  public synchronized void increment(long delta) {
    requireCounter("increment");
    long next = value + delta;
    if (delta < 0 && Long.compareUnsigned(value, -delta) < 0) {
      throw PyprofException.state(describe() + " would go below zero (" + Long.toUnsignedString(value)
          + " " + delta + "); MXNet stores it as uint64 and would wrap to 18446744073709551615."
          + " fix: decrement by at most the current value, or set_value() first");
    }
    if (delta > 0 && Long.compareUnsigned(next, value) < 0) {
      throw PyprofException.state(describe() + " would exceed 2**64-1 ("
          + Long.toUnsignedString(value) + " +" + delta + "). fix: set_value() to a smaller value"
          + " first");
    }
    LibMXNet.MXProfileAdjustCounter(pointer(), delta);
    value = next;
  }

  /** Subtracts {@code delta}. */
  public void decrement(long delta) {
    if (delta == Long.MIN_VALUE) {
      throw PyprofException.option(describe() + ": delta out of range: " + delta);
    }
    increment(-delta);
  }

  private void requireDuration(String op) {
    if (kind == Kind.COUNTER) {
      throw PyprofException.option(op + "() needs a Task, Frame or Event, not " + describe());
    }
  }

  private void requireCounter(String op) {
    if (kind != Kind.COUNTER) {
      throw PyprofException.option(op + "() needs a Counter, not " + describe());
    }
  }

  @Override
  protected String describe() {
    return kind.display() + " '" + name + "'";
  }

  @Override
  protected void free(Pointer p) {
    synchronized (this) { // waits for a start/stop/set/adjust in progress
      LibMXNet.MXProfileDestroyHandle(p);
    }
  }

  @Override
  public String toString() {
    return "ProfileObject[" + kind + " " + name + (isClosed() ? ", closed]" : "]");
  }
}
