package pyprof.jvm;

import clojure.lang.IFn;
import clojure.lang.Keyword;
import clojure.lang.PersistentArrayMap;
import clojure.lang.PersistentHashMap;
import java.util.Map;

/**
 * Java facade over the Clojure namespace {@code pyprof.profiler}: the same calls and validation
 * ({@code profiler_config.json}), one implementation. Thread safe.
 *
 * <p>Errors: {@link PyprofException} (unchecked) of a {@code kind()} ({@code invalid-config},
 * {@code invalid-state}, ...) and catalogue {@code code()} (errors.json) for what pyprof rejects
 * before any C call; its subclass {@link MXNetException} when MXNet fails. Windows of a service:
 * {@link ProfilerSession}; JMX: {@link ProfilerControl}.
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

  /** Resolved on first use: loading the namespaces compiles Clojure code. */
  private static final class Vars {
    static final IFn SET_CONFIG = profiler("profiler-set-config");
    static final IFn SET_STATE = profiler("profiler-set-state");
    static final IFn DUMP = profiler("dump-profile");
    static final IFn DUMPS = profiler("dumps");
    static final IFn PAUSE = profiler("pause");
    static final IFn RESUME = profiler("resume");
    static final IFn DOMAIN = profiler("domain");
    static final IFn TASK = profiler("task");
    static final IFn FRAME = profiler("frame");
    static final IFn EVENT = profiler("event");
    static final IFn COUNTER = profiler("counter");
    static final IFn MARK = profiler("mark");
    static final IFn STATE = profiler("state");
    static final IFn CURRENT_CONFIG = profiler("current-config");
    static final IFn STEADY_BEGIN = JavaData.var("pyprof.steady", "begin-as!");
    static final IFn STEADY_END = JavaData.var("pyprof.steady", "end!");
    static final IFn STEADY_ACTIVE = JavaData.var("pyprof.steady", "active");
    static final IFn STEADY_FROM_PROPERTY = JavaData.var("pyprof.steady", "from-property!");
    static final IFn STATS = JavaData.var("pyprof.stats", "stats");

    private static IFn profiler(String name) {
      return JavaData.var("pyprof.profiler", name);
    }
  }

  /** Loads the Clojure namespaces behind this class now (see {@link ProfilerControl#register}). */
  static void preload() {
    Vars.STATE.getClass();
  }

  /**
   * Configures the profiler (C: {@code MXSetProcessProfilerConfig}). Keys are the C names
   * ({@code profiler_config.json}), values Boolean, Number or String; keys left out return to
   * their C default.
   *
   * @return the strings sent to C, by C key ({@code "profile_symbolic" -> "True"}), unmodifiable,
   *     sorted by key
   * @throws PyprofException {@code invalid-config} for an unknown key or bad value (config.*,
   *     process.*), or a {@code filename} another live process claimed (config.filename_claimed);
   *     {@code invalid-state} while a session owns the profiler or after the finished trace
   */
  public static Map<String, String> setConfig(Map<String, ?> config) {
    // null reaches Clojure as nil: config.not_a_map, as any other non-map
    return strings(call(() -> Vars.SET_CONFIG.invoke(
        config == null ? null : PersistentHashMap.create(config))));
  }

  /**
   * Starts ({@code "run"}) or stops ({@code "stop"}) recording (C:
   * {@code MXSetProcessProfilerState}).
   *
   * @throws PyprofException {@code invalid-state}: state.invalid, state.finished_run, or while a
   *     session owns the profiler
   */
  public static void setState(String state) {
    call(() -> Vars.SET_STATE.invoke(state));
  }

  /**
   * Writes the trace file (C: {@code MXDumpProcessProfile}); {@code finished} ends the trace
   * session (valid JSON; no second trace session in this process), else an intermediate dump.
   *
   * @throws PyprofException {@code invalid-state}: state.dump_before_run, state.finished_dump
   */
  public static void dump(boolean finished) {
    call(() -> Vars.DUMP.invoke(finished));
  }

  /**
   * MXNet's aggregate statistics as a text table by total time, descending (C:
   * {@code MXAggregateProfileStatsPrintEx}); ms, kB, 4 significant digits.
   *
   * @throws PyprofException {@code invalid-state}: dumps.no_aggregate_stats, dumps.failed,
   *     dumps.empty
   */
  public static String dumps() {
    return (String) call(() -> Vars.DUMPS.invoke());
  }

  /**
   * MXNet's aggregate statistics (as {@link #dumps()}; exact statistics: {@link #stats}).
   *
   * @param format {@code "table"} (a String) or {@code "json"} (a {@code Map<String, Object>}:
   *     {@code "Time"} category to operator to {@code "Count"}, {@code "Total"}, {@code "Min"},
   *     {@code "Max"}, {@code "Avg"}; {@code "Memory"}; {@code "Unit"})
   * @param sortBy {@code "total"}, {@code "avg"}, {@code "min"}, {@code "max"} or {@code "count"}
   * @throws PyprofException {@code invalid-option} dumps.format, dumps.sort_by; else as
   *     {@link #dumps()}
   */
  public static Object dumps(boolean reset, String format, String sortBy, boolean ascending) {
    // the names as given, null too: pyprof.profiler/dumps checks them against api.json
    return JavaData.of(call(() -> Vars.DUMPS.invoke(
        PersistentArrayMap.createAsIfByAssoc(new Object[] {
          Keyword.intern("reset"), reset,
          Keyword.intern("format"), format,
          Keyword.intern("sort-by"), sortBy,
          Keyword.intern("ascending"), ascending}))));
  }

  /**
   * What this process asked of the profiler (MXNet has no getters); no C call.
   *
   * @return an unmodifiable map of {@code "running"}, {@code "paused"}, {@code "finished"} and
   *     {@code "ever_ran"}
   */
  public static Map<String, Boolean> state() {
    Map<?, ?> s = (Map<?, ?>) call(() -> Vars.STATE.invoke());
    Map<String, Boolean> out = new java.util.LinkedHashMap<>();
    for (String k : new String[] {"running", "paused", "finished", "ever_ran"}) {
      out.put(k, Boolean.TRUE.equals(s.get(Keyword.intern(k.replace('_', '-')))));
    }
    return java.util.Collections.unmodifiableMap(out);
  }

  /**
   * The configuration in force after the last {@link #setConfig} (as it returned), or null
   * before any; no C call.
   */
  public static Map<String, String> currentConfig() {
    Object c = call(() -> Vars.CURRENT_CONFIG.invoke());
    return c == null ? null : strings(c);
  }

  /**
   * Begins steady mode ({@code pyprof.steady}) at start-up, before the service's own MXNet
   * threads start: configures with {@code options} (C keys; with {@code "filename"} into that
   * file, else into the raw trace sessions cut), runs and pauses. Until {@link #steadyEnd()}
   * nothing changes MXNet's {@code IsProfiling}: sessions pause and resume; setState, a finished
   * dump and a config changing a mode key are refused (C: {@code MXSetProcessProfilerConfig},
   * {@code MXSetProcessProfilerState(1)}, {@code MXProcessProfilePause(1)}).
   *
   * @throws PyprofException {@code invalid-state} steady.already, steady.session_open,
   *     steady.profiler_running; {@code session-finished}; {@code invalid-config}
   */
  public static void steadyBegin(Map<String, ?> options) {
    call(() -> Vars.STEADY_BEGIN.invoke(  // who began it, as a Java caller reads it
        options == null ? null : PersistentHashMap.create(options),
        "Profiler.steadyBegin(...)"));
  }

  /** {@link #steadyBegin(Map)} with MXNet's default recording options, on the raw trace. */
  public static void steadyBegin() {
    steadyBegin(Map.of());
  }

  /**
   * Ends steady mode once the caller's MXNet threads ended: stops, and finishes the
   * {@code "filename"} trace if one was given; idempotent (C: {@code MXNDArrayWaitAll},
   * {@code MXSetProcessProfilerState(0)}, {@code MXDumpProcessProfile(1)}).
   *
   * @throws PyprofException {@code invalid-state} steady.session_open
   */
  public static void steadyEnd() {
    call(() -> Vars.STEADY_END.invoke());
  }

  /** Who began steady mode (a session's name, {@code -Dpyprof.steady}, ...), or null. */
  public static String steadyActive() {
    return (String) call(() -> Vars.STEADY_ACTIVE.invoke());
  }

  /**
   * Begins steady mode when {@code -Dpyprof.steady=true} (default options, raw trace); called by
   * {@link ProfilerControl#register()}. Returns whether steady mode is on.
   */
  public static boolean steadyFromProperty() {
    return Boolean.TRUE.equals(call(() -> Vars.STEADY_FROM_PROPERTY.invoke()));
  }

  /** Pauses recording, the state staying "run" (C: {@code MXProcessProfilePause(1)}). */
  public static void pause() {
    call(() -> Vars.PAUSE.invoke());
  }

  /** Resumes recording (C: {@code MXProcessProfilePause(0)}). */
  public static void resume() {
    call(() -> Vars.RESUME.invoke());
  }

  /**
   * The domain {@code name}, one per name, never destroyed (C: {@code MXProfileCreateDomain}).
   *
   * @throws PyprofException {@code invalid-option} object.bad_name, object.name_too_long (over
   *     {@link ProfileObject#nameMaxBytes()} UTF-8 bytes), object.name_bad_char
   */
  public static ProfileDomain domain(String name) {
    return (ProfileDomain) call(() -> Vars.DOMAIN.invoke(name));
  }

  /**
   * A new task (C: {@code MXProfileCreateTask}): an async b/e pair between start and stop; close
   * it to destroy the handle.
   *
   * @throws PyprofException {@code invalid-option} object.needs_domain, or a bad name as
   *     {@link #domain}
   */
  public static ProfileObject task(ProfileDomain domain, String name) {
    return (ProfileObject) call(() -> Vars.TASK.invoke(domain, name));
  }

  /** A new frame, a ( ) pair (C: {@code MXProfileCreateFrame}); errors as {@link #task}. */
  public static ProfileObject frame(ProfileDomain domain, String name) {
    return (ProfileObject) call(() -> Vars.FRAME.invoke(domain, name));
  }

  /** A new event, a B/E pair of category "event" (C: {@code MXProfileCreateEvent}). */
  public static ProfileObject event(String name) {
    return (ProfileObject) call(() -> Vars.EVENT.invoke(name));
  }

  /** A new unsigned 64-bit counter at 0 (C: {@code MXProfileCreateCounter}); as {@link #task}. */
  public static ProfileObject counter(ProfileDomain domain, String name) {
    return (ProfileObject) call(() -> Vars.COUNTER.invoke(domain, name));
  }

  /**
   * Records an instant marker now (C: {@code MXProfileSetMarker}); {@code scope} of api.json
   * marker_scopes ({@code "global"}, {@code "process"}, {@code "thread"}, {@code "task"},
   * {@code "marker"}), else marker.scope; other errors as {@link #task}.
   */
  public static void mark(ProfileDomain domain, String name, String scope) {
    call(() -> Vars.MARK.invoke(domain, name, scope));
  }

  /**
   * Names the calling thread in the windows written from now on (a {@code thread_name} metadata
   * event, trace.json thread_names). Threads calling MXNet through pyprof are named on their
   * first call; another binding's thread (DJL) calls this at its start and after renaming
   * itself. Cheap, loads no Clojure, any time.
   *
   * @return false where threads cannot be named (not Linux) or {@link ThreadNames#LIMIT} are
   */
  public static boolean nameThread() {
    return ThreadNames.register() != 0L;
  }

  /**
   * Statistics of valid trace files (a session's windows, or MXNet's own layout), streamed, no C
   * call; Python's {@code pyprof.trace.stats} within a relative 1e-12.
   *
   * @return an unmodifiable map: {@code "operators"} (maps of {@code "category"}, {@code "name"},
   *     {@code "device"}, {@code "count"}, microseconds {@code "total_us"}, {@code "min_us"},
   *     {@code "max_us"} (Long, Double when not whole), {@code "mean_us"}, {@code "p50_us"},
   *     {@code "p90_us"}, {@code "p99_us"} (Double), {@code "bulk"}), {@code "memory"} (bytes
   *     per device), {@code "counters"}, {@code "notes"}, {@code "units"}
   * @throws PyprofException trace.no_paths, trace.not_a_path, an unreadable file, or
   *     trace.not_valid for a damaged or foreign one (fix: {@code pyprof repair})
   */
  public static Map<String, Object> stats(String... paths) {
    return JavaData.map((Map<?, ?>) call(() -> Vars.STATS.invoke(
        paths == null ? null : java.util.Arrays.asList(paths)))); // null: trace.no_paths
  }

  /** A map of C strings as an unmodifiable {@code Map<String, String>} sorted by key. */
  private static Map<String, String> strings(Object m) {
    java.util.TreeMap<String, String> out = new java.util.TreeMap<>();
    for (Map.Entry<?, ?> e : ((Map<?, ?>) m).entrySet()) {
      out.put(String.valueOf(e.getKey()), String.valueOf(e.getValue()));
    }
    return java.util.Collections.unmodifiableMap(out);
  }

  private static Object call(java.util.function.Supplier<Object> f) {
    try {
      return f.get();
    } catch (Throwable t) {
      throw PyprofException.wrap(t);
    }
  }
}
