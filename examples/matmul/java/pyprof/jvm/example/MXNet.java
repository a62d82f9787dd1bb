package pyprof.jvm.example;

import com.sun.jna.Library;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;
import java.util.Map;
import pyprof.jvm.capi.LibMXNet;

/**
 * The C functions only the example calls (symbols, copying an array out), which the library does
 * not bind: a JNA direct mapping of the libmxnet {@link LibMXNet#load()} loaded, each call behind
 * the library's API gate ({@link LibMXNet#gated}). C names and argument order; a failure throws
 * {@code pyprof.jvm.MXNetException}. Listed in pyprof/spec/capi.json (language "example").
 */
public final class MXNet {
  private MXNet() {}

  /** The raw natives, registered on first use. */
  private static final class N {
    static {
      Native.register(N.class, NativeLibrary.getInstance(LibMXNet.load(),
          Map.of(Library.OPTION_STRING_ENCODING, "UTF-8")));
    }

    static native int MXNDArraySyncCopyToCPU(Pointer handle, Pointer data, long size);

    static native int MXSymbolCreateVariable(String name, PointerByReference out);

    static native int MXSymbolCreateAtomicSymbol(
        Pointer creator, int numParam, Pointer keys, Pointer vals, PointerByReference out);

    static native int MXSymbolCompose(
        Pointer sym, String name, int numArgs, Pointer keys, Pointer args);

    static native int MXSymbolListArguments(
        Pointer symbol, IntByReference outSize, PointerByReference outStrArray);

    static native int MXSymbolFree(Pointer symbol);
  }

  /** {@code size} counts elements, not bytes. */
  public static void MXNDArraySyncCopyToCPU(Pointer handle, Pointer data, long size) {
    LibMXNet.gated(() -> N.MXNDArraySyncCopyToCPU(handle, data, size), "MXNDArraySyncCopyToCPU");
  }

  public static void MXSymbolCreateVariable(String name, PointerByReference out) {
    LibMXNet.gated(() -> N.MXSymbolCreateVariable(name, out), "MXSymbolCreateVariable");
  }

  /** An NNVM OpHandle ({@code NNGetOpHandle}) is an AtomicSymbolCreator. */
  public static void MXSymbolCreateAtomicSymbol(
      Pointer creator, int numParam, Pointer keys, Pointer vals, PointerByReference out) {
    LibMXNet.gated(() -> N.MXSymbolCreateAtomicSymbol(creator, numParam, keys, vals, out),
        "MXSymbolCreateAtomicSymbol");
  }

  public static void MXSymbolCompose(
      Pointer sym, String name, int numArgs, Pointer keys, Pointer args) {
    LibMXNet.gated(() -> N.MXSymbolCompose(sym, name, numArgs, keys, args), "MXSymbolCompose");
  }

  public static void MXSymbolListArguments(
      Pointer symbol, IntByReference outSize, PointerByReference outStrArray) {
    LibMXNet.gated(() -> N.MXSymbolListArguments(symbol, outSize, outStrArray),
        "MXSymbolListArguments");
  }

  public static void MXSymbolFree(Pointer symbol) {
    LibMXNet.gated(() -> N.MXSymbolFree(symbol), "MXSymbolFree");
  }
}
