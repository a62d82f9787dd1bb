package pyprof.example.djl;

import clojure.java.api.Clojure;
import clojure.lang.IFn;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.sun.tools.attach.VirtualMachine;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
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
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.management.MBeanServerConnection;
import javax.management.Notification;
import javax.management.NotificationListener;
import javax.management.ObjectName;
import javax.management.openmbean.CompositeData;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

/**
 * Stress of pyprof's JMX control beside a DJL service: a plain JMX client in its own JVM. It
 * starts the service ({@link Service}, same classpath) as a child process, attaches to it
 * (attach API, {@code startLocalManagementAgent}: a local connector, no port), and cycles
 * {@code start("", 0)} (default options), a few {@code step()}s and {@code stop()} while the
 * service's workers keep serving.
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

  // options
  int cycles = intEnv("PYPROF_DJL_STRESS_CYCLES", 50);
  long seconds = intEnv("PYPROF_DJL_STRESS_SECONDS", 0);
  int steps = 3;
  long stepMs = 50;
  int workers = 4;
  long pauseMs = 5;
  String options = "";
  List<String> jvmOpts = new ArrayList<>();
  Path out;
  long hangSeconds = 30;
  int maxAborts = 5;
  long settleSeconds = 60;

  // results
  int cyclesDone;
  int cyclesCompleted;
  final Set<Integer> abortedServices = new LinkedHashSet<>();
  int windowsReported;
  int services;
  int aborts;
  int hangs;
  int stalls;
  long requests;
  long failedRequests;
  Boolean emitter;
  String lastSave; // the LastSave attribute at the end, where the MBean has it
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
  final ExecutorService calls = Executors.newCachedThreadPool(r -> {
    Thread t = new Thread(r, "stress-jmx-call");
    t.setDaemon(true);
    return t;
  });

  static int intEnv(String name, int dflt) {
    String v = System.getenv(name);
    return v == null || v.isBlank() ? dflt : Integer.parseInt(v.trim());
  }

  /** One service process and its JMX connection. */
  final class Svc {
    final int number;
    final Path dir;
    final Process process;
    final long pid;
    final List<String> stdout = new CopyOnWriteArrayList<>();
    JMXConnector connector;
    MBeanServerConnection mbs;
    long lastRequests = -1;
    long lastAdvanceNanos = System.nanoTime();
    boolean dead;

    Svc(int number) throws Exception {
      this.number = number;
      dir = out.resolve("svc-" + number);
      Files.createDirectories(dir.resolve("windows"));
      List<String> cmd = new ArrayList<>();
      cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
      cmd.add("-cp");
      cmd.add(System.getProperty("java.class.path"));
      cmd.add("-XX:+UseSerialGC");
      cmd.add("-XX:ErrorFile=" + dir.resolve("hs_err_pid%p.log"));
      cmd.add("-Dpyprof.outputRoot=" + dir.resolve("windows"));
      cmd.add("-Dai.djl.offline=true");
      cmd.add("-Dai.djl.default_engine=MXNet");
      cmd.addAll(jvmOpts);
      cmd.add(Service.class.getName());
      cmd.addAll(List.of("--stdin", "--workers", String.valueOf(workers), "--pause-ms",
          String.valueOf(pauseMs)));
      ProcessBuilder pb = new ProcessBuilder(cmd).directory(dir.toFile())
          .redirectError(dir.resolve("stderr.log").toFile());
      process = pb.start();
      pid = process.pid();
      services++;
      Thread reader = new Thread(this::readStdout, "stress-stdout-" + number);
      reader.setDaemon(true);
      reader.start();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(180);
      while (!stdout.contains("djl-service: ready")) {
        if (!process.isAlive()) {
          throw new IllegalStateException("service " + number + " exited " + process.exitValue()
              + " before it was ready: " + tail(dir.resolve("stderr.log"), 2000));
        }
        if (System.nanoTime() > deadline) {
          process.destroyForcibly();
          throw new IllegalStateException("service " + number + " not ready after 180 s");
        }
        Thread.sleep(50);
      }
      for (String line : stdout) {
        if (line.startsWith("djl-service: jna ")) {
          jnaSeen.add(line.substring("djl-service: jna ".length()));
        } else if (line.startsWith("djl-service: MXNet ")) {
          libmxnetSeen.add(line.substring(line.indexOf("libmxnet ") + "libmxnet ".length()));
        }
      }
      VirtualMachine vm = VirtualMachine.attach(String.valueOf(pid));
      String address;
      try {
        address = vm.startLocalManagementAgent();
      } finally {
        vm.detach();
      }
      connector = JMXConnectorFactory.connect(new JMXServiceURL(address));
      mbs = connector.getMBeanServerConnection();
      ObjectName control = new ObjectName(CONTROL);
      boolean isEmitter = mbs.isInstanceOf(control, "javax.management.NotificationEmitter");
      emitter = emitter == null ? isEmitter : emitter && isEmitter;
      if (isEmitter) {
        NotificationListener listener = Stress.this::onNotification;
        mbs.addNotificationListener(control, listener, null, null);
      }
    }

    void readStdout() {
      try (BufferedReader r = new BufferedReader(
          new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
           Writer log = Files.newBufferedWriter(dir.resolve("stdout.log"))) {
        String line;
        while ((line = r.readLine()) != null) {
          stdout.add(line);
          log.write(line + "\n");
          log.flush();
        }
      } catch (IOException e) {
        // the process ended
      }
    }

    /** Counts the abort once; true when the service is dead. */
    boolean checkDead(String when) {
      if (dead) {
        return true;
      }
      if (process.isAlive()) {
        return false;
      }
      dead = true;
      aborts++;
      abortedServices.add(number);
      Map<String, Object> d = new LinkedHashMap<>();
      d.put("service", number);
      d.put("when", when);
      d.put("exit_code", process.exitValue());
      String err = tail(dir.resolve("stderr.log"), 100_000);
      List<String> lines = err.lines()
          .filter(l -> l.contains("terminate called") || l.contains("Check failed")
              || l.contains("SIGSEGV") || l.contains("SIGABRT") || l.contains("fatal error"))
          .limit(5).collect(Collectors.toList());
      d.put("stderr", lines);
      try (Stream<Path> s = Files.list(dir)) {
        d.put("hs_err", s.filter(p -> p.getFileName().toString().startsWith("hs_err"))
            .map(Path::toString).collect(Collectors.toList()));
      } catch (IOException e) {
        d.put("hs_err", List.of());
      }
      abortDetails.add(d);
      problems.add("abort: service " + number + " died " + when + ", exit " + process.exitValue()
          + " " + lines);
      closeQuietly();
      return true;
    }

    void hang(String what) {
      hangs++;
      Path dump = dir.resolve("hang-" + hangs + ".txt");
      try {
        Process jcmd = new ProcessBuilder(
            Paths.get(System.getProperty("java.home"), "bin", "jcmd").toString(),
            String.valueOf(pid), "Thread.print").redirectErrorStream(true)
            .redirectOutput(dump.toFile()).start();
        jcmd.waitFor(30, TimeUnit.SECONDS);
      } catch (Exception e) {
        // no thread dump
      }
      problems.add("hang: " + what + " (service " + number + ", threads in " + dump + ")");
      dead = true;
      process.destroyForcibly();
      closeQuietly();
    }

    void closeQuietly() {
      try {
        if (connector != null) {
          connector.close();
        }
      } catch (IOException e) {
        // gone
      }
    }

    /**
     * Ends the service: stop on its standard input, then its last line (requests, failed) and
     * exit status 0 expected.
     */
    void finish() throws Exception {
      if (dead) {
        return;
      }
      try {
        readCounts();
      } catch (Exception e) {
        // the stop line says them too
      }
      try {
        lastSave = String.valueOf(mbs.getAttribute(new ObjectName(CONTROL), "LastSave"));
      } catch (Exception e) {
        // an MBean without the attribute
      }
      closeQuietly();
      try (OutputStream in = process.getOutputStream()) {
        in.write("stop\n".getBytes(StandardCharsets.UTF_8));
      } catch (IOException e) {
        // already gone: checkDead says so
      }
      if (!process.waitFor(hangSeconds + 30, TimeUnit.SECONDS)) {
        hang("service did not stop within " + (hangSeconds + 30) + " s of stop");
        return;
      }
      Thread.sleep(200); // the last stdout line
      if (process.exitValue() != 0) {
        checkDead("at shutdown");
        return;
      }
      dead = true;
      String last = stdout.stream().filter(l -> l.startsWith("djl-service: stopped,"))
          .reduce((a, b) -> b).orElse(null);
      if (last == null) {
        problems.add("service " + number + " ended without its stopped line");
        return;
      }
      long req = Long.parseLong(last.replaceAll(".*requests=(\\d+).*", "$1"));
      long bad = Long.parseLong(last.replaceAll(".*failed=(\\d+).*", "$1"));
      requests += req - Math.max(lastRequests, 0);
      lastRequests = req;
      failedRequests += bad - counted;
      counted = bad;
    }

    long counted; // failed requests of this service already added to failedRequests

    void readCounts() throws Exception {
      ObjectName svc = new ObjectName(Service.OBJECT_NAME);
      long req = (Long) mbs.getAttribute(svc, "Requests");
      long bad = (Long) mbs.getAttribute(svc, "FailedRequests");
      if (req > lastRequests) {
        requests += req - Math.max(lastRequests, 0);
        lastRequests = req;
        lastAdvanceNanos = System.nanoTime();
      }
      failedRequests += bad - counted;
      counted = bad;
    }
  }

  void onNotification(Notification n, Object handback) {
    String path = null;
    Object data = n.getUserData();
    if (data instanceof CompositeData && ((CompositeData) data).containsKey("path")) {
      path = String.valueOf(((CompositeData) data).get("path"));
    } else if (data instanceof String) {
      try {
        Object m = readJson((String) data);
        if (m instanceof Map) {
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
    }
  }

  static Object readJson(String s) {
    IFn read = Holder.READ;
    return read.invoke(s);
  }

  private static final class Holder {
    static final IFn READ;
    static final IFn WRITE;

    static {
      Clojure.var("clojure.core", "require").invoke(Clojure.read("clojure.data.json"));
      READ = Clojure.var("clojure.data.json", "read-str");
      WRITE = Clojure.var("clojure.data.json", "write-str");
    }
  }

  /** A JMX call, timed; null when it hung (the service is killed) or the service died. */
  Object call(Svc s, String label, Callable<Object> c) throws Exception {
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
      if (s.checkDead("during " + label)) {
        return null;
      }
      Throwable cause = e.getCause();
      if (cause instanceof javax.management.RuntimeMBeanException) {
        cause = ((javax.management.RuntimeMBeanException) cause).getTargetException();
      } else if (cause instanceof javax.management.MBeanException) {
        cause = ((javax.management.MBeanException) cause).getTargetException();
      }
      // the connection may lag behind a process that is dying
      Thread.sleep(500);
      if (s.checkDead("during " + label)) {
        return null;
      }
      errors.add(label + ": " + cause);
      problems.add("error: " + label + ": " + cause);
      return null;
    }
  }

  void cycle(Svc s) throws Exception {
    ObjectName control = new ObjectName(CONTROL);
    Object started = call(s, "start", () -> s.mbs.invoke(control, "start",
        new Object[] {options, 0L}, new String[] {"java.lang.String", "long"}));
    if (started == null) {
      return;
    }
    for (int i = 0; i < steps && !s.dead; i++) {
      Thread.sleep(stepMs);
      if (s.checkDead("between calls")) {
        return;
      }
      call(s, "step", () -> s.mbs.invoke(control, "step", new Object[0], new String[0]));
    }
    if (s.dead) {
      return;
    }
    Thread.sleep(stepMs);
    Object stopped = call(s, "stop", () -> s.mbs.invoke(control, "stop", new Object[0],
        new String[0]));
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
    if (s.dead) {
      return;
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

  int run() throws Exception {
    Files.createDirectories(out);
    long t0 = System.nanoTime();
    long until = t0 + TimeUnit.SECONDS.toNanos(seconds);
    Svc s = null;
    try {
      while (cyclesDone < cycles || System.nanoTime() < until) {
        if (s == null || s.dead) {
          if (aborts + hangs >= maxAborts) {
            problems.add("gave up after " + aborts + " abort(s) and " + hangs + " hang(s): "
                + (cycles - cyclesDone) + " cycle(s) not run");
            break;
          }
          s = new Svc(services);
        }
        cycle(s);
        cyclesDone++;
        s.checkDead("after cycle " + cyclesDone);
      }
      if (s != null && !s.dead) {
        settle();
        s.finish();
      }
    } finally {
      if (s != null && s.process.isAlive()) {
        s.process.destroyForcibly();
      }
    }
    double wall = (System.nanoTime() - t0) / 1e9;
    Map<String, Object> report = report(wall);
    String json = (String) Holder.WRITE.invoke(report);
    Files.writeString(out.resolve("report.json"), json + "\n");
    printHuman(report);
    System.out.println("STRESS " + json);
    System.out.flush();
    return Boolean.TRUE.equals(report.get("clean")) ? 0 : 1;
  }

  /** Waits until every window has its saved (or failed) notification, or settleSeconds. */
  void settle() throws InterruptedException {
    if (!Boolean.TRUE.equals(emitter)) {
      return;
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(settleSeconds);
    while (System.nanoTime() < deadline
        && savedNotes.get() + failedNotes.get() < Math.max(windowsReported, windowFiles().size())) {
      Thread.sleep(100);
    }
    Thread.sleep(300); // a late notification of a window no stop() reported
  }

  List<Path> windowFiles() {
    List<Path> files = new ArrayList<>();
    for (int i = 0; i < services; i++) {
      Path w = out.resolve("svc-" + i).resolve("windows");
      try (Stream<Path> s = Files.walk(w)) {
        s.filter(Files::isRegularFile).sorted().forEach(files::add);
      } catch (IOException e) {
        // no windows
      }
    }
    return files;
  }

  /** Null when the file is a JSON object with a traceEvents list; else what is wrong. */
  static String validate(Path p, long[] events) {
    JsonFactory jf = new JsonFactory();
    try (JsonParser jp = jf.createParser(p.toFile())) {
      if (jp.nextToken() != JsonToken.START_OBJECT) {
        return "not a JSON object";
      }
      boolean found = false;
      while (jp.nextToken() == JsonToken.FIELD_NAME) {
        String field = jp.getCurrentName();
        JsonToken t = jp.nextToken();
        if ("traceEvents".equals(field) && t == JsonToken.START_ARRAY) {
          found = true;
          long n = 0;
          while (jp.nextToken() != JsonToken.END_ARRAY) {
            if (jp.currentToken() != JsonToken.START_OBJECT) {
              return "traceEvents holds a non-object";
            }
            jp.skipChildren();
            n++;
          }
          events[0] += n;
        } else {
          jp.skipChildren();
        }
      }
      if (jp.currentToken() != JsonToken.END_OBJECT || jp.nextToken() != null) {
        return "text after the object";
      }
      return found ? null : "no traceEvents list";
    } catch (IOException e) {
      return "not valid JSON: " + e.getMessage().lines().findFirst().orElse("");
    }
  }

  Map<String, Object> report(double wall) {
    List<Path> files = windowFiles();
    int valid = 0;
    long[] events = {0};
    List<String> invalid = new ArrayList<>();
    Set<String> filePaths = new LinkedHashSet<>();
    int partial = 0;
    for (Path f : new ArrayList<>(files)) {
      if (f.getFileName().toString().endsWith(".partial")) {
        // a window being written when its service died; in a service that lived: a problem
        files.remove(f);
        partial++;
        if (!abortedServices.contains(serviceOf(f))) {
          invalid.add(f + ": left unfinished by a service that did not abort");
        }
        continue;
      }
      filePaths.add(f.toAbsolutePath().toString());
      String why = validate(f, events);
      if (why == null) {
        valid++;
      } else {
        invalid.add(f + ": " + why);
      }
    }
    for (String p : reportedPaths) {
      if (!Files.isRegularFile(Paths.get(p))) {
        invalid.add(p + ": reported by stop() but not written");
      }
    }
    if (aborts == 0 && hangs == 0 && windowsReported > 0 && windowsReported != files.size()) {
      invalid.add(files.size() + " window files for " + windowsReported + " windows stop() reported");
    }
    problems.addAll(invalid.stream().map(s -> "window: " + s).collect(Collectors.toList()));
    if (Boolean.TRUE.equals(emitter)) {
      if (savedNotes.get() != files.size()) {
        problems.add("notifications: " + savedNotes.get() + " " + SAVED + " for " + files.size()
            + " window files");
      }
      for (String p : notifiedPaths) {
        if (!filePaths.contains(Paths.get(p).toAbsolutePath().toString())) {
          problems.add("notification for " + p + ", which is no window file");
        }
      }
      for (String t : failedNoteTexts) {
        problems.add("notification " + FAILED + ": " + t);
      }
    }
    if (failedRequests > 0) {
      problems.add("failed requests: " + failedRequests);
    }
    if (jnaSeen.size() != 1) {
      problems.add("JNA: " + jnaSeen);
    }
    if (libmxnetSeen.size() != 1 || libmxnetSeen.iterator().next().contains(":")) {
      problems.add("libmxnet: one library expected, " + libmxnetSeen);
    }
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("cycles", cyclesDone);
    r.put("cycles_completed", cyclesCompleted);
    r.put("cycles_wanted", cycles);
    r.put("options", options);
    r.put("jvm_opts", jvmOpts);
    r.put("steps", steps);
    r.put("workers", workers);
    r.put("services", services);
    r.put("aborts", aborts);
    r.put("abort_details", abortDetails);
    r.put("hangs", hangs);
    r.put("stalls", stalls);
    r.put("errors", errors.size());
    r.put("error_messages", errors.stream().limit(10).collect(Collectors.toList()));
    r.put("requests", requests);
    r.put("failed_requests", failedRequests);
    r.put("windows_reported", windowsReported);
    r.put("window_files", files.size());
    r.put("windows_valid", valid);
    r.put("partial_files", partial);
    r.put("window_events", events[0]);
    r.put("emitter", emitter);
    r.put("saved_notifications", savedNotes.get());
    r.put("failed_notifications", failedNotes.get());
    r.put("last_save", lastSave);
    r.put("jna", new ArrayList<>(jnaSeen));
    r.put("libmxnet", new ArrayList<>(libmxnetSeen));
    Map<String, Object> t = new LinkedHashMap<>();
    for (Map.Entry<String, List<Double>> e : timings.entrySet()) {
      List<Double> v = new ArrayList<>(e.getValue());
      Collections.sort(v);
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("n", v.size());
      m.put("p50_ms", round(pct(v, 50)));
      m.put("p99_ms", round(pct(v, 99)));
      m.put("max_ms", round(v.get(v.size() - 1)));
      t.put(e.getKey(), m);
    }
    r.put("timings", t);
    r.put("wall_s", round(wall));
    r.put("problems", problems.stream().limit(50).collect(Collectors.toList()));
    r.put("clean", problems.isEmpty() && aborts == 0 && hangs == 0 && errors.isEmpty()
        && cyclesCompleted >= cycles);
    r.put("out", out.toString());
    return r;
  }

  /** The service number of a file under out/svc-N/windows. */
  int serviceOf(Path f) {
    Path rel = out.relativize(f);
    return Integer.parseInt(rel.getName(0).toString().substring("svc-".length()));
  }

  static double pct(List<Double> sorted, int p) {
    int rank = (int) Math.ceil(p / 100.0 * sorted.size()); // nearest rank
    return sorted.get(Math.max(0, rank - 1));
  }

  static double round(double x) {
    return Math.round(x * 10) / 10.0;
  }

  void printHuman(Map<String, Object> r) {
    System.out.printf(Locale.ROOT, "stress: %s cycles, %s completed (start(%s), %d steps %d ms "
        + "apart, stop), %d service(s) of %d workers, %.1f s%n", r.get("cycles"),
        r.get("cycles_completed"), quote(options), steps, stepMs, services, workers,
        (Double) r.get("wall_s"));
    System.out.printf(Locale.ROOT, "stress: aborts %d, hangs %d, control errors %d, requests %d, "
        + "failed requests %d%n", aborts, hangs, errors.size(), requests, failedRequests);
    System.out.printf(Locale.ROOT, "stress: windows %s reported by stop(), %s files, %s valid "
        + "(%s events), %s unfinished; notifications: %s%n", r.get("windows_reported"),
        r.get("window_files"), r.get("windows_valid"), r.get("window_events"), r.get("partial_files"),
        Boolean.TRUE.equals(emitter) ? savedNotes.get() + " saved, " + failedNotes.get()
            + " failed" : "the MBean emits none");
    @SuppressWarnings("unchecked")
    Map<String, Map<String, Object>> t = (Map<String, Map<String, Object>>) r.get("timings");
    for (Map.Entry<String, Map<String, Object>> e : t.entrySet()) {
      Map<String, Object> m = e.getValue();
      System.out.printf(Locale.ROOT, "stress: %-6s n=%-4s p50 %8s ms  p99 %8s ms  max %8s ms%n",
          e.getKey(), m.get("n"), m.get("p50_ms"), m.get("p99_ms"), m.get("max_ms"));
    }
    System.out.println("stress: jna " + jnaSeen + "; libmxnet " + libmxnetSeen);
    for (String p : problems.stream().limit(20).collect(Collectors.toList())) {
      System.out.println("stress: problem: " + p);
    }
  }

  static String quote(String s) {
    return "\"" + s + "\"";
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
