package pyprof.jvm;

import clojure.java.api.Clojure;
import clojure.lang.IFn;
import clojure.lang.Keyword;
import clojure.lang.PersistentHashMap;
import clojure.lang.RT;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A profiling session for services: one or more windows of MXNet's process-wide profiler, each
 * saved as its own valid Chrome trace (the design of {@code pyprof.session}, shared with Python).
 * Safe beside the service's own MXNet binding (DJL) with default options: {@code profile_api}
 * stays off unless named, or steady mode is on ({@link #notes()}, api.json service_session).
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
 * <p>Options: {@code "path"} (window files; {@code {window}}, {@code {step}}, {@code {pid}} are
 * filled in), {@code "schedule"} (a map of {@code wait}, {@code warmup}, {@code active},
 * {@code repeat}, {@code skip_first}, read by the rules of {@code schedule.json} shared with
 * Python; default: one window from start to stop), {@code "on_trace_ready"} (a
 * {@code java.util.function.Consumer} called with each saved window, the map {@link #stop()}
 * lists), and the recording
 * keys of {@link Profiler#setConfig} except {@code filename}, {@code continuous_dump} and
 * {@code profile_process}; {@code "record_shapes"}, {@code "with_stack"}, {@code "with_flops"}
 * (booleans, off by default) give each bound executor's operator events in the windows its
 * shapes and attributes, and with {@code with_stack} its call site (the Clojure namespace
 * {@code pyprof.capture}); Python's readers derive the FLOPs from them.
 *
 * <p>Thread safe: any number of threads may call any method. {@link #stop()}, {@link #dump()}
 * and {@link #close()} are idempotent. A failed {@link #start()} leaves the profiler as it was
 * (usable by a new session). Every error is a {@link PyprofException} (unchecked); a failing C
 * call is its subclass {@link MXNetException}, carrying MXNet's message.
 */
public final class ProfilerSession implements AutoCloseable {
  private static final class Vars {
    static final IFn PROFILE;
    static final IFn CHECK_OPTIONS;
    static final IFn SCHEDULE;
    static final IFn START;
    static final IFn STEP;
    static final IFn STOP;
    static final IFn STATE;
    static final IFn STATS;
    static final IFn WRITE_WINDOWS;
    static final IFn RECORDING_BYTES;
    static final IFn ESCAPE;
    static final IFn FIRST_FILE;
    static final IFn SAVED;
    static final IFn SERVICE;

    static {
      Clojure.var("clojure.core", "require").invoke(Clojure.read("pyprof.session"));
      PROFILE = Clojure.var("pyprof.session", "profile");
      CHECK_OPTIONS = Clojure.var("pyprof.session", "check-options");
      SCHEDULE = Clojure.var("pyprof.session", "schedule");
      START = Clojure.var("pyprof.session", "start!");
      STEP = Clojure.var("pyprof.session", "step!");
      STOP = Clojure.var("pyprof.session", "stop!");
      STATE = Clojure.var("pyprof.session", "session-state");
      STATS = Clojure.var("pyprof.session", "session-stats");
      WRITE_WINDOWS = Clojure.var("pyprof.session", "write-windows!");
      ESCAPE = Clojure.var("pyprof.session.template", "escape"); // loaded by pyprof.session
      FIRST_FILE = Clojure.var("pyprof.session", "first-file");
      RECORDING_BYTES = Clojure.var("pyprof.session", "recording-bytes");
      SAVED = Clojure.var("pyprof.session", "saved?");
      SERVICE = (IFn) Clojure.var("pyprof.rules", "api").invoke("service_session");
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
  private final List<String> notes = new ArrayList<>();
  private final java.util.concurrent.atomic.AtomicReference<RuntimeException> saveFailure =
      new java.util.concurrent.atomic.AtomicReference<>();

  /**
   * Loads the Clojure namespaces behind this class now (they load on first use otherwise, which
   * compiles them: seconds), and runs the options' check and the window cut once each (the cut
   * on synthetic bytes in memory), so that a service's first session and first window do not
   * pay for their first run. No C call; no file written.
   */
  public static void init() {
    Vars.PROFILE.getClass();
    Vars.CHECK_OPTIONS.invoke(toClojure(Map.of("path", "pyprof_trace_{window}.json")));
    Clojure.var("pyprof.session.raw", "warm-up!").invoke();
  }

  /**
   * A session (not started yet) writing under the output root of {@code -Dpyprof.outputRoot}
   * (default {@code <java.io.tmpdir>/pyprof}, see {@link OutputRoot}); no C call.
   *
   * @param options see the class comment: {@code "path"}, {@code "schedule"} (a map) and
   *     recording keys as {@link Profiler#setConfig} takes them
   * @throws PyprofException {@code invalid-option} or {@code invalid-config} for a bad option
   *     (session.reserved_option, session.schedule_not_map, schedule.*, session.path_needs_window,
   *     config.*), and for a {@code "path"} outside the root or in a directory that does not
   *     exist (root.outside, root.missing_directory), or where no file can be written
   *     (session.bad_path, as Python's profile checks)
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
    if (!opts.containsKey("profile_api") && !opts.containsKey("profile_all")
        && !Boolean.parseBoolean(String.valueOf(opts.get("steady"))) && Profiler.steadyActive() == null) {
      ((Map<?, ?>) service("defaults")).forEach((k, v) -> opts.put((String) k, v));
      notes.add((String) service("default_note"));
    }
    if ((on(opts.get("profile_api")) || on(opts.get("profile_all"))) && !on(opts.get("steady"))
        && Profiler.steadyActive() == null) {
      notes.add((String) service("api_note")); // the user's call, said once
    }
    for (Object k : (List<?>) service("capture_options")) {
      if (on(opts.get(k))) {
        notes.add((String) service("capture_note")); // what they cannot record, in one line
        break;
      }
    }
    Object onFailed = opts.remove("on_save_failed");
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
              if (onFailed instanceof java.util.function.Consumer) {
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
   * The window path template {@code template} resolved under the root, the root's own text
   * escaped (grammar.json window_path: braces in its name stay literal). The first window's file
   * is what {@link OutputRoot#resolve} checks: a field may name a directory ({pid}/w.json), and
   * fields fill with digits only, so the template stays under the root where that file does.
   */
  private String underRoot(String template) {
    root.resolve("path", (String) Vars.FIRST_FILE.invoke(template));
    return Vars.ESCAPE.invoke(root.toString()) + java.io.File.separator
        + root.path().relativize(root.path().resolve(template).normalize());
  }

  /** An option given as on (true, "true", 1, ...), as the config grammar reads a flag. */
  static boolean on(Object v) {
    String t = String.valueOf(v).strip();
    return v != null && !Boolean.FALSE.equals(v) && !"false".equalsIgnoreCase(t) && !"0".equals(t);
  }

  /**
   * What this session does not record that its options may lead one to expect, one line each
   * (api.json service_session): {@code profile_api} left off by default (default_note), or asked
   * for without steady mode (api_note), and what record_shapes, with_stack and with_flops cannot
   * give (capture_note); the last two also printed on stderr at {@link #start()}. Empty when
   * none applies.
   */
  public List<String> notes() {
    return java.util.Collections.unmodifiableList(notes);
  }

  /** The directory this session writes under. */
  public String outputRoot() {
    return root.toString();
  }

  /**
   * Converts Java options to pyprof.session's: "path", "schedule" become keywords (a null
   * schedule is none: one window from start to stop); the schedule's keys stay the strings
   * they are, as schedule.json spells them ({@code skip_first}; Python knows no
   * {@code skip-first}, so neither does this: an unknown option, named as written).
   */
  static Object toClojure(Map<String, ?> options) {
    Map<Object, Object> out = new HashMap<>();
    for (Map.Entry<String, ?> e : options.entrySet()) {
      String k = e.getKey();
      if ("path".equals(k)) {
        out.put(Keyword.intern("path"), e.getValue()); // null is refused, not the file "null"
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
      } else if ("steady".equals(k)) { // Boolean, or "true" as JMX and -D options spell it:
        out.put(Keyword.intern("steady"), e.getValue()); // the config grammar reads either
      } else if ("schedule".equals(k)) {
        Object v = e.getValue();
        if (v == null) {
          continue; // no schedule, as Python's schedule=None
        }
        if (!(v instanceof Map)) {
          throw PyprofException.catalogue("session.schedule_not_map", "value", v);
        }
        Map<Object, Object> sched = new HashMap<>();
        for (Map.Entry<?, ?> s : ((Map<?, ?>) v).entrySet()) {
          Object val = s.getValue();
          sched.put(String.valueOf(s.getKey()), val instanceof Integer ? Long.valueOf((Integer) val) : val);
        }
        out.put(Keyword.intern("schedule"), Vars.SCHEDULE.invoke(PersistentHashMap.create(sched)));
      } else {
        out.put(k, e.getValue());
      }
    }
    return PersistentHashMap.create(out);
  }

  /**
   * Takes ownership of the profiler and begins step 0 (C: {@code MXSetProcessProfilerConfig},
   * {@code MXSetProcessProfilerState}). A failed start leaves the profiler as it was.
   *
   * @return this session
   * @throws PyprofException {@code invalid-state} when it was started before
   *     (session.already_started), another session is open (session.nested), the profiler is
   *     recording outside a session (session.profiler_running) or wrote its finished trace
   *     (session.profiler_finished)
   * @throws MXNetException when a C call fails
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
   * Marks the end of one step; ends a window when its last active step ends (a quiescent point,
   * C: {@code MXNDArrayWaitAll}, {@code MXDumpProcessProfile(0)}) and returns: the window's file
   * is cut and written by the saver thread ({@code pyprof-window-saver}, lowest priority), one
   * window after the other in the order they ended; a step while an earlier window is still
   * being written takes its boundary at once all the same. {@link #awaitSaved(long)} waits for
   * the files, {@code on_trace_ready} hears each.
   * Once the session saved {@code -Dpyprof.maxWindows} windows, or the open window recorded more
   * than {@code -Dpyprof.maxWindowBytes} of raw trace, it stops (saving an open window: so at
   * most one window more).
   *
   * @throws PyprofException {@code invalid-state} when the session is not open (session.not_open);
   *     root.too_many_windows or root.window_too_large at the caps
   * @throws MXNetException when a C call fails
   */
  public void step() {
    call(Vars.STEP);
    checkLimits();
  }

  /**
   * Waits until every window that ended so far is written (they are cut and written by the
   * saver thread, api.json service_session), at most {@code timeoutMillis} (0: no bound).
   *
   * @return true when every ended window is written; false when the time ran out
   * @throws PyprofException the first failure of a save of this session (its window's events
   *     stay in the raw trace; {@code pyprof recover} writes them), once
   */
  public boolean awaitSaved(long timeoutMillis) {
    boolean done = Boolean.TRUE.equals(call(s -> Vars.SAVED.invoke(s, timeoutMillis > 0 ? timeoutMillis : null)));
    RuntimeException e = saveFailure.getAndSet(null);
    if (e != null) {
      throw e;
    }
    return done;
  }

  /**
   * Stops the session on pyprof's stopper thread and returns at once; the future completes with
   * what {@link #stop()} returns once every window is written (or with its error).
   */
  public java.util.concurrent.CompletableFuture<List<Map<String, Object>>> stopAsync() {
    return java.util.concurrent.CompletableFuture.supplyAsync(this::stop, Stopper.EXECUTOR);
  }

  /** Raw-trace bytes the open window has recorded so far (0 when none is open). */
  public long recordingBytes() {
    return ((Number) call(Vars.RECORDING_BYTES)).longValue();
  }

  /**
   * Stops the session (keeping its windows) and throws when it passed a limit (see
   * {@link #step()}); does nothing otherwise. Called by {@link #step()} and by
   * {@link ProfilerControl}'s timer.
   */
  public void checkLimits() {
    long bytes = recordingBytes();
    long maxBytes = OutputRoot.maxWindowBytes();
    int windows = ((List<?>) stateNow().get("windows")).size();
    if (bytes > maxBytes) {
      stop();
      throw PyprofException.catalogue("root.window_too_large", "index", windows, "bytes", bytes,
          "limit", maxBytes);
    }
    long maxWindows = OutputRoot.maxWindows();
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
   * @return every saved window, an unmodifiable list of unmodifiable maps: {@code "index"}
   *     (Long, from 0), {@code "path"} (String), {@code "first_step"}, {@code "last_step"},
   *     {@code "events"} (Long) and the window's real time span {@code "start_us"},
   *     {@code "end_us"} (Long: microseconds since the epoch, the clock of the trace's
   *     {@code ts}), and {@code "truncated"} (Boolean: true when the window stopped recording
   *     at the raw trace's cap, api.json raw_trace max_bytes, {@code $PYPROF_RAW_MAX_BYTES})
   * @throws MXNetException when a C call fails
   */
  public List<Map<String, Object>> stop() {
    return JavaData.maps(call(Vars.STOP));
  }

  /**
   * Stops (when open) and returns the paths of the saved window traces. Idempotent.
   *
   * @return an unmodifiable list of absolute paths, in window order (empty when no window was
   *     saved)
   */
  public List<String> dump() {
    List<String> out = new ArrayList<>();
    for (Map<String, Object> w : stop()) {
      out.add((String) w.get("path"));
    }
    return java.util.Collections.unmodifiableList(out);
  }

  /**
   * The absolute file {@link #dump(String)} writes for {@code path}; no C call, nothing written.
   *
   * @throws PyprofException root.outside, root.missing_directory; session.dump_over_window for a
   *     window of this session, session.dump_exists for any other file there (a dump never
   *     replaces one)
   */
  public String dumpPath(String path) {
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
   * Stops (when open) and writes all windows as one valid trace at {@code path} (relative:
   * under the output root; refused outside it, as the session's {@code "path"}): metadata once,
   * then every window's events in order (pure JVM file I/O, no C call).
   *
   * @return {@code path}
   * @throws PyprofException {@code invalid-state} when no window was saved (session.no_window),
   *     for one of the session's own window files (session.dump_over_window), for a file that
   *     exists (session.dump_exists) or cannot be written; root.outside, root.missing_directory; and
   *     root.dump_too_large when the windows' files hold more than {@code -Dpyprof.maxDumpBytes}
   *     bytes
   */
  public String dump(String path) {
    String out = dumpPath(path);
    List<String> paths = dump();
    if (paths.isEmpty()) {
      throw PyprofException.catalogue("session.no_window");
    }
    for (String p : paths) { // the windows are the session's record (stats() reads them)
      if (sameFile(p, out)) {
        throw PyprofException.catalogue("session.dump_over_window", "path", out);
      }
    }
    long bytes = 0;
    for (String p : paths) {
      bytes += new java.io.File(p).length();
    }
    long max = OutputRoot.maxDumpBytes();
    if (bytes > max) {
      throw PyprofException.catalogue("root.dump_too_large", "bytes", bytes, "limit", max);
    }
    path = out;
    try {
      return String.valueOf(Vars.WRITE_WINDOWS.invoke(paths, path));
    } catch (Throwable t) {
      throw PyprofException.wrap(t);
    }
  }

  /**
   * Exact statistics of the saved windows together, read from their files (no C call); the
   * shape of {@link Profiler#stats}: an unmodifiable {@code Map<String, Object>} with
   * {@code "operators"} (count, and {@code total_us}, {@code min_us}, {@code max_us},
   * {@code mean_us}, {@code p50_us}, {@code p90_us}, {@code p99_us} in microseconds, per
   * category, name and device), {@code "memory"} (bytes) and {@code "counters"}.
   *
   * @throws PyprofException {@code invalid-state} when no window was saved (session.no_window)
   */
  public Map<String, Object> stats() {
    return JavaData.map((Map<?, ?>) call(Vars.STATS));
  }

  /**
   * The session's state; no C call.
   *
   * @return an unmodifiable map: {@code "state"} ({@code "new"}, {@code "open"} or
   *     {@code "closed"}), {@code "step"} (Long: the current step), {@code "action"} (the
   *     schedule's action for it: {@code "none"}, {@code "warmup"}, {@code "record"} or
   *     {@code "record_and_save"}, as schedule.json spells them) and {@code "windows"} (the saved windows, as {@link #stop()} returns
   *     them)
   */
  public Map<String, Object> state() {
    return JavaData.map((Map<?, ?>) call(Vars.STATE));
  }

  /**
   * {@link #state()} at once: {@code "windows"} lists the windows written so far, not those the
   * saver thread still writes. No C call, no wait.
   */
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
