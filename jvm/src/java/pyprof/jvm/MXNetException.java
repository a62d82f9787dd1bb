package pyprof.jvm;

import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;

/**
 * A call into libmxnet failed (it returned -1), or libmxnet could not be loaded: a {@link
 * PyprofException} of kind {@code "mxnet"} whose {@code ex-data} is {@code {:pyprof/error :mxnet,
 * :fn "MXDumpProcessProfile", :mxnet-error "..."}}.
 */
public class MXNetException extends PyprofException {
  private static final long serialVersionUID = 1L;
  private static final Keyword FN = Keyword.intern("fn");
  private static final Keyword MXNET_ERROR = Keyword.intern("mxnet-error");

  /** As Python's MXNetError: "{@code function} failed: MXNet's first line", then the fix. */
  public MXNetException(String function, String mxnetMessage) {
    this(function, mxnetMessage, function + " failed: " + firstLine(mxnetMessage) + "\n  fix: "
        + PyprofException.fix("mxnet.call_failed"));
  }

  public MXNetException(String function, String mxnetMessage, String message) {
    super(message, PersistentArrayMap.createAsIfByAssoc(new Object[] {
      ERROR, Keyword.intern("mxnet"), FN, function,
      MXNET_ERROR, mxnetMessage == null ? "" : mxnetMessage}), null);
  }

  /** The C function that failed, e.g. {@code "MXSetProcessProfilerConfig"}, or "dlopen". */
  public String function() {
    return (String) getData().valAt(FN);
  }

  /** MXNet's own error text ({@code MXGetLastError()}), including any C++ stack trace. */
  public String mxnetMessage() {
    return (String) getData().valAt(MXNET_ERROR);
  }

  /** The human part of an MXNet message: lines before its C++ stack trace, joined. */
  static String firstLine(String message) {
    StringBuilder sb = new StringBuilder();
    for (String line : (message == null ? "" : message).strip().split("\\R")) {
      String t = line.strip();
      if (t.startsWith("Stack trace") || t.startsWith("[bt]")) {
        break;
      }
      if (!t.isEmpty()) {
        sb.append(sb.length() > 0 ? " " : "").append(t);
      }
    }
    String text = sb.toString().replaceFirst("^MXNetError: ", "");
    return text.isEmpty() ? "(MXNet gave no message)" : text;
  }
}
