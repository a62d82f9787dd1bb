package pyprof.jvm;

import clojure.lang.BigInt;
import clojure.lang.Keyword;
import clojure.lang.Ratio;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Clojure data as Java callers read it: what the facades ({@link Profiler},
 * {@link ProfilerSession}, {@link ProfilerControl}) return instead of Clojure's persistent
 * structures with keyword keys. The names are Python's (snake_case), as the keys Java callers
 * pass in: {@code :total-us} becomes {@code "total_us"}, the value {@code :record-and-save}
 * {@code "record_and_save"}.
 */
final class JavaData {
  private JavaData() {}

  /**
   * {@code x} as plain Java data: a map becomes an unmodifiable {@code Map<String, Object>} (in
   * the source's order) with keyword keys as strings; a list, vector, set or primitive array an
   * unmodifiable {@code List<Object>}; a keyword a {@code String}; an Integer, Short or Byte a
   * {@code Long}; a Clojure BigInt a {@code Long} when it fits, else a {@link BigInteger}; a
   * Float or Ratio a {@code Double}; String, Long, Double, Boolean, BigInteger, null and other
   * objects (handles, files) as they are.
   */
  static Object of(Object x) {
    if (x instanceof Keyword) {
      return name((Keyword) x);
    }
    if (x instanceof Map) {
      return map((Map<?, ?>) x);
    }
    if (x instanceof Collection) {
      List<Object> out = new ArrayList<>(((Collection<?>) x).size());
      for (Object o : (Collection<?>) x) {
        out.add(of(o));
      }
      return Collections.unmodifiableList(out);
    }
    if (x != null && x.getClass().isArray() && x.getClass().getComponentType().isPrimitive()) {
      int n = java.lang.reflect.Array.getLength(x);
      List<Object> out = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        out.add(of(java.lang.reflect.Array.get(x, i)));
      }
      return Collections.unmodifiableList(out);
    }
    if (x instanceof Integer || x instanceof Short || x instanceof Byte) {
      return ((Number) x).longValue();
    }
    if (x instanceof BigInt) {
      BigInteger b = ((BigInt) x).toBigInteger();
      return b.bitLength() < 64 ? (Object) b.longValue() : b;
    }
    if (x instanceof Float || x instanceof Ratio) {
      return ((Number) x).doubleValue();
    }
    if (x instanceof Character) {
      return String.valueOf(x);
    }
    return x;
  }

  /** {@code m} as an unmodifiable {@code Map<String, Object>} (see {@link #of}). */
  static Map<String, Object> map(Map<?, ?> m) {
    if (m == null) {
      return null;
    }
    Map<String, Object> out = new LinkedHashMap<>();
    for (Map.Entry<?, ?> e : m.entrySet()) {
      Object k = e.getKey();
      out.put(k instanceof Keyword ? name((Keyword) k) : String.valueOf(k), of(e.getValue()));
    }
    return Collections.unmodifiableMap(out);
  }

  /** A list of maps (see {@link #of}). */
  @SuppressWarnings("unchecked")
  static List<Map<String, Object>> maps(Object xs) {
    return (List<Map<String, Object>>) of(xs == null ? List.of() : xs);
  }

  /** The keyword's name in Python's spelling: dashes become underscores; a namespace is kept. */
  static String name(Keyword k) {
    String n = k.getName().replace('-', '_');
    return k.getNamespace() == null ? n : k.getNamespace() + "/" + n;
  }
}
