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
   * {@code pyprof-jmx-<pid>-<n>-{window}.json}; a path outside the root is refused),
   * {@code schedule} ({@code {"wait":1,"active":2,"repeat":3}}) and {@code step_seconds} (when
   * set, a step ends every so many seconds; else the service calls {@link #step()}).
   * {@code maxDurationSeconds} ends a forgotten session (0 or less: the default). Returns a
   * line such as {@code session open, stops by itself after 600 s}. Errors: an
   * {@link IllegalArgumentException} for a bad option, an {@link IllegalStateException} when a
   * session is running or the profiler is busy, both with pyprof's message ending in a fix.
   */
  String start(String options, long maxDurationSeconds);

  /**
   * Marks the end of one step of the running session; returns once the boundary is taken, or
   * after {@link ProfilerControl#AWAIT_MILLIS} ms (the boundary is then taken in call order).
   */
  void step();

  /**
   * Stops the session (saving an open window); returns, after at most
   * {@link ProfilerControl#AWAIT_MILLIS} ms, the windows written so far as a JSON array of objects
   * {@code index}, {@code path}, {@code first_step}, {@code last_step}, {@code events},
   * {@code start_us}, {@code end_us} (microseconds since the epoch); each later one is a
   * {@code pyprof.window.saved} notification ({@link #awaitSaved(long)} waits for them).
   * With no session running (never started, stopped, or ended by itself) it stops nothing and
   * returns {@code []}, as Python's {@code stop()} of a stopped session does nothing; the last
   * session's windows stay in {@link #getStatus()}.
   */
  String stop();

  /**
   * Stops the session if open and writes all its windows as one trace at {@code path}
   * (relative to the output root; a path outside it is refused).
   */
  String dump(String path);

  /**
   * Exact statistics of the last session's windows, as a JSON object ({@code operators} with
   * {@code count}, {@code total_us}, {@code p50_us}, ...: times in microseconds; {@code memory}
   * in bytes; {@code counters}; {@code notes}), the keys of {@link ProfilerSession#stats()}.
   * Read on the control thread: when not ready within the operation's wait, the object is
   * {@code {"pending": true, "note": ...}} and a later call returns the statistics.
   */
  String stats();

  /**
   * Waits until every operation given so far is done and every window written, at most
   * {@code timeoutMillis} ms; true when all are (a failure is in {@link #getLastSave()}).
   */
  boolean awaitSaved(long timeoutMillis);

  /**
   * The last window or dump written, or the last failure, as a JSON object: {@code state}
   * ({@code none}, {@code saved}, {@code dumped}, {@code failed}) and {@code path},
   * {@code events}, {@code bytes}, ... or {@code code}, {@code message}, {@code fix}.
   */
  String getLastSave();

  /** True while a session started here is open. */
  boolean isActive();

  /**
   * The last session's state as a JSON object: {@code state} ({@code none} before any session,
   * {@code new}, {@code open}, {@code closed}), {@code step}, {@code action}, {@code windows},
   * {@code active}, {@code remaining_seconds} and a {@code note} when it ended by itself.
   */
  String getStatus();

  /** The limit applied when start is given none, in seconds. */
  long getDefaultMaxDurationSeconds();

  /** The directory every file is written under ({@code -Dpyprof.outputRoot}). */
  String getOutputRoot();

  /**
   * Refused with an {@link IllegalStateException} naming the fix: steady mode is only safe
   * begun before the service's own MXNet threads start, so a service gives
   * {@code -Dpyprof.steady=true} on its command line, which {@link ProfilerControl#register()}
   * reads (the operation stays so that a console calling it gets the reason, not a missing
   * operation).
   */
  String steadyBegin(String options);

  /**
   * Ends steady mode ({@link Profiler#steadyEnd()}): only once the service's own MXNet threads
   * have ended (stops a running session first). Carried out on the control thread after the
   * windows before it are written; returns after at most {@link ProfilerControl#AWAIT_MILLIS} ms.
   */
  void steadyEnd();

  /** Who began steady mode ({@code -Dpyprof.steady}, ...), or the empty string when off. */
  String getSteady();
}
