package pyprof.jvm;

import clojure.lang.BigInt;
import clojure.lang.IDeref;
import clojure.lang.IFn;
import com.sun.jna.Pointer;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.List;
import pyprof.jvm.capi.LibMXNet;

/**
 * A profiler task, frame, event or counter (ProfileHandle) with the semantics of Python's
 * {@code pyprof.objects}: start twice or stop before start throws (MXNet keeps one start time
 * per handle); a counter is an unsigned 64-bit value, and a set or adjustment leaving
 * 0 ... 2^64-1 throws and leaves it unchanged; {@link #close()} destroys the handle once
 * ({@code MXProfileDestroyHandle}), after a call in progress on it. Thread safe. Errors: the
 * catalogue's {@link PyprofException}s (errors.json; limits from api.json) or
 * {@link MXNetException}.
 */
public final class ProfileObject extends NativeHandle {
  /** What the handle was created as; decides which calls make sense on it. */
  public enum Kind {
    TASK,
    FRAME,
    EVENT,
    COUNTER;

    /** As the Python reference names it in errors: {@code "Task"}, ... */
    public String display() {
      return name().charAt(0) + name().substring(1).toLowerCase(java.util.Locale.ROOT);
    }
  }

  /** api.json's {@code names}, read through {@code pyprof.rules} on first use. */
  private static final class Names {
    static final int MAX_BYTES;
    static final List<?> FORBIDDEN_CHARS;
    static final int FORBIDDEN_BELOW;
    static final int SHOWN_CHARS;
    static final IFn LONE_SURROGATE;

    static {
      MAX_BYTES = ((Number) rule("name-max-bytes")).intValue();
      FORBIDDEN_CHARS = (List<?>) rule("name-forbidden-chars");
      FORBIDDEN_BELOW = ((Number) rule("name-forbidden-below")).intValue();
      SHOWN_CHARS = ((Number) rule("name-shown-chars")).intValue();
      LONE_SURROGATE = JavaData.var("pyprof.rules", "lone-surrogate");
    }

    private static Object rule(String name) {
      return ((IDeref) JavaData.var("pyprof.rules", name)).deref();
    }
  }

  private static final String DURATIONS = "Task, Frame or Event";

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

  /** The byte limit of a name (api.json {@code names.max_bytes}: MXNet keeps 128 with the NUL). */
  public static int nameMaxBytes() {
    return Names.MAX_BYTES;
  }

  /**
   * Returns {@code name} when it is a non-empty string of at most {@link #nameMaxBytes()} UTF-8
   * bytes without a quote, back slash or control character (MXNet copies names unescaped into the
   * trace); else object.bad_name, object.name_not_unicode, object.name_too_long,
   * object.name_bad_char.
   */
  public static String checkName(String kind, Object name) {
    if (!(name instanceof String) || ((String) name).isEmpty()) {
      throw PyprofException.catalogue("object.bad_name", "what", kind, "name", name);
    }
    String s = (String) name;
    List<?> bad = (List<?>) Names.LONE_SURROGATE.invoke(s);
    if (bad != null) { // no UTF-8 encoding: getBytes would silently write '?'
      throw PyprofException.catalogue("object.name_not_unicode", "what", kind,
          "index", bad.get(0), "point", bad.get(1));
    }
    int bytes = s.getBytes(StandardCharsets.UTF_8).length;
    if (bytes > Names.MAX_BYTES) {
      int shown = s.offsetByCodePoints(0, Math.min(Names.SHOWN_CHARS, s.codePointCount(0, s.length())));
      throw PyprofException.catalogue("object.name_too_long", "what", kind,
          "shown", s.substring(0, shown), "bytes", (long) bytes, "max", (long) Names.MAX_BYTES);
    }
    for (int i = 0; i < s.length(); ) {
      int c = s.codePointAt(i);
      String ch = new String(Character.toChars(c));
      if (c < Names.FORBIDDEN_BELOW || Names.FORBIDDEN_CHARS.contains(ch)) {
        throw PyprofException.catalogue("object.name_bad_char", "what", kind, "name", s, "char", ch);
      }
      i += Character.charCount(c);
    }
    return s;
  }

  @Override
  protected RuntimeException closed() {
    return PyprofException.catalogue("object.closed", "what", kind.display(), "name", name);
  }

  /** Begins the duration (C: MXProfileDurationStart). */
  public synchronized void start() {
    requireKind("start()", false);
    Pointer p = pointer();
    if (started) {
      throw PyprofException.catalogue("object.already_started", "what", kind.display(), "name", name);
    }
    LibMXNet.MXProfileDurationStart(p);
    started = true;
  }

  /** Ends the duration and records it (C: MXProfileDurationStop). */
  public synchronized void stop() {
    requireKind("stop()", false);
    Pointer p = pointer();
    if (!started) {
      throw PyprofException.catalogue("object.not_started", "what", kind.display(), "name", name);
    }
    started = false;
    LibMXNet.MXProfileDurationStop(p);
  }

  public synchronized boolean isStarted() {
    return started;
  }

  // ------------------------------------------------------------------ counters

  /** The last value pyprof set, 0 ... 2^64-1 (a {@code long} would read 2^64-1 as -1). */
  public synchronized BigInteger value() {
    requireKind("value()", true);
    return unsigned(value);
  }

  /** Sets the counter (C: MXProfileSetCounter); a negative {@code v} is counter.out_of_range. */
  public void setValue(long v) {
    requireKind("setValue()", true);
    if (v < 0) {
      throw PyprofException.catalogue("counter.out_of_range", "name", name, "value", v);
    }
    setUnsignedValue(v);
  }

  /** Sets the counter to {@code v}, 0 ... 2^64-1, else counter.out_of_range; null: counter.not_int. */
  public void setValue(BigInteger v) {
    requireKind("setValue()", true);
    if (v == null) {
      throw PyprofException.catalogue("counter.not_int", "name", name, "what", "value", "value", null);
    }
    if (v.signum() < 0 || v.bitLength() > 64) {
      throw PyprofException.catalogue("counter.out_of_range", "name", name, "value", number(v));
    }
    setUnsignedValue(v.longValue());
  }

  /** Adds {@code delta}, any size; a step beyond MXNet's int64 is counter.step_range. */
  public void increment(BigInteger delta) {
    if (delta == null) {
      throw PyprofException.catalogue("counter.not_int", "name", name, "what", "delta", "value", null);
    }
    if (delta.bitLength() < 64) {
      increment(delta.longValue());
    } else {
      refuseStep(delta);
    }
  }

  /** Subtracts {@code delta}, any size (see {@link #increment(BigInteger)}). */
  public void decrement(BigInteger delta) {
    increment(delta == null ? null : delta.negate());
  }

  /** Sets the counter to the unsigned value of {@code bits} (C: MXProfileSetCounter). */
  public synchronized void setUnsignedValue(long bits) {
    requireKind("setValue()", true);
    LibMXNet.MXProfileSetCounter(pointer(), bits);
    value = bits;
  }

  /**
   * Adds {@code delta}, which may be negative (C: MXProfileAdjustCounter); counter.below_zero,
   * counter.above_max leave it unchanged.
   */
  public synchronized void increment(long delta) {
    requireKind("increment()", true);
    Pointer p = pointer();
    long next = value + delta;
    // wrapped around; -delta of Long.MIN_VALUE is 2^63 as an unsigned number: still holds
    if (delta < 0 ? Long.compareUnsigned(value, -delta) < 0 : Long.compareUnsigned(next, value) < 0) {
      refuseStep(BigInteger.valueOf(delta)); // counter.below_zero or counter.above_max
    }
    LibMXNet.MXProfileAdjustCounter(p, delta);
    value = next;
  }

  /** Subtracts {@code delta} (Long.MIN_VALUE adds 2^63: a step MXNet's int64 cannot take). */
  public void decrement(long delta) {
    if (delta == Long.MIN_VALUE) {
      refuseStep(BigInteger.valueOf(delta).negate());
    }
    increment(-delta);
  }

  /**
   * Throws the error of an adjustment by {@code delta}: object.closed, counter.below_zero,
   * counter.above_max, else (outside MXNet's int64) counter.step_range.
   */
  private synchronized void refuseStep(BigInteger delta) {
    requireKind("increment()", true);
    pointer();
    BigInteger next = unsigned(value).add(delta);
    String code = next.signum() < 0 ? "counter.below_zero"
        : next.bitLength() > 64 ? "counter.above_max" : "counter.step_range";
    throw PyprofException.catalogue(code, "name", name, "value", number(unsigned(value)),
        "delta", (delta.signum() < 0 ? "" : "+") + delta);
  }

  private static BigInteger unsigned(long bits) {
    return new BigInteger(Long.toUnsignedString(bits));
  }

  /** A value for an error's data: a Long when it fits, else a Clojure BigInt. */
  private static Object number(BigInteger v) {
    return v.bitLength() < 64 ? (Object) v.longValue() : BigInt.fromBigInteger(v);
  }

  private void requireKind(String call, boolean counter) {
    if ((kind == Kind.COUNTER) != counter) {
      throw PyprofException.catalogue("object.wrong_kind", "call", call,
          "needs", counter ? Kind.COUNTER.display() : DURATIONS, "what", kind.display(),
          "name", name);
    }
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
