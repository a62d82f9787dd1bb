(ns ^:no-doc pyprof.native
  "The one place Clojure touches libmxnet: loading and the `mx` call macro.

  Every C call goes through `mx`, that is through `pyprof.jvm.capi.LibMXNet`, which loads the
  library on first use and gates the call: a failure throws `pyprof.jvm.MXNetException`, whose `ex-data` is
  `{:pyprof/error :mxnet, :fn \"<C function>\", :mxnet-error \"<MXGetLastError text>\"}`."
  (:import (com.sun.jna Pointer)
           (com.sun.jna.ptr IntByReference PointerByReference)
           (pyprof.jvm.capi LibMXNet)))

(set! *warn-on-reflection* true)

(defn load!
  "Loads libmxnet once per JVM (see `LibMXNet/load` for the search order) and returns its path."
  ^String []
  (LibMXNet/load))

(defmacro mx
  "Calls the C function `f` (a symbol naming a `pyprof.jvm.capi.LibMXNet` method, e.g.
  `MXGetVersion`) with `args`. LibMXNet loads the library, passes the API gate (switches run
  alone, see `pyprof.jvm.capi.Gate`) and throws `MXNetException` when the call fails."
  [f & args]
  `(. LibMXNet ~f ~@args))

(defn int-out
  "Calls `(f out)` with a fresh IntByReference and returns the int written."
  ^long [f]
  (let [out (IntByReference.)]
    (f out)
    (.getValue out)))

(defn out-pointer
  "Calls `(f out)` with a fresh PointerByReference and returns the pointer written."
  ^Pointer [f]
  (let [out (PointerByReference.)]
    (f out)
    (.getValue out)))

(defn version
  "libmxnet's version as an int (10901 for 1.9.1)."
  ^long []
  (LibMXNet/version))

(defn gpu-count
  "Number of GPUs this MXNet build sees (`MXGetGPUCount`); 0 on a CPU-only build."
  ^long []
  (int-out #(mx MXGetGPUCount ^IntByReference %)))

(defn strings
  "A native `const char*[]` of `xs` (nil when empty). Keep it reachable during the call."
  ^Pointer [xs]
  (LibMXNet/strings (into-array String xs)))

(defn pointers
  "A native array of handles `ps` (nil when empty). Keep it reachable during the call."
  ^Pointer [ps]
  (LibMXNet/pointers (into-array Pointer ps)))

(defonce ^:private op-handles (atom {}))

(defn op-handle
  "The NNVM operator handle (also an AtomicSymbolCreator) for `op-name`, e.g. \"dot\". Operators
  live as long as the process, so handles are cached and never freed."
  ^Pointer [^String op-name]
  (or (get @op-handles op-name)
      (let [h (out-pointer #(mx NNGetOpHandle op-name ^PointerByReference %))]
        (swap! op-handles assoc op-name h)
        h)))
