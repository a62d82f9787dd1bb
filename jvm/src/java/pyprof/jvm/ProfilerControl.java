package pyprof.jvm;

import clojure.lang.IFn;
import java.lang.management.ManagementFactory;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import javax.management.InstanceAlreadyExistsException;
import javax.management.JMException;
import javax.management.MBeanNotificationInfo;
import javax.management.MBeanOperationInfo;
import javax.management.MBeanParameterInfo;
import javax.management.MBeanServer;
import javax.management.Notification;
import javax.management.NotificationBroadcasterSupport;
import javax.management.ObjectName;

/**
 * On-demand control of a running service through JMX: register once at start-up,
 * {@code ProfilerControl.register()}, and it is {@code pyprof:type=ProfilerControl} on the
 * platform MBean server, local-only unless a remote connector is enabled (jconsole, VisualVM,
 * {@code jcmd <pid> ManagementAgent.start_local}; never set
 * {@code com.sun.management.jmxremote.port} without authentication and TLS).
 *
 * <p>One session at a time, stopped by itself after {@code maxDurationSeconds} (else
 * {@code -Dpyprof.jmx.maxDurationSeconds}, 600 s; at most
 * {@code -Dpyprof.jmx.maxDurationLimitSeconds}, 3600 s) or at a limit of {@link OutputRoot}
 * (checked every second), keeping its windows, with a note in {@link #getStatus()}. Files only
 * under the output root. With {@code step_seconds} a timer ends a step that long after the
 * previous timed step began (late: a longer window, no catch-up). A session leaves
 * {@code profile_api} off unless steady mode is on (api.json service_session), so no state
 * switch can abort a C call of the service's own binding (DJL). Errors reach JMX clients as
 * {@link IllegalArgumentException} or {@link IllegalStateException} with pyprof's message.
 *
 * <p>No operation blocks its caller: each runs on the control thread
 * ({@code pyprof-jmx-control}, in call order) and returns when done or after
 * {@link #AWAIT_MILLIS} ms; windows are written by the saver thread ({@link Background}).
 * Notifications (user data: a JSON object): {@code pyprof.window.saved} ({@code path},
 * {@code index}, {@code events}, {@code bytes}, {@code first_step}, {@code last_step},
 * {@code start_us}, {@code end_us}, {@code session}), {@code pyprof.window.failed}
 * ({@code code}, {@code message}, {@code fix}; its events stay for {@code pyprof recover}),
 * {@code pyprof.dump.written}, {@code pyprof.dump.failed} and {@code pyprof.session.failed};
 * {@link #getLastSave()} shows the last.
 */
public final class ProfilerControl extends NotificationBroadcasterSupport
    implements ProfilerControlMBean {
  public static final String OBJECT_NAME = "pyprof:type=ProfilerControl";
  /** Notification types. */
  public static final String WINDOW_SAVED = "pyprof.window.saved";
  public static final String WINDOW_FAILED = "pyprof.window.failed";
  public static final String DUMP_WRITTEN = "pyprof.dump.written";
  public static final String DUMP_FAILED = "pyprof.dump.failed";
  public static final String SESSION_FAILED = "pyprof.session.failed";
  /** How long an operation waits for its work (api.json service_session await_millis). */
  public static final long AWAIT_MILLIS =
      ((Number) ProfilerSession.service("await_millis")).longValue();

  private static final class Vars {
    static final IFn WRITE_JSON = JavaData.var("clojure.data.json", "write-str");
  }

  private static final ProfilerControl INSTANCE = new ProfilerControl();

  private final ScheduledExecutorService timer =
      Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "pyprof-jmx-timer");
        t.setDaemon(true);
        return t;
      });
  /** Runs every session call, in the order the operations came. */
  private final ExecutorService control = Background.singleThread("pyprof-jmx-control", false);
  private final AtomicLong sequence = new AtomicLong();
  private ProfilerSession session; // guarded by this: the last session started here
  private boolean active; // guarded by this
  private int started; // guarded by this: sessions started here, numbering the default paths
  private long deadlineNanos; // guarded by this
  private String lastError; // guarded by this: why the session ended early, if it did
  private String lastSave = "{\"state\":\"none\"}"; // guarded by this
  private Future<?> lastTask; // guarded by this: the last operation given to the control thread
  private Future<?> statsTask; // guarded by this: stats() of the windows named by statsKey
  private Object statsKey; // guarded by this
  private ScheduledFuture<?> expiry; // guarded by this
  private ScheduledFuture<?> stepper; // guarded by this
  private ScheduledFuture<?> limits; // guarded by this

  private ProfilerControl() {
    super(new MBeanNotificationInfo[] {new MBeanNotificationInfo(new String[] {WINDOW_SAVED,
        WINDOW_FAILED, DUMP_WRITTEN, DUMP_FAILED, SESSION_FAILED}, Notification.class.getName(),
        "a window or dump written, or a session's work failed; user data: a JSON object")});
  }

  /** The one instance (also usable without JMX). */
  public static ProfilerControl instance() {
    return INSTANCE;
  }

  /**
   * Registers the MBean (idempotent) after {@link #preload()} and steady mode's
   * {@code -Dpyprof.steady}; returns its name.
   *
   * @throws PyprofException {@code invalid-state} when the MBean server refuses the MBean
   */
  public static ObjectName register() {
    preload();
    Profiler.steadyFromProperty(); // -Dpyprof.steady=true: at start-up, before MXNet threads
    try {
      ObjectName name = new ObjectName(OBJECT_NAME);
      MBeanServer server = ManagementFactory.getPlatformMBeanServer();
      if (!server.isRegistered(name)) {
        try {
          server.registerMBean(new Described(), name);
        } catch (InstanceAlreadyExistsException e) {
          // registered concurrently: fine
        }
      }
      return name;
    } catch (JMException e) {
      throw new PyprofException("invalid-state", "cannot register " + OBJECT_NAME + ": " + e
          + ". fix: unregister the MBean of that name first");
    }
  }

  /**
   * Loads, once, what a first start needs (the Clojure namespaces, the JSON writer, the error
   * catalogue, libmxnet), so that no JMX request waits for it; a library that cannot load is
   * {@link #start}'s error.
   */
  static void preload() {
    Preloaded.DONE.getClass();
  }

  private static final class Preloaded {
    static final Boolean DONE;

    static {
      ProfilerSession.init();
      Profiler.preload();
      PyprofException.preload();
      Vars.WRITE_JSON.getClass();
      try {
        pyprof.jvm.capi.LibMXNet.load();
      } catch (RuntimeException | LinkageError e) {
        // start() reports it, with the fix, when a session needs the library
      }
      DONE = Boolean.TRUE;
    }
  }

  /** The bean as JMX clients see it: operations and parameters described by api.json. */
  private static final class Described extends javax.management.StandardEmitterMBean {
    private static final Map<?, ?> OPS = (Map<?, ?>) ProfilerSession.service("jmx_operations");

    Described() {
      super(INSTANCE, ProfilerControlMBean.class, INSTANCE);
    }

    private static String about(MBeanOperationInfo op, int parameter, int field) {
      List<?> o = (List<?>) OPS.get(op.getName());
      return String.valueOf(parameter < 0 ? o.get(0) : ((List<?>) o.get(parameter + 1)).get(field));
    }

    @Override
    protected String getDescription(MBeanOperationInfo op) {
      return about(op, -1, 0);
    }

    @Override
    protected String getParameterName(MBeanOperationInfo op, MBeanParameterInfo p, int i) {
      return about(op, i, 0);
    }

    @Override
    protected String getDescription(MBeanOperationInfo op, MBeanParameterInfo p, int i) {
      return about(op, i, 1);
    }
  }

  /** Stops a running session and removes the MBean (idempotent); its windows are written after. */
  public static void unregister() {
    INSTANCE.stop();
    try {
      ObjectName name = new ObjectName(OBJECT_NAME);
      MBeanServer server = ManagementFactory.getPlatformMBeanServer();
      if (server.isRegistered(name)) {
        server.unregisterMBean(name);
      }
    } catch (JMException e) {
      // not registered: nothing to do
    }
  }

  @Override
  public String start(String options, long maxDurationSeconds) {
    Future<?> task;
    String line;
    synchronized (this) {
      if (active) {
        throw new IllegalStateException("a pyprof JMX session is already running. fix: call stop() first");
      }
      try {
        Map<String, Object> opts = JmxOptions.parse(options);
        // a running service's own binding may be inside MXNet: no switch of API profiling
        if (opts.containsKey("steady")) {
          throw new IllegalArgumentException((String) ProfilerSession.service("jmx_steady_refused"));
        }
        for (String key : List.of("profile_api", "profile_all")) {
          if (ProfilerSession.on(opts.get(key)) && Profiler.steadyActive() == null) {
            throw new IllegalArgumentException(((String) ProfilerSession.service("jmx_api_refused"))
                .replace("{key}", key));
          }
        }
        // Checked before anything starts: a bad option or -D value leaves no session running.
        long defaultMax = Limits.jmxDefaultSeconds(); // checked even when not used
        long max = maxDurationSeconds > 0 ? Math.min(maxDurationSeconds, Limits.jmxLimitSeconds())
            : defaultMax;
        Object stepSeconds = opts.remove("step_seconds");
        double step = stepSeconds == null ? 0 : Double.parseDouble(String.valueOf(stepSeconds));
        // the timer counts whole milliseconds; a step past the session's end would never come
        if (stepSeconds != null && !(step >= 0.001 && step <= max)) {
          throw new IllegalArgumentException("step_seconds must be at least 0.001 (1 ms) and at "
              + "most the session's maximum duration, " + max + " s, got " + stepSeconds
              + ". fix: pass a step of 1 ms or more, e.g. step_seconds=1");
        }
        long stepMs = (long) (step * 1000);
        JmxOptions.liftSchedule(opts);
        // under the output root, as every path here; one file name per session of the process
        opts.putIfAbsent("path", "pyprof-jmx-" + ProcessHandle.current().pid() + "-" + started
            + "-{window}.json");
        int number = started;
        opts.put("on_trace_ready", (java.util.function.Consumer<Map<String, Object>>) w ->
            saved(number, w));
        opts.put("on_save_failed", (java.util.function.Consumer<RuntimeException>) e ->
            failed(WINDOW_FAILED, e));
        Thread.currentThread().setContextClassLoader(ProfilerControl.class.getClassLoader());
        ProfilerSession s = new ProfilerSession(opts); // checks the options: no C call
        started++;
        session = s;
        active = true;
        lastError = null;
        deadlineNanos = System.nanoTime() + TimeUnit.SECONDS.toNanos(max);
        task = submit(() -> {
          try {
            s.start();
          } catch (RuntimeException e) {
            ended(s, "not started: " + e.getMessage());
            failed(SESSION_FAILED, e);
            throw e;
          }
          if (stepMs > 0) { // the first step one period after step 0 began
            long periodNanos = TimeUnit.MILLISECONDS.toNanos(stepMs);
            nextStep(s, periodNanos, periodNanos);
          }
          return null;
        });
        expiry = timer.schedule(() -> expire(s), max, TimeUnit.SECONDS);
        limits = timer.scheduleWithFixedDelay(() -> checkLimits(s), 1, 1, TimeUnit.SECONDS);
        StringBuilder b = new StringBuilder(", stops by itself after " + max + " s");
        s.notes().forEach(n -> b.append("; ").append(n));
        line = b.toString();
      } catch (PyprofException e) {
        throw forJmx("session.unknown_option".equals(e.code()) ? JmxOptions.unknown(e) : e);
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException("options: not a number: " + e.getMessage()
            + ". fix: write numbers as digits, e.g. step_seconds=1");
      }
    }
    return (await(task) ? "session open" : "session starting (see Status)") + line;
  }

  /** Gives {@code work} to the control thread, after every operation before it. */
  private synchronized Future<?> submit(Callable<?> work) {
    lastTask = control.submit(work);
    return lastTask;
  }

  /** {@link #await(Future, long, boolean)} for {@link #AWAIT_MILLIS} ms, rethrowing. */
  private static boolean await(Future<?> task) {
    return await(task, TimeUnit.MILLISECONDS.toNanos(AWAIT_MILLIS), true);
  }

  /**
   * Waits for {@code task} at most {@code nanos}, never holding this object's lock; true when it
   * is done. Its error as a JMX client's exception when {@code rethrow}, else ignored (its
   * notification and LastSave tell it).
   */
  private static boolean await(Future<?> task, long nanos, boolean rethrow) {
    try {
      task.get(nanos, TimeUnit.NANOSECONDS);
      return true;
    } catch (TimeoutException e) {
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    } catch (ExecutionException e) {
      if (!rethrow) {
        return true;
      }
      Throwable c = e.getCause();
      if (c instanceof PyprofException) {
        throw forJmx((PyprofException) c);
      }
      throw c instanceof RuntimeException ? (RuntimeException) c : new IllegalStateException(c);
    }
  }

  /** The session {@code s} ended by itself (or failed): no longer active here. */
  private synchronized void ended(ProfilerSession s, String why) {
    if (session == s && active) {
      lastError = why;
      cancelTimers();
      active = false;
    }
  }

  /** On the saver thread: a window of session {@code number} was written. */
  private void saved(int number, Map<String, Object> w) {
    Map<String, Object> data = new LinkedHashMap<>(w);
    data.put("bytes", new java.io.File(String.valueOf(w.get("path"))).length());
    data.put("session", number);
    Map<String, Object> last = new LinkedHashMap<>(data);
    last.put("state", "saved");
    tell(WINDOW_SAVED, "window " + w.get("index") + " saved: " + w.get("path"), data, last);
  }

  /** A session's work failed off the caller's thread: a notification and the LastSave state. */
  private void failed(String type, RuntimeException e) {
    Map<String, Object> data = new LinkedHashMap<>();
    PyprofException p = e instanceof PyprofException ? (PyprofException) e : null;
    data.put("state", "failed");
    data.put("code", p == null ? null : p.code());
    data.put("message", e.getMessage());
    String msg = String.valueOf(e.getMessage());
    int fix = msg.lastIndexOf("fix: ");
    data.put("fix", fix < 0 ? null : msg.substring(fix + 5));
    tell(type, msg, data, data);
  }

  /** LastSave becomes {@code last}; a notification of {@code type} carries {@code data}. */
  private void tell(String type, String message, Object data, Object last) {
    synchronized (this) {
      lastSave = json(last);
    }
    Notification n = new Notification(type, OBJECT_NAME, sequence.incrementAndGet(),
        System.currentTimeMillis(), message);
    n.setUserData(json(data));
    sendNotification(n);
  }

  /** Every second: stop a session whose open window passed -Dpyprof.maxWindowBytes. */
  private synchronized void checkLimits(ProfilerSession s) {
    if (session != s || !active) {
      return;
    }
    submit(() -> {
      try {
        s.checkLimits();
      } catch (RuntimeException e) {
        ended(s, "stopped: " + e.getMessage());
        s.stop(); // idempotent: whatever the limit's error, nothing is left recording
      }
      return null;
    });
  }

  private synchronized void expire(ProfilerSession s) {
    if (session == s && active) {
      lastError = "stopped after its maximum duration";
      stopLocked();
    }
  }

  /**
   * One timed step, then the next one scheduled {@code periodNanos} after this one began: a step
   * that runs late makes that window longer, and the ticks it missed are skipped, so
   * consecutive steps are never closer than the period.
   */
  private void timedStep(ProfilerSession s, long periodNanos) {
    long began;
    Future<?> task;
    synchronized (this) {
      if (session != s || !active) {
        return;
      }
      began = System.nanoTime(); // after a slow call let go of this control
      task = submit(() -> stepOn(s));
    }
    try {
      task.get(); // on the timer thread: the next tick counts from this step's end at the latest
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    } catch (ExecutionException e) {
      return; // stepOn ended the session and said why
    }
    nextStep(s, periodNanos, Math.max(0, began + periodNanos - System.nanoTime()));
  }

  /** Schedules the timed step of {@code s} in {@code delayNanos}, while it is open here. */
  private synchronized void nextStep(ProfilerSession s, long periodNanos, long delayNanos) {
    if (session == s && active) {
      stepper = timer.schedule(() -> timedStep(s, periodNanos), delayNanos, TimeUnit.NANOSECONDS);
    }
  }

  /** On the control thread: one step of {@code s}; a limit that stopped it ends it here too. */
  private Object stepOn(ProfilerSession s) {
    try {
      s.step();
    } catch (PyprofException e) {
      if (!"open".equals(s.stateNow().get("state"))) {
        ended(s, "stopped: " + e.getMessage());
        s.stop();
      }
      throw e;
    }
    return null;
  }

  @Override
  public void step() {
    Future<?> task;
    synchronized (this) {
      if (!active) {
        throw new IllegalStateException("no pyprof JMX session is running. fix: call start(...) first");
      }
      ProfilerSession s = session;
      task = submit(() -> stepOn(s));
    }
    await(task);
  }

  @Override
  public String stop() {
    Future<?> task;
    ProfilerSession s;
    synchronized (this) {
      if (!active) {
        return "[]"; // nothing stopped, as Python's stop() of a stopped session
      }
      s = session;
      task = stopLocked();
    }
    await(task);
    return json(s.stateNow().get("windows"));
  }

  /** Ends the session here and gives its stop to the control thread. */
  private Future<?> stopLocked() {
    active = false;
    cancelTimers();
    ProfilerSession s = session;
    return submit(s::stop);
  }

  private void cancelTimers() {
    for (ScheduledFuture<?> f : java.util.Arrays.asList(expiry, stepper, limits)) {
      if (f != null) {
        f.cancel(false);
      }
    }
    expiry = null;
    stepper = null;
    limits = null;
  }

  private void requireSession() {
    if (session == null) {
      throw new IllegalStateException("no pyprof JMX session was started. fix: call start(...) first");
    }
  }

  @Override
  public String dump(String path) {
    Future<?> task;
    String out;
    synchronized (this) {
      requireSession();
      ProfilerSession s = session;
      try {
        out = s.dumpPath(path); // root.outside, root.missing_directory: now
      } catch (PyprofException e) {
        throw forJmx(e);
      }
      if (active) {
        stopLocked();
      }
      task = submit(() -> {
        try {
          s.dump(out);
        } catch (RuntimeException e) {
          failed(DUMP_FAILED, e);
          throw e;
        }
        Map<String, Object> data = new LinkedHashMap<>();
        data.put("state", "dumped");
        data.put("path", out);
        data.put("bytes", new java.io.File(out).length());
        tell(DUMP_WRITTEN, "dump written: " + out, data, data);
        return null;
      });
    }
    await(task);
    return out;
  }

  /** Read on the control thread; kept until the session's windows change. */
  @Override
  public String stats() {
    ProfilerSession s;
    synchronized (this) {
      requireSession();
      s = session;
    }
    Object key = List.of(s, String.valueOf(s.stateNow().get("windows")));
    Future<?> task;
    synchronized (this) {
      if (statsTask == null || !key.equals(statsKey)) {
        statsKey = key;
        statsTask = submit(() -> json(s.stats()));
      }
      task = statsTask;
    }
    try {
      if (!await(task)) {
        return json(Map.of("pending", true, "note", ProfilerSession.service("jmx_stats_pending")));
      }
      return (String) task.get(); // done, and succeeded: await threw otherwise
    } catch (RuntimeException e) {
      synchronized (this) {
        if (statsTask == task) {
          statsTask = null; // a failed read is not kept: the next call reads again
        }
      }
      throw e;
    } catch (ExecutionException | InterruptedException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public boolean awaitSaved(long timeoutMillis) {
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(1, timeoutMillis));
    Future<?> task;
    ProfilerSession s;
    synchronized (this) {
      task = lastTask;
      s = session;
    }
    if (task != null && !await(task, Math.max(1, deadline - System.nanoTime()), false)) {
      return false;
    }
    try {
      return s == null || s.awaitSaved(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
    } catch (PyprofException e) {
      return true; // told by its notification and LastSave
    }
  }

  @Override
  public synchronized String getLastSave() {
    return lastSave;
  }

  @Override
  public String steadyBegin(String options) {
    throw new IllegalStateException((String) ProfilerSession.service("jmx_steady_refused"));
  }

  @Override
  public void steadyEnd() {
    Future<?> task;
    synchronized (this) {
      if (active) {
        stopLocked();
      }
      task = submit(() -> {
        Profiler.steadyEnd();
        return null;
      });
    }
    await(task); // in call order, after the windows before it are written: at most 60 ms here
  }

  @Override
  public String getSteady() {
    String s = Profiler.steadyActive();
    return s == null ? "" : s;
  }

  @Override
  public synchronized boolean isActive() {
    return active;
  }

  @Override
  public synchronized String getStatus() {
    Map<String, Object> out = new LinkedHashMap<>();
    if (session == null) {
      out.put("state", "none");
    } else {
      out.putAll(session.stateNow());
      out.put("active", active);
      out.put("remaining_seconds",
          active ? Math.max(0, TimeUnit.NANOSECONDS.toSeconds(deadlineNanos - System.nanoTime())) : 0);
      if (lastError != null) {
        out.put("note", lastError);
      }
    }
    return json(out);
  }

  @Override
  public long getDefaultMaxDurationSeconds() {
    try {
      return Limits.jmxDefaultSeconds();
    } catch (PyprofException e) {
      throw forJmx(e);
    }
  }

  @Override
  public synchronized String getOutputRoot() {
    // the running session's root; else the configured one, without creating it
    return session != null ? session.outputRoot() : OutputRoot.configured();
  }

  // ------------------------------------------------------------------ helpers

  private static String json(Object o) {
    return (String) Vars.WRITE_JSON.invoke(o);
  }

  /** JMX clients lack pyprof's classes: rethrow as a JDK exception with the same message. */
  private static RuntimeException forJmx(PyprofException e) {
    String kind = e.kind();
    String msg = e.jmxMessage();
    return kind.startsWith("invalid-config") || kind.startsWith("invalid-option")
        ? new IllegalArgumentException(msg)
        : new IllegalStateException(msg);
  }
}
