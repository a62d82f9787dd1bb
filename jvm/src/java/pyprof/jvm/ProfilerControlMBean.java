package pyprof.jvm;

/**
 * JMX interface of {@link ProfilerControl} ({@code pyprof:type=ProfilerControl}): simple types
 * only, so every JMX client can call it; what clients show of each operation is api.json
 * service_session jmx_operations. Operations return after at most
 * {@link ProfilerControl#AWAIT_MILLIS} ms, the rest running on the control thread in call order.
 * Errors: {@link IllegalArgumentException} for a bad option, {@link IllegalStateException}
 * otherwise, with pyprof's message ending in a fix.
 */
public interface ProfilerControlMBean {
  /**
   * Starts a session; {@code options} a JSON object or {@code key=value} pairs separated by
   * commas: recording keys, {@code path} (under the output root, default
   * {@code pyprof-jmx-<pid>-<n>-{window}.json}), the schedule's keys ({@code wait},
   * {@code active}, ...) or {@code schedule} ({@code {"wait":1,"active":2}}), {@code step_seconds}
   * (a step every so many seconds, else the service calls {@link #step()}).
   * {@code maxDurationSeconds} ends a forgotten session (0 or less: the default). Returns a line
   * such as {@code session open, stops by itself after 600 s}.
   */
  String start(String options, long maxDurationSeconds);

  /** Ends one step of the running session. */
  void step();

  /**
   * Stops the session, saving an open window; returns the windows written so far as a JSON array
   * of objects {@code index}, {@code path}, {@code first_step}, {@code last_step},
   * {@code events}, {@code start_us}, {@code end_us} (microseconds since the epoch); {@code []}
   * when no session runs (the last one's windows stay in {@link #getStatus()}).
   */
  String stop();

  /** Stops the session if open and writes all its windows as one new trace at {@code path}. */
  String dump(String path);

  /**
   * Statistics of the last session's windows as a JSON object (the keys of
   * {@link ProfilerSession#stats()}), or {@code {"pending": true, "note": ...}} when not read
   * within the operation's wait (a later call returns them).
   */
  String stats();

  /** Waits at most {@code timeoutMillis} for every operation and window; true when all are done. */
  boolean awaitSaved(long timeoutMillis);

  /**
   * The last window or dump written, or failure, as a JSON object: {@code state} ({@code none},
   * {@code saved}, {@code dumped}, {@code failed}) and {@code path}, {@code events},
   * {@code bytes}, ... or {@code code}, {@code message}, {@code fix}.
   */
  String getLastSave();

  /** True while a session started here is open. */
  boolean isActive();

  /**
   * The last session's state as a JSON object: {@code state} ({@code none}, {@code new},
   * {@code open}, {@code closed}), {@code step}, {@code action}, {@code windows}, {@code active},
   * {@code remaining_seconds} and a {@code note} when it ended by itself.
   */
  String getStatus();

  /** The limit applied when start is given none, in seconds. */
  long getDefaultMaxDurationSeconds();

  /** The directory every file is written under ({@code -Dpyprof.outputRoot}). */
  String getOutputRoot();

  /**
   * Refused, naming the fix (api.json jmx_steady_refused): steady mode begins at the JVM's
   * start-up, {@code -Dpyprof.steady=true}; the operation stays so that a console gets the reason.
   */
  String steadyBegin(String options);

  /**
   * Ends steady mode ({@link Profiler#steadyEnd()}) once the service's own MXNet threads ended,
   * stopping a running session first.
   */
  void steadyEnd();

  /** Who began steady mode, or the empty string when off. */
  String getSteady();
}
