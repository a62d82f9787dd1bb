package pyprof.jvm;

import clojure.java.api.Clojure;
import clojure.lang.IFn;
import java.lang.management.ManagementFactory;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import javax.management.InstanceAlreadyExistsException;
import javax.management.JMException;
import javax.management.MBeanServer;
import javax.management.ObjectName;

/**
 * On-demand control of a running service through JMX. Register it once at start-up:
 *
 * <pre>{@code ProfilerControl.register();   // Clojure: (pyprof.jvm.ProfilerControl/register)}</pre>
 *
 * It appears as {@code pyprof:type=ProfilerControl} on the platform MBean server. That server is
 * local-only unless you enable a remote connector: JDK tools on the same machine, running as the
 * same OS user, attach to the process (jconsole, VisualVM, {@code jcmd <pid>
 * ManagementAgent.start_local}); no port is opened. Do not set
 * {@code com.sun.management.jmxremote.port} without authentication and TLS.
 *
 * <p>Every session has a maximum duration ({@code maxDurationSeconds}, else
 * {@code -Dpyprof.jmx.maxDurationSeconds}, else 600 s; never more than
 * {@code -Dpyprof.jmx.maxDurationLimitSeconds}, default 3600 s): a forgotten session stops by
 * itself and keeps its windows. With {@code step_seconds}, a timer ends a step that many seconds
 * after the previous timed step began: a late step makes a longer window, never a burst of
 * catch-up steps; every window records its real time span ({@code start-us}, {@code end-us},
 * microseconds since the epoch, in {@link #stop()}'s and {@link #getStatus()}'s windows).
 * One session at a time.
 *
 * <p>Files are written only under the output root ({@link OutputRoot}: {@code
 * -Dpyprof.outputRoot}, default {@code <java.io.tmpdir>/pyprof}): a relative {@code path} or
 * dump path resolves there; an absolute path outside it or a {@code ..} that leaves it is
 * refused. A session stops by itself (keeping its windows, with a note in {@link #getStatus()})
 * once it saved {@code -Dpyprof.maxWindows} windows (default 1000) or its open window recorded
 * more than {@code -Dpyprof.maxWindowBytes} of raw trace (default 256 MiB; checked every second,
 * so a window may pass it by what one second records); {@code dump} refuses to write more than
 * {@code -Dpyprof.maxDumpBytes} (default 1 GiB). Errors reach the JMX client as
 * {@link IllegalArgumentException} or {@link IllegalStateException} with pyprof's message (JMX
 * clients cannot load pyprof's own exception classes).
 */
public final class ProfilerControl implements ProfilerControlMBean {
  public static final String OBJECT_NAME = "pyprof:type=ProfilerControl";

  private static final long DEFAULT_MAX_S = Long.getLong("pyprof.jmx.maxDurationSeconds", 600);
  private static final long LIMIT_MAX_S = Long.getLong("pyprof.jmx.maxDurationLimitSeconds", 3600);

  private static final class Vars {
    static final IFn WRITE_JSON;

    static {
      Clojure.var("clojure.core", "require").invoke(Clojure.read("clojure.data.json"));
      WRITE_JSON = Clojure.var("clojure.data.json", "write-str");
    }
  }

  private static final ProfilerControl INSTANCE = new ProfilerControl();

  private final ScheduledExecutorService timer =
      Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "pyprof-jmx-timer");
        t.setDaemon(true);
        return t;
      });
  private ProfilerSession session; // guarded by this: the last session started here
  private boolean active; // guarded by this
  private int started; // guarded by this: sessions started here, numbering the default paths
  private long deadlineNanos; // guarded by this
  private String lastError; // guarded by this: why the session ended early, if it did
  private ScheduledFuture<?> expiry; // guarded by this
  private ScheduledFuture<?> stepper; // guarded by this
  private ScheduledFuture<?> limits; // guarded by this

  private ProfilerControl() {}

  /** The one instance (also usable without JMX). */
  public static ProfilerControl instance() {
    return INSTANCE;
  }

  /**
   * Registers the MBean on the platform MBean server (idempotent); returns its name. Loads what
   * the first {@link #start} needs first ({@link #preload()}), so that the first request of a
   * JMX client does not wait for it.
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
          server.registerMBean(INSTANCE, name);
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
   * Loads, once, what a session's first start needs, here rather than on a JMX thread at the
   * first request: the Clojure namespaces of sessions, of the profiler and of the statistics
   * (compiled from their sources: seconds), the JSON reader, the error catalogue, and libmxnet
   * (C: dlopen, {@code MXGetVersion}). A library that cannot be loaded is not an error here:
   * {@link #start} reports it. Measured in docs/performance.md (bench/bench_jmx_start.py).
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

  /** Stops a running session and removes the MBean (idempotent). */
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
  public synchronized String start(String options, long maxDurationSeconds) {
    if (active) {
      throw new IllegalStateException("a pyprof JMX session is already running. fix: call stop() first");
    }
    try {
      Map<String, Object> opts = JmxOptions.parse(options);
      Object stepSeconds = opts.remove("step_seconds");
      // Checked before anything starts: a bad option must leave no session running.
      double step = stepSeconds == null ? 0 : Double.parseDouble(String.valueOf(stepSeconds));
      if (stepSeconds != null && !(step >= 0.001)) { // the timer counts whole milliseconds
        throw new IllegalArgumentException("step_seconds must be at least 0.001 (1 ms), got "
            + stepSeconds + ". fix: pass a step of 1 ms or more, e.g. step_seconds=1");
      }
      long stepMs = (long) (step * 1000);
      JmxOptions.liftSchedule(opts);
      // under the output root, as every path here; one file name per session of the process
      opts.putIfAbsent("path", "pyprof-jmx-" + ProcessHandle.current().pid() + "-" + started
          + "-{window}.json");
      long max = maxDurationSeconds > 0 ? maxDurationSeconds : DEFAULT_MAX_S;
      max = Math.min(max, LIMIT_MAX_S);
      Thread.currentThread().setContextClassLoader(ProfilerControl.class.getClassLoader());
      ProfilerSession s = new ProfilerSession(opts);
      s.start();
      started++;
      session = s;
      active = true;
      lastError = null;
      deadlineNanos = System.nanoTime() + TimeUnit.SECONDS.toNanos(max);
      expiry = timer.schedule(() -> expire(s), max, TimeUnit.SECONDS);
      limits = timer.scheduleWithFixedDelay(() -> checkLimits(s), 1, 1, TimeUnit.SECONDS);
      if (stepMs > 0) {
        long periodNanos = TimeUnit.MILLISECONDS.toNanos(stepMs);
        stepper = timer.schedule(() -> timedStep(s, periodNanos), periodNanos,
            TimeUnit.NANOSECONDS);
      }
      return "session " + s.state().get("state") + ", stops by itself after " + max + " s";
    } catch (PyprofException e) {
      throw forJmx("session.unknown_option".equals(e.code()) ? JmxOptions.unknown(e) : e);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("options: not a number: " + e.getMessage()
          + ". fix: write numbers as digits, e.g. step_seconds=1");
    }
  }

  /** Every second: stop a session whose open window passed -Dpyprof.maxWindowBytes. */
  private synchronized void checkLimits(ProfilerSession s) {
    if (session != s || !active) {
      return;
    }
    try {
      s.checkLimits();
    } catch (RuntimeException e) {
      lastError = "stopped: " + e.getMessage();
      stopLocked();
    }
  }

  private synchronized void expire(ProfilerSession s) {
    if (session == s && active) {
      lastError = "stopped after its maximum duration";
      stopLocked();
    }
  }

  /**
   * One timed step, then the next one scheduled {@code periodNanos} after this one began: a step
   * that runs late (waiting for this control's lock, held by a slow call) or long (waiting for
   * queued operators, cutting a large window) makes that window longer, and the ticks it
   * missed are skipped. Consecutive steps are therefore never closer than the period. (At a
   * fixed rate the missed ticks ran back to back to catch up: after a 1 s step at a 0.2 s
   * period, five empty windows within 30 ms. At a fixed delay from the end of a step, the time
   * to cut the last window would be added to every window.)
   */
  private synchronized void timedStep(ProfilerSession s, long periodNanos) {
    if (session != s || !active) {
      return;
    }
    long began = System.nanoTime();
    try {
      s.step();
    } catch (RuntimeException e) {
      lastError = "stopped: " + e.getMessage();
      stopLocked();
      return;
    }
    long delay = Math.max(0, began + periodNanos - System.nanoTime());
    stepper = timer.schedule(() -> timedStep(s, periodNanos), delay, TimeUnit.NANOSECONDS);
  }

  @Override
  public synchronized void step() {
    if (!active) {
      throw new IllegalStateException("no pyprof JMX session is running. fix: call start(...) first");
    }
    try {
      session.step();
    } catch (PyprofException e) {
      if (!"open".equals(session.state().get("state"))) { // a limit stopped it: end it here too
        lastError = "stopped: " + e.getMessage();
        stopLocked();
      }
      throw forJmx(e);
    }
  }

  @Override
  public synchronized String stop() {
    if (session == null) {
      return "[]";
    }
    try {
      return json(stopLocked());
    } catch (PyprofException e) {
      throw forJmx(e);
    }
  }

  private List<Map<String, Object>> stopLocked() {
    active = false;
    if (expiry != null) {
      expiry.cancel(false);
    }
    if (stepper != null) {
      stepper.cancel(false);
    }
    if (limits != null) {
      limits.cancel(false);
    }
    expiry = null;
    stepper = null;
    limits = null;
    return session.stop();
  }

  @Override
  public synchronized String dump(String path) {
    if (session == null) {
      throw new IllegalStateException("no pyprof JMX session was started. fix: call start(...) first");
    }
    try {
      stopLocked();
      return session.dump(path);
    } catch (PyprofException e) {
      throw forJmx(e);
    }
  }

  @Override
  public synchronized String stats() {
    if (session == null) {
      throw new IllegalStateException("no pyprof JMX session was started. fix: call start(...) first");
    }
    try {
      return json(session.stats());
    } catch (PyprofException e) {
      throw forJmx(e);
    }
  }

  @Override
  public synchronized String steadyBegin(String options) {
    try {
      Profiler.steadyBegin(JmxOptions.parse(options));
      return Profiler.steadyActive();
    } catch (PyprofException e) {
      throw forJmx(e);
    }
  }

  @Override
  public synchronized void steadyEnd() {
    try {
      if (active) {
        stopLocked();
      }
      Profiler.steadyEnd();
    } catch (PyprofException e) {
      throw forJmx(e);
    }
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
      out.putAll(session.state());
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
    return DEFAULT_MAX_S;
  }

  @Override
  public synchronized String getOutputRoot() {
    // the running session's root; else the configured one, without creating it
    return session != null ? session.outputRoot() : String.valueOf(System.getProperty(
        OutputRoot.PROPERTY, System.getProperty("java.io.tmpdir") + "/pyprof"));
  }

  // ------------------------------------------------------------------ helpers

  private static String json(Object o) {
    return (String) Vars.WRITE_JSON.invoke(o);
  }

  /** JMX clients lack pyprof's classes: rethrow as a JDK exception with the same message. */
  private static RuntimeException forJmx(PyprofException e) {
    String kind = e.kind();
    String msg = e.getMessage();
    return kind.startsWith("invalid-config") || kind.startsWith("invalid-option")
        ? new IllegalArgumentException(msg)
        : new IllegalStateException(msg);
  }
}
