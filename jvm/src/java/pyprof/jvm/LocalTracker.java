package pyprof.jvm;

import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The {@link Tracker} of a JVM on its own (no Python in the process): the fields in an immutable
 * map, replaced by each write (a read never waits, not even for a thread holding the lock); the
 * lock a {@link ReentrantLock}; a thread's {@link #owner} identity is its Java thread id.
 */
public final class LocalTracker implements Tracker {
  /** The one local tracker of this JVM. */
  static final LocalTracker INSTANCE = new LocalTracker(null);

  /** This process's tracker ({@link Tracker#current}). */
  static volatile Tracker current = INSTANCE;

  private final ReentrantLock lock = new ReentrantLock();
  private volatile Map<String, Object> fields;

  /**
   * A tracker whose fields start as {@code initial} (a {@link #read} of another tracker, say),
   * each field left out at its start value: null, false, or no kept part.
   */
  public LocalTracker(Map<String, Object> initial) {
    Map<String, Object> start = new HashMap<>();
    for (String f : FIELDS) {
      start.put(f, null);
    }
    for (String f : List.of("running", "ever_ran", "paused", "finished", "repair_on_finish")) {
      start.put(f, Boolean.FALSE);
    }
    start.put("kept_parts", List.of());
    fields = Collections.unmodifiableMap(start);
    if (initial != null) {
      write(initial);
    }
  }

  @Override
  public Map<String, Object> read() {
    return fields;
  }

  @Override
  public void write(Map<String, Object> changes) {
    for (String name : changes.keySet()) {
      if (!FIELDS.contains(name)) {
        throw new IllegalArgumentException("no tracker field " + name + " (the fields are "
            + FIELDS + "). fix: name one of Tracker.FIELDS");
      }
    }
    lock.lock();
    try {
      Map<String, Object> next = new HashMap<>(fields);
      next.putAll(changes);
      fields = Collections.unmodifiableMap(next);
    } finally {
      lock.unlock();
    }
  }

  @Override
  public void lock() {
    lock.lock();
  }

  @Override
  public void unlock() {
    lock.unlock();
  }

  @Override
  public long owner() {
    return Thread.currentThread().getId();
  }
}
