package pyprof.jvm;

import java.util.List;
import java.util.Map;

/**
 * What this process has asked of MXNet's profiler singleton (MXNet has no getters), one per
 * process: {@link LocalTracker} in a JVM on its own; in a JPype-hosted JVM a proxy over Python's
 * {@code pyprof.process.tracker.TRACKER} ({@link #use}), so both languages share one record
 * under one lock. The fields ({@link #FIELDS}) are that class's attributes, which it documents:
 * {@code config} a {@code Map<String, String>} of C strings or null; {@code running}, {@code
 * ever_ran}, {@code paused}, {@code finished}, {@code repair_on_finish} Booleans; {@code session}
 * and {@code steady} Strings or null; {@code internal} an {@link #owner} ({@code Long}) or null;
 * {@code kept_parts} a {@code List<String>}. Its lock comes before the API gates
 * (docs/concurrency.md).
 */
public interface Tracker {
  /** The field names, as Python's tracker spells them. */
  List<String> FIELDS = List.of("config", "running", "ever_ran", "paused", "finished", "session",
      "internal", "repair_on_finish", "kept_parts", "steady");

  /** Every field's value now, by name (a snapshot: later writes do not change it). */
  Map<String, Object> read();

  /** Sets the fields in {@code changes}; IllegalArgumentException for a name not in FIELDS. */
  void write(Map<String, Object> changes);

  /** Takes the lock, reentrantly: a thread that holds it may take it again. */
  void lock();

  /** Releases the lock once (as often as it was taken, by the thread that took it). */
  void unlock();

  /**
   * The calling thread's identity, which {@code internal} holds while it makes a session's calls:
   * Python's {@code threading.get_ident()} in a JPype-hosted JVM, else the Java thread's id.
   */
  long owner();

  /**
   * Claims trace file {@code path} (absolute) for this process by a POSIX lock on its claim file
   * {@code claimFile} (api.json {@code trace_claims}), which then holds this process's pid. POSIX
   * locks belong to the process, so the process's tracker holds them (Python's, through the
   * proxy, in a JPype-hosted JVM: {@code pyprof.process.claim}).
   *
   * @return 0 when this process holds the claim now, else the holder's pid (-1 while it has not
   *     written it yet)
   * @throws java.io.IOException when the claim file cannot be opened or locked
   */
  long claim(String path, String claimFile) throws java.io.IOException;

  /** True when this process holds the claim of {@code path} (as {@link #claim} names it). */
  boolean holds(String path);

  /** Gives the claim of {@code path} back (the file emptied, not deleted); null: every one. */
  void release(String path);

  /**
   * Records that a session of this process (either language's) wrote window file {@code path}
   * (absolute): a later window never replaces it (api.json {@code trace_claims.written_about}).
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
