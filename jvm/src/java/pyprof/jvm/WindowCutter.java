package pyprof.jvm;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.io.Writer;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.BiConsumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Cuts a window out of the raw trace at disk speed, in constant memory: Python's
 * {@code pyprof.trace.rawcut} steps 1 and 2 (its docstring is the design). Runs are read by the C
 * code ({@link NativeCutter}), else by the tolerant reader; slices the writers' plan would change
 * ({@link Nesting}) are left to the caller.
 */
public final class WindowCutter {
  private static final JsonFactory FACTORY = new JsonFactory();

  private final Pattern header;
  private final Pattern footer;
  private final String[][] idFields; // {kind, field}
  private final Map<String, String> kindOf = new HashMap<>(); // id field -> its kind
  private final String[] id2Scopes;
  private final long limit;
  private final String threadName;
  private final long hashSeed;

  /**
   * @param layout trace.json {@code mxnet_layout}
   * @param ids trace.json {@code ids}
   * @param threadNames trace.json {@code thread_names}
   */
  public WindowCutter(Map<?, ?> layout, Map<?, ?> ids, Map<?, ?> threadNames) {
    threadName = (String) threadNames.get("name");
    hashSeed = ((Number) threadNames.get("hash_seed")).longValue();
    header = Pattern.compile((String) layout.get("header"));
    footer = Pattern.compile((String) layout.get("footer"));
    List<String[]> fields = new ArrayList<>();
    for (Map.Entry<?, ?> k : ((Map<?, ?>) ids.get("kinds")).entrySet()) {
      for (Object f : (List<?>) k.getValue()) {
        fields.add(new String[] {(String) k.getKey(), (String) f});
        kindOf.put((String) f, (String) k.getKey());
      }
    }
    idFields = fields.toArray(new String[0][]);
    id2Scopes = ((List<?>) ids.get("id2_scopes")).toArray(new String[0]);
    limit = 1L << ((Number) ids.get("limit_bits")).intValue();
  }

  /** What a cut wrote. */
  public static final class Result {
    /** Events written. */
    public final long events;
    /** The metadata events found in the range, in order. */
    public final List<Map<String, Object>> metadata;
    /** False when one pass numbered an id that a later safe id holds: cut in two passes. */
    public final boolean renumbered;

    Result(long events, List<Map<String, Object>> metadata, boolean renumbered) {
      this.events = events;
      this.metadata = metadata;
      this.renumbered = renumbered;
    }
  }

  /**
   * Writes {@code known} metadata, the events of raw bytes {@code [start, end)} of {@code raw}
   * (metadata already written skipped), then {@code extra}, as one valid trace to {@code out}
   * (closed), ids renumbered; a {@code thread_name} event before the first event of each pid
   * and tid whose tid {@code names} holds ({@link #names()}). Ids are numbered as they come
   * unless {@code twoPasses} (a pass written nowhere reserves every safe id first); without
   * {@code plan} slices go as they come.
   *
   * @throws NotLayout bytes not in MXNet's layout, or slices that need the writers' plan
   *     ({@link NeedsPlan}): the caller reads them the tolerant way
   * @throws IOException when the file cannot be read or {@code out} written
   */
  public Result cut(String raw, long start, long end, List<?> known, List<?> extra, Writer out,
      boolean twoPasses, Map<Long, String> names, boolean plan) throws IOException {
    long[] body = body(raw, start, end);
    Ids numbering = new Ids(limit, new HashMap<>());
    if (twoPasses) {
      pass(raw, body, known, extra, null, names, plan, numbering);
      numbering = new Ids(limit, numbering.reserved);
    }
    return pass(raw, body, known, extra, out, names, plan, numbering);
  }

  /** A pass of {@link #cut}; with {@code out} null, one that only numbers (C runs unwritten). */
  private Result pass(String raw, long[] body, List<?> known, List<?> extra, Writer out,
      Map<Long, String> names, boolean plan, Ids numbering) throws IOException {
    try (JsonGenerator g = FACTORY.createGenerator(out == null ? Writer.nullWriter() : out)) {
      Pass p = new Pass(g, out == null, numbering, names, new Nesting(plan));
      g.setRootValueSeparator(null);
      g.writeRaw("{\"traceEvents\":[\n");
      for (Object m : known) {
        Map<String, Object> n = normalMap((Map<?, ?>) m);
        if (p.seen.add(n)) {
          p.write(n);
        }
      }
      eachRun(raw, body, p);
      List<Map<String, Object>> tail = new ArrayList<>();
      for (Object e : extra) {
        tail.add(normalMap((Map<?, ?>) e));
        p.nesting.feed(tail.get(tail.size() - 1));
      }
      p.nesting.finish();
      for (Map<String, Object> e : tail) {
        p.write(e);
      }
      g.writeRaw("\n],\"displayTimeUnit\":\"ms\"}\n");
      return new Result(p.count, p.found, !numbering.collided);
    }
  }

  /** One pass of a cut: where it writes, and what it met. */
  private final class Pass {
    final JsonGenerator g;
    final boolean dry;
    final Ids numbering;
    final Map<Long, String> names;
    final Nesting nesting;
    final Numbered numbered;
    final Set<Object> seen = new HashSet<>(); // metadata events written
    final List<Map<String, Object>> found = new ArrayList<>(); // those of the range
    final Set<List<Object>> named = new HashSet<>(); // threads named: [pid tid]
    long count; // events written

    Pass(JsonGenerator g, boolean dry, Ids numbering, Map<Long, String> names, Nesting nesting) {
      this.g = g;
      this.dry = dry;
      this.numbering = numbering;
      this.names = names;
      this.nesting = nesting;
      this.numbered = new Numbered(numbering);
    }

    void write(Map<String, Object> e) throws IOException {
      if (count++ > 0) {
        g.writeRaw(",\n");
      }
      writeEvent(g, e, numbering);
    }

    /** An event of a run the tolerant reader read. */
    void event(Map<String, Object> e) throws IOException {
      if (!"M".equals(e.get("ph"))) {
        nesting.feed(e);
        Map<String, Object> m = threadNameOf(e, names, named);
        if (m != null) {
          write(m);
        }
        write(e);
      } else if (seen.add(e)) {
        found.add(e);
        write(e);
      }
    }

    /** What {@link #event} does for each event of a run the C code read, from its bytes. */
    void run(NativeCutter.Run r, byte[] bytes) throws IOException {
      nesting.feed(r, bytes);
      byte[] skip = new byte[r.n];
      List<Map<Long, Long>> changed = List.of(new HashMap<>(), new HashMap<>(), new HashMap<>());
      int lo = 0;
      for (int i = 0; i < r.n; i++) {
        if (r.ph(i) == 'M') {
          Map<String, Object> m = parsed(r, bytes, i);
          if (!seen.add(m)) {
            skip[i] = 1;
            continue;
          }
          found.add(m);
        } else if (r.has(i, 1) && names.containsKey(r.id(i, 1))) {
          Map<String, Object> e = new HashMap<>(Map.of("tid", unsigned(r.id(i, 1))));
          if (r.has(i, 0)) {
            e.put("pid", unsigned(r.id(i, 0)));
          }
          Map<String, Object> m = threadNameOf(e, names, named);
          if (m != null) {
            write(r, lo, i, skip, changed);
            write(m);
            lo = i;
          }
        }
        numbered.number(r, i, changed);
      }
      write(r, lo, r.n, skip, changed);
    }

    /** Writes events {@code [lo, hi)} of {@code r} but those {@code skip} marks. */
    private void write(NativeCutter.Run r, int lo, int hi, byte[] skip, List<Map<Long, Long>> changed)
        throws IOException {
      String text = hi > lo && !dry ? r.patched(lo, hi, skip, changed) : "";
      if (text.isEmpty()) {
        return;
      }
      if (count > 0) {
        g.writeRaw(",\n");
      }
      g.writeRaw(text);
      for (int i = lo; i < hi; i++) {
        count += 1 - skip[i];
      }
    }
  }

  private static final String[] RUN_FIELDS = {"pid", "tid", "id"}; // cutter.c's id columns
  private static final Object SAME = new Object(); // a value written as it was read

  /** The ids of one cut as written, per id column of cutter.c, memoised by their bits. */
  private final class Numbered {
    private final Ids numbering;
    private final List<Map<Long, Object>> byBits = List.of(new HashMap<>(), new HashMap<>(), new HashMap<>());
    private final long[] lastBits = new long[3];
    private final Object[] last = new Object[3]; // the last value looked up, per column

    Numbered(Ids numbering) {
      this.numbering = numbering;
    }

    /**
     * Numbers the ids of event {@code i} of {@code r} as {@link #writeEvent} would: the bits of
     * each written as another number go to {@code changed}, per column.
     */
    void number(NativeCutter.Run r, int i, List<Map<Long, Long>> changed) {
      for (int k = 0; k < 3; k++) {
        if (!r.has(i, k)) {
          continue;
        }
        long bits = r.id(i, k);
        Object v = last[k] != null && lastBits[k] == bits ? last[k] : byBits.get(k).get(bits);
        if (v == null) {
          Object read = unsigned(bits);
          v = numbering.id(kindOf.get(RUN_FIELDS[k]), read);
          v = v.equals(read) ? SAME : v;
          byBits.get(k).put(bits, v);
        }
        lastBits[k] = bits;
        last[k] = v;
        if (v != SAME) {
          changed.get(k).put(bits, (Long) v);
        }
      }
    }
  }

  /** An unsigned 64-bit value's bits as the reader holds it: a Long, past 63 bits a BigInteger. */
  private static Object unsigned(long bits) {
    return bits >= 0 ? Long.valueOf(bits) : new BigInteger(Long.toUnsignedString(bits));
  }

  /**
   * Gives {@code p} each run of the body {@code [from, to)} of {@code raw} (whole events of about
   * {@link #BLOCK} bytes, cut at separators) the C code reads, and each event of the other runs,
   * in order. Memory: a run and its events.
   */
  private void eachRun(String raw, long[] body, Pass p) throws IOException {
    if (body[1] <= body[0]) {
      return;
    }
    NativeCutter nc = NativeCutter.get();
    try (RandomAccessFile file = new RandomAccessFile(raw, "r")) {
      file.seek(body[0]);
      long left = body[1] - body[0];
      byte[] carry = new byte[0];
      while (left > 0 || carry.length > 0) {
        int want = (int) Math.min(BLOCK, left);
        byte[] buf = new byte[carry.length + want];
        System.arraycopy(carry, 0, buf, 0, carry.length);
        file.readFully(buf, carry.length, want);
        left -= want;
        int cut = left > 0 ? lastSeparator(buf) : buf.length;
        if (cut < 0) {
          if (buf.length > (1 << 26)) {
            throw new NotLayout("no event separator in 64 MiB");
          }
          carry = buf;
          continue;
        }
        carry = Arrays.copyOfRange(buf, Math.min(buf.length, cut + 3), buf.length);
        NativeCutter.Run r = nc == null ? null : nc.read(buf, cut);
        if (r != null) {
          p.run(r, buf);
        } else {
          for (Map<String, Object> e : tolerant(buf, 0, cut)) {
            p.event(e);
          }
        }
        if (left == 0 && carry.length > 0 && new String(carry, StandardCharsets.ISO_8859_1).isBlank()) {
          carry = new byte[0];
        }
      }
    }
  }

  private static final int BLOCK = 1 << 22;

  /** Where the last event separator (a line holding only ",") of {@code b} begins; -1: none. */
  private static int lastSeparator(byte[] b) {
    for (int i = b.length - 3; i >= 0; i--) {
      if (b[i] == '\n' && b[i + 1] == ',' && b[i + 2] == '\n') {
        return i;
      }
    }
    return -1;
  }

  /** Event {@code i} of run {@code r} read from {@code bytes} by {@link #tolerant}. */
  private static Map<String, Object> parsed(NativeCutter.Run r, byte[] bytes, int i) throws IOException {
    return tolerant(bytes, r.inLo(i), r.inHi(i) - r.inLo(i)).get(0);
  }

  /**
   * Whether runs are read by the C code here: it is built (once per machine) and loaded at the
   * first call ({@link ProfilerControl#register()} preloads it).
   */
  public boolean cutsInC() {
    return NativeCutter.get() != null;
  }

  /** The registered threads now ({@link ThreadNames#byTid}), with trace.json's hash seed. */
  public Map<Long, String> names() {
    return ThreadNames.byTid(hashSeed);
  }

  /**
   * The {@code thread_name} event due before {@code e}: when its tid is one of {@code names}
   * and its pid and tid are not in {@code named} yet (then added); else null.
   */
  public Map<String, Object> threadNameOf(Map<?, ?> e, Map<Long, String> names,
      Set<List<Object>> named) {
    Object tid = e.get("tid");
    Long key = tidKey(tid);
    String name = key == null ? null : names.get(key);
    if (name == null || !named.add(Arrays.asList(e.get("pid"), tid))) {
      return null;
    }
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("ph", "M");
    m.put("name", threadName);
    if (e.containsKey("pid")) {
      m.put("pid", e.get("pid"));
    }
    m.put("tid", tid);
    m.put("args", new LinkedHashMap<>(Map.of("name", name)));
    return m;
  }

  /** A tid as read (an integer up to 64 bits, unsigned) as its bits in a long; else null. */
  static Long tidKey(Object v) {
    v = normal(v);
    if (v instanceof Long) {
      return (Long) v;
    }
    return v instanceof BigInteger && ((BigInteger) v).signum() >= 0 ? ((BigInteger) v).longValue() : null;
  }

  /**
   * Whether the slices of the cut, written as they come, are what the writers' plan writes
   * (Python's {@code pyprof.trace.slices.Nesting}): integer times, every end closing its thread's
   * innermost open begin (of its name, or nameless), no negative duration, the slices of a
   * thread nesting (checked against its latest 1024 outer slices), none left open; else
   * {@link NeedsPlan}.
   */
  private static final class Nesting {
    private final boolean on; // false: nothing checked
    private final Map<Object, ArrayDeque<Object[]>> opened = new HashMap<>(); // {name, ts}
    private final Map<Object, TreeMap<Long, Long>> outer = new HashMap<>(); // begin -> end
    private final Map<Object, Long> floor = new HashMap<>(); // the last end of those let go

    Nesting(boolean on) {
      this.on = on;
    }

    /** A slice event read as a map (its thread keyed as a run's columns key it). */
    void feed(Map<String, Object> e) throws NeedsPlan {
      Object ph = e.get("ph");
      Object ts = e.get("ts");
      Object dur = e.get("dur");
      if (!on || (!"B".equals(ph) && !"E".equals(ph) && !"X".equals(ph))) {
        return;
      }
      if (!(ts instanceof Long) || ("X".equals(ph) && !(dur instanceof Long))) {
        throw new NeedsPlan();
      }
      Object thread = Arrays.asList(key(e.get("pid")), key(e.get("tid")));
      ArrayDeque<Object[]> s = opened.computeIfAbsent(thread, k -> new ArrayDeque<>());
      if ("X".equals(ph)) {
        close(thread, (Long) ts, (Long) ts + (Long) dur);
      } else if ("B".equals(ph)) {
        s.push(new Object[] {e.get("name"), ts});
      } else if (s.isEmpty() || (e.get("name") != null && !e.get("name").equals(s.peek()[0]))) {
        throw new NeedsPlan();
      } else {
        close(thread, (Long) s.pop()[1], (Long) ts);
      }
    }

    /** The slice events of a run the C code read: a begin and its end at once (what MXNet
     * writes most) from the columns, any other one read from its bytes. */
    void feed(NativeCutter.Run r, byte[] bytes) throws IOException {
      for (int i = 0; on && i < r.n; i++) {
        char ph = r.ph(i);
        if (ph == 'B' && i + 1 < r.n && r.ph(i + 1) == 'E' && r.same(i + 1) && r.tsOk(i)
            && r.tsOk(i + 1) && thread(r, i).equals(thread(r, i + 1))) {
          close(thread(r, i), r.ts(i), r.ts(++i));
        } else if (ph == 'B' || ph == 'E' || ph == 'X') {
          feed(parsed(r, bytes, i));
        }
      }
    }

    private static Object thread(NativeCutter.Run r, int i) {
      return Arrays.asList(r.has(i, 0) ? r.id(i, 0) : null, r.has(i, 1) ? r.id(i, 1) : null);
    }

    private static Object key(Object id) {
      return tidKey(id) != null ? tidKey(id) : id;
    }

    private void close(Object thread, long b, long e) throws NeedsPlan {
      Long f = floor.get(thread);
      if (e < b || (f != null && b < f)) {
        throw new NeedsPlan();
      }
      if (e == b) {
        return; // a point nests in whatever holds it, and holds nothing
      }
      TreeMap<Long, Long> t = outer.computeIfAbsent(thread, k -> new TreeMap<>());
      Map.Entry<Long, Long> left = t.lowerEntry(b);
      Map<Long, Long> inside = t.subMap(b, true, e, false);
      if ((left != null && left.getValue() > b) || inside.values().stream().anyMatch(x -> x > e)) {
        throw new NeedsPlan(); // overlaps one before it or one inside it (the plan takes a parent first)
      }
      inside.clear();
      t.put(b, e);
      if (t.size() > 1024) {
        floor.put(thread, t.pollFirstEntry().getValue());
      }
    }

    void finish() throws NeedsPlan {
      if (on && opened.values().stream().anyMatch(s -> !s.isEmpty())) {
        throw new NeedsPlan(); // a begin never closed
      }
    }
  }

  /** {start, end} of the events in {@code [start, end)}: header, footer and separators off. */
  private long[] body(String raw, long start, long end) throws IOException {
    try (RandomAccessFile f = new RandomAccessFile(raw, "r")) {
      end = Math.min(end, f.length());
      int n = (int) Math.min(end - start, 1 << 16);
      if (n <= 0) {
        return new long[] {start, start};
      }
      String head = latin1(f, start, n); // one char a byte: offsets are byte offsets
      Matcher h = header.matcher(head);
      int s = h.lookingAt() ? h.end() : 0;
      while (s < head.length() && (head.charAt(s) == ',' || Character.isWhitespace(head.charAt(s)))) {
        s++;
      }
      String tail = latin1(f, end - n, n);
      int e = tail.length();
      Matcher m = footer.matcher(tail);
      while (m.find()) {
        if (m.end() == tail.length()) {
          e = m.start();
          break;
        }
      }
      while (e > 0 && (tail.charAt(e - 1) == ',' || Character.isWhitespace(tail.charAt(e - 1)))) {
        e--;
      }
      long from = start + s;
      long to = end - n + e;
      return new long[] {from, Math.max(from, to)};
    }
  }

  private static String latin1(RandomAccessFile f, long at, int n) throws IOException {
    byte[] b = new byte[n];
    f.seek(at);
    f.readFully(b);
    return new String(b, StandardCharsets.ISO_8859_1);
  }

  /**
   * The events of {@code len} bytes of {@code b} at {@code off} (whole events in MXNet's layout),
   * read by {@code pyprof.trace.reader/parse-raw}; every event has "ph".
   */
  private static List<Map<String, Object>> tolerant(byte[] b, int off, int len) throws IOException {
    List<Map<String, Object>> out = new ArrayList<>();
    Object events;
    try {
      events = ParseRaw.FN.invoke(new String(b, off, len, StandardCharsets.UTF_8));
    } catch (clojure.lang.ExceptionInfo e) {
      throw new NotLayout("not MXNet's trace layout: " + e.getMessage());
    }
    for (Object e : (List<?>) events) {
      if (!(e instanceof Map) || !((Map<?, ?>) e).containsKey("ph")) {
        throw new NotLayout("an event without \"ph\"");
      }
      out.add(normalMap((Map<?, ?>) e));
    }
    return out;
  }

  /** The Clojure reader, loaded when first needed. */
  private static final class ParseRaw {
    static final clojure.lang.IFn FN = JavaData.var("pyprof.trace.reader", "parse-raw");
  }

  /** Bytes the cut does not read: the caller reads them the tolerant way, never shown to a user. */
  public static class NotLayout extends IOException {
    private static final long serialVersionUID = 1L;

    NotLayout(String why) {
      super(why);
    }
  }

  /** Slices the cut does not write as they come ({@link Nesting}): the caller applies the plan. */
  public static final class NeedsPlan extends NotLayout {
    private static final long serialVersionUID = 1L;

    NeedsPlan() {
      super("slices the writers' plan places");
    }
  }

  /** {@code m} with the reader's numbers: Long, BigInteger up to 64 bits, else Double. */
  @SuppressWarnings("unchecked")
  static Map<String, Object> normalMap(Map<?, ?> m) {
    return (Map<String, Object>) normal(m);
  }

  private static Object normal(Object v) {
    if (v instanceof Map) {
      Map<String, Object> out = new LinkedHashMap<>();
      for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
        out.put(String.valueOf(e.getKey()), normal(e.getValue()));
      }
      return out;
    }
    if (v instanceof List) {
      List<Object> out = new ArrayList<>();
      for (Object x : (List<?>) v) {
        out.add(normal(x));
      }
      return out;
    }
    if (v instanceof clojure.lang.BigInt) {
      v = ((clojure.lang.BigInt) v).toBigInteger();
    }
    if (v instanceof BigInteger) {
      BigInteger n = (BigInteger) v;
      return n.bitLength() < 64 ? (Object) n.longValue() : n.bitLength() < 65 ? (Object) n : (Object) n.doubleValue();
    }
    if (v instanceof Integer || v instanceof Short || v instanceof Byte) {
      return ((Number) v).longValue();
    }
    return v instanceof Float ? (Object) ((Number) v).doubleValue() : v;
  }

  /** {@code e} with its ids as {@code numbering} gives them, written without a copy. */
  private void writeEvent(JsonGenerator g, Map<String, Object> e, Ids numbering)
      throws IOException {
    forEachId(e, numbering::id); // numbered in the rule's order of fields, then written as they lie
    g.writeStartObject();
    for (Map.Entry<String, Object> f : e.entrySet()) {
      g.writeFieldName(f.getKey());
      String kind = kindOf.get(f.getKey());
      Object v = f.getValue();
      if (kind == null) {
        writeValue(g, v);
      } else if ("id2".equals(f.getKey()) && v instanceof Map) {
        Map<String, Object> id2 = new LinkedHashMap<>();
        for (Map.Entry<?, ?> x : ((Map<?, ?>) v).entrySet()) {
          String scope = String.valueOf(x.getKey());
          boolean isScope = Arrays.asList(id2Scopes).contains(scope);
          id2.put(scope, isScope ? numbering.id(kind, x.getValue()) : x.getValue());
        }
        writeValue(g, id2);
      } else {
        writeValue(g, numbering.id(kind, v));
      }
    }
    g.writeEndObject();
  }

  private static void writeValue(JsonGenerator g, Object v) throws IOException {
    if (v instanceof Map) {
      g.writeStartObject();
      for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
        g.writeFieldName(String.valueOf(e.getKey()));
        writeValue(g, e.getValue());
      }
      g.writeEndObject();
    } else if (v instanceof List) {
      g.writeStartArray();
      for (Object x : (List<?>) v) {
        writeValue(g, x);
      }
      g.writeEndArray();
    } else if (v instanceof String) {
      g.writeString((String) v);
    } else if (v instanceof Long) {
      g.writeNumber((Long) v);
    } else if (v instanceof BigInteger) {
      g.writeNumber((BigInteger) v);
    } else if (v instanceof Double) {
      g.writeNumber((Double) v);
    } else if (v instanceof Boolean) {
      g.writeBoolean((Boolean) v);
    } else if (v == null) {
      g.writeNull();
    } else {
      g.writeString(String.valueOf(v));
    }
  }

  /**
   * The renumbering of unsafe ids over one trace (trace.json {@code ids}; Python's
   * {@code rawcut._Ids}), the JVM's one: each unsafe value of a kind gets, at its first use, the
   * next integer from 1 that no safe integer id of that kind in {@code reserved} uses. Safe ids
   * met are reserved; {@link #collided} when one is a number given already (a trace's safe ids
   * all reserved first, by a pass that numbers them, makes the numbering exact).
   */
  public static final class Ids {
    private final long limit;
    /** Kind -> the safe integer ids met. */
    public final Map<String, Set<Long>> reserved;
    private final Map<String, Map<Object, Long>> numbers = new HashMap<>();
    private final Map<String, Long> next = new HashMap<>();
    private final Map<String, Set<Long>> given = new HashMap<>();
    boolean collided;

    /**
     * @param limit 2**limit_bits
     * @param reserved kind -> the safe ids taken (kept, and added to)
     */
    public Ids(long limit, Map<String, Set<Long>> reserved) {
      this.limit = limit;
      this.reserved = reserved;
    }

    /** The id {@code v} of {@code kind} as written: itself when safe, else its number. */
    public Object id(String kind, Object v) {
      v = normal(v);
      if (v instanceof String) {
        return v;
      }
      if (v instanceof Long && (Long) v > -limit && (Long) v < limit) {
        if (reserved.computeIfAbsent(kind, k -> new HashSet<>()).add((Long) v)) {
          collided |= given.getOrDefault(kind, Set.of()).contains(v);
        }
        return v;
      }
      // normal: one integer is one Long or BigInteger, apart from 1.0 and true
      return numbers.computeIfAbsent(kind, k -> new HashMap<>()).computeIfAbsent(v, k -> fresh(kind));
    }

    /** A number of {@code kind} that no id uses (an overlap track's tid). */
    public long fresh(String kind) {
      Set<Long> taken = reserved.getOrDefault(kind, Set.of());
      long n = next.getOrDefault(kind, 1L);
      while (taken.contains(n)) {
        n++;
      }
      next.put(kind, n + 1);
      given.computeIfAbsent(kind, k -> new HashSet<>()).add(n);
      return n;
    }
  }

  /** Calls {@code f} with (kind, value) of each id of {@code e}, in trace.json's order. */
  private void forEachId(Map<String, Object> e, BiConsumer<String, Object> f) {
    for (String[] kf : idFields) {
      if (!e.containsKey(kf[1])) {
        continue;
      }
      Object v = e.get(kf[1]);
      if ("id2".equals(kf[1]) && v instanceof Map) {
        Map<?, ?> m = (Map<?, ?>) v;
        for (String scope : id2Scopes) {
          if (m.containsKey(scope)) {
            f.accept(kf[0], m.get(scope));
          }
        }
      } else {
        f.accept(kf[0], v);
      }
    }
  }
}
