package pyprof.jvm;

import clojure.java.api.Clojure;
import clojure.lang.ExceptionInfo;
import clojure.lang.IFn;
import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;

/**
 * The one unchecked exception type of pyprof's JVM layer.
 *
 * <p>{@link #kind()} says what went wrong: {@code "invalid-config"}, {@code "invalid-option"},
 * {@code "invalid-state"}, {@code "session-finished"}, {@code "no-gpu"}, {@code "invalid-device"}
 * (rejected before any C call) or {@code "mxnet"} (a failing C call: the subclass
 * {@link MXNetException}, carrying MXNet's own message). An error of pyprof's catalogue
 * ({@code pyprof/spec/errors.json}, shared with the Python package) carries its code in
 * {@code :pyprof/code} ({@link #code()}), its fix in {@code :fix} (Clojure calls) and
 * {@code :java-fix} (Java calls), and its fields. Messages end in {@code fix: ...}: errors raised by
 * Java methods, and every error through the facades ({@link #wrap}), name Java calls; errors of the
 * Clojure functions name Clojure calls. It is a {@link ExceptionInfo}, so Clojure code catches it
 * as one and reads the same data with {@code ex-data}: {@code {:pyprof/error :invalid-state ...}}.
 * The JPype bridge turns it into the matching Python error.
 */
public class PyprofException extends ExceptionInfo {
  private static final long serialVersionUID = 1L;
  static final Keyword ERROR = Keyword.intern("pyprof", "error");
  static final Keyword CODE = Keyword.intern("pyprof", "code");
  static final Keyword FIX = Keyword.intern("fix");
  static final Keyword JAVA_FIX = Keyword.intern("java-fix");

  public PyprofException(String message, IPersistentMap data, Throwable cause) {
    super(message, data == null ? PersistentArrayMap.EMPTY : data, cause);
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
   * {@code pyprof.rules/error} and {@code message}, resolved on first use (loading them reads the
   * spec files).
   */
  private static final class Rules {
    static final IFn ERROR;
    static final IFn RENDER;
    static final clojure.lang.IDeref CATALOGUE;
    static final IFn MESSAGE;

    static {
      Clojure.var("clojure.core", "require").invoke(Clojure.read("pyprof.rules"));
      ERROR = Clojure.var("pyprof.rules", "error");
      RENDER = Clojure.var("pyprof.rules", "render");
      CATALOGUE = (clojure.lang.IDeref) Clojure.var("pyprof.rules", "catalogue");
      MESSAGE = Clojure.var("pyprof.rules", "message");
    }
  }

  /** Loads the error catalogue now (see {@link ProfilerControl#register}). */
  static void preload() {
    Rules.MESSAGE.getClass();
  }

  /**
   * The fix of catalogue error {@code code} (a fix without fields, e.g. {@code "mxnet.call_failed"}),
   * as Java calls spell it.
   */
  static String fix(String code) {
    Object template = Clojure.var("clojure.core", "get-in").invoke(Rules.CATALOGUE.deref(),
        clojure.lang.PersistentVector.create("errors", code, "fix"));
    return String.valueOf(Rules.RENDER.invoke(template, PersistentArrayMap.EMPTY, "java"));
  }

  /**
   * The catalogue error {@code code} (errors.json, e.g. {@code "object.closed"}) with its fields
   * given as name, value pairs ({@code "what", "Task", "name", "step"}), its message naming Java
   * calls; not thrown.
   */
  public static PyprofException catalogue(String code, Object... fields) {
    Object[] kvs = new Object[fields.length];
    for (int i = 0; i < fields.length; i += 2) {
      kvs[i] = Keyword.intern((String) fields[i]);
      kvs[i + 1] = fields[i + 1];
    }
    PyprofException e = (PyprofException) Rules.ERROR.invoke(code,
        PersistentArrayMap.createAsIfByAssoc(kvs));
    return new PyprofException(javaMessage(e.getMessage(), e.getData()), e.getData(), null);
  }

  /**
   * {@code message} as Java callers read it: a catalogue error ({@code :pyprof/code} in
   * {@code data}) rendered again in Java (values as Java literals, API names as Java calls,
   * {@code pyprof.rules/message}); another error with its Clojure-phrased fix ({@code :fix}, e.g.
   * {@code (dump-profile false)}) replaced by the Java-phrased one ({@code :java-fix}); unchanged
   * when neither applies.
   */
  static String javaMessage(String message, IPersistentMap data) {
    String rendered = rendered(data, "java");
    return rendered != null ? rendered : swapFix(message, data.valAt(FIX), data.valAt(JAVA_FIX));
  }

  /** {@code message} as Clojure callers read it (the reverse of {@link #javaMessage}). */
  static String clojureMessage(String message, IPersistentMap data) {
    String rendered = rendered(data, "clojure");
    return rendered != null ? rendered : swapFix(message, data.valAt(JAVA_FIX), data.valAt(FIX));
  }

  /** The catalogue message of {@code data}'s code in {@code language}, or null for none. */
  private static String rendered(IPersistentMap data, String language) {
    Object code = data.valAt(CODE);
    if (!(code instanceof String)) {
      return null;
    }
    try {
      return (String) Rules.MESSAGE.invoke(code, data, language);
    } catch (IllegalArgumentException notInCatalogue) {
      return null; // a code of another version of the catalogue, or fields missing
    }
  }

  private static String swapFix(String message, Object from, Object to) {
    if (message == null || !(from instanceof String) || !(to instanceof String)) {
      return message;
    }
    String marker = "fix: " + from;
    int at = message.lastIndexOf(marker);
    if (at < 0) {
      return message;
    }
    return message.substring(0, at) + "fix: " + to + message.substring(at + marker.length());
  }

  /** This error with the same data, cause and stack trace, and {@code message}. */
  private PyprofException withMessage(String message) {
    if (message == null || message.equals(getMessage())) {
      return this;
    }
    PyprofException e = new PyprofException(message, getData(), getCause());
    e.setStackTrace(getStackTrace());
    return e;
  }

  /** This error with its fix naming Java calls (itself when it already does, or has no fix). */
  public PyprofException inJava() {
    return withMessage(javaMessage(getMessage(), getData()));
  }

  /** The message as a JMX client reads it: API names as the MBean's options take them. */
  String jmxMessage() {
    String rendered = rendered(getData(), "jmx");
    return rendered != null ? rendered : getMessage();
  }

  /** This error with its fix naming Clojure calls (itself when it already does, or has no fix). */
  public PyprofException inClojure() {
    return withMessage(clojureMessage(getMessage(), getData()));
  }

  /** {@code "invalid-state"}, {@code "mxnet"}, ...: the name of {@code :pyprof/error}. */
  public String kind() {
    Object k = getData().valAt(ERROR);
    return k instanceof Keyword ? ((Keyword) k).getName() : String.valueOf(k);
  }

  /** The catalogue code ({@code "state.finished_run"}, ...), or null for an error outside it. */
  public String code() {
    Object c = getData().valAt(CODE);
    return c == null ? null : String.valueOf(c);
  }

  @Override
  public String toString() {
    String message = getLocalizedMessage();
    String name = getClass().getName();
    return message == null ? name : name + ": " + message;
  }

  /**
   * {@code t} as a PyprofException whose fix names Java calls: itself (rephrased when its fix names
   * Clojure calls), or a Clojure {@code ex-info} carrying {@code :pyprof/error} converted with its
   * message and data; any other RuntimeException or Error is returned unchanged (wrapped when
   * checked).
   */
  public static RuntimeException wrap(Throwable t) {
    if (t instanceof PyprofException) {
      return ((PyprofException) t).inJava();
    }
    if (t instanceof clojure.lang.IExceptionInfo) {
      IPersistentMap d = ((clojure.lang.IExceptionInfo) t).getData();
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
