package pyprof.example.djl;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.inference.Predictor;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.initializer.NormalInitializer;
import ai.djl.translate.Batchifier;
import ai.djl.translate.Translator;
import ai.djl.translate.TranslatorContext;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import javax.management.ObjectName;
import javax.management.StandardMBean;
import pyprof.jvm.Profiler;
import pyprof.jvm.ProfilerControl;

/**
 * A small inference service on DJL's MXNet engine: a multilayer perceptron built in code
 * (SequentialBlock of Linear layers, random weights, no model zoo) served by several worker
 * threads, each with its own {@link Predictor}, in a loop. It registers pyprof's JMX MBean
 * ({@code pyprof:type=ProfilerControl}) at start-up, so jconsole, VisualVM or any JMX client
 * profiles it while it serves, and its own counters as {@code pyprof.example.djl:type=Service}.
 * Each worker calls {@link Profiler#nameThread()} first: windows name its calls' thread.
 *
 * <pre>
 * usage: lein run -- [--workers 4] [--seconds 0] [--stdin] [--pause-ms 0]
 *   --workers N   worker threads, each with its own Predictor (default 4)
 *   --seconds S   serve S seconds, then stop (default 0: until Ctrl+C)
 *   --stdin       stop at a line "stop" or at the end of standard input (the stress harness)
 *   --pause-ms M  pause between a worker's requests (default 0)
 * </pre>
 *
 * <p>Lines on standard output begin with {@code djl-service:}; the last one, at shutdown, is
 * {@code djl-service: stopped, requests=N failed=F}.
 */
public final class Service implements ServiceStatsMBean {
  public static final String OBJECT_NAME = "pyprof.example.djl:type=Service";
  static final int FEATURES = 64;
  static final int HIDDEN = 128;
  static final int CLASSES = 10;
  static final int BATCH = 8;

  private final int workers;
  private final long pauseMs;
  private final AtomicBoolean running = new AtomicBoolean(true);
  private final AtomicBoolean stopped = new AtomicBoolean(false);
  private final AtomicLong requests = new AtomicLong();
  private final AtomicLong failed = new AtomicLong();
  private final List<Thread> threads = new ArrayList<>();
  private final CountDownLatch done;
  private String jna = "";
  private String libmxnet = "";
  private String mxnetVersion = "";
  private Model model;

  private Service(int workers, long pauseMs) {
    this.workers = workers;
    this.pauseMs = pauseMs;
    this.done = new CountDownLatch(workers);
  }

  /** Request: BATCH rows of FEATURES floats; response: the softmax of each row's CLASSES. */
  static final class Mlp implements Translator<float[], float[]> {
    @Override
    public NDList processInput(TranslatorContext ctx, float[] input) {
      return new NDList(ctx.getNDManager().create(input, new Shape(BATCH, FEATURES)));
    }

    @Override
    public float[] processOutput(TranslatorContext ctx, NDList list) {
      return list.singletonOrThrow().softmax(-1).toFloatArray();
    }

    @Override
    public Batchifier getBatchifier() {
      return null; // the request is a batch already
    }
  }

  public static void main(String[] args) throws Exception {
    int workers = 4;
    long seconds = 0;
    long pauseMs = 0;
    boolean stdin = false;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--workers":
        case "--threads":
          workers = Integer.parseInt(args[++i]);
          break;
        case "--seconds":
          seconds = Long.parseLong(args[++i]);
          break;
        case "--pause-ms":
          pauseMs = Long.parseLong(args[++i]);
          break;
        case "--stdin":
          stdin = true;
          break;
        default:
          System.err.println("usage: lein run -- [--workers 4] [--seconds 0] [--stdin] "
              + "[--pause-ms 0]\nunknown argument: " + args[i]);
          System.exit(2);
      }
    }
    if (workers < 1) {
      System.err.println("--workers must be 1 or more, got " + workers);
      System.exit(2);
    }
    // Never download anything, and run on MXNet, unless the command line says otherwise.
    if (System.getProperty("ai.djl.offline") == null && System.getenv("DJL_OFFLINE") == null) {
      System.setProperty("ai.djl.offline", "true");
    }
    if (System.getProperty("ai.djl.default_engine") == null
        && System.getenv("DJL_DEFAULT_ENGINE") == null) {
      System.setProperty("ai.djl.default_engine", "MXNet");
    }
    Service service = new Service(workers, pauseMs);
    service.run(seconds, stdin);
  }

  private void run(long seconds, boolean stdin) throws Exception {
    long pid = ProcessHandle.current().pid();
    jna = com.sun.jna.Native.VERSION + " from " + jarOf(com.sun.jna.Native.class);
    say("jna " + jna);
    // pyprof's MBean first: with -Dpyprof.steady=true it begins steady mode here, before any
    // thread of the service calls libmxnet.
    ObjectName control = ProfilerControl.register();
    Engine engine;
    try {
      engine = Engine.getEngine("MXNet");
    } catch (RuntimeException | LinkageError e) {
      Throwable root = e;
      while (root.getCause() != null) {
        root = root.getCause();
      }
      System.err.println("djl-service: DJL's MXNet engine did not load (" + root + "; "
          + "MXNET_LIBRARY_PATH=" + System.getenv("MXNET_LIBRARY_PATH") + "). fix: export "
          + "MXNET_LIBRARY_PATH=<the mxnet wheel's libmxnet.so>, the one pyprof loads");
      System.exit(1);
      return;
    }
    mxnetVersion = engine.getVersion();
    libmxnet = String.join(":", mappedLibmxnet());
    say("MXNet " + mxnetVersion + " (DJL " + Engine.getDjlVersion() + ", engine "
        + engine.getEngineName() + "), libmxnet " + libmxnet);

    SequentialBlock block = new SequentialBlock()
        .add(Linear.builder().setUnits(HIDDEN).build())
        .add(Activation.reluBlock())
        .add(Linear.builder().setUnits(HIDDEN).build())
        .add(Activation.reluBlock())
        .add(Linear.builder().setUnits(CLASSES).build());
    block.setInitializer(new NormalInitializer(0.05f), Parameter.Type.WEIGHT);
    model = Model.newInstance("mlp", "MXNet");
    model.setBlock(block);
    block.initialize(model.getNDManager(), DataType.FLOAT32, new Shape(BATCH, FEATURES));

    ManagementFactory.getPlatformMBeanServer().registerMBean(
        new StandardMBean(this, ServiceStatsMBean.class), new ObjectName(OBJECT_NAME));
    Runtime.getRuntime().addShutdownHook(new Thread(this::shutdown, "djl-service-shutdown"));
    for (int i = 0; i < workers; i++) {
      final int n = i;
      Thread t = new Thread(() -> serve(n), "djl-service-worker-" + i);
      threads.add(t);
      t.start();
    }
    say("pid " + pid + ", " + workers + " workers serving; MBeans " + control + " and "
        + OBJECT_NAME);
    String steady = ProfilerControl.instance().getSteady();
    say("pyprof output root " + ProfilerControl.instance().getOutputRoot() + ", steady mode "
        + (steady.isEmpty() ? "off" : steady));
    say("ready");

    if (stdin) {
      try (BufferedReader in = new BufferedReader(
          new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
          // other lines are ignored
        }
      }
    } else if (seconds > 0) {
      Thread.sleep(TimeUnit.SECONDS.toMillis(seconds));
    } else {
      done.await(); // until Ctrl+C: the shutdown hook stops the workers
      return;
    }
    shutdown();
  }

  private void serve(int n) {
    // DJL calls MXNet from this thread past pyprof: name it (djl-service-worker-<n>) in the
    // windows, whose C API calls (steady mode) carry its thread id
    Profiler.nameThread();
    Random random = new Random(n);
    float[] input = new float[BATCH * FEATURES];
    int errorsShown = 0;
    try (Predictor<float[], float[]> predictor = model.newPredictor(new Mlp())) {
      while (running.get()) {
        for (int i = 0; i < input.length; i++) {
          input[i] = random.nextFloat();
        }
        try {
          float[] out = predictor.predict(input);
          if (out.length != BATCH * CLASSES) {
            throw new IllegalStateException("result of " + out.length + " floats, expected "
                + BATCH * CLASSES);
          }
          requests.incrementAndGet();
        } catch (Exception e) {
          failed.incrementAndGet();
          if (errorsShown++ < 3) {
            System.err.println("djl-service: worker " + n + ": request failed: " + e);
          }
        }
        if (pauseMs > 0) {
          Thread.sleep(pauseMs);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      done.countDown();
    }
  }

  /** Stops the workers (each ends its request in flight), then says what was served. */
  private void shutdown() {
    if (!stopped.compareAndSet(false, true)) {
      return;
    }
    running.set(false);
    try {
      if (!done.await(30, TimeUnit.SECONDS)) {
        System.err.println("djl-service: workers still busy after 30 s");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    ProfilerControl.unregister(); // stops a session still open (its windows are kept)
    say("stopped, requests=" + requests.get() + " failed=" + failed.get());
  }

  private static void say(String line) {
    System.out.println("djl-service: " + line);
    System.out.flush();
  }

  static String jarOf(Class<?> c) {
    try {
      return Paths.get(c.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
    } catch (Exception e) {
      return String.valueOf(c.getResource(c.getSimpleName() + ".class"));
    }
  }

  /** The libmxnet files this process has mapped (Linux: /proc/self/maps). */
  static List<String> mappedLibmxnet() throws IOException {
    TreeSet<String> paths = new TreeSet<>();
    for (String line : Files.readAllLines(Paths.get("/proc/self/maps"))) {
      int slash = line.indexOf('/');
      if (slash >= 0 && line.contains("libmxnet")) {
        paths.add(line.substring(slash).trim());
      }
    }
    return new ArrayList<>(paths);
  }

  @Override
  public long getRequests() {
    return requests.get();
  }

  @Override
  public long getFailedRequests() {
    return failed.get();
  }

  @Override
  public int getWorkers() {
    return workers;
  }

  @Override
  public String getJna() {
    return jna;
  }

  @Override
  public String getLibmxnet() {
    return libmxnet;
  }

  @Override
  public String getMxnetVersion() {
    return mxnetVersion;
  }
}
