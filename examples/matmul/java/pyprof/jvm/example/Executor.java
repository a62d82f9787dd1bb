package pyprof.jvm.example;

import com.sun.jna.Pointer;
import pyprof.jvm.NativeHandle;
import pyprof.jvm.capi.LibMXNet;

/** A bound MXNet executor (ExecutorHandle). Outputs are separate NDArray handles that the caller closes. Closing calls {@code MXExecutorFree} once. */
public final class Executor extends NativeHandle {
  public Executor(Pointer handle) {
    super(handle);
  }

  @Override
  protected void free(Pointer p) {
    LibMXNet.MXExecutorFree(p);
  }
}
