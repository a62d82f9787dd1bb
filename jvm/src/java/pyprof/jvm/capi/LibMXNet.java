package pyprof.jvm.capi;

import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import com.sun.jna.StringArray;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;
import java.nio.file.Path;
import pyprof.jvm.MXNetException;
import pyprof.jvm.ThreadNames;

/**
 * The part of MXNet 1.9.1's C API that pyprof uses, with the names and argument order of
 * {@code mxnet/c_api.h} and {@code nnvm/c_api.h}. Each method loads libmxnet on first use, makes
 * the call behind the {@link Gate} and throws {@link MXNetException} (the function and {@code
 * MXGetLastError()}, read on the same thread) when it returns -1. Switches (profiler config and
 * state, a finished dump) run with the gate closed; profiler-object calls and pause, which MXNet
 * keeps out of its API-call records, pass freely; every other call holds the read side.
 *
 * <p>Handles ({@code void*}) are {@link Pointer}s; {@code const char**} and handle arrays are
 * built by {@link #strings} and {@link #pointers}; {@code size_t} and {@code [u]int64_t} are
 * {@code long}.
 */
public final class LibMXNet {
  /** MXNet 1.9.x: the MXAggregateProfileStatsPrintEx sort codes and names used here are 1.9's. */
  public static final int EXPECTED_VERSION = 10901;

  /** MXNet's string encoding (names, keys, values, its errors), whatever the locale. */
  static final String UTF8 = "UTF-8";
  private static final Object LOAD_LOCK = new Object();
  private static volatile String loadedPath;
  private static MXNetException fatal; // guarded by LOAD_LOCK; set once a loaded library is unusable

  private LibMXNet() {}

  /**
   * Loads libmxnet once per JVM ({@link LibraryLoader} says where) and returns its absolute path.
   * Throws {@link MXNetException} "dlopen" when none loads, "MXGetVersion" when it is not MXNet
   * 1.9. It takes its own lock, then the gate's read side (the version check); every gated call
   * loads before it enters the gate, so loading never waits for a thread that waits for it.
   */
  public static String load() {
    if (loadedPath == null) {
      synchronized (LOAD_LOCK) {
        if (fatal != null) {
          throw fatal;
        }
        if (loadedPath == null) {
          LibraryLoader.find(LibMXNet::tryLoad);
        }
      }
    }
    return loadedPath;
  }

  /** The absolute path of the loaded libmxnet, or null before {@link #load()} succeeded. */
  public static String loadedPath() {
    return loadedPath;
  }

  /** Null once {@code path} is loaded, else why not; throws when it is not MXNet 1.9. */
  private static String tryLoad(Path path) {
    NativeLibrary lib;
    try {
      // MXNet's strings are UTF-8 whatever the JVM's locale (JNA's default is the platform's)
      lib = NativeLibrary.getInstance(path.toString(),
          java.util.Map.of(com.sun.jna.Library.OPTION_STRING_ENCODING, UTF8));
    } catch (UnsatisfiedLinkError e) {
      return e.getMessage();
    }
    Native.register(Natives.class, lib);
    IntByReference v = new IntByReference();
    Gate.shared(() -> Natives.MXGetVersion(v), "MXGetVersion");
    if (v.getValue() / 100 != EXPECTED_VERSION / 100) {
      String text = path + " is MXNet " + versionString(v.getValue()) + "; pyprof needs MXNet "
          + versionString(EXPECTED_VERSION) + ". fix: pip install 'mxnet==1.9.1' 'numpy<1.24', or "
          + "point " + LibraryLoader.ENV + " at a 1.9.1 libmxnet.so";
      fatal = new MXNetException("MXGetVersion", text, text);
      throw fatal;
    }
    loadedPath = path.toString();
    return null;
  }

  /** 10901 -> "1.9.1". */
  public static String versionString(int v) {
    return (v / 10000) + "." + (v / 100 % 100) + "." + (v % 100);
  }

  /** The version of the loaded library, e.g. 10901 (C: MXGetVersion). */
  public static int version() {
    IntByReference v = new IntByReference();
    MXGetVersion(v);
    return v.getValue();
  }

  // ---------------------------------------------------------------- errors and marshalling

  /** Throws {@link MXNetException} carrying {@code fn} and {@code MXGetLastError()} when rc != 0. */
  static void check(int rc, String fn) {
    if (rc != 0) {
      throw new MXNetException(fn, Natives.MXGetLastError());
    }
  }

  /**
   * Makes {@code call}, the C function {@code fn}, as a reader of the gate: every reader here,
   * and another JNA mapping's call of the loaded libmxnet (the example's).
   */
  public static void gated(java.util.function.IntSupplier call, String fn) {
    load();
    ThreadNames.touch(); // windows name the threads that call MXNet (once per thread)
    Gate.shared(call, fn);
  }

  private static void free(java.util.function.IntSupplier call, String fn) {
    load();
    ThreadNames.touch();
    check(call.getAsInt(), fn);
  }

  private static void switched(java.util.function.IntSupplier call, String fn) {
    load();
    Gate.exclusive(call, fn);
  }

  /** A native {@code const char*[]} (NULL when empty); keep the result reachable during the call. */
  public static Pointer strings(String... values) {
    return values.length == 0 ? null : new StringArray(values, UTF8);
  }

  /** A native array of handles (NULL when empty); keep the result reachable during the call. */
  public static Pointer pointers(Pointer... values) {
    if (values.length == 0) {
      return null;
    }
    Memory m = new Memory((long) values.length * Native.POINTER_SIZE);
    for (int i = 0; i < values.length; i++) {
      m.setPointer((long) i * Native.POINTER_SIZE, values[i]);
    }
    return m;
  }

  // ---------------------------------------------------------------- library (readers)

  public static void MXGetVersion(IntByReference out) {
    gated(() -> Natives.MXGetVersion(out), "MXGetVersion");
  }

  public static void MXGetGPUCount(IntByReference out) {
    gated(() -> Natives.MXGetGPUCount(out), "MXGetGPUCount");
  }

  // ---------------------------------------------------------------- profiler

  /** A switch: runs with the gate closed. */
  public static void MXSetProcessProfilerConfig(
      int numParams, Pointer keys, Pointer vals, Pointer kvstoreHandle) {
    switched(() -> Natives.MXSetProcessProfilerConfig(numParams, keys, vals, kvstoreHandle),
        "MXSetProcessProfilerConfig");
  }

  /** A switch: runs with the gate closed. */
  public static void MXSetProcessProfilerState(int state, int profileProcess, Pointer kvstoreHandle) {
    switched(() -> Natives.MXSetProcessProfilerState(state, profileProcess, kvstoreHandle),
        "MXSetProcessProfilerState");
  }

  /** A finished dump ({@code finished} 1) is a switch; an intermediate one only appends. */
  public static void MXDumpProcessProfile(int finished, int profileProcess, Pointer kvstoreHandle) {
    java.util.function.IntSupplier call =
        () -> Natives.MXDumpProcessProfile(finished, profileProcess, kvstoreHandle);
    if (finished != 0) {
      switched(call, "MXDumpProcessProfile");
    } else {
      free(call, "MXDumpProcessProfile");
    }
  }

  public static void MXAggregateProfileStatsPrintEx(
      PointerByReference outStr, int reset, int format, int sortBy, int ascending) {
    gated(() -> Natives.MXAggregateProfileStatsPrintEx(outStr, reset, format, sortBy, ascending),
        "MXAggregateProfileStatsPrintEx");
  }

  public static void MXProcessProfilePause(int paused, int profileProcess, Pointer kvstoreHandle) {
    free(() -> Natives.MXProcessProfilePause(paused, profileProcess, kvstoreHandle),
        "MXProcessProfilePause");
  }

  public static void MXProfileCreateDomain(String domain, PointerByReference out) {
    free(() -> Natives.MXProfileCreateDomain(domain, out), "MXProfileCreateDomain");
  }

  public static void MXProfileCreateTask(Pointer domain, String taskName, PointerByReference out) {
    free(() -> Natives.MXProfileCreateTask(domain, taskName, out), "MXProfileCreateTask");
  }

  public static void MXProfileCreateFrame(Pointer domain, String frameName, PointerByReference out) {
    free(() -> Natives.MXProfileCreateFrame(domain, frameName, out), "MXProfileCreateFrame");
  }

  public static void MXProfileCreateEvent(String eventName, PointerByReference out) {
    free(() -> Natives.MXProfileCreateEvent(eventName, out), "MXProfileCreateEvent");
  }

  public static void MXProfileCreateCounter(
      Pointer domain, String counterName, PointerByReference out) {
    free(() -> Natives.MXProfileCreateCounter(domain, counterName, out), "MXProfileCreateCounter");
  }

  public static void MXProfileDestroyHandle(Pointer handle) {
    free(() -> Natives.MXProfileDestroyHandle(handle), "MXProfileDestroyHandle");
  }

  public static void MXProfileDurationStart(Pointer durationHandle) {
    ThreadNames.touch();
    check(Natives.MXProfileDurationStart(durationHandle), "MXProfileDurationStart");
  }

  public static void MXProfileDurationStop(Pointer durationHandle) {
    check(Natives.MXProfileDurationStop(durationHandle), "MXProfileDurationStop");
  }

  public static void MXProfileSetCounter(Pointer counterHandle, long value) {
    check(Natives.MXProfileSetCounter(counterHandle, value), "MXProfileSetCounter");
  }

  public static void MXProfileAdjustCounter(Pointer counterHandle, long value) {
    check(Natives.MXProfileAdjustCounter(counterHandle, value), "MXProfileAdjustCounter");
  }

  public static void MXProfileSetMarker(Pointer domain, String instantMarkerName, String scope) {
    free(() -> Natives.MXProfileSetMarker(domain, instantMarkerName, scope), "MXProfileSetMarker");
  }

  // ---------------------------------------------------------------- operators, NDArray (readers)

  public static void NNGetOpHandle(String opName, PointerByReference opOut) {
    gated(() -> Natives.NNGetOpHandle(opName, opOut), "NNGetOpHandle");
  }

  public static void MXImperativeInvoke(
      Pointer creator,
      int numInputs,
      Pointer inputs,
      IntByReference numOutputs,
      PointerByReference outputs,
      int numParams,
      Pointer paramKeys,
      Pointer paramVals) {
    gated(() -> Natives.MXImperativeInvoke(creator, numInputs, inputs, numOutputs, outputs,
        numParams, paramKeys, paramVals), "MXImperativeInvoke");
  }

  public static void MXNDArrayWaitToRead(Pointer handle) {
    gated(() -> Natives.MXNDArrayWaitToRead(handle), "MXNDArrayWaitToRead");
  }

  public static void MXNDArrayWaitAll() {
    gated(Natives::MXNDArrayWaitAll, "MXNDArrayWaitAll");
  }

  public static void MXNDArrayGetShapeEx(
      Pointer handle, IntByReference outDim, PointerByReference outPdata) {
    gated(() -> Natives.MXNDArrayGetShapeEx(handle, outDim, outPdata), "MXNDArrayGetShapeEx");
  }

  public static void MXNDArrayGetDType(Pointer handle, IntByReference outDtype) {
    gated(() -> Natives.MXNDArrayGetDType(handle, outDtype), "MXNDArrayGetDType");
  }

  public static void MXNDArrayFree(Pointer handle) {
    gated(() -> Natives.MXNDArrayFree(handle), "MXNDArrayFree");
  }

  // ---------------------------------------------------------------- symbols, executors (readers)

  /** The JSON stays valid until this thread's next MXNet call. */
  public static void MXSymbolSaveToJSON(Pointer symbol, PointerByReference outJson) {
    gated(() -> Natives.MXSymbolSaveToJSON(symbol, outJson), "MXSymbolSaveToJSON");
  }

  public static void MXExecutorBind(
      Pointer symbolHandle,
      int devType,
      int devId,
      int len,
      Pointer inArgs,
      Pointer argGradStore,
      int[] gradReqType,
      int auxStatesLen,
      Pointer auxStates,
      PointerByReference out) {
    gated(() -> Natives.MXExecutorBind(symbolHandle, devType, devId, len, inArgs, argGradStore,
        gradReqType, auxStatesLen, auxStates, out), "MXExecutorBind");
    ExecutorHook h = executorHook;
    if (h != null) {
      h.bound(out.getValue(), symbolHandle, len > 0 ? inArgs.getPointerArray(0, len) : new Pointer[0],
          auxStatesLen > 0 ? auxStates.getPointerArray(0, auxStatesLen) : new Pointer[0]);
    }
  }

  public static void MXExecutorForward(Pointer handle, int isTrain) {
    ExecutorHook h = executorHook;
    long begin = h != null ? ExecutorHook.nowUs() : 0;
    gated(() -> Natives.MXExecutorForward(handle, isTrain), "MXExecutorForward");
    if (h != null) {
      h.forward(handle, begin, ExecutorHook.nowUs());
    }
  }

  public static void MXExecutorOutputs(
      Pointer handle, IntByReference outSize, PointerByReference out) {
    gated(() -> Natives.MXExecutorOutputs(handle, outSize, out), "MXExecutorOutputs");
  }

  public static void MXExecutorFree(Pointer handle) {
    ExecutorHook h = executorHook;
    if (h != null) {
      h.freed(handle); // before the free: the address may be reused at once
    }
    gated(() -> Natives.MXExecutorFree(handle), "MXExecutorFree");
  }

  private static volatile ExecutorHook executorHook;

  /** Sets (null: clears) the hook told of every bind, forward and free (pyprof.capture). */
  public static void setExecutorHook(ExecutorHook h) {
    executorHook = h;
  }
}
