package pyprof.example.djl;

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
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

/**
 * One service process of the stress ({@link Service}, on the harness's classpath) and its JMX
 * connection: started in {@code <out>/svc-<n>/} (its stdout.log, stderr.log, hs_err files, and
 * its output root {@code windows/}), attached to through the attach API
 * ({@code startLocalManagementAgent}: a local connector, no port). It tells the {@link Stress}
 * when it died (an abort) or hung, and what it served.
 */
final class ServiceProcess {
  static final long READY_SECONDS = 180;

  final Stress st;
  final int number;
  final Path dir;
  final Process process;
  final long pid;
  final List<String> stdout = new CopyOnWriteArrayList<>();
  JMXConnector connector;
  MBeanServerConnection mbs;
  boolean dead;
  long lastRequests = -1;
  long countedFailed; // failed requests already added to the stress's count
  long lastAdvanceNanos = System.nanoTime();

  /** Starts service number {@code number}; returns once it said ready and JMX is connected. */
  ServiceProcess(Stress st, int number) throws Exception {
    this.st = st;
    this.number = number;
    dir = st.out.resolve("svc-" + number);
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
    cmd.addAll(st.jvmOpts);
    cmd.add(Service.class.getName());
    cmd.addAll(List.of("--stdin", "--workers", String.valueOf(st.workers), "--pause-ms",
        String.valueOf(st.pauseMs)));
    process = new ProcessBuilder(cmd).directory(dir.toFile())
        .redirectError(dir.resolve("stderr.log").toFile()).start();
    pid = process.pid();
    Thread reader = new Thread(this::readStdout, "stress-stdout-" + number);
    reader.setDaemon(true);
    reader.start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(READY_SECONDS);
    while (!stdout.contains("djl-service: ready")) {
      if (!process.isAlive()) {
        checkDead("before it was ready");
        return;
      }
      if (System.nanoTime() > deadline) {
        hang("not ready after " + READY_SECONDS + " s");
        return;
      }
      Thread.sleep(50);
    }
    for (String line : stdout) {
      if (line.startsWith("djl-service: jna ")) {
        st.jnaSeen.add(line.substring("djl-service: jna ".length()));
      } else if (line.startsWith("djl-service: MXNet ")) {
        st.libmxnetSeen.add(line.substring(line.indexOf("libmxnet ") + "libmxnet ".length()));
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
    ObjectName control = new ObjectName(Stress.CONTROL);
    boolean emitter = mbs.isInstanceOf(control, "javax.management.NotificationEmitter");
    st.emitter = st.emitter == null ? emitter : st.emitter && emitter;
    if (emitter) {
      mbs.addNotificationListener(control, st::onNotification, null, null);
    }
  }

  private void readStdout() {
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

  /** True when the service is dead; the first time, counts the abort and says why. */
  boolean checkDead(String when) {
    if (dead) {
      return true;
    }
    if (process.isAlive()) {
      return false;
    }
    dead = true;
    st.aborts++;
    st.abortedServices.add(number);
    Map<String, Object> d = new LinkedHashMap<>();
    d.put("service", number);
    d.put("when", when);
    d.put("exit_code", process.exitValue());
    List<String> lines = Stress.tail(dir.resolve("stderr.log"), 100_000).lines()
        .filter(l -> l.startsWith("djl-service:") || l.startsWith("Exception in thread")
            || l.startsWith("Caused by:") || l.contains("terminate called") || l.contains("Check failed")
            || l.contains("SIGSEGV") || l.contains("SIGABRT") || l.contains("fatal error"))
        .limit(5).collect(Collectors.toList());
    d.put("stderr", lines);
    try (Stream<Path> s = Files.list(dir)) {
      d.put("hs_err", s.filter(p -> p.getFileName().toString().startsWith("hs_err"))
          .map(Path::toString).collect(Collectors.toList()));
    } catch (IOException e) {
      d.put("hs_err", List.of());
    }
    st.abortDetails.add(d);
    st.problems.add("abort: service " + number + " died " + when + ", exit "
        + process.exitValue() + " " + lines);
    closeQuietly();
    return true;
  }

  /** Counts a hang: saves a thread dump of the service, then kills it. */
  void hang(String what) {
    st.hangs++;
    Path dump = dir.resolve("hang-" + st.hangs + ".txt");
    try {
      Process jcmd = new ProcessBuilder(
          Paths.get(System.getProperty("java.home"), "bin", "jcmd").toString(),
          String.valueOf(pid), "Thread.print").redirectErrorStream(true)
          .redirectOutput(dump.toFile()).start();
      jcmd.waitFor(30, TimeUnit.SECONDS);
    } catch (Exception e) {
      // no thread dump
    }
    st.problems.add("hang: " + what + " (service " + number + ", threads in " + dump + ")");
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

  /** Reads the service's counters (its own MBean); notes when requests last grew. */
  void readCounts() throws Exception {
    ObjectName svc = new ObjectName(Service.OBJECT_NAME);
    count((Long) mbs.getAttribute(svc, "Requests"),
        (Long) mbs.getAttribute(svc, "FailedRequests"));
  }

  private void count(long requests, long failed) {
    if (requests > lastRequests) {
      st.requests += requests - Math.max(lastRequests, 0);
      lastRequests = requests;
      lastAdvanceNanos = System.nanoTime();
    }
    st.failedRequests += failed - countedFailed;
    countedFailed = failed;
  }

  /**
   * Ends the service: "stop" on its standard input; it must exit 0 with its last line
   * {@code djl-service: stopped, requests=N failed=F}.
   */
  void finish() throws Exception {
    if (dead) {
      return;
    }
    try {
      readCounts();
    } catch (Exception e) {
      // its last line says them too
    }
    try {
      st.lastSave = String.valueOf(mbs.getAttribute(new ObjectName(Stress.CONTROL), "LastSave"));
    } catch (Exception e) {
      // an MBean without the attribute
    }
    closeQuietly();
    try (OutputStream in = process.getOutputStream()) {
      in.write("stop\n".getBytes(StandardCharsets.UTF_8));
    } catch (IOException e) {
      // already gone: checkDead says so
    }
    long limit = st.hangSeconds + 30;
    if (!process.waitFor(limit, TimeUnit.SECONDS)) {
      hang("the service did not end within " + limit + " s of stop");
      return;
    }
    Thread.sleep(200); // its last stdout line
    if (process.exitValue() != 0) {
      checkDead("at shutdown");
      return;
    }
    dead = true;
    String last = stdout.stream().filter(l -> l.startsWith("djl-service: stopped,"))
        .reduce((a, b) -> b).orElse(null);
    if (last == null) {
      st.problems.add("service " + number + " ended without its stopped line");
      return;
    }
    count(Long.parseLong(last.replaceAll(".*requests=(\\d+).*", "$1")),
        Long.parseLong(last.replaceAll(".*failed=(\\d+).*", "$1")));
  }
}
