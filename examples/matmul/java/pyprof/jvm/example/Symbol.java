package pyprof.jvm.example;

import com.sun.jna.Pointer;
import pyprof.jvm.NativeHandle;

/** An MXNet symbol (SymbolHandle). Closing calls {@code MXSymbolFree} once. */
public final class Symbol extends NativeHandle {
  public Symbol(Pointer handle) {
    super(handle);
  }

  @Override
  protected void free(Pointer p) {
    MXNet.MXSymbolFree(p);
  }
}
