package pyprof.jvm.capi;

import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;

/**
 * The raw JNA direct mapping behind {@link LibMXNet} (registered by its {@code load}), hidden in
 * this package so that no call bypasses the {@link Gate}. Each function returns 0, or -1 on
 * failure. The one list of them is {@code pyprof/spec/capi.json}, checked against this class by
 * {@code jvm/test/pyprof/capi_spec_test.clj}: a new binding is added there first.
 */
final class Natives {
  private Natives() {}

  static native String MXGetLastError();

  static native int MXGetVersion(IntByReference out);

  static native int MXGetGPUCount(IntByReference out);

  static native int MXSetProcessProfilerConfig(
      int numParams, Pointer keys, Pointer vals, Pointer kvstoreHandle);

  static native int MXSetProcessProfilerState(int state, int profileProcess, Pointer kvstoreHandle);

  static native int MXDumpProcessProfile(int finished, int profileProcess, Pointer kvstoreHandle);

  static native int MXAggregateProfileStatsPrintEx(
      PointerByReference outStr, int reset, int format, int sortBy, int ascending);

  static native int MXProcessProfilePause(int paused, int profileProcess, Pointer kvstoreHandle);

  static native int MXProfileCreateDomain(String domain, PointerByReference out);

  static native int MXProfileCreateTask(Pointer domain, String taskName, PointerByReference out);

  static native int MXProfileCreateFrame(Pointer domain, String frameName, PointerByReference out);

  static native int MXProfileCreateEvent(String eventName, PointerByReference out);

  static native int MXProfileCreateCounter(
      Pointer domain, String counterName, PointerByReference out);

  static native int MXProfileDestroyHandle(Pointer handle);

  static native int MXProfileDurationStart(Pointer durationHandle);

  static native int MXProfileDurationStop(Pointer durationHandle);

  static native int MXProfileSetCounter(Pointer counterHandle, long value);

  static native int MXProfileAdjustCounter(Pointer counterHandle, long value);

  static native int MXProfileSetMarker(Pointer domain, String instantMarkerName, String scope);

  static native int NNGetOpHandle(String opName, PointerByReference opOut);

  static native int MXImperativeInvoke(
      Pointer creator,
      int numInputs,
      Pointer inputs,
      IntByReference numOutputs,
      PointerByReference outputs,
      int numParams,
      Pointer paramKeys,
      Pointer paramVals);

  static native int MXNDArrayWaitToRead(Pointer handle);

  static native int MXNDArrayWaitAll();

  static native int MXNDArrayGetShapeEx(
      Pointer handle, IntByReference outDim, PointerByReference outPdata);

  static native int MXNDArrayGetDType(Pointer handle, IntByReference outDtype);

  static native int MXNDArrayFree(Pointer handle);

  static native int MXSymbolSaveToJSON(Pointer symbol, PointerByReference outJson);

  static native int MXExecutorBind(
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

  static native int MXExecutorForward(Pointer handle, int isTrain);

  static native int MXExecutorOutputs(Pointer handle, IntByReference outSize, PointerByReference out);

  static native int MXExecutorFree(Pointer handle);
}
