package pyprof.jvm;

import clojure.java.api.Clojure;
import clojure.lang.BigInt;
import clojure.lang.IFn;
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
 * Clojure data as Java callers read it, what the facades return: keyword keys and values as
 * strings in Python's spelling ({@code :total-us} becomes {@code "total_us"}), unmodifiable Java
 * maps (in the source's order) and lists, Integer/Short/Byte as Long, a BigInt as Long when it
 * fits (else BigInteger), Float/Ratio as Double; anything else (handles, files) as it is.
 */
final class JavaData {
  private JavaData() {}

  /** The var {@code ns/name}, its namespace loaded first (compiled from source: seconds). */
  static IFn var(String ns, String name) {
    Clojure.var("clojure.core", "require").invoke(Clojure.read(ns));
    return Clojure.var(ns, name);
  }

  /** {@code x} as plain Java data (see the class comment). */
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

  /** {@code m} as an unmodifiable {@code Map<String, Object>}. */
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
