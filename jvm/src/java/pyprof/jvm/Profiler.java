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
 * <p>Errors: {@code clojure.lang.ExceptionInfo} (a RuntimeException) for a key, value or state the
 * spec rejects before any C call; {@link MXNetException} when MXNet itself fails.
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

    static {
      Clojure.var("clojure.core", "require").invoke(Clojure.read("pyprof.profiler"));
      SET_CONFIG = Clojure.var("pyprof.profiler", "profiler-set-config");
      SET_STATE = Clojure.var("pyprof.profiler", "profiler-set-state");
      DUMP = Clojure.var("pyprof.profiler", "dump-profile");
      DUMPS = Clojure.var("pyprof.profiler", "dumps");
      PAUSE = Clojure.var("pyprof.profiler", "pause");
      RESUME = Clojure.var("pyprof.profiler", "resume");
    }
  }

  /**
   * Configures the profiler ({@code MXSetProcessProfilerConfig}). Keys are the C names
   * ({@code "profile_symbolic"}, {@code "filename"}, ...); values Boolean, Number or String. Keys left
   * out return to their C default. Returns the strings sent to C.
   */
  @SuppressWarnings("unchecked")
  public static Map<String, String> setConfig(Map<String, ?> config) {
    return (Map<String, String>) Vars.SET_CONFIG.invoke(PersistentHashMap.create(config));
  }

  /** {@code "run"} or {@code "stop"} ({@code MXSetProcessProfilerState}). */
  public static void setState(String state) {
    Vars.SET_STATE.invoke(state);
  }

  /** Writes the trace file ({@code MXDumpProcessProfile}); {@code finished} ends the session. */
  public static void dump(boolean finished) {
    Vars.DUMP.invoke(finished);
  }

  /** Aggregate statistics as a table sorted by total time, descending (needs aggregate_stats). */
  public static String dumps() {
    return (String) Vars.DUMPS.invoke();
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
    return Vars.DUMPS.invoke(
        PersistentArrayMap.createAsIfByAssoc(new Object[] {
          Keyword.intern("reset"), reset,
          Keyword.intern("format"), Keyword.intern(format),
          Keyword.intern("sort-by"), Keyword.intern(sortBy),
          Keyword.intern("ascending"), ascending}));
  }

  /** Pauses recording ({@code MXProcessProfilePause(1)}); state stays "run". */
  public static void pause() {
    Vars.PAUSE.invoke();
  }

  /** Resumes recording after {@link #pause()}. */
  public static void resume() {
    Vars.RESUME.invoke();
  }
}
