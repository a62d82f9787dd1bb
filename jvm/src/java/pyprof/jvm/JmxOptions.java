package pyprof.jvm;

import clojure.lang.IDeref;
import clojure.lang.IFn;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The options of {@link ProfilerControl#start(String, long)} as JMX passes them: a JSON object
 * or {@code key=value} pairs, the schedule's keys at top level.
 */
final class JmxOptions {
  private static final IFn READ_JSON = JavaData.var("clojure.data.json", "read-str");
  private static final IFn OPTION_NAMES = JavaData.var("pyprof.session", "option-names");
  private static final IFn UNKNOWN_OPTION = JavaData.var("pyprof.config", "unknown-option-error");
  private static final List<?> SCHEDULE_KEYS = (List<?>) ((IDeref) JavaData.var(
      "pyprof.session.schedule", "parameter-names")).deref();

  private JmxOptions() {}

  static Map<String, Object> parse(String options) {
    Map<String, Object> out = new HashMap<>();
    String s = options == null ? "" : options.strip();
    if (s.isEmpty()) {
      return out;
    }
    if (s.startsWith("[") || s.startsWith("\"")) { // JSON, but no object: named as a whole
      throw new IllegalArgumentException("options must be a JSON object or key=value pairs, got "
          + s + ". fix: pass key=value pairs or a JSON object such as {\"step_seconds\": 1}");
    }
    if (s.startsWith("{")) {
      Object parsed;
      try {
        parsed = READ_JSON.invoke(s);
      } catch (Exception e) { // clojure.data.json's own words (a checked Exception), then the fix
        throw new IllegalArgumentException("options are not valid JSON (" + e.getMessage()
            + "): " + s + ". fix: pass a JSON object such as {\"step_seconds\": 1}, or key=value"
            + " pairs separated by commas");
      }
      if (!(parsed instanceof Map)) {
        throw new IllegalArgumentException("options must be a JSON object, got " + s
            + ". fix: pass key=value pairs or a JSON object such as {\"step_seconds\": 1}");
      }
      for (Map.Entry<?, ?> e : ((Map<?, ?>) parsed).entrySet()) {
        out.put(String.valueOf(e.getKey()), e.getValue());
      }
      return out;
    }
    for (String part : s.split(",")) {
      String p = part.strip();
      if (p.isEmpty()) {
        continue;
      }
      int eq = p.indexOf('=');
      if (eq <= 0) {
        throw new IllegalArgumentException(
            "options: expected key=value pairs separated by commas, or a JSON object; got " + p
                + ". fix: write each option as key=value, separated by commas");
      }
      out.put(p.substring(0, eq).strip(), p.substring(eq + 1).strip());
    }
    return out;
  }

  /**
   * Moves the schedule's top-level keys into {@code opts}' {@code "schedule"} map, integer texts
   * as numbers; session.schedule_twice when {@code opts} has that map too.
   */
  static void liftSchedule(Map<String, Object> opts) {
    Map<String, Object> sched = new HashMap<>();
    List<Object> top = new ArrayList<>(SCHEDULE_KEYS);
    top.retainAll(opts.keySet());
    if (opts.containsKey("schedule") && !top.isEmpty()) {
      throw PyprofException.catalogue("session.schedule_twice", "options",
          clojure.lang.PersistentVector.create(top));
    }
    if (opts.get("schedule") instanceof Map) {
      ((Map<?, ?>) opts.get("schedule")).forEach((k, v) -> sched.put(String.valueOf(k), v));
    }
    top.forEach(k -> sched.put((String) k, opts.remove(k)));
    sched.replaceAll((k, v) -> v instanceof String && ((String) v).strip().matches("[+-]?\\d{1,18}")
        ? Long.valueOf(((String) v).strip()) : v);
    if (!sched.isEmpty()) {
      opts.put("schedule", sched);
    }
  }

  /** session.unknown_option among JMX's options: the schedule's keys and step_seconds included. */
  static PyprofException unknown(PyprofException e) {
    Object option = e.getData().valAt(clojure.lang.Keyword.intern("option"));
    List<Object> valid = new ArrayList<>();
    for (Object k : (Iterable<?>) OPTION_NAMES.invoke()) {
      if (!"schedule".equals(k) && !"on_trace_ready".equals(k)) {
        valid.add(k);
      }
    }
    valid.addAll(SCHEDULE_KEYS);
    valid.add("step_seconds");
    return ((PyprofException) UNKNOWN_OPTION.invoke(option, option,
        clojure.lang.PersistentVector.create(valid))).inJava();
  }
}
