(ns pyprof.example.executor
  "Running a bound executor (`pyprof.jvm.example.Executor`, from `pyprof.example.symbol/bind`)."
  (:require [pyprof.native :refer [mx]])
  (:import (com.sun.jna.ptr IntByReference PointerByReference)
           (pyprof.jvm.example Executor NDArray)))

(set! *warn-on-reflection* true)

(defn forward
  "Runs the forward pass (C: MXExecutorForward); asynchronous, like all MXNet work. Options:
  {:is-train false}. Returns `exec`."
  (^Executor [exec] (forward exec {}))
  (^Executor [^Executor exec {:keys [is-train]}]
   (mx MXExecutorForward (.pointer exec) (if is-train 1 0))
   exec))

(defn outputs
  "The executor's outputs as a vector of new NDArray handles (C: MXExecutorOutputs); each must be
  closed by the caller (see `close-all`)."
  [^Executor exec]
  (let [n (IntByReference.)
        out (PointerByReference.)]
    (mx MXExecutorOutputs (.pointer exec) n out)
    (if (pos? (.getValue n))
      (mapv #(NDArray. %) (.getPointerArray (.getValue out) 0 (.getValue n)))
      [])))

(defn close-all
  "Closes every AutoCloseable in `xs`, even when one close throws (the first error is rethrown)."
  [xs]
  (let [err (reduce (fn [err ^java.lang.AutoCloseable x]
                      (try (.close x) err
                           (catch Throwable t (or err t))))
                    nil xs)]
    (when err (throw err))))
