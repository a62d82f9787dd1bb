package pyprof.jvm;

import com.sun.jna.Pointer;

/** An MXNet symbol (SymbolHandle). Closing calls {@code MXSymbolFree} once. */
public final class Symbol extends NativeHandle {
  public Symbol(Pointer handle) {
    super(handle);
  }

  @Override
  protected void free(Pointer p) {
    LibMXNet.gated(() -> LibMXNet.MXSymbolFree(p), "MXSymbolFree");
  }
}
