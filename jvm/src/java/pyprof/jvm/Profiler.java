package pyprof.jvm;

import clojure.java.api.Clojure;
import clojure.lang.IFn;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;
import clojure.lang.PersistentHashMap;
import java.util.Map;

/**
 * Java facade over the Clojure namespace {@code pyprof.profiler}: the same calls, the same
 * validation against {@code profiler_config.json}, one implementation.
 *
 * <p>Errors: one unchecked type, {@link PyprofException}: {@code kind()} {@code invalid-config},
 * {@code invalid-state}, ... for what pyprof rejects before any C call, with the catalogue code
 * ({@code code()}) and fields of the Python reference's error and a fix naming Java calls; its
 * subclass {@link MXNetException} when MXNet itself fails. All methods are thread safe. For windows of a
 * long-running service use {@link ProfilerSession}; for control from JMX, {@link ProfilerControl}.
 *
 * <pre>{@code
 * Profiler.setConfig(Map.of("filename", "trace.json", "aggregate_stats", true));
 * Profiler.setState("run");
 * ... work ...
 * Profiler.setState("stop");
 * Profiler.dump(true);
 * System.out.println(Profiler.dumps());
 * }</pre>
 */
public final class Profiler {
  private Profiler() {}

  /** Resolved on first use: loading pyprof.profiler compiles Clojure code. */
  private static final class Vars {
    static final IFn SET_CONFIG;
    static final IFn SET_STATE;
    static final IFn DUMP;
    static final IFn DUMPS;
    static final IFn PAUSE;
    static final IFn RESUME;
    static final IFn DOMAIN;
    static final IFn TASK;
    static final IFn FRAME;
    static final IFn EVENT;
    static final IFn COUNTER;
    static final IFn MARK;
    static final IFn STATS;
    static final IFn STATE;
    static final IFn CURRENT_CONFIG;

    static {
      Clojure.var("clojure.core", "require").invoke(Clojure.read("pyprof.profiler"));
      SET_CONFIG = Clojure.var("pyprof.profiler", "profiler-set-config");
      SET_STATE = Clojure.var("pyprof.profiler", "profiler-set-state");
      DUMP = Clojure.var("pyprof.profiler", "dump-profile");
      DUMPS = Clojure.var("pyprof.profiler", "dumps");
      PAUSE = Clojure.var("pyprof.profiler", "pause");
      RESUME = Clojure.var("pyprof.profiler", "resume");
      DOMAIN = Clojure.var("pyprof.profiler", "domain");
      TASK = Clojure.var("pyprof.profiler", "task");
      FRAME = Clojure.var("pyprof.profiler", "frame");
      EVENT = Clojure.var("pyprof.profiler", "event");
      COUNTER = Clojure.var("pyprof.profiler", "counter");
      MARK = Clojure.var("pyprof.profiler", "mark");
      STATE = Clojure.var("pyprof.profiler", "state");
      CURRENT_CONFIG = Clojure.var("pyprof.profiler", "current-config");
      Clojure.var("clojure.core", "require").invoke(Clojure.read("pyprof.stats"));
      STATS = Clojure.var("pyprof.stats", "stats");
    }
  }

  /**
   * Configures the profiler ({@code MXSetProcessProfilerConfig}). Keys are the C names
   * ({@code "profile_symbolic"}, {@code "filename"}, ...); values Boolean, Number or String. Keys left
   * out return to their C default. Returns the strings sent to C.
   */
  @SuppressWarnings("unchecked")
  public static Map<String, String> setConfig(Map<String, ?> config) {
    // null reaches the Clojure side as nil: config.not_a_map, as any other non-map.
    return (Map<String, String>) call(() -> Vars.SET_CONFIG.invoke(
        config == null ? null : PersistentHashMap.create(config)));
  }

  /** {@code "run"} or {@code "stop"} ({@code MXSetProcessProfilerState}). */
  public static void setState(String state) {
    call(() -> Vars.SET_STATE.invoke(state));
  }

  /** Writes the trace file ({@code MXDumpProcessProfile}); {@code finished} ends the session. */
  public static void dump(boolean finished) {
    call(() -> Vars.DUMP.invoke(finished));
  }

  /** Aggregate statistics as a table sorted by total time, descending (needs aggregate_stats). */
  public static String dumps() {
    return (String) call(() -> Vars.DUMPS.invoke());
  }

  /**
   * Aggregate statistics ({@code MXAggregateProfileStatsPrintEx}).
   *
   * @param reset clear the statistics after reading them
   * @param format {@code "table"} (returns a String) or {@code "json"} (returns a Clojure map)
   * @param sortBy {@code "total"}, {@code "avg"}, {@code "min"}, {@code "max"} or {@code "count"}
   * @param ascending sort order
   */
  public static Object dumps(boolean reset, String format, String sortBy, boolean ascending) {
    // The names as given (a null too): pyprof.profiler/dumps checks them against api.json.
    return call(() -> Vars.DUMPS.invoke(
        PersistentArrayMap.createAsIfByAssoc(new Object[] {
          Keyword.intern("reset"), reset,
          Keyword.intern("format"), format,
          Keyword.intern("sort-by"), sortBy,
          Keyword.intern("ascending"), ascending})));
  }

  /**
   * What this process has asked of the profiler (MXNet has no getters): {@code running},
   * {@code paused}, {@code finished} (a finished dump happened: no new trace session in this
   * process) and {@code ever_ran}, as {@code pyprof.profiler.state()} in Python.
   */
  public static Map<String, Boolean> state() {
    Map<?, ?> s = (Map<?, ?>) call(() -> Vars.STATE.invoke());
    Map<String, Boolean> out = new java.util.LinkedHashMap<>();
    for (String k : new String[] {"running", "paused", "finished", "ever_ran"}) {
      out.put(k, Boolean.TRUE.equals(s.get(Keyword.intern(k.replace('_', '-')))));
    }
    return out;
  }

  /**
   * The configuration in force (C key to C string, keys left out at their C default) after the
   * last {@link #setConfig}, or null before any.
   */
  @SuppressWarnings("unchecked")
  public static Map<String, String> currentConfig() {
    Object c = call(() -> Vars.CURRENT_CONFIG.invoke());
    return c == null ? null : java.util.Collections.unmodifiableMap(new java.util.TreeMap<>((Map<String, String>) c));
  }

  /** Pauses recording ({@code MXProcessProfilePause(1)}); state stays "run". */
  public static void pause() {
    call(() -> Vars.PAUSE.invoke());
  }

  /** Resumes recording after {@link #pause()}. */
  public static void resume() {
    call(() -> Vars.RESUME.invoke());
  }

  /** The domain {@code name} (one per name; never destroyed). */
  public static ProfileDomain domain(String name) {
    return (ProfileDomain) call(() -> Vars.DOMAIN.invoke(name));
  }

  /** A new task in {@code domain}; close it to destroy the handle. */
  public static ProfileObject task(ProfileDomain domain, String name) {
    return (ProfileObject) call(() -> Vars.TASK.invoke(domain, name));
  }

  /** A new frame in {@code domain}. */
  public static ProfileObject frame(ProfileDomain domain, String name) {
    return (ProfileObject) call(() -> Vars.FRAME.invoke(domain, name));
  }

  /** A new event (no domain). */
  public static ProfileObject event(String name) {
    return (ProfileObject) call(() -> Vars.EVENT.invoke(name));
  }

  /** A new counter in {@code domain}, at 0. */
  public static ProfileObject counter(ProfileDomain domain, String name) {
    return (ProfileObject) call(() -> Vars.COUNTER.invoke(domain, name));
  }

  /**
   * Records the instant marker {@code name} with {@code scope} (api.json's marker_scopes: global,
   * process, thread, task, marker).
   */
  public static void mark(ProfileDomain domain, String name, String scope) {
    call(() -> Vars.MARK.invoke(domain, name, scope));
  }

  /** Exact statistics of the trace file(s) at {@code paths} (see {@code pyprof.stats}). */
  @SuppressWarnings("unchecked")
  public static Map<Object, Object> stats(String... paths) {
    return (Map<Object, Object>) call(() -> Vars.STATS.invoke(java.util.Arrays.asList(paths)));
  }

  private static Object call(java.util.function.Supplier<Object> f) {
    try {
      return f.get();
    } catch (Throwable t) {
      throw PyprofException.wrap(t);
    }
  }
}
