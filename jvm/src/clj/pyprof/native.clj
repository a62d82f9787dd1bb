(ns ^:no-doc pyprof.native
  "The one place Clojure touches libmxnet: loading and the `mx` call macro, over
  `pyprof.jvm.capi.LibMXNet`."
  (:import (com.sun.jna Pointer)
           (com.sun.jna.ptr PointerByReference)
           (pyprof.jvm.capi LibMXNet)))

(set! *warn-on-reflection* true)

(defn load!
  "Loads libmxnet once per JVM (see `LibMXNet/load` for the search order) and returns its path."
  ^String []
  (LibMXNet/load))

(defmacro mx
  "Calls the C function `f` (a `LibMXNet` method, e.g. `MXGetVersion`) with `args`: loaded on
  first use, behind the API gate; a failure throws `pyprof.jvm.MXNetException`, `ex-data`
  `{:pyprof/error :mxnet, :fn \"<C function>\", :mxnet-error \"<MXGetLastError text>\"}`."
  [f & args]
  `(. LibMXNet ~f ~@args))

(defn out-pointer
  "Calls `(f out)` with a fresh PointerByReference and returns the pointer written."
  ^Pointer [f]
  (let [out (PointerByReference.)]
    (f out)
    (.getValue out)))

(defn strings
  "A native `const char*[]` of `xs` (nil when empty). Keep it reachable during the call."
  ^Pointer [xs]
  (LibMXNet/strings (into-array String xs)))
