package pyprof.jvm;

import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import com.sun.jna.StringArray;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * JNA direct mapping of the part of MXNet 1.9.1's C API that pyprof uses. Names and argument order
 * are those of {@code mxnet/c_api.h} and {@code nnvm/c_api.h}; every function returns 0 on success
 * and -1 on failure, and callers pass the result through {@link #check(int, String)}.
 *
 * <p>Call {@link #load()} once before any native method: it finds libmxnet.so (see
 * {@link LibraryLoader} for the order), loads it by absolute path, binds the methods below and checks
 * {@code MXGetVersion}. It is idempotent and thread-safe; the Clojure layer calls it on every entry.
 *
 * <p>Handles are {@code void*}: {@link Pointer} here. {@code const char**} and handle arrays are
 * passed as a {@link Pointer} built by {@link #strings} and {@link #pointers} (direct mapping does not
 * marshal object arrays). {@code uint32_t}/{@code int} map to {@code int}, {@code size_t},
 * {@code uint64_t} and {@code int64_t} to {@code long}.
 */
public final class LibMXNet {
  /** MXNet 1.9.x: the MXAggregateProfileStatsPrintEx sort codes and names used here are 1.9's. */
  public static final int EXPECTED_VERSION = 10901;

  /** {@code dev_type} codes of MXNet contexts. */
  public static final int DEV_CPU = 1;
  public static final int DEV_GPU = 2;

  private static volatile String loadedPath;
  private static MXNetException fatal; // guarded by LibMXNet.class; set once a loaded library is unusable

  /**
   * MXNet aborts the process (std::terminate from on_exit_api: "Check failed:
   * !thread_profiling_data.calls_.empty()") when API profiling is switched on while another
   * thread is inside a C API call. Every call pyprof makes holds the read side of this lock
   * ({@link #enter()}/{@link #exit()}); calls that switch profiling (config, state, pause) hold
   * the write side ({@link #exclusive()}), so no pyprof call is in flight while the mode changes.
   * Calls that other code makes into the same libmxnet (Python under JPype) are not covered.
   */
  private static final ReentrantReadWriteLock GATE = new ReentrantReadWriteLock();

  private LibMXNet() {}

  /** Before a C call: shared with other calls, excluded from profiler switches. */
  public static void enter() {
    GATE.readLock().lock();
  }

  /** After a C call made under {@link #enter()}. */
  public static void exit() {
    GATE.readLock().unlock();
  }

  /**
   * Runs one C call inside the gate and checks its return code: for calls made outside the
   * Clojure {@code mx} macro (handle frees, the version check).
   */
  public static void gated(java.util.function.IntSupplier call, String function) {
    enter();
    try {
      check(call.getAsInt(), function);
    } finally {
      exit();
    }
  }

  /** The lock a profiler switch holds: no C call of pyprof is in flight meanwhile. */
  public static Lock exclusive() {
    return GATE.writeLock();
  }

  // ---------------------------------------------------------------- loading

  /**
   * Loads libmxnet once per JVM and returns its absolute path. Throws {@link MXNetException} with
   * function {@code "dlopen"} listing every path tried and the fix when none loads, or when the
   * loaded library is not MXNet 1.9.
   */
  public static String load() {
    String p = loadedPath;
    return p != null ? p : loadSlow();
  }

  /** The absolute path of the loaded libmxnet, or null before {@link #load()} succeeded. */
  public static String loadedPath() {
    return loadedPath;
  }

  private static synchronized String loadSlow() {
    if (loadedPath != null) {
      return loadedPath;
    }
    if (fatal != null) {
      throw fatal;
    }
    List<String> tried = new ArrayList<>();
    List<LibraryLoader.Candidate> candidates = LibraryLoader.candidates(System.getenv(), tried);
    boolean explicit = !candidates.isEmpty() && candidates.get(0).explicit;
    for (LibraryLoader.Candidate c : candidates) {
      if (tryLoad(c, tried)) {
        return loadedPath;
      }
    }
    if (!explicit) {
      LibraryLoader.Candidate c = LibraryLoader.fromPython(tried);
      if (c != null && tryLoad(c, tried)) {
        return loadedPath;
      }
    }
    throw LibraryLoader.notFound(tried);
  }

  private static boolean tryLoad(LibraryLoader.Candidate c, List<String> tried) {
    Path path = c.path;
    if (!LibraryLoader.isFile(path)) {
      tried.add(c + ": no such file");
      return false;
    }
    NativeLibrary lib;
    try {
      lib = NativeLibrary.getInstance(path.toString());
    } catch (UnsatisfiedLinkError e) {
      tried.add(c + ": " + e.getMessage());
      return false;
    }
    Native.register(LibMXNet.class, lib);
    IntByReference v = new IntByReference();
    gated(() -> MXGetVersion(v), "MXGetVersion");
    if (v.getValue() / 100 != EXPECTED_VERSION / 100) {
      String text =
          path + " is MXNet " + versionString(v.getValue()) + "; pyprof needs MXNet "
              + versionString(EXPECTED_VERSION)
              + " (fix: pip install 'mxnet==1.9.1' 'numpy<1.24', or point "
              + LibraryLoader.ENV + " at a 1.9.1 libmxnet.so)";
      fatal = new MXNetException("MXGetVersion", text, text);
      throw fatal;
    }
    loadedPath = path.toString();
    return true;
  }

  /** 10901 -> "1.9.1". */
  public static String versionString(int v) {
    return (v / 10000) + "." + (v / 100 % 100) + "." + (v % 100);
  }

  /** The version of the loaded library, e.g. 10901. */
  public static int version() {
    load();
    IntByReference v = new IntByReference();
    gated(() -> MXGetVersion(v), "MXGetVersion");
    return v.getValue();
  }

  // ---------------------------------------------------------------- errors and marshalling

  /** Throws {@link MXNetException} carrying {@code fn} and {@code MXGetLastError()} when rc != 0. */
  public static void check(int rc, String fn) {
    if (rc != 0) {
      throw new MXNetException(fn, MXGetLastError());
    }
  }

  /** A native {@code const char*[]} (NULL when empty); keep the result reachable during the call. */
  public static Pointer strings(String... values) {
    return values.length == 0 ? null : new StringArray(values);
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

  // ---------------------------------------------------------------- library

  public static native String MXGetLastError();

  public static native int MXGetVersion(IntByReference out);

  public static native int MXGetGPUCount(IntByReference out);

  // ---------------------------------------------------------------- profiler

  public static native int MXSetProcessProfilerConfig(
      int numParams, Pointer keys, Pointer vals, Pointer kvstoreHandle);

  public static native int MXSetProcessProfilerState(
      int state, int profileProcess, Pointer kvstoreHandle);

  public static native int MXDumpProcessProfile(
      int finished, int profileProcess, Pointer kvstoreHandle);

  public static native int MXAggregateProfileStatsPrintEx(
      PointerByReference outStr, int reset, int format, int sortBy, int ascending);

  public static native int MXProcessProfilePause(
      int paused, int profileProcess, Pointer kvstoreHandle);

  public static native int MXProfileCreateDomain(String domain, PointerByReference out);

  public static native int MXProfileCreateTask(
      Pointer domain, String taskName, PointerByReference out);

  public static native int MXProfileCreateFrame(
      Pointer domain, String frameName, PointerByReference out);

  public static native int MXProfileCreateEvent(String eventName, PointerByReference out);

  public static native int MXProfileCreateCounter(
      Pointer domain, String counterName, PointerByReference out);

  public static native int MXProfileDestroyHandle(Pointer handle);

  public static native int MXProfileDurationStart(Pointer durationHandle);

  public static native int MXProfileDurationStop(Pointer durationHandle);

  public static native int MXProfileSetCounter(Pointer counterHandle, long value);

  public static native int MXProfileAdjustCounter(Pointer counterHandle, long value);

  public static native int MXProfileSetMarker(
      Pointer domain, String instantMarkerName, String scope);

  // ---------------------------------------------------------------- operators, NDArray

  public static native int NNGetOpHandle(String opName, PointerByReference opOut);

  public static native int MXImperativeInvoke(
      Pointer creator,
      int numInputs,
      Pointer inputs,
      IntByReference numOutputs,
      PointerByReference outputs,
      int numParams,
      Pointer paramKeys,
      Pointer paramVals);

  public static native int MXNDArrayCreate(
      int[] shape, int ndim, int devType, int devId, int delayAlloc, PointerByReference out);

  public static native int MXNDArrayCreateEx(
      int[] shape,
      int ndim,
      int devType,
      int devId,
      int delayAlloc,
      int dtype,
      PointerByReference out);

  public static native int MXNDArrayWaitToRead(Pointer handle);

  public static native int MXNDArrayWaitAll();

  /** {@code size} counts elements, not bytes. */
  public static native int MXNDArraySyncCopyToCPU(Pointer handle, Pointer data, long size);

  public static native int MXNDArrayGetShape(
      Pointer handle, IntByReference outDim, PointerByReference outPdata);

  public static native int MXNDArrayGetShapeEx(
      Pointer handle, IntByReference outDim, PointerByReference outPdata);

  public static native int MXNDArrayGetDType(Pointer handle, IntByReference outDtype);

  public static native int MXNDArrayFree(Pointer handle);

  // ---------------------------------------------------------------- symbols, executors

  public static native int MXSymbolCreateVariable(String name, PointerByReference out);

  /** An NNVM OpHandle (from {@link #NNGetOpHandle}) is an AtomicSymbolCreator. */
  public static native int MXSymbolCreateAtomicSymbol(
      Pointer creator, int numParam, Pointer keys, Pointer vals, PointerByReference out);

  public static native int MXSymbolCompose(
      Pointer sym, String name, int numArgs, Pointer keys, Pointer args);

  public static native int MXSymbolListArguments(
      Pointer symbol, IntByReference outSize, PointerByReference outStrArray);

  public static native int MXSymbolFree(Pointer symbol);

  public static native int MXExecutorBind(
      Pointer symbolHandle,
      int devType,
      int devId,
      int len,
      Pointer inArgs,
      Pointer argGradStore,
      int[] gradReqType,
      int auxStatesLen,
      Pointer auxStates,
      PointerByReference out);

  public static native int MXExecutorForward(Pointer handle, int isTrain);

  public static native int MXExecutorOutputs(
      Pointer handle, IntByReference outSize, PointerByReference out);

  public static native int MXExecutorFree(Pointer handle);
}
