package pyprof.jvm;

import clojure.java.api.Clojure;
import clojure.lang.IFn;
import java.util.List;
import java.util.Map;

/**
 * FLOPs and bytes of one MXNet operator call, from the table Python reads too
 * ({@code pyprof/spec/flops.json}); a thin facade over the Clojure namespace {@code pyprof.flops}.
 * Conventions (docs/attribution.md): a multiply-add is 2 FLOPs, bias and elementwise work 1 per
 * element, bytes are the bytes of the inputs read plus the outputs written (float32 here). No C
 * function is called.
 */
public final class Flops {
  private Flops() {}

  private static final class Vars {
    static final IFn FLOPS;
    static final IFn BYTES;

    static {
      Clojure.var("clojure.core", "require").invoke(Clojure.read("pyprof.flops"));
      FLOPS = Clojure.var("pyprof.flops", "flops");
      BYTES = Clojure.var("pyprof.flops", "bytes-moved");
    }
  }

  /**
   * Floating-point operations of one call of {@code op}, or {@code null} when the spec has no
   * formula for it.
   *
   * @param op the operator's name as the trace writes it, e.g. {@code "Convolution"}
   * @param inputShapes the inputs' shapes in MXNet's order
   * @param attrs the operator's attributes, as MXNet's strings ({@code "(3, 3)"}) or values
   * @return FLOPs (a multiply-add is 2), or null
   * @throws PyprofException for shapes or attributes the formula cannot use
   */
  public static Long flops(String op, List<? extends List<? extends Number>> inputShapes,
                           Map<String, ?> attrs) {
    return (Long) call(() -> Vars.FLOPS.invoke(op, inputShapes, attrs));
  }

  /**
   * Bytes of the inputs read plus the outputs written (float32), or {@code null} when the spec
   * has no formula (or leaves the outputs to the recorded ones).
   *
   * @param op the operator's name
   * @param inputShapes the inputs' shapes in MXNet's order
   * @param attrs the operator's attributes
   * @return bytes, or null
   * @throws PyprofException for shapes or attributes the formula cannot use
   */
  public static Long bytesMoved(String op, List<? extends List<? extends Number>> inputShapes,
                                Map<String, ?> attrs) {
    return (Long) call(() -> Vars.BYTES.invoke(op, inputShapes, attrs));
  }

  private static Object call(java.util.function.Supplier<Object> f) {
    try {
      return f.get();
    } catch (Throwable t) {
      throw PyprofException.wrap(t);
    }
  }
}
