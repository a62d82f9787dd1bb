package pyprof.jvm;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.LinkOption;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The {@link Tracker} of a JVM on its own: the fields in an immutable map replaced by each write
 * (a read never waits); the claims as one locked {@link FileChannel} per claimed path.
 */
public final class LocalTracker implements Tracker {
  private static final List<String> BOOLEANS =
      List.of("running", "ever_ran", "paused", "finished", "repair_on_finish");

  static final LocalTracker INSTANCE = new LocalTracker(null);

  /** {@link Tracker#current}. */
  static volatile Tracker current = INSTANCE;

  private final ReentrantLock lock = new ReentrantLock();
  private volatile Map<String, Object> fields;

  /** A tracker whose fields start as {@code initial}, the others null, false or no part. */
  public LocalTracker(Map<String, Object> initial) {
    Map<String, Object> start = new HashMap<>();
    for (String f : FIELDS) {
      start.put(f, f.equals("kept_parts") ? List.of() : BOOLEANS.contains(f) ? Boolean.FALSE : null);
    }
    fields = Collections.unmodifiableMap(start);
    write(initial == null ? Map.of() : initial);
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

  // one per process, whichever instance is current: POSIX locks belong to the process
  private static final Map<String, FileChannel> CLAIMS = new HashMap<>();
  private static final java.util.Set<String> WRITTEN = java.util.concurrent.ConcurrentHashMap.newKeySet();

  @Override
  public long claim(String path, String claimFile) throws IOException {
    synchronized (CLAIMS) {
      if (CLAIMS.containsKey(path)) {
        return 0;
      }
      FileChannel ch = FileChannel.open(Paths.get(claimFile), StandardOpenOption.CREATE,
          StandardOpenOption.READ, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS);
      boolean kept = false;
      try {
        if (ch.tryLock() == null) {
          return otherPid(ch);
        }
        ch.truncate(0);
        ch.write(ByteBuffer.wrap((ProcessHandle.current().pid() + "\n")
            .getBytes(StandardCharsets.US_ASCII)), 0);
        CLAIMS.put(path, ch);
        kept = true;
        return 0;
      } finally {
        if (!kept) {
          ch.close(); // this JVM holds no lock on that file: closing drops nothing
        }
      }
    }
  }

  /** The pid in a claim file another process holds; -1 while it is still unwritten. */
  private static long otherPid(FileChannel ch) throws IOException {
    ByteBuffer buf = ByteBuffer.allocate(32);
    ch.read(buf, 0);
    String text = new String(buf.array(), 0, buf.position(), StandardCharsets.US_ASCII).trim();
    return !text.isEmpty() && text.chars().allMatch(Character::isDigit)
        ? Long.parseLong(text) : -1;
  }

  @Override
  public void windowWritten(String path) {
    WRITTEN.add(path);
  }

  @Override
  public boolean wasWritten(String path) {
    return WRITTEN.contains(path);
  }

  @Override
  public boolean holds(String path) {
    synchronized (CLAIMS) {
      return CLAIMS.containsKey(path);
    }
  }

  @Override
  public void release(String path) {
    synchronized (CLAIMS) {
      for (String p : path == null ? new ArrayList<>(CLAIMS.keySet()) : List.of(path)) {
        FileChannel ch = CLAIMS.remove(p);
        if (ch == null) {
          continue;
        }
        try (FileChannel closed = ch) { // the lock goes with the channel
          closed.truncate(0); // no stale pid; still locked, so no other claimant writes meanwhile
        } catch (IOException e) {
          // closed all the same: the claim is given back
        }
      }
    }
  }
}
