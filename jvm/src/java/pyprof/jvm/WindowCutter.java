package pyprof.jvm;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.io.InputStream;
import java.io.RandomAccessFile;
import java.io.Writer;
import java.math.BigInteger;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Cuts a window out of the raw trace at disk speed, in constant memory: bytes {@code [start,
 * end)} of a file in MXNet's layout (trace.json {@code mxnet_layout}: one field per line, names
 * copied unescaped) written as a valid trace, known metadata first, each metadata event once,
 * unsafe ids renumbered (trace.json {@code ids}), then the extra events. One streaming pass,
 * numbering unsafe ids as they come; a second pass first, gathering every safe id, only when a
 * safe id found later holds a number already given. One event held at a time; only lines whose
 * value holds what JSON escapes are rewritten. What
 * {@code pyprof.session.raw/cut!} did with the whole range in memory, with the same events out.
 * Named threads (trace.json {@code thread_names}, {@link ThreadNames}) get their
 * {@code thread_name} event before their first event in the range. The rules are read from
 * trace.json by the caller (Clojure: {@code pyprof.session.raw}).
 */
public final class WindowCutter {
  private static final JsonFactory FACTORY = new JsonFactory();
  private static final BigInteger LIMIT_BASE = BigInteger.ONE;

  private final Pattern header;
  private final Pattern footer;
  private final Pattern[] stringLines;
  private final String[][] idFields; // {kind, field}
  private final Map<String, String> kindOf = new HashMap<>(); // id field -> its kind
  private final String[] id2Scopes;
  private final BigInteger limit;
  private final String threadName;
  private final long hashSeed;

  /**
   * A cutter that names no threads.
   *
   * @param layout trace.json {@code mxnet_layout} (header, footer, raw_string_lines)
   * @param ids trace.json {@code ids} (limit_bits, kinds, id2_scopes)
   */
  public WindowCutter(Map<?, ?> layout, Map<?, ?> ids) {
    this(layout, ids, Map.of("name", "thread_name", "hash_seed", 0L));
  }

  /**
   * @param layout trace.json {@code mxnet_layout} (header, footer, raw_string_lines)
   * @param ids trace.json {@code ids} (limit_bits, kinds, id2_scopes)
   * @param threadNames trace.json {@code thread_names} (name, hash_seed)
   */
  public WindowCutter(Map<?, ?> layout, Map<?, ?> ids, Map<?, ?> threadNames) {
    threadName = (String) threadNames.get("name");
    hashSeed = ((Number) threadNames.get("hash_seed")).longValue();
    header = Pattern.compile((String) layout.get("header"));
    footer = Pattern.compile((String) layout.get("footer"));
    List<?> lines = (List<?>) layout.get("raw_string_lines");
    stringLines = new Pattern[lines.size()];
    for (int i = 0; i < stringLines.length; i++) {
      stringLines[i] = Pattern.compile((String) lines.get(i), Pattern.UNIX_LINES); // only \n ends a line
    }
    List<String[]> fields = new ArrayList<>();
    for (Map.Entry<?, ?> k : ((Map<?, ?>) ids.get("kinds")).entrySet()) {
      for (Object f : (List<?>) k.getValue()) {
        fields.add(new String[] {(String) k.getKey(), (String) f});
      }
    }
    idFields = fields.toArray(new String[0][]);
    for (String[] kf : idFields) {
      kindOf.put(kf[1], kf[0]);
    }
    List<?> scopes = (List<?>) ids.get("id2_scopes");
    id2Scopes = scopes.toArray(new String[0]);
    limit = LIMIT_BASE.shiftLeft(((Number) ids.get("limit_bits")).intValue());
  }

  /** What a cut wrote. */
  public static final class Result {
    /** Events written (metadata, the range's events, the extra ones). */
    public final long events;
    /** The metadata events found in the range, in order (for the caller's store). */
    public final List<Map<String, Object>> metadata;
    /** False when the one pass numbered an id that a later safe id holds: cut in two passes. */
    public final boolean renumbered;

    Result(long events, List<Map<String, Object>> metadata, boolean renumbered) {
      this.events = events;
      this.metadata = metadata;
      this.renumbered = renumbered;
    }
  }

  /**
   * Writes the window: {@code known} metadata, then the events of raw bytes {@code [start, end)}
   * of {@code raw} (metadata already written skipped), then {@code extra}, as one valid trace to
   * {@code out}; ids renumbered over the whole. Nothing of the range is held but one event.
   *
   * @throws IOException when the file cannot be read or {@code out} written, or the bytes are
   *     not MXNet's layout (the caller then reads them the slow, tolerant way)
   */
  public Result cut(String raw, long start, long end, List<?> known, List<?> extra, Writer out)
      throws IOException {
    return cut(raw, start, end, known, extra, out, false);
  }

  /**
   * {@link #cut}, in one pass unless {@code twoPasses}: ids are numbered as they come, which is
   * the final numbering unless a safe id found later is a number already given; then
   * {@link Result#renumbered} is false and the caller cuts again with {@code twoPasses}.
   */
  public Result cut(String raw, long start, long end, List<?> known, List<?> extra, Writer out,
      boolean twoPasses) throws IOException {
    return cut(raw, start, end, known, extra, out, twoPasses, Map.of());
  }

  /**
   * {@link #cut(String, long, long, List, List, Writer, boolean)}, a {@code thread_name}
   * metadata event (trace.json {@code thread_names}) written before the first event of the range
   * of each pid and tid whose tid {@code names} holds ({@link #names()}: tid as MXNet writes it,
   * the unsigned value's bits in a long, to the thread's name).
   */
  public Result cut(String raw, long start, long end, List<?> known, List<?> extra, Writer out,
      boolean twoPasses, Map<Long, String> names) throws IOException {
    long[] body = body(raw, start, end);
    List<Map<String, Object>> head = new ArrayList<>();
    Set<Object> seen = new HashSet<>();
    for (Object m : known) {
      Map<String, Object> n = normalMap((Map<?, ?>) m);
      if (seen.add(n)) {
        head.add(n);
      }
    }
    List<Map<String, Object>> tail = new ArrayList<>();
    for (Object e : extra) {
      tail.add(normalMap((Map<?, ?>) e));
    }
    Ids numbering = new Ids();
    if (twoPasses) { // every safe id first, then the numbers
      head.forEach(numbering::scan);
      Set<Object> seen1 = new HashSet<>(seen);
      each(raw, body, e -> {
        if (!isMetadata(e) || seen1.add(e)) {
          numbering.scan(e);
        }
      });
      tail.forEach(numbering::scan);
      numbering.assign();
    }
    List<Map<String, Object>> found = new ArrayList<>();
    Set<List<Object>> named = new HashSet<>();
    long[] count = {0};
    try (JsonGenerator g = FACTORY.createGenerator(out)) {
      g.setRootValueSeparator(null);
      g.writeRaw("{\"traceEvents\":[\n");
      Consumer<Map<String, Object>> write = e -> {
        try {
          if (count[0]++ > 0) {
            g.writeRaw(",\n");
          }
          writeEvent(g, e, numbering);
        } catch (IOException x) {
          throw new java.io.UncheckedIOException(x);
        }
      };
      try {
        head.forEach(write);
        each(raw, body, e -> {
          if (!isMetadata(e)) {
            if (!names.isEmpty()) {
              Map<String, Object> m = threadNameOf(e, names, named);
              if (m != null) {
                write.accept(m);
              }
            }
            write.accept(e);
          } else if (seen.add(e)) {
            found.add(e);
            write.accept(e);
          }
        });
        tail.forEach(write);
      } catch (java.io.UncheckedIOException x) {
        throw x.getCause();
      }
      g.writeRaw("\n],\"displayTimeUnit\":\"ms\"}\n");
    }
    return new Result(count[0], found, !numbering.collided());
  }

  /**
   * Reads and writes synthetic bytes of MXNet's layout (20k events, in memory: no file is
   * written) a few times into nothing, so that a service's first window is cut by compiled code,
   * not the interpreter. For preloading ({@link ProfilerControl#register()}).
   */
  public void warmUp() {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < 20000; i++) {
      b.append(i == 0 ? "" : ",\n").append("    {\n        \"name\": \"op\\x\",\n")
          .append("        \"cat\": \"operator\",\n        \"ph\": \"").append(i % 2 == 0 ? 'B' : 'E')
          .append("\",\n        \"ts\": ").append(i).append(",\n        \"pid\": 0,\n")
          .append("        \"tid\": ").append(9007199254740993L + i % 4).append("\n    }\n");
    }
    byte[] body = b.toString().getBytes(StandardCharsets.UTF_8);
    try {
      for (int i = 0; i < 5; i++) { // the reading and writing of a cut, in memory: no file
        Ids numbering = new Ids();
        try (JsonGenerator g = FACTORY.createGenerator(Writer.nullWriter())) {
          eachIn(new java.io.ByteArrayInputStream(body), e -> {
            try {
              writeEvent(g, e, numbering);
            } catch (IOException x) {
              throw new java.io.UncheckedIOException(x);
            }
          });
        }
      }
    } catch (IOException | java.io.UncheckedIOException e) {
      // not expected (memory only): the first cut is slower, nothing else
    }
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
    if (name == null || !named.add(java.util.Arrays.asList(e.get("pid"), tid))) {
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

  /** A tid as read ({@code Long}, a {@code BigInteger} or Clojure {@code BigInt} up to 64 bits) as its bits in a long; else null. */
  static Long tidKey(Object v) {
    if (v instanceof Long) {
      return (Long) v;
    }
    if (v instanceof clojure.lang.BigInt) {
      v = ((clojure.lang.BigInt) v).toBigInteger();
    }
    if (v instanceof BigInteger && ((BigInteger) v).signum() >= 0 && ((BigInteger) v).bitLength() <= 64) {
      return ((BigInteger) v).longValue();
    }
    if (v instanceof Integer) {
      return ((Integer) v).longValue();
    }
    return null;
  }

  private static boolean isMetadata(Map<String, Object> e) {
    return "M".equals(e.get("ph"));
  }

  // ------------------------------------------------------------------ the range's bounds

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

  // ------------------------------------------------------------------ reading

  /** Calls {@code f} on each event of the body {@code [from, to)} of {@code raw}, in order. */
  private void each(String raw, long[] body, Consumer<Map<String, Object>> f) throws IOException {
    if (body[1] <= body[0]) {
      return;
    }
    try (RandomAccessFile file = new RandomAccessFile(raw, "r")) {
      file.seek(body[0]);
      eachIn(new Bounded(Channels.newInputStream(file.getChannel()), body[1] - body[0]), f);
    }
  }

  /** Calls {@code f} on each event of {@code in}, the bytes of a body (no header or footer). */
  private void eachIn(InputStream in, Consumer<Map<String, Object>> f) throws IOException {
    {
      try (JsonParser p = FACTORY.createParser(new Escaping(in))) {
        if (p.nextToken() != JsonToken.START_ARRAY) {
          throw notLayout("not MXNet's trace layout");
        }
        while (p.nextToken() == JsonToken.START_OBJECT) {
          @SuppressWarnings("unchecked")
          Map<String, Object> e = (Map<String, Object>) read(p);
          if (!e.containsKey("ph")) {
            throw notLayout("an event without \"ph\"");
          }
          f.accept(e);
        }
        if (p.currentToken() != JsonToken.END_ARRAY || p.nextToken() != null) {
          throw notLayout("not MXNet's trace layout");
        }
      } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
        throw notLayout("not MXNet's trace layout: " + e.getOriginalMessage());
      }
    }
  }

  /**
   * Bytes the cut does not read: never shown to a user (the caller then reads them the tolerant
   * way, which says what is wrong with its fix).
   */
  public static final class NotLayout extends IOException {
    private static final long serialVersionUID = 1L;

    NotLayout(String why) {
      super(why);
    }
  }

  private static IOException notLayout(String why) {
    return new NotLayout(why);
  }

  /** The value {@code p} is on, as Java data (numbers as {@link #number}). */
  private static Object read(JsonParser p) throws IOException {
    JsonToken t = p.currentToken();
    switch (t) {
      case START_OBJECT: {
        Map<String, Object> m = new LinkedHashMap<>();
        while (p.nextToken() == JsonToken.FIELD_NAME) {
          String k = p.getCurrentName();
          p.nextToken();
          m.put(k, read(p));
        }
        return m;
      }
      case START_ARRAY: {
        List<Object> v = new ArrayList<>();
        while (p.nextToken() != JsonToken.END_ARRAY) {
          v.add(read(p));
        }
        return v;
      }
      case VALUE_STRING:
        return p.getText();
      case VALUE_NUMBER_INT:
        return p.getNumberType() == JsonParser.NumberType.BIG_INTEGER
            ? number(p.getBigIntegerValue()) : (Object) p.getLongValue();
      case VALUE_NUMBER_FLOAT:
        return p.getDoubleValue();
      case VALUE_TRUE:
        return Boolean.TRUE;
      case VALUE_FALSE:
        return Boolean.FALSE;
      case VALUE_NULL:
        return null;
      default:
        throw notLayout("unexpected " + t);
    }
  }

  /** An integer as the JVM's reader holds it: a Long, a BigInteger up to 64 bits, else a double. */
  private static Object number(BigInteger n) {
    if (n.bitLength() < 64) {
      return n.longValue();
    }
    return n.bitLength() < 65 ? (Object) n : (Object) n.doubleValue();
  }

  /** {@code m} with Clojure's numbers (BigInt, Integer, ...) as {@link #read} gives them. */
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
      return number(((clojure.lang.BigInt) v).toBigInteger());
    }
    if (v instanceof BigInteger) {
      return number((BigInteger) v);
    }
    if (v instanceof Integer || v instanceof Short || v instanceof Byte) {
      return ((Number) v).longValue();
    }
    if (v instanceof Float) {
      return ((Number) v).doubleValue();
    }
    return v;
  }

  // ------------------------------------------------------------------ writing

  /** {@code e} with its ids as {@code numbering} gives them, written without a copy. */
  private void writeEvent(JsonGenerator g, Map<String, Object> e, Ids numbering)
      throws IOException {
    // numbers given in the rule's order of fields (trace.json ids kinds), then written as they lie
    forEachIdField(e, (kind, field, scope, v) -> numbering.id(kind, v));
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
          boolean isScope = false;
          for (String sc : id2Scopes) {
            isScope |= sc.equals(scope);
          }
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

  // ------------------------------------------------------------------ ids (trace.json ids)

  /**
   * The renumbering of unsafe ids over one trace, as pyprof.trace.ids/renumber: each unsafe value
   * of a kind gets the next integer from 1 that no safe integer id of that kind uses, in order of
   * first use. After {@link #assign()} (every id scanned) that is exact; without it, numbers are
   * given as values come, skipping the safe ids seen so far, and {@link #collided()} tells when a
   * safe id seen later is one of them.
   */
  private final class Ids {
    private final Map<String, Set<Long>> reserved = new HashMap<>();
    private final Map<String, LinkedHashMap<Object, Long>> numbers = new HashMap<>();
    private final Map<String, Long> next = new HashMap<>();
    private final Map<String, Set<Long>> given = new HashMap<>();
    private boolean assigned;
    private boolean collided;

    private boolean safe(Object v) {
      if (v instanceof String) {
        return true;
      }
      if (v instanceof Long) {
        long x = (Long) v;
        return x > -limit.longValue() && x < limit.longValue();
      }
      return false; // a BigInteger is past 63 bits; doubles, booleans, null are no ids
    }

    private Object key(Object v) {
      return v instanceof Long ? BigInteger.valueOf((Long) v) : v;
    }

    void scan(Map<String, Object> e) {
      forEachId(e, (kind, v) -> {
        if (safe(v)) {
          if (v instanceof Long) {
            reserved.computeIfAbsent(kind, k -> new HashSet<>()).add((Long) v);
          }
        } else {
          numbers.computeIfAbsent(kind, k -> new LinkedHashMap<>()).putIfAbsent(key(v), null);
        }
      });
    }

    void assign() {
      for (Map.Entry<String, LinkedHashMap<Object, Long>> k : numbers.entrySet()) {
        for (Map.Entry<Object, Long> e : k.getValue().entrySet()) {
          e.setValue(fresh(k.getKey()));
        }
      }
      assigned = true;
    }

    private long fresh(String kind) {
      Set<Long> taken = reserved.getOrDefault(kind, Set.of());
      long n = next.getOrDefault(kind, 1L);
      while (taken.contains(n)) {
        n++;
      }
      next.put(kind, n + 1);
      given.computeIfAbsent(kind, k -> new HashSet<>()).add(n);
      return n;
    }

    boolean collided() {
      return collided;
    }

    /** The id {@code v} of {@code kind} as written: itself when safe, else its number. */
    Object id(String kind, Object v) {
      if (safe(v)) {
        if (!assigned && v instanceof Long) {
          reserved.computeIfAbsent(kind, k -> new HashSet<>()).add((Long) v);
          collided |= given.getOrDefault(kind, Set.of()).contains(v);
        }
        return v;
      }
      return numbers.computeIfAbsent(kind, k -> new LinkedHashMap<>())
          .computeIfAbsent(key(v), k -> fresh(kind));
    }
  }

  private interface IdVisitor {
    void visit(String kind, Object value);
  }

  private interface IdFieldVisitor {
    void visit(String kind, String field, String scope, Object value);
  }

  private void forEachId(Map<String, Object> e, IdVisitor f) {
    forEachIdField(e, (kind, field, scope, v) -> f.visit(kind, v));
  }

  private void forEachIdField(Map<String, Object> e, IdFieldVisitor f) {
    for (String[] kf : idFields) {
      if (!e.containsKey(kf[1])) {
        continue;
      }
      Object v = e.get(kf[1]);
      if ("id2".equals(kf[1]) && v instanceof Map) {
        Map<?, ?> m = (Map<?, ?>) v;
        for (String scope : id2Scopes) {
          if (m.containsKey(scope)) {
            f.visit(kf[0], kf[1], scope, m.get(scope));
          }
        }
      } else {
        f.visit(kf[0], kf[1], null, v);
      }
    }
  }

  // ------------------------------------------------------------------ the byte stream

  /** At most {@code left} bytes of {@code in}. */
  private static final class Bounded extends java.io.FilterInputStream {
    private long left;

    Bounded(InputStream in, long left) {
      super(in);
      this.left = left;
    }

    @Override
    public int read() throws IOException {
      if (left <= 0) {
        return -1;
      }
      int c = super.read();
      if (c >= 0) {
        left--;
      }
      return c;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      if (left <= 0) {
        return -1;
      }
      int n = super.read(b, off, (int) Math.min(len, left));
      if (n > 0) {
        left -= n;
      }
      return n;
    }
  }

  /**
   * "[" + the body + "]" as bytes, each line of the body whose raw value holds what JSON escapes
   * rewritten by raw_string_lines (lines end at '\n' only, as MXNet writes them); the other
   * lines are copied as they are.
   */
  private final class Escaping extends InputStream {
    private final InputStream in;
    private final byte[] block = new byte[1 << 16];
    private java.io.ByteArrayOutputStream carry = new java.io.ByteArrayOutputStream();
    private byte[] out = {'['};
    private int outPos;
    private int outLen = 1;
    private boolean done;

    Escaping(InputStream in) {
      this.in = in;
    }

    @Override
    public int read() throws IOException {
      byte[] one = new byte[1];
      return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      while (outPos >= outLen) {
        if (done) {
          return -1;
        }
        fill();
      }
      int n = Math.min(len, outLen - outPos);
      System.arraycopy(out, outPos, b, off, n);
      outPos += n;
      return n;
    }

    /** The next block of whole lines (escaped where needed), or the closing "]". */
    private void fill() throws IOException {
      int n = in.read(block, 0, block.length);
      java.io.ByteArrayOutputStream o = new java.io.ByteArrayOutputStream(block.length + 256);
      if (n < 0) {
        if (carry.size() > 0) {
          line(carry.toByteArray(), 0, carry.size(), o);
          carry.reset();
        }
        o.write(']');
        done = true;
      } else {
        int from = 0;
        for (int i = 0; i < n; i++) {
          if (block[i] == '\n') {
            if (carry.size() > 0) {
              carry.write(block, from, i - from);
              line(carry.toByteArray(), 0, carry.size(), o);
              carry.reset();
            } else {
              line(block, from, i - from, o);
            }
            o.write('\n');
            from = i + 1;
          }
        }
        carry.write(block, from, n - from);
      }
      out = o.toByteArray();
      outPos = 0;
      outLen = out.length;
    }

    private void line(byte[] b, int off, int len, java.io.ByteArrayOutputStream o) {
      int quotes = 0;
      boolean escape = false;
      for (int i = off; i < off + len; i++) {
        byte c = b[i];
        if (c == '"') {
          quotes++;
        } else if (c == '\\' || (c >= 0 && c < 0x20)) {
          escape = true;
          break;
        }
      }
      if (!escape && quotes <= 4) {
        o.write(b, off, len);
        return;
      }
      String s = new String(b, off, len, StandardCharsets.UTF_8);
      for (Pattern p : stringLines) {
        Matcher m = p.matcher(s);
        if (m.matches()) {
          s = m.group(1) + jsonEscape(m.group(2)) + m.group(3);
          break;
        }
      }
      byte[] e = s.getBytes(StandardCharsets.UTF_8);
      o.write(e, 0, e.length);
    }

    @Override
    public void close() throws IOException {
      in.close();
    }
  }

  private static String jsonEscape(String v) {
    StringBuilder b = new StringBuilder(v.length() + 8);
    for (int i = 0; i < v.length(); i++) {
      char c = v.charAt(i);
      switch (c) {
        case '"': b.append("\\\""); break;
        case '\\': b.append("\\\\"); break;
        case '\b': b.append("\\b"); break;
        case '\f': b.append("\\f"); break;
        case '\n': b.append("\\n"); break;
        case '\r': b.append("\\r"); break;
        case '\t': b.append("\\t"); break;
        default:
          if (c < 0x20) {
            b.append(String.format("\\u%04x", (int) c));
          } else {
            b.append(c);
          }
      }
    }
    return b.toString();
  }
}
