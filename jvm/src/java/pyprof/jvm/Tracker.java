package pyprof.jvm;

import java.util.List;
import java.util.Map;

/**
 * What this process has asked of MXNet's profiler singleton (MXNet has no getters): the one
 * record behind the profiler's errors that name a fix, session ownership, the kept trace file and
 * the state the profiler reports.
 *
 * <p>There is one per process. A JVM on its own uses {@link LocalTracker}; when JPype hosts this
 * JVM inside Python, {@code pyprof.jvm.start()} installs ({@link #use}) a proxy over Python's
 * {@code pyprof.process.tracker.TRACKER}, so every read and write of the JVM layer goes to Python's record
 * under Python's lock, and both languages see the same facts.
 *
 * <p>Fields, by their snake_case names ({@link #FIELDS}, the attribute names of Python's tracker):
 * <ul>
 *   <li>{@code config}: the effective configuration after the last worker config, C key to C
 *       string ({@code Map<String, String>}), or null before the first;
 *   <li>{@code running}, {@code ever_ran}, {@code paused}, {@code finished} (a finished dump
 *       happened: no new trace session in this process), {@code repair_on_finish} (configured
 *       after the profiler ran: a finished dump rewrites the file MXNet may write without its
 *       header): {@code Boolean};
 *   <li>{@code session}: the name of the pyprof session (either language's) that owns the
 *       profiler, or null;
 *   <li>{@code internal}: the {@link #owner} identity of the thread making that session's own
 *       calls while it makes them ({@code Long}), or null;
 *   <li>{@code kept_parts}: the parts kept of the trace file before a config named it again
 *       ({@code List<String>}, in order; api.json {@code keep_filename});
 *   <li>{@code steady}: who began steady mode (api.json {@code steady}: the profiler stays
 *       running, so nothing may change MXNet's {@code IsProfiling}), a {@code String}, or null.
 * </ul>
 *
 * <p>Lock order: this lock comes before the API gates (Python's, then the JVM's,
 * docs/concurrency.md); code that holds a gate never takes it.
 */
public interface Tracker {
  /** The field names, as Python's tracker spells its attributes. */
  List<String> FIELDS = List.of("config", "running", "ever_ran", "paused", "finished", "session",
      "internal", "repair_on_finish", "kept_parts", "steady");

  /** Every field's value now, by name (a snapshot: later writes do not change it). */
  Map<String, Object> read();

  /**
   * Sets the fields named in {@code changes} (the others keep their values). Throws
   * {@link IllegalArgumentException} for a name not in {@link #FIELDS}.
   */
  void write(Map<String, Object> changes);

  /** Takes the lock, reentrantly: a thread that holds it may take it again. */
  void lock();

  /** Releases the lock once (as often as it was taken, by the thread that took it). */
  void unlock();

  /**
   * The calling thread's identity as an owner, the value {@code internal} holds while the thread
   * makes a session's calls: in a JPype-hosted JVM Python's {@code threading.get_ident()} (a
   * Java thread that calls Python runs it on its own OS thread), else the Java thread's id.
   */
  long owner();

  /**
   * Claims the trace file {@code path} (absolute, normalised by grammar.json {@code paths}) for
   * this process by a POSIX record lock on {@code claimFile}, its claim file (api.json
   * {@code trace_claims}; its directory exists), which then holds this process's pid. POSIX
   * locks belong to the process, so there is one holder of the claims per process: a JVM on its
   * own holds them here; a JPype-hosted JVM's proxy holds them in Python
   * ({@code pyprof.process.claim}), at Python's claim file of {@code path} (the same one by the
   * rule, unless Python changed its environment after the JVM started).
   *
   * @return 0 when this process holds the claim now (newly, or already), else the pid of the
   *     process that holds it (-1 while that one has not written its pid yet: the caller
   *     asks again for up to api.json {@code trace_claims.pid_wait_s})
   * @throws java.io.IOException when the claim file cannot be opened or locked
   */
  long claim(String path, String claimFile) throws java.io.IOException;

  /** True when this process holds the claim of {@code path} (as {@link #claim} names it). */
  boolean holds(String path);

  /** Gives the claim of {@code path} back (the file emptied, not deleted); null: every one. */
  void release(String path);

  /**
   * Records that a session of this process wrote window file {@code path} (absolute): a later
   * window never replaces it (api.json {@code trace_claims.written_about}). One record per
   * process, whichever language wrote: a JPype-hosted JVM's proxy keeps it in Python.
   */
  void windowWritten(String path);

  /** True when a session of this process wrote window file {@code path} ({@link #windowWritten}). */
  boolean wasWritten(String path);

  /** The tracker of this process: the one {@link #use} installed, else the local one. */
  static Tracker current() {
    return LocalTracker.current;
  }

  /** Makes {@code tracker} this process's tracker; null restores the local one. */
  static void use(Tracker tracker) {
    LocalTracker.current = tracker == null ? LocalTracker.INSTANCE : tracker;
  }
}
