package pyprof.jvm.example;

import com.sun.jna.Pointer;
import pyprof.jvm.NativeHandle;
import pyprof.jvm.capi.LibMXNet;

/** An MXNet NDArray (NDArrayHandle). Closing calls {@code MXNDArrayFree} once. */
public final class NDArray extends NativeHandle {
  public NDArray(Pointer handle) {
    super(handle);
  }

  @Override
  protected void free(Pointer p) {
    LibMXNet.MXNDArrayFree(p);
  }
}
