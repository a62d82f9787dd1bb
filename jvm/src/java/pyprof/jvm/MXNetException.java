package pyprof.jvm;

import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;

/**
 * A call into libmxnet failed (it returned -1), or libmxnet could not be loaded.
 *
 * <p>{@link #function()} names the C function ({@code "MXDumpProcessProfile"}, or {@code "dlopen"}
 * when loading failed); {@link #mxnetMessage()} is the full text of {@code MXGetLastError()}, read on
 * the failing thread right after the call. {@link #getMessage()} keeps only the human part of it
 * (MXNet appends a C++ stack trace).
 *
 * <p>It is a {@link PyprofException} of kind {@code "mxnet"}, so Clojure code reads it with {@code ex-data}:
 * {@code {:pyprof/error :mxnet, :fn "MXDumpProcessProfile", :mxnet-error "..."}}.
 */
public class MXNetException extends PyprofException {
  private static final long serialVersionUID = 1L;

  private final String function;
  private final String mxnetMessage;

  public MXNetException(String function, String mxnetMessage) {
    // as Python's MXNetError: "<function> failed: <MXNet's first line>\n  fix: <fix>"
    this(function, mxnetMessage, function + " failed: " + firstLine(mxnetMessage) + "\n  fix: "
        + PyprofException.fix("mxnet.call_failed"));
  }

  public MXNetException(String function, String mxnetMessage, String message) {
    super(message, PersistentArrayMap.createAsIfByAssoc(new Object[] {
      ERROR, Keyword.intern("mxnet"),
      Keyword.intern("fn"), function,
      Keyword.intern("mxnet-error"), mxnetMessage == null ? "" : mxnetMessage}), null);
    this.function = function;
    this.mxnetMessage = mxnetMessage == null ? "" : mxnetMessage;
  }

  /** The C function that failed, e.g. {@code "MXSetProcessProfilerConfig"}. */
  public String function() {
    return function;
  }

  /** MXNet's own error text ({@code MXGetLastError()}), including any C++ stack trace. */
  public String mxnetMessage() {
    return mxnetMessage;
  }

  /** The human part of an MXNet message: lines before "Stack trace", joined, without "MXNetError: ". */
  static String firstLine(String message) {
    if (message == null || message.isBlank()) {
      return "(MXNet gave no message)";
    }
    StringBuilder sb = new StringBuilder();
    for (String line : message.strip().split("\\R")) {
      String t = line.strip();
      if (t.startsWith("Stack trace") || t.startsWith("[bt]")) {
        break;
      }
      if (!t.isEmpty()) {
        if (sb.length() > 0) {
          sb.append(' ');
        }
        sb.append(t);
      }
    }
    String text = sb.toString();
    if (text.startsWith("MXNetError: ")) {
      text = text.substring("MXNetError: ".length());
    }
    return text.isEmpty() ? "(MXNet gave no message)" : text;
  }
}
