package pyprof.jvm;

import com.sun.jna.Library;
import com.sun.jna.Native;
import java.io.IOException;
import java.io.InputStream;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The window cut's byte work in C: {@code pyprof/native/c/cutter.c}, shared with Python's
 * {@code pyprof.native.cutter}, built at first use with {@code $CC} (default {@code cc}) into
 * {@code $XDG_CACHE_HOME/pyprof} (default {@code ~/.cache/pyprof}) under Python's name for it, so
 * one build serves both. Without a compiler, or with {@code PYPROF_CUTTER=python} (or
 * {@code -Dpyprof.cutter=python}), {@link #get()} is null.
 */
final class NativeCutter {
  /** The C functions (cutter.c). */
  interface Lib extends Library {
    long cut_run(ByteBuffer buf, long len, long cap, ByteBuffer out, ByteBuffer size, ByteBuffer ph,
        ByteBuffer ts, ByteBuffer tsOk, ByteBuffer ids, ByteBuffer has, ByteBuffer at, ByteBuffer same,
        ByteBuffer starts, ByteBuffer inLo, ByteBuffer inHi);

    long cut_patch(ByteBuffer src, long size, long n, long lo, long hi, byte[] sep, long sepLen,
        ByteBuffer ids, ByteBuffer has, ByteBuffer at, ByteBuffer starts, byte[] skip, ByteBuffer dst,
        long[] old0, long[] new0, long count0, long[] old1, long[] new1, long count1, long[] old2,
        long[] new2, long count2);
  }

  private static volatile Object loaded; // a Lib, or the reason it is not there (a String)

  private final Lib lib;

  private NativeCutter(Lib lib) {
    this.lib = lib;
  }

  /** The C code, built and loaded at first use; null where it cannot run (see the class). */
  static NativeCutter get() {
    if ("python".equals(System.getenv("PYPROF_CUTTER"))
        || "python".equals(System.getProperty("pyprof.cutter"))) {
      return null;
    }
    Object l = loaded;
    if (l == null) {
      synchronized (NativeCutter.class) {
        l = loaded;
        if (l == null) {
          try {
            l = Native.load(build().toString(), Lib.class);
          } catch (IOException | RuntimeException | UnsatisfiedLinkError e) {
            l = String.valueOf(e.getMessage());
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null; // not remembered: the next cut tries again
          }
          loaded = l;
        }
      }
    }
    return l instanceof Lib ? new NativeCutter((Lib) l) : null;
  }

  /** The shared library of cutter.c: Python's name (cutter-&lt;sha-256 prefix&gt;.so), built once. */
  private static Path build() throws IOException, InterruptedException {
    byte[] src;
    try (InputStream in = NativeCutter.class.getClassLoader().getResourceAsStream("cutter.c")) {
      if (in == null) {
        throw new IOException("cutter.c is not on the classpath. fix: put pyprof/native/c on it (jvm/project.clj :resource-paths)");
      }
      src = in.readAllBytes();
    }
    String hash;
    try {
      hash = String.format("%064x", new BigInteger(1, MessageDigest.getInstance("SHA-256").digest(src)));
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IOException(e);
    }
    String cache = System.getenv("XDG_CACHE_HOME");
    Path dir = cache != null && !cache.isEmpty() ? Paths.get(cache, "pyprof")
        : Paths.get(System.getProperty("user.home"), ".cache", "pyprof");
    Path out = dir.resolve("cutter-" + hash.substring(0, 16) + ".so");
    if (Files.isRegularFile(out)) {
      return out;
    }
    Files.createDirectories(dir);
    // built beside, moved in place whole: a process building at once (Python too) only repeats
    Path c = Files.createTempFile(dir, "cutter-", ".c");
    Path tmp = Files.createTempFile(dir, "cutter-", ".so");
    try {
      Files.write(c, src);
      String cc = System.getenv("CC") == null || System.getenv("CC").isEmpty() ? "cc" : System.getenv("CC");
      Process p = new ProcessBuilder(cc, "-O2", "-shared", "-fPIC", "-o", tmp.toString(), c.toString())
          .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
      if (!p.waitFor(120, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        throw new IOException(cc + " took over 120 s on cutter.c. fix: a working C compiler as CC");
      }
      if (p.exitValue() != 0) {
        throw new IOException(cc + " failed on cutter.c. fix: a working C compiler as CC (scripts/setup.sh installs gcc)");
      }
      Files.move(tmp, out, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } finally {
      Files.deleteIfExists(c);
      Files.deleteIfExists(tmp);
    }
    return out;
  }

  // this thread's buffers (Buffers): cut_run's columns in its order of arguments, then two more
  private static final int OUT = 0;
  private static final int SIZE = 1;
  private static final int PH = 2;
  private static final int TS = 3;
  private static final int TS_OK = 4;
  private static final int IDS = 5;
  private static final int HAS = 6;
  private static final int AT = 7;
  private static final int SAME = 8;
  private static final int STARTS = 9;
  private static final int IN_LO = 10;
  private static final int IN_HI = 11;
  private static final int PATCHED = 12;
  private static final int RUN = 13;

  /** A run the C code read: {@code n} events, their compact bytes and columns (cutter.c cut_run). */
  final class Run {
    final int n;
    private final int size;
    private final ByteBuffer[] c; // the columns, by slot

    Run(int n, int size, ByteBuffer[] c) {
      this.n = n;
      this.size = size;
      this.c = c;
    }

    char ph(int i) {
      return (char) (c[PH].get(i) & 0xff);
    }

    /** Event {@code i}'s ts, when {@link #tsOk} (a plain integer). */
    long ts(int i) {
      return c[TS].getLong(8 * i);
    }

    boolean tsOk(int i) {
      return c[TS_OK].get(i) != 0;
    }

    /** Whether slice event {@code i} and the slice event before it have one string name. */
    boolean same(int i) {
      return c[SAME].get(i) != 0;
    }

    boolean has(int i, int k) {
      return c[HAS].get(3 * i + k) != 0;
    }

    /** Id {@code k} (0 pid, 1 tid, 2 id) of event {@code i}: an unsigned 64-bit value's bits. */
    long id(int i, int k) {
      return c[IDS].getLong(8 * (3 * i + k));
    }

    /** Where event {@code i} lies in the bytes read: from, to. */
    int inLo(int i) {
      return (int) c[IN_LO].getLong(8 * i);
    }

    int inHi(int i) {
      return (int) c[IN_HI].getLong(8 * i);
    }

    /**
     * Events {@code [lo, hi)} but those {@code skip} marks, joined by ",\n", each id of column
     * {@code k} whose bits {@code changed.get(k)} holds written as its number (cutter.c cut_patch).
     */
    String patched(int lo, int hi, byte[] skip, List<Map<Long, Long>> changed) {
      long[][] tables = new long[6][];
      for (int k = 0; k < 3; k++) {
        Long[] old = changed.get(k).keySet().toArray(new Long[0]);
        Arrays.sort(old, Long::compareUnsigned); // as the C code compares
        tables[2 * k] = new long[old.length + 1];
        tables[2 * k + 1] = new long[old.length + 1];
        for (int j = 0; j < old.length; j++) {
          tables[2 * k][j] = old[j];
          tables[2 * k + 1][j] = changed.get(k).get(old[j]);
        }
      }
      ByteBuffer dst = BUFFERS.get().take(PATCHED, size + 64L + 64L * n);
      long bytes = lib.cut_patch(c[OUT], size, n, lo, hi, SEPARATOR, SEPARATOR.length, c[IDS], c[HAS],
          c[AT], c[STARTS], skip, dst, tables[0], tables[1], tables[0].length - 1, tables[2], tables[3],
          tables[2].length - 1, tables[4], tables[5], tables[4].length - 1);
      byte[] b = new byte[(int) bytes];
      dst.get(b);
      return new String(b, StandardCharsets.ISO_8859_1);
    }
  }

  private static final byte[] SEPARATOR = {',', '\n'}; // as WindowCutter writes events

  /**
   * Reads the first {@code len} bytes of {@code bytes} (whole events separated by commas, no
   * header); null when the C code does not read them as a JSON parser does, or an event has no
   * "ph" (the tolerant reader then says what is wrong).
   */
  Run read(byte[] bytes, int len) {
    long cap = 1;
    for (int i = 0; i < len; i++) {
      if (bytes[i] == '{') {
        cap++;
      }
    }
    ByteBuffer run = BUFFERS.get().take(RUN, len).put(bytes, 0, len).flip(); // JNA: from its position
    long[] sizes = {len + cap + 16, 8, cap, 8 * cap, cap, 24 * cap, 3 * cap, 24 * cap, cap, 8 * cap,
        8 * cap, 8 * cap};
    ByteBuffer[] c = new ByteBuffer[sizes.length];
    Buffers b = BUFFERS.get();
    for (int k = 0; k < sizes.length; k++) {
      c[k] = b.take(k, sizes[k]);
    }
    long n = lib.cut_run(run, len, cap, c[OUT], c[SIZE], c[PH], c[TS], c[TS_OK], c[IDS], c[HAS], c[AT],
        c[SAME], c[STARTS], c[IN_LO], c[IN_HI]);
    for (int i = 0; i < n; i++) {
      if (c[PH].get(i) == 0) {
        return null;
      }
    }
    return n < 0 ? null : new Run((int) n, (int) c[SIZE].getLong(0), c);
  }

  /**
   * A thread's direct buffers, kept and grown, never freed per run: a cut would otherwise leave
   * megabytes of direct memory a run to the collector (a service's small heap, or one that
   * disables explicit GC, could run out). A run's columns are valid until the thread's next read.
   */
  private static final class Buffers {
    private final ByteBuffer[] slots = new ByteBuffer[14];

    ByteBuffer take(int slot, long n) {
      ByteBuffer b = slots[slot];
      if (b == null || b.capacity() < n) {
        b = ByteBuffer.allocateDirect((int) Math.max(64, n + n / 2)).order(ByteOrder.nativeOrder());
        slots[slot] = b;
      }
      b.clear();
      return b;
    }
  }

  private static final ThreadLocal<Buffers> BUFFERS = ThreadLocal.withInitial(Buffers::new);
}
