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
    static final IFn STEADY_BEGIN;
    static final IFn STEADY_END;
    static final IFn STEADY_ACTIVE;
    static final IFn STEADY_FROM_PROPERTY;

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
      Clojure.var("clojure.core", "require").invoke(Clojure.read("pyprof.steady"));
      STEADY_BEGIN = Clojure.var("pyprof.steady", "begin-as!");
      STEADY_END = Clojure.var("pyprof.steady", "end!");
      STEADY_ACTIVE = Clojure.var("pyprof.steady", "active");
      STEADY_FROM_PROPERTY = Clojure.var("pyprof.steady", "from-property!");
      Clojure.var("clojure.core", "require").invoke(Clojure.read("pyprof.stats"));
      STATS = Clojure.var("pyprof.stats", "stats");
    }
  }

  /** Loads the Clojure namespaces behind this class now (see {@link ProfilerControl#register}). */
  static void preload() {
    Vars.STATE.getClass();
  }

  /**
   * Configures the profiler (C: {@code MXSetProcessProfilerConfig}). Keys are the C names
   * ({@code "profile_symbolic"}, {@code "filename"}, ...; {@code profiler_config.json} lists them);
   * values Boolean, Number or String. Keys left out return to their C default.
   *
   * @return the strings sent to C, C key to C string ({@code "profile_symbolic" -> "True"}), an
   *     unmodifiable map sorted by key
   * @throws PyprofException {@code invalid-config} for an unknown key or a bad value (config.*,
   *     process.*), or when another process configured the same {@code filename} first and has
   *     not finished its trace (config.filename_claimed, naming its pid; the file is claimed for
   *     this process until its finished dump or exit: api.json {@code trace_claims}),
   *     {@code invalid-state} while a session owns the profiler or after the finished trace
   *     (state.*)
   * @throws MXNetException when the C call fails
   */
  public static Map<String, String> setConfig(Map<String, ?> config) {
    // null reaches the Clojure side as nil: config.not_a_map, as any other non-map.
    return strings(call(() -> Vars.SET_CONFIG.invoke(
        config == null ? null : PersistentHashMap.create(config))));
  }

  /**
   * Starts or stops recording (C: {@code MXSetProcessProfilerState}).
   *
   * @param state {@code "run"} or {@code "stop"}
   * @throws PyprofException {@code invalid-state} for another state (state.invalid), after the
   *     finished trace (state.finished_run) or while a session owns the profiler
   * @throws MXNetException when the C call fails
   */
  public static void setState(String state) {
    call(() -> Vars.SET_STATE.invoke(state));
  }

  /**
   * Writes the trace file (C: {@code MXDumpProcessProfile}).
   *
   * @param finished true ends the trace session: the file is complete, valid JSON, and MXNet
   *     cannot record a second session in this process; false writes an intermediate dump
   * @throws PyprofException {@code invalid-state} before the profiler ran (state.dump_before_run)
   *     or after a finished dump (state.finished_dump)
   * @throws MXNetException when the C call fails
   */
  public static void dump(boolean finished) {
    call(() -> Vars.DUMP.invoke(finished));
  }

  /**
   * MXNet's aggregate statistics as a text table sorted by total time, descending (C:
   * {@code MXAggregateProfileStatsPrintEx}); times in ms, memory in kB, 4 significant digits.
   *
   * @throws PyprofException {@code invalid-state} when aggregate_stats is off
   *     (dumps.no_aggregate_stats) or MXNet has none (dumps.failed, dumps.empty)
   */
  public static String dumps() {
    return (String) call(() -> Vars.DUMPS.invoke());
  }

  /**
   * MXNet's aggregate statistics (C: {@code MXAggregateProfileStatsPrintEx}); times in ms, memory
   * in kB, 4 significant digits (exact statistics: {@link #stats}).
   *
   * @param reset clear the statistics after reading them
   * @param format {@code "table"} (returns the text table, a String) or {@code "json"} (returns a
   *     {@code Map<String, Object>}: {@code "Time"} category to operator name to {@code "Count"},
   *     {@code "Total"}, {@code "Min"}, {@code "Max"}, {@code "Avg"}; {@code "Memory"};
   *     {@code "Unit"} {@code {"Time": "ms", "Memory": "kB"}})
   * @param sortBy {@code "total"}, {@code "avg"}, {@code "min"}, {@code "max"} or {@code "count"}
   * @param ascending sort order
   * @throws PyprofException {@code invalid-option} for a bad format or sort key (dumps.format,
   *     dumps.sort_by), {@code invalid-state} as {@link #dumps()}
   */
  public static Object dumps(boolean reset, String format, String sortBy, boolean ascending) {
    // The names as given (a null too): pyprof.profiler/dumps checks them against api.json.
    return JavaData.of(call(() -> Vars.DUMPS.invoke(
        PersistentArrayMap.createAsIfByAssoc(new Object[] {
          Keyword.intern("reset"), reset,
          Keyword.intern("format"), format,
          Keyword.intern("sort-by"), sortBy,
          Keyword.intern("ascending"), ascending}))));
  }

  /**
   * What this process has asked of the profiler (MXNet has no getters), as
   * {@code pyprof.profiler.state()} in Python; no C call.
   *
   * @return an unmodifiable map of {@code "running"}, {@code "paused"}, {@code "finished"} (a
   *     finished dump happened: no new trace session in this process) and {@code "ever_ran"}
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
   * The configuration in force after the last {@link #setConfig}; no C call (MXNet has no
   * getter).
   *
   * @return C key to C string, keys left out at their C default, an unmodifiable map sorted by
   *     key; null before any {@link #setConfig}
   */
  public static Map<String, String> currentConfig() {
    Object c = call(() -> Vars.CURRENT_CONFIG.invoke());
    return c == null ? null : strings(c);
  }

  /**
   * Begins steady mode (Clojure {@code pyprof.steady/begin!}): call it at start-up, before the
   * service's own MXNet threads start (DJL's engine, a JNI binding: calls pyprof does not gate).
   * Configures the profiler with {@code options} (C key names as in {@link #setConfig}; with
   * {@code "filename"}, into that file, recorded while resumed; without, into pyprof's raw trace,
   * which sessions cut into windows), switches it to run and pauses it. From then on nothing
   * changes MXNet's {@code IsProfiling} until {@link #steadyEnd()} or exit: sessions take windows
   * by pause and resume, {@link #setState} and a finished {@link #dump} are refused, and so is a
   * config that changes a mode key (C: {@code MXSetProcessProfilerConfig},
   * {@code MXSetProcessProfilerState(1)}, {@code MXProcessProfilePause(1)}).
   *
   * @throws PyprofException {@code invalid-state} steady.already, steady.session_open,
   *     steady.profiler_running; {@code session-finished}; {@code invalid-config} for an option
   */
  public static void steadyBegin(Map<String, ?> options) {
    call(() -> Vars.STEADY_BEGIN.invoke(  // who began it, as a Java caller reads it
        options == null ? null : PersistentHashMap.create(keywords(options)),
        "Profiler.steadyBegin(...)"));
  }

  /** {@link #steadyBegin(Map)} with MXNet's default recording options, on the raw trace. */
  public static void steadyBegin() {
    steadyBegin(Map.of());
  }

  /**
   * Ends steady mode: the caller says its MXNet threads have ended. Stops the profiler and, with
   * a {@code "filename"} of {@link #steadyBegin(Map)}, finishes that trace. Idempotent
   * (C: {@code MXNDArrayWaitAll}, {@code MXSetProcessProfilerState(0)},
   * {@code MXDumpProcessProfile(1)}).
   *
   * @throws PyprofException {@code invalid-state} steady.session_open while a session is open
   */
  public static void steadyEnd() {
    call(() -> Vars.STEADY_END.invoke());
  }

  /** Who began steady mode (a session's name, {@code -Dpyprof.steady}, ...), or null. */
  public static String steadyActive() {
    return (String) call(() -> Vars.STEADY_ACTIVE.invoke());
  }

  /**
   * At start-up: begins steady mode when {@code -Dpyprof.steady=true} (api.json steady property),
   * with MXNet's default recording options on the raw trace; {@link ProfilerControl#register()}
   * calls it. Returns whether steady mode is on.
   */
  public static boolean steadyFromProperty() {
    return Boolean.TRUE.equals(call(() -> Vars.STEADY_FROM_PROPERTY.invoke()));
  }

  private static Map<Object, Object> keywords(Map<String, ?> options) {
    Map<Object, Object> out = new java.util.HashMap<>();
    options.forEach((k, v) -> out.put("filename".equals(k) ? clojure.lang.Keyword.intern(k) : k, v));
    return out;
  }

  /**
   * Pauses recording (C: {@code MXProcessProfilePause(1)}); the state stays "run".
   *
   * @throws MXNetException when the C call fails
   */
  public static void pause() {
    call(() -> Vars.PAUSE.invoke());
  }

  /**
   * Resumes recording after {@link #pause()} (C: {@code MXProcessProfilePause(0)}).
   *
   * @throws MXNetException when the C call fails
   */
  public static void resume() {
    call(() -> Vars.RESUME.invoke());
  }

  /**
   * The domain {@code name} (C: {@code MXProfileCreateDomain}): one per name in this JVM, never
   * destroyed; the category of its tasks, frames, counters and markers in the trace.
   *
   * @throws PyprofException {@code invalid-option} for a bad name (object.bad_name,
   *     object.name_too_long: more UTF-8 bytes than
   *     {@link ProfileObject#nameMaxBytes()}, object.name_bad_char)
   */
  public static ProfileDomain domain(String name) {
    return (ProfileDomain) call(() -> Vars.DOMAIN.invoke(name));
  }

  /**
   * A new task {@code name} in {@code domain} (C: {@code MXProfileCreateTask}), recorded as an
   * async b/e pair between {@link ProfileObject#start()} and {@link ProfileObject#stop()}; close
   * it to destroy the handle.
   *
   * @throws PyprofException {@code invalid-option} for a null domain (object.needs_domain) or a
   *     bad name (as {@link #domain})
   */
  public static ProfileObject task(ProfileDomain domain, String name) {
    return (ProfileObject) call(() -> Vars.TASK.invoke(domain, name));
  }

  /**
   * A new frame {@code name} in {@code domain} (C: {@code MXProfileCreateFrame}), recorded as a
   * ( ) pair; errors as {@link #task}.
   */
  public static ProfileObject frame(ProfileDomain domain, String name) {
    return (ProfileObject) call(() -> Vars.FRAME.invoke(domain, name));
  }

  /**
   * A new event {@code name} without a domain (C: {@code MXProfileCreateEvent}), recorded as a
   * B/E pair of category "event"; errors as {@link #domain}.
   */
  public static ProfileObject event(String name) {
    return (ProfileObject) call(() -> Vars.EVENT.invoke(name));
  }

  /**
   * A new counter {@code name} in {@code domain}, at 0 (C: {@code MXProfileCreateCounter}); an
   * unsigned 64-bit value recorded as C events ({@link ProfileObject#setValue},
   * {@link ProfileObject#increment}); errors as {@link #task}.
   */
  public static ProfileObject counter(ProfileDomain domain, String name) {
    return (ProfileObject) call(() -> Vars.COUNTER.invoke(domain, name));
  }

  /**
   * Records the instant marker {@code name} in {@code domain} now (C: {@code MXProfileSetMarker}).
   *
   * @param scope api.json's marker_scopes: {@code "global"}, {@code "process"},
   *     {@code "thread"}, {@code "task"} or {@code "marker"}
   * @throws PyprofException {@code invalid-option} for another scope (marker.scope), a null
   *     domain or a bad name (as {@link #task})
   */
  public static void mark(ProfileDomain domain, String name, String scope) {
    call(() -> Vars.MARK.invoke(domain, name, scope));
  }

  /**
   * Names the calling thread in the windows written from now on: each window whose events hold
   * MXNet calls made by this thread gets a {@code thread_name} metadata event with
   * {@link Thread#getName()} (trace.json {@code thread_names}). Threads that call MXNet through
   * pyprof are named on their first call; a thread of another binding (DJL's workers, the
   * retired Scala/Java package) calls this once at its start, and again after it renames itself.
   * Cheap (one native call and one map entry; no Clojure is loaded), and any thread may call
   * it at any time, with or without a session.
   *
   * @return whether the thread is named: false where threads cannot be named (not Linux), or
   *     when {@link ThreadNames#LIMIT} living threads are named already
   */
  public static boolean nameThread() {
    return ThreadNames.register() != 0L;
  }

  /**
   * Statistics of the valid trace file(s) at {@code paths} (the windows a session wrote, or a
   * trace in MXNet's own layout), read as a stream (pure JVM, no C call; Python's
   * {@code pyprof.trace.stats} figures within a relative 1e-12).
   *
   * @return an unmodifiable {@code Map<String, Object>}: {@code "operators"} (a list of maps of
   *     {@code "category"}, {@code "name"}, {@code "device"}, {@code "count"}, and times in
   *     microseconds {@code "total_us"}, {@code "min_us"}, {@code "max_us"} (Long, or Double when
   *     a duration is not whole), {@code "mean_us"}, {@code "p50_us"}, {@code "p90_us"},
   *     {@code "p99_us"} (Double), {@code "bulk"}), {@code "memory"} (per device, in bytes),
   *     {@code "counters"}, {@code "notes"} (Strings) and {@code "units"}
   * @throws PyprofException for no path ({@code trace.no_paths}), a null one
   *     ({@code trace.not_a_path}), a missing or unreadable file, or a damaged or foreign one
   *     ({@code trace.not_valid}, whose fix is Python's {@code pyprof repair})
   */
  public static Map<String, Object> stats(String... paths) {
    return JavaData.map((Map<?, ?>) call(() -> Vars.STATS.invoke(java.util.Arrays.asList(paths))));
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
