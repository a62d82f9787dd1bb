package pyprof.example.djl;

import clojure.java.api.Clojure;
import clojure.lang.IFn;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import javax.management.MBeanException;
import javax.management.Notification;
import javax.management.ObjectName;
import javax.management.RuntimeMBeanException;
import javax.management.openmbean.CompositeData;

/**
 * Stress of pyprof's JMX control beside a DJL service: a plain JMX client in its own JVM. It
 * starts the service ({@link Service}, same classpath) as a child process, attaches to it
 * (attach API, {@code startLocalManagementAgent}: a local connector, no port), and cycles
 * {@code start("", 0)} (default options), a few {@code step()}s and {@code stop()} while the
 * service's workers keep serving. {@link ServiceProcess} runs one service, {@link Report}
 * checks the windows and writes the report.
 *
 * <p>It counts aborts (the service died: exit code, {@code terminate called}, {@code hs_err}
 * files; a fresh service takes the remaining cycles), hangs (a JMX call that takes longer than
 * {@code --hang-seconds}, or a service whose request count stops growing that long; the service
 * is then killed after a thread dump), control errors (a JMX call that threw), the service's
 * failed requests, and checks every window file under the output root: a JSON object with a
 * {@code traceEvents} list. When the MBean is a {@code NotificationEmitter} it counts the
 * {@code pyprof.window.saved} and {@code pyprof.window.failed} notifications and expects one
 * saved notification per window. Each control call is timed (p50, p99, max).
 *
 * <pre>
 * usage: lein stress -- [--cycles 50] [--seconds 0] [--steps 3] [--step-ms 50] [--workers 4]
 *                       [--options ""] [--steady] [--jvm-opt X]... [--out DIR]
 *                       [--hang-seconds 30] [--max-aborts 5] [--pause-ms 5]
 *                       [--settle-seconds 60]
 * </pre>
 *
 * {@code --cycles} defaults to {@code PYPROF_DJL_STRESS_CYCLES} (else 50); {@code --seconds}
 * to {@code PYPROF_DJL_STRESS_SECONDS} (else 0): the run ends once both are reached. The
 * report is printed and written to {@code DIR/report.json}; its last line on standard output
 * is {@code STRESS <the report as JSON>}. Exit status 0 when the run is clean, 1 otherwise.
 */
public final class Stress {
  static final String CONTROL = "pyprof:type=ProfilerControl";
  static final String SAVED = "pyprof.window.saved";
  static final String FAILED = "pyprof.window.failed";
  static final String SESSION_FAILED = "pyprof.session.failed";

  // options
  int cycles = intEnv("PYPROF_DJL_STRESS_CYCLES", 50);
  long seconds = intEnv("PYPROF_DJL_STRESS_SECONDS", 0);
  int steps = 3;
  long stepMs = 50;
  int workers = 4;
  long pauseMs = 5;
  String options = "";
  final List<String> jvmOpts = new ArrayList<>();
  Path out;
  long hangSeconds = 30;
  int maxAborts = 5;
  long settleSeconds = 60;

  // what the run found (the report's fields)
  int cyclesDone;
  int cyclesCompleted;
  int services;
  int aborts;
  int hangs;
  int stalls;
  long requests;
  long failedRequests;
  int windowsReported;
  Boolean emitter; // null until a service is connected
  String lastSave; // the LastSave attribute at the end, where the MBean has it
  final Set<Integer> abortedServices = new LinkedHashSet<>();
  final Map<String, List<Double>> timings = new LinkedHashMap<>();
  final List<String> problems = new ArrayList<>();
  final List<Map<String, Object>> abortDetails = new ArrayList<>();
  final List<String> errors = new ArrayList<>();
  final Set<String> reportedPaths = new LinkedHashSet<>();
  final Set<String> notifiedPaths = ConcurrentHashMap.newKeySet();
  final AtomicInteger savedNotes = new AtomicInteger();
  final AtomicInteger failedNotes = new AtomicInteger();
  final List<String> failedNoteTexts = new CopyOnWriteArrayList<>();
  final Set<String> jnaSeen = new LinkedHashSet<>();
  final Set<String> libmxnetSeen = new LinkedHashSet<>();
  private final ExecutorService calls = Executors.newCachedThreadPool(r -> {
    Thread t = new Thread(r, "stress-jmx-call");
    t.setDaemon(true);
    return t;
  });

  static int intEnv(String name, int dflt) {
    String v = System.getenv(name);
    return v == null || v.isBlank() ? dflt : Integer.parseInt(v.trim());
  }

  private static final class Json {
    static final IFn READ;
    static final IFn WRITE;

    static {
      Clojure.var("clojure.core", "require").invoke(Clojure.read("clojure.data.json"));
      READ = Clojure.var("clojure.data.json", "read-str");
      WRITE = Clojure.var("clojure.data.json", "write-str");
    }
  }

  static Object readJson(String s) {
    return Json.READ.invoke(s);
  }

  /** A notification of the MBean: counts saved and failed windows. */
  void onNotification(Notification n, Object handback) {
    String path = null;
    Object data = n.getUserData();
    if (data instanceof CompositeData && ((CompositeData) data).containsKey("path")) {
      path = String.valueOf(((CompositeData) data).get("path"));
    } else if (data instanceof String) {
      try {
        Object m = readJson((String) data);
        if (m instanceof Map && ((Map<?, ?>) m).get("path") != null) {
          path = String.valueOf(((Map<?, ?>) m).get("path"));
        }
      } catch (RuntimeException e) {
        // not JSON: counted, no path
      }
    }
    if (SAVED.equals(n.getType())) {
      savedNotes.incrementAndGet();
      if (path != null) {
        notifiedPaths.add(path);
      }
    } else if (FAILED.equals(n.getType())) {
      failedNotes.incrementAndGet();
      failedNoteTexts.add(n.getMessage() + " " + data);
    } else if (SESSION_FAILED.equals(n.getType())) {
      failedNoteTexts.add(SESSION_FAILED + ": " + n.getMessage() + " " + data);
    }
  }

  /** A JMX call, timed; null when it threw (an error), hung (the service is killed) or the
   * service died (an abort). */
  Object call(ServiceProcess s, String label, Callable<Object> c) throws Exception {
    long t0 = System.nanoTime();
    Future<Object> f = calls.submit(c);
    try {
      Object r = f.get(hangSeconds, TimeUnit.SECONDS);
      timings.computeIfAbsent(label, k -> new ArrayList<>()).add((System.nanoTime() - t0) / 1e6);
      return r;
    } catch (TimeoutException e) {
      f.cancel(true);
      if (!s.checkDead("during " + label)) {
        s.hang(label + " took more than " + hangSeconds + " s");
      }
      return null;
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeMBeanException) {
        cause = ((RuntimeMBeanException) cause).getTargetException();
      } else if (cause instanceof MBeanException) {
        cause = ((MBeanException) cause).getTargetException();
      }
      Thread.sleep(500); // the connection may fail before the dying process has exited
      if (s.checkDead("during " + label)) {
        return null;
      }
      errors.add(label + ": " + cause);
      problems.add("error: " + label + ": " + cause);
      return null;
    }
  }

  /** start("", 0), steps, stop, then the service's counters. */
  void cycle(ServiceProcess s) throws Exception {
    ObjectName control = new ObjectName(CONTROL);
    Object started = call(s, "start", () -> s.mbs.invoke(control, "start",
        new Object[] {options, 0L}, new String[] {"java.lang.String", "long"}));
    if (started == null) {
      return;
    }
    for (int i = 0; i < steps; i++) {
      Thread.sleep(stepMs);
      if (s.checkDead("between calls")) {
        return;
      }
      call(s, "step", () -> s.mbs.invoke(control, "step", new Object[0], new String[0]));
      if (s.dead) {
        return;
      }
    }
    Thread.sleep(stepMs);
    Object stopped = call(s, "stop", () -> s.mbs.invoke(control, "stop", new Object[0],
        new String[0]));
    if (s.dead) {
      return;
    }
    if (stopped instanceof String) {
      try {
        Object ws = readJson((String) stopped);
        if (ws instanceof List) {
          for (Object w : (List<?>) ws) {
            if (w instanceof Map && ((Map<?, ?>) w).get("path") != null) {
              windowsReported++;
              reportedPaths.add(String.valueOf(((Map<?, ?>) w).get("path")));
            }
          }
        }
      } catch (RuntimeException e) {
        // stop returns something else than the windows: the files are checked anyway
      }
    }
    cyclesCompleted++;
    call(s, "attrs", () -> {
      s.readCounts();
      return Boolean.TRUE;
    });
    if (!s.dead && System.nanoTime() - s.lastAdvanceNanos > TimeUnit.SECONDS.toNanos(hangSeconds)) {
      stalls++;
      s.hang("the service served no request for " + hangSeconds + " s");
    }
  }

  /**
   * Waits for the windows still being written: the MBean's awaitSaved where it has one, then
   * until every window has its saved (or failed) notification, at most settleSeconds.
   */
  void settle(ServiceProcess s) throws Exception {
    if (!Boolean.TRUE.equals(emitter)) {
      return;
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(settleSeconds);
    ObjectName control = new ObjectName(CONTROL);
    boolean await = Arrays.stream(s.mbs.getMBeanInfo(control).getOperations())
        .anyMatch(o -> o.getName().equals("awaitSaved"));
    if (await) {
      Object done = call(s, "await", () -> s.mbs.invoke(control, "awaitSaved",
          new Object[] {TimeUnit.SECONDS.toMillis(Math.min(settleSeconds, hangSeconds - 1))},
          new String[] {"long"}));
      if (Boolean.FALSE.equals(done)) {
        problems.add("awaitSaved: windows still being written after "
            + Math.min(settleSeconds, hangSeconds - 1) + " s");
      }
      if (s.dead) {
        return;
      }
    }
    while (System.nanoTime() < deadline && savedNotes.get() + failedNotes.get()
        < Math.max(windowsReported, Report.windowFiles(out, services).size())) {
      Thread.sleep(100);
    }
    Thread.sleep(300); // a late notification of a window no stop() reported
  }

  int run() throws Exception {
    Files.createDirectories(out);
    long t0 = System.nanoTime();
    long until = t0 + TimeUnit.SECONDS.toNanos(seconds);
    ServiceProcess s = null;
    try {
      while (cyclesDone < cycles || System.nanoTime() < until) {
        if (s == null || s.dead) {
          if (aborts + hangs >= maxAborts) {
            problems.add("gave up after " + aborts + " abort(s) and " + hangs + " hang(s): "
                + Math.max(0, cycles - cyclesDone) + " cycle(s) not run");
            break;
          }
          s = new ServiceProcess(this, services++);
          if (s.dead) {
            continue;
          }
        }
        cycle(s);
        cyclesDone++;
        s.checkDead("after cycle " + cyclesDone);
      }
      if (s != null && !s.dead) {
        settle(s);
        s.finish();
      }
    } finally {
      if (s != null && s.process.isAlive()) {
        s.process.destroyForcibly();
      }
    }
    Map<String, Object> report = Report.build(this, (System.nanoTime() - t0) / 1e9);
    String json = (String) Json.WRITE.invoke(report);
    Files.writeString(out.resolve("report.json"), json + "\n");
    Report.print(this, report);
    System.out.println("STRESS " + json);
    System.out.flush();
    return Boolean.TRUE.equals(report.get("clean")) ? 0 : 1;
  }

  static String tail(Path p, int max) {
    try {
      String s = Files.readString(p, StandardCharsets.ISO_8859_1);
      return s.length() <= max ? s : s.substring(s.length() - max);
    } catch (IOException e) {
      return "";
    }
  }

  public static void main(String[] args) throws Exception {
    Stress st = new Stress();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      switch (a) {
        case "--cycles": st.cycles = Integer.parseInt(args[++i]); break;
        case "--seconds": st.seconds = Long.parseLong(args[++i]); break;
        case "--steps": st.steps = Integer.parseInt(args[++i]); break;
        case "--step-ms": st.stepMs = Long.parseLong(args[++i]); break;
        case "--workers": st.workers = Integer.parseInt(args[++i]); break;
        case "--pause-ms": st.pauseMs = Long.parseLong(args[++i]); break;
        case "--options": st.options = args[++i]; break;
        case "--steady": st.jvmOpts.add("-Dpyprof.steady=true"); break;
        case "--jvm-opt": st.jvmOpts.add(args[++i]); break;
        case "--out": st.out = Paths.get(args[++i]).toAbsolutePath(); break;
        case "--hang-seconds": st.hangSeconds = Long.parseLong(args[++i]); break;
        case "--max-aborts": st.maxAborts = Integer.parseInt(args[++i]); break;
        case "--settle-seconds": st.settleSeconds = Long.parseLong(args[++i]); break;
        default:
          System.err.println("usage: lein stress -- [--cycles 50] [--seconds 0] [--steps 3] "
              + "[--step-ms 50] [--workers 4] [--pause-ms 5] [--options \"\"] [--steady] "
              + "[--jvm-opt X]... [--out DIR] [--hang-seconds 30] [--max-aborts 5] "
              + "[--settle-seconds 60]\nunknown argument: " + a);
          System.exit(2);
      }
    }
    if (st.out == null) {
      st.out = Files.createTempDirectory("djl-stress-");
    }
    int rc;
    try {
      rc = st.run();
    } finally {
      st.calls.shutdownNow();
    }
    System.exit(rc);
  }
}
