package pyprof.jvm;

import clojure.lang.IExceptionInfo;
import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;

/**
 * The one unchecked exception type of pyprof's JVM layer.
 *
 * <p>{@link #kind()} says what went wrong: {@code "invalid-config"}, {@code "invalid-option"},
 * {@code "invalid-state"}, {@code "session-finished"}, {@code "no-gpu"}, {@code "invalid-device"}
 * (rejected before any C call) or {@code "mxnet"} (a failing C call: the subclass
 * {@link MXNetException}, carrying MXNet's own message). Messages that name a fix name Java
 * calls ({@code fix: Profiler.dump(false) ...}): {@link #wrap} puts the error's {@code :java-fix}
 * in place of the Clojure-phrased {@code :fix}; both stay in the data. It implements {@link IExceptionInfo}, so Clojure code reads the same
 * data with {@code ex-data}: {@code {:pyprof/error :invalid-state ...}}. The JPype bridge turns it
 * into the matching Python error.
 */
public class PyprofException extends RuntimeException implements IExceptionInfo {
  private static final long serialVersionUID = 1L;
  static final Keyword ERROR = Keyword.intern("pyprof", "error");
  static final Keyword FIX = Keyword.intern("fix");
  static final Keyword JAVA_FIX = Keyword.intern("java-fix");

  private final transient IPersistentMap data;

  public PyprofException(String message, IPersistentMap data, Throwable cause) {
    super(message, cause);
    this.data = data == null ? PersistentArrayMap.EMPTY : data;
  }

  /** An error of {@code kind} (e.g. {@code "invalid-state"}) with no further data. */
  public PyprofException(String kind, String message) {
    this(message, PersistentArrayMap.createAsIfByAssoc(new Object[] {ERROR, Keyword.intern(kind)}),
        null);
  }

  static PyprofException state(String message) {
    return new PyprofException("invalid-state", message);
  }

  static PyprofException option(String message) {
    return new PyprofException("invalid-option", message);
  }

  /**
   * {@code message} with its Clojure-phrased fix ({@code :fix} in {@code data}, e.g.
   * {@code (dump-profile false)}) replaced by the Java-phrased one ({@code :java-fix}, e.g.
   * {@code Profiler.dump(false)}); unchanged when either is missing.
   */
  static String javaMessage(String message, IPersistentMap data) {
    Object fix = data.valAt(FIX);
    Object javaFix = data.valAt(JAVA_FIX);
    if (message == null || !(fix instanceof String) || !(javaFix instanceof String)) {
      return message;
    }
    String marker = "fix: " + fix;
    int at = message.lastIndexOf(marker);
    if (at < 0) {
      return message;
    }
    return message.substring(0, at) + "fix: " + javaFix + message.substring(at + marker.length());
  }

  /** {@code "invalid-state"}, {@code "mxnet"}, ...: the name of {@code :pyprof/error}. */
  public String kind() {
    Object k = data.valAt(ERROR);
    return k instanceof Keyword ? ((Keyword) k).getName() : String.valueOf(k);
  }

  @Override
  public IPersistentMap getData() {
    return data;
  }

  /**
   * {@code t} as a PyprofException: itself, or a Clojure {@code ex-info} carrying
   * {@code :pyprof/error} converted with its message and data; any other RuntimeException or
   * Error is returned unchanged (wrapped when checked).
   */
  public static RuntimeException wrap(Throwable t) {
    if (t instanceof PyprofException) {
      return (PyprofException) t;
    }
    if (t instanceof IExceptionInfo) {
      IPersistentMap d = ((IExceptionInfo) t).getData();
      if (d != null && d.containsKey(ERROR)) {
        return new PyprofException(javaMessage(t.getMessage(), d), d, t);
      }
    }
    if (t instanceof RuntimeException) {
      return (RuntimeException) t;
    }
    if (t instanceof Error) {
      throw (Error) t;
    }
    return new PyprofException(String.valueOf(t.getMessage()),
        PersistentArrayMap.createAsIfByAssoc(new Object[] {ERROR, Keyword.intern("io")}), t);
  }
}
