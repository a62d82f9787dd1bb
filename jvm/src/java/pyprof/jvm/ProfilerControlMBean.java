package pyprof.jvm;

/**
 * JMX management interface of pyprof ({@code pyprof:type=ProfilerControl} on the platform MBean
 * server): profile a running service from jconsole, VisualVM, jmxterm or code. Only simple types,
 * so every standard JMX client can call it. See {@link ProfilerControl}.
 */
public interface ProfilerControlMBean {
  /**
   * Starts a session. {@code options} is a JSON object (or {@code key=value} pairs separated by
   * commas): recording keys ({@code profile_imperative}, {@code aggregate_stats}, ...),
   * {@code path} (window files, relative to the output root, default
   * {@code pyprof-jmx-<pid>-{window}.json}; a path outside the root is refused),
   * {@code schedule} ({@code {"wait":1,"active":2,"repeat":3}}) and {@code step_seconds} (when
   * set, a step ends every so many seconds; else the service calls {@link #step()}).
   * {@code maxDurationSeconds} ends a forgotten session (0 or less: the default). Returns the
   * session's name.
   */
  String start(String options, long maxDurationSeconds);

  /** Marks the end of one step of the running session. */
  void step();

  /** Stops the session (saving an open window); returns its windows as JSON. Idempotent. */
  String stop();

  /**
   * Stops the session if open and writes all its windows as one trace at {@code path}
   * (relative to the output root; a path outside it is refused).
   */
  String dump(String path);

  /** Exact statistics of the last session's windows, as JSON (times in us, memory in bytes). */
  String stats();

  /** True while a session started here is open. */
  boolean isActive();

  /** The last session's state as JSON: state, step, action, windows, remaining seconds. */
  String getStatus();

  /** The limit applied when start is given none, in seconds. */
  long getDefaultMaxDurationSeconds();

  /** The directory every file is written under ({@code -Dpyprof.outputRoot}). */
  String getOutputRoot();
}
