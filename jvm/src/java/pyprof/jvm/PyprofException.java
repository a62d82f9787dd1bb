package pyprof.jvm;

import clojure.java.api.Clojure;
import clojure.lang.ExceptionInfo;
import clojure.lang.IFn;
import clojure.lang.IPersistentMap;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;

/**
 * The one unchecked exception type of pyprof's JVM layer, an {@link ExceptionInfo}: Clojure reads
 * its data with {@code ex-data} ({@code {:pyprof/error :invalid-state ...}}) and the JPype bridge
 * turns it into the matching Python error. {@link #kind()}: {@code "invalid-config"}, {@code
 * "invalid-option"}, {@code "invalid-state"}, {@code "session-finished"}, {@code "no-gpu"},
 * {@code "invalid-device"} (rejected before any C call) or {@code "mxnet"} ({@link
 * MXNetException}). An error of the catalogue {@code pyprof/spec/errors.json} carries {@link
 * #code()}, its fields, {@code :fix} (Clojure calls) and {@code :java-fix} (Java calls). Messages
 * end in {@code fix: ...}, naming Java calls from Java methods and the facades ({@link #wrap}),
 * Clojure calls from Clojure functions.
 */
public class PyprofException extends ExceptionInfo {
  private static final long serialVersionUID = 1L;
  static final Keyword ERROR = Keyword.intern("pyprof", "error");
  private static final Keyword CODE = Keyword.intern("pyprof", "code");
  private static final Keyword FIX = Keyword.intern("fix");
  private static final Keyword JAVA_FIX = Keyword.intern("java-fix");

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

  /** {@code pyprof.rules}' functions, resolved on first use (they read the spec). */
  private static final class Rules {
    static final IFn ERROR;
    static final IFn MESSAGE;
    static final IFn RENDER;
    static final clojure.lang.IDeref CATALOGUE;

    static {
      Clojure.var("clojure.core", "require").invoke(Clojure.read("pyprof.rules"));
      ERROR = Clojure.var("pyprof.rules", "error");
      MESSAGE = Clojure.var("pyprof.rules", "message");
      RENDER = Clojure.var("pyprof.rules", "render");
      CATALOGUE = (clojure.lang.IDeref) Clojure.var("pyprof.rules", "catalogue");
    }
  }

  /** Loads the error catalogue now (see {@link ProfilerControl#register}). */
  static void preload() {
    Rules.MESSAGE.getClass();
  }

  /** The fix of catalogue error {@code code} (a fix without fields), naming Java calls. */
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
    return new PyprofException(phrased(e.getMessage(), e.getData(), "java"), e.getData(), null);
  }

  /**
   * {@code message} as callers in {@code language} ("java", "clojure") read it: a catalogue error
   * rendered again ({@code pyprof.rules/message}), else its fix swapped for the other language's
   * ({@code :fix}, {@code :java-fix}), else unchanged.
   */
  static String phrased(String message, IPersistentMap data, String language) {
    String rendered = rendered(data, language);
    if (rendered != null) {
      return rendered;
    }
    boolean java = language.equals("java");
    Object from = data.valAt(java ? FIX : JAVA_FIX);
    Object to = data.valAt(java ? JAVA_FIX : FIX);
    if (message == null || !(from instanceof String) || !(to instanceof String)) {
      return message;
    }
    String marker = "fix: " + from;
    int at = message.lastIndexOf(marker);
    return at < 0 ? message
        : message.substring(0, at) + "fix: " + to + message.substring(at + marker.length());
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
    return withMessage(phrased(getMessage(), getData(), "java"));
  }

  /** The message as a JMX client reads it: API names as the MBean's options take them. */
  String jmxMessage() {
    String rendered = rendered(getData(), "jmx");
    return rendered != null ? rendered : getMessage();
  }

  /** This error with its fix naming Clojure calls (itself when it already does, or has no fix). */
  public PyprofException inClojure() {
    return withMessage(phrased(getMessage(), getData(), "clojure"));
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
        return new PyprofException(phrased(t.getMessage(), d, "java"), d, t);
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
