package pyprof.jvm;

import clojure.java.api.Clojure;
import clojure.lang.IFn;
import clojure.lang.Keyword;
import clojure.lang.PersistentHashMap;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A profiling session for services: windows of MXNet's process-wide profiler, each saved as its
 * own valid Chrome trace ({@code pyprof.session}, shared with Python). Safe beside the service's
 * own MXNet binding (DJL) by default: {@code profile_api} stays off unless named, or steady mode
 * is on ({@link #notes()}, api.json service_session).
 *
 * <pre>{@code
 * try (ProfilerSession s = new ProfilerSession(Map.of(
 *         "path", "/tmp/trace_{window}.json",
 *         "profile_imperative", true, "aggregate_stats", true,
 *         "schedule", Map.of("wait", 1, "active", 2, "repeat", 3)))) {
 *   s.start();
 *   for (Batch b : batches) { train(b); s.step(); }
 * }   // close() stops and saves the open window
 * }</pre>
 *
 * <p>Options: {@code "path"} (window files; {@code {window}}, {@code {step}}, {@code {pid}}
 * filled in), {@code "schedule"} (a map of schedule.json's {@code wait}, {@code warmup},
 * {@code active}, {@code repeat}, {@code skip_first}; default: one window from start to stop),
 * {@code "on_trace_ready"} (a {@code Consumer} of each saved window, as {@link #stop()} lists
 * them), {@code "steady"}, the recording keys of {@link Profiler#setConfig} but
 * {@code filename}, {@code continuous_dump} and {@code profile_process}, and
 * {@code "record_shapes"}, {@code "with_stack"}, {@code "with_flops"} (bound executors' shapes,
 * attributes and call sites on their operator events, {@code pyprof.capture}).
 *
 * <p>Thread safe; {@link #stop()}, {@link #dump()} and {@link #close()} are idempotent; a failed
 * {@link #start()} leaves the profiler as it was. Errors: {@link PyprofException}, a failing C
 * call its subclass {@link MXNetException}.
 */
public final class ProfilerSession implements AutoCloseable {
  private static final class Vars {
    static final IFn PROFILE = session("profile");
    static final IFn CHECK_OPTIONS = session("check-options");
    static final IFn SCHEDULE = session("schedule");
    static final IFn START = session("start!");
    static final IFn STEP = session("step!");
    static final IFn STOP = session("stop!");
    static final IFn STATE = session("session-state");
    static final IFn STATS = session("session-stats");
    static final IFn WRITE_WINDOWS = session("write-windows!");
    static final IFn RECORDING_BYTES = session("recording-bytes");
    static final IFn FIRST_FILE = session("first-file");
    static final IFn SAVED = session("saved?");
    static final IFn BOOLEAN_VALUE = JavaData.var("pyprof.util", "boolean-value");
    static final IFn ESCAPE = JavaData.var("pyprof.session.template", "escape");
    static final IFn FILE_PROBLEM = JavaData.var("pyprof.output", "file-problem");
    static final IFn SERVICE = (IFn) JavaData.var("pyprof.rules", "api").invoke("service_session");

    private static IFn session(String name) {
      return JavaData.var("pyprof.session", name);
    }
  }

  /** api.json service_session field {@code key}. */
  static Object service(String key) {
    return ((Map<?, ?>) Vars.SERVICE).get(key);
  }

  /** The thread that runs {@link #stopAsync()}'s stops, in call order. */
  private static final class Stopper {
    static final java.util.concurrent.ExecutorService EXECUTOR =
        Background.singleThread("pyprof-session-stopper", false); // the boundary: light, on time
  }

  private final Object session;
  private final OutputRoot root;
  // read once, here: a bad -D value is the constructor's error, never a later step's
  private final long maxWindows = Limits.maxWindows();
  private final long maxWindowBytes = Limits.maxWindowBytes();
  private final long maxDumpBytes = Limits.maxDumpBytes();
  private final List<String> notes = new ArrayList<>();
  private final java.util.concurrent.atomic.AtomicReference<RuntimeException> saveFailure =
      new java.util.concurrent.atomic.AtomicReference<>();

  /**
   * Loads the Clojure namespaces behind this class and runs the options' check and the window cut
   * once (on synthetic bytes), so that a service's first session and window do not pay for it.
   * No C call, no file.
   */
  public static void init() {
    Vars.PROFILE.getClass();
    Vars.CHECK_OPTIONS.invoke(toClojure(Map.of("path", "pyprof_trace_{window}.json")));
    Clojure.var("pyprof.session.raw", "warm-up!").invoke();
  }

  /**
   * A session, not started, writing under {@link OutputRoot#fromProperty()}; no C call.
   *
   * @throws PyprofException {@code invalid-option} or {@code invalid-config} for a bad option
   *     (session.*, schedule.*, config.*), a path outside the root or where no file can be
   *     written (root.outside, root.missing_directory, session.bad_path), or a bad
   *     {@code -Dpyprof.maxWindows}, {@code maxWindowBytes} or {@code maxDumpBytes}
   *     (root.bad_limit)
   */
  public ProfilerSession(Map<String, ?> options) {
    this(options, OutputRoot.fromProperty());
  }

  /** A session writing only under {@code outputRoot} (created owner-only when missing). */
  public ProfilerSession(Map<String, ?> options, String outputRoot) {
    this(options, new OutputRoot(outputRoot));
  }

  private ProfilerSession(Map<String, ?> options, OutputRoot root) {
    this.root = root;
    if (options == null) {
      throw PyprofException.catalogue("root.null", "what", "the session's options", "expected",
          "a map of options (Map.of() for the defaults)");
    }
    Map<String, Object> opts = new HashMap<>(options);
    // api.json service_session: no state switch of this session can abort another binding's call
    boolean steady = on(opts.get("steady")) || Profiler.steadyActive() != null;
    if (!steady && !opts.containsKey("profile_api") && !opts.containsKey("profile_all")) {
      ((Map<?, ?>) service("defaults")).forEach((k, v) -> opts.put((String) k, v));
      notes.add((String) service("default_note"));
    }
    if (!steady && (on(opts.get("profile_api")) || on(opts.get("profile_all")))) {
      notes.add((String) service("api_note")); // the user's call, said once
    }
    for (Object k : (List<?>) service("capture_options")) {
      if (on(opts.get(k))) {
        notes.add((String) service("capture_note")); // what they cannot record, in one line
        break;
      }
    }
    Object onFailed = opts.remove("on_save_failed");
    if (onFailed != null && !(onFailed instanceof java.util.function.Consumer)) {
      throw PyprofException.catalogue("session.not_callable", "option", "on_save_failed",
          "value", onFailed, "expected", "a Consumer<RuntimeException> of each failed save");
    }
    Object path = opts.get("path");
    try {
      // the options' errors in the caller's words first; the path's file is checked once resolved
      Vars.CHECK_OPTIONS.invoke(toClojure(opts));
      opts.put("path", underRoot(path == null ? "pyprof_trace_{window}.json"
          : String.valueOf(path)));
      session = Vars.PROFILE.invoke(((clojure.lang.IPersistentMap) toClojure(opts))
          .assoc(Keyword.intern("pyprof.session", "within"), root.toString()) // its leftovers only
          .assoc(Keyword.intern("pyprof.session", "defer-saves"), true)
          .assoc(Keyword.intern("pyprof.session", "on-save-failed"), new clojure.lang.AFn() {
            @Override
            @SuppressWarnings("unchecked")
            public Object invoke(Object t) {
              RuntimeException e = PyprofException.wrap((Throwable) t);
              saveFailure.compareAndSet(null, e);
              if (onFailed != null) {
                ((java.util.function.Consumer<Object>) onFailed).accept(e);
              }
              return null;
            }
          }));
    } catch (Throwable t) {
      throw PyprofException.wrap(t);
    }
  }

  /**
   * {@code template} under the root, the root's text escaped (grammar.json window_path). The
   * first window's file is checked: fields fill with digits only, so the template stays under
   * the root where that file does.
   */
  private String underRoot(String template) {
    root.resolve("path", (String) Vars.FIRST_FILE.invoke(template));
    return Vars.ESCAPE.invoke(root.toString()) + java.io.File.separator
        + root.path().relativize(root.path().resolve(template).normalize());
  }

  /** An option given as on, by grammar.json's boolean. */
  static boolean on(Object v) {
    return Boolean.TRUE.equals(Vars.BOOLEAN_VALUE.invoke(v));
  }

  /**
   * What this session does not record that its options may lead one to expect (api.json
   * service_session default_note, api_note, capture_note; the last two also on stderr at
   * {@link #start()}).
   */
  public List<String> notes() {
    return java.util.Collections.unmodifiableList(notes);
  }

  /** The directory this session writes under. */
  public String outputRoot() {
    return root.toString();
  }

  /**
   * Java options as pyprof.session's: its own options as keywords, recording keys as given; the
   * schedule's keys as schedule.json spells them ({@code skip-first} is unknown, as in Python).
   */
  static Object toClojure(Map<String, ?> options) {
    Map<Object, Object> out = new HashMap<>();
    for (Map.Entry<?, ?> e : options.entrySet()) {
      // a Clojure caller's keyword keys by name, as Profiler.setConfig takes them
      Object key = e.getKey() instanceof Keyword ? ((Keyword) e.getKey()).getName() : e.getKey();
      if (!(key instanceof String)) {
        out.put(key, e.getValue()); // pyprof.session names the key that is not a name
        continue;
      }
      String k = (String) key;
      if ("path".equals(k) || "steady".equals(k)) { // a null path is refused, not "null"
        out.put(Keyword.intern(k), e.getValue());
      } else if ("on_trace_ready".equals(k)) { // a Consumer of each saved window (Java data)
        Object f = e.getValue();
        out.put(Keyword.intern("on-trace-ready"), f instanceof java.util.function.Consumer
            ? new clojure.lang.AFn() {
                @Override
                @SuppressWarnings("unchecked")
                public Object invoke(Object w) {
                  ((java.util.function.Consumer<Object>) f).accept(JavaData.map((Map<?, ?>) w));
                  return null;
                }
              }
            : f); // anything else: session.not_callable, as Python's
      } else if ("schedule".equals(k)) {
        Object v = e.getValue();
        if (v == null) {
          continue; // no schedule, as Python's schedule=None
        }
        if (!(v instanceof Map)) {
          throw PyprofException.catalogue("session.schedule_not_map", "value", v);
        }
        out.put(Keyword.intern("schedule"), Vars.SCHEDULE.invoke(PersistentHashMap.create((Map<?, ?>) v)));
      } else {
        out.put(k, e.getValue());
      }
    }
    return PersistentHashMap.create(out);
  }

  /**
   * Takes ownership of the profiler and begins step 0 (C: {@code MXSetProcessProfilerConfig},
   * {@code MXSetProcessProfilerState}); returns this session.
   *
   * @throws PyprofException {@code invalid-state} session.already_started, session.nested,
   *     session.profiler_running, session.profiler_finished
   */
  public ProfilerSession start() {
    call(Vars.START);
    for (Object n : List.of(service("api_note"), service("capture_note"))) {
      if (notes.contains(n)) {
        System.err.println("pyprof: " + n);
      }
    }
    return this;
  }

  /**
   * Ends one step; a window ends when its last active step does (C: {@code MXNDArrayWaitAll},
   * {@code MXDumpProcessProfile(0)}) and returns at the boundary: the saver thread
   * ({@code pyprof-window-saver}, lowest priority) writes the windows in the order they ended.
   * Past {@code -Dpyprof.maxWindows} windows or {@code -Dpyprof.maxWindowBytes} of raw trace in
   * the open window, the session stops (saving that window).
   *
   * @throws PyprofException session.not_open; root.too_many_windows, root.window_too_large
   */
  public void step() {
    call(Vars.STEP);
    checkLimits();
  }

  /**
   * Waits at most {@code timeoutMillis} (0: no bound) until every window that ended is written;
   * false when the time ran out.
   *
   * @throws PyprofException the first failure of a save, once (its events stay in the raw trace:
   *     {@code pyprof recover})
   */
  public boolean awaitSaved(long timeoutMillis) {
    boolean done = Boolean.TRUE.equals(call(s -> Vars.SAVED.invoke(s, timeoutMillis > 0 ? timeoutMillis : null)));
    RuntimeException e = saveFailure.getAndSet(null);
    if (e != null) {
      throw e;
    }
    return done;
  }

  /** {@link #stop()} on pyprof's stopper thread; returns at once. */
  public java.util.concurrent.CompletableFuture<List<Map<String, Object>>> stopAsync() {
    return java.util.concurrent.CompletableFuture.supplyAsync(this::stop, Stopper.EXECUTOR);
  }

  /** Stops the session and throws when it passed a limit of {@link #step()}; else nothing. */
  public void checkLimits() {
    long bytes = ((Number) call(Vars.RECORDING_BYTES)).longValue(); // of the open window
    int windows = ((List<?>) stateNow().get("windows")).size();
    if (bytes > maxWindowBytes) {
      stop();
      throw PyprofException.catalogue("root.window_too_large", "index", windows, "bytes", bytes,
          "limit", maxWindowBytes);
    }
    if (windows >= maxWindows) {
      windows = stop().size();
      throw PyprofException.catalogue("root.too_many_windows", "windows", windows,
          "limit", maxWindows);
    }
  }

  /**
   * Stops recording, saves an open window and gives the profiler back (C:
   * {@code MXSetProcessProfilerState}, {@code MXDumpProcessProfile(0)}). Idempotent.
   *
   * @return every saved window, unmodifiable maps of {@code "index"}, {@code "path"},
   *     {@code "first_step"}, {@code "last_step"}, {@code "events"}, {@code "start_us"},
   *     {@code "end_us"} (Long, microseconds since the epoch) and {@code "truncated"} (stopped
   *     at the raw trace's cap, api.json raw_trace max_bytes)
   */
  public List<Map<String, Object>> stop() {
    return JavaData.maps(call(Vars.STOP));
  }

  /** Stops (when open); the saved windows' absolute paths in order. Idempotent. */
  public List<String> dump() {
    List<String> out = new ArrayList<>();
    for (Map<String, Object> w : stop()) {
      out.add((String) w.get("path"));
    }
    return java.util.Collections.unmodifiableList(out);
  }

  /**
   * The absolute file {@link #dump(String)} writes for {@code path}; nothing written.
   *
   * @throws PyprofException root.outside, root.missing_directory, session.dump_over_window,
   *     session.dump_exists (a dump never replaces a file), session.bad_dump_path (a name too
   *     long, no file creatable there, too little space)
   */
  public String dumpPath(String path) {
    return dumpPath(path, true);
  }

  /** {@link #dumpPath(String)}; {@code probe}: with the file-system check (a probe file). */
  private String dumpPath(String path, boolean probe) {
    String out = root.resolve("dump path", path).toString();
    for (Object w : (List<?>) stateNow().get("windows")) {
      if (sameFile(String.valueOf(((Map<?, ?>) w).get("path")), out)) {
        throw PyprofException.catalogue("session.dump_over_window", "path", out);
      }
    }
    if (java.nio.file.Files.exists(java.nio.file.Paths.get(out),
        java.nio.file.LinkOption.NOFOLLOW_LINKS)) { // nothing is replaced without a word
      throw PyprofException.catalogue("session.dump_exists", "path", out);
    }
    Map<?, ?> problem = probe ? (Map<?, ?>) Vars.FILE_PROBLEM.invoke(out) : null; // no space...
    if (problem != null) {
      throw PyprofException.catalogue("session.bad_dump_path", "value", path, "problem",
          problem.get(Keyword.intern("problem")), "path_fix", problem.get(Keyword.intern("path_fix")));
    }
    return out;
  }

  /** True when {@code a} and {@code b} are one file (links included); false if one is absent. */
  private static boolean sameFile(String a, String b) {
    try {
      return java.nio.file.Files.isSameFile(java.nio.file.Paths.get(a), java.nio.file.Paths.get(b));
    } catch (java.io.IOException e) {
      return false;
    }
  }

  /**
   * Stops (when open) and writes all windows as one valid trace at {@code path} (under the
   * output root), metadata once; no C call. Returns the absolute path.
   *
   * @throws PyprofException session.no_window (when no window was saved and none is being
   *     recorded, the session is left as it was), root.dump_too_large (over
   *     {@code -Dpyprof.maxDumpBytes}), and as {@link #dumpPath}
   */
  public String dump(String path) {
    dumpPath(path); // a bad path leaves the session open
    Map<String, Object> now = state(); // after the windows being written
    if (((List<?>) now.get("windows")).isEmpty()
        && !String.valueOf(now.get("action")).startsWith("record")) {
      throw PyprofException.catalogue("session.no_window"); // nor will stopping save one: kept open
    }
    List<String> paths = dump();
    if (paths.isEmpty()) {
      throw PyprofException.catalogue("session.no_window");
    }
    String out = dumpPath(path, false); // over the windows the stop saved too (probed above)
    long bytes = 0;
    for (String p : paths) {
      bytes += new java.io.File(p).length();
    }
    if (bytes > maxDumpBytes) {
      throw PyprofException.catalogue("root.dump_too_large", "bytes", bytes, "limit",
          maxDumpBytes);
    }
    return String.valueOf(call(s -> Vars.WRITE_WINDOWS.invoke(paths, out)));
  }

  /**
   * Exact statistics of the saved windows together, as {@link Profiler#stats}; no C call.
   *
   * @throws PyprofException session.no_window
   */
  public Map<String, Object> stats() {
    return JavaData.map((Map<?, ?>) call(Vars.STATS));
  }

  /**
   * The session's state, after the windows being written; no C call.
   *
   * @return an unmodifiable map: {@code "state"} ({@code "new"}, {@code "open"},
   *     {@code "closed"}), {@code "step"} (Long), {@code "action"} (schedule.json's
   *     {@code "none"}, {@code "warmup"}, {@code "record"}, {@code "record_and_save"}) and
   *     {@code "windows"} (as {@link #stop()} returns them)
   */
  public Map<String, Object> state() {
    return JavaData.map((Map<?, ?>) call(Vars.STATE));
  }

  /** {@link #state()} at once: {@code "windows"} lists the windows written so far. */
  public Map<String, Object> stateNow() {
    return JavaData.map((Map<?, ?>) call(s -> Vars.STATE.invoke(s, true)));
  }

  /** Same as {@link #stop()}. */
  @Override
  public void close() {
    stop();
  }

  private Object call(IFn f) {
    return call(f::invoke);
  }

  private Object call(java.util.function.Function<Object, Object> f) {
    try {
      return f.apply(session);
    } catch (Throwable t) {
      throw PyprofException.wrap(t);
    }
  }
}
