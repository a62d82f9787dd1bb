(ns pyprof.example.ndarray
  "The few NDArray operations the example needs. Arrays are `pyprof.jvm.example.NDArray` (AutoCloseable,
  freed exactly once by `close`): use `with-open`."
  (:require [pyprof.example.context :as context]
            [pyprof.native :as native :refer [mx]])
  (:import (com.sun.jna Memory Pointer)
           (com.sun.jna.ptr IntByReference PointerByReference)
           (pyprof.jvm.example MXNet NDArray)))

(set! *warn-on-reflection* true)

(def ^:private float32 0)

(defn- shape-param ^String [shape]
  (when-not (and (sequential? shape) (seq shape) (every? #(and (integer? %) (pos? %)) shape))
    (throw (ex-info (str "shape must be a non-empty vector of positive integers, got " (pr-str shape)
                         ". fix: pass e.g. [2 3]")
                    {:pyprof/error :invalid-option :shape shape})))
  (str "(" (clojure.string/join "," shape) ")"))

(defonce ^:private op-handles (atom {}))

(defn op-handle
  "The NNVM operator handle (also an AtomicSymbolCreator) for `op-name`, e.g. \"dot\"
  (C: NNGetOpHandle). Operators live as long as the process: handles are cached, never freed."
  ^Pointer [^String op-name]
  (or (get @op-handles op-name)
      (let [h (native/out-pointer #(mx NNGetOpHandle op-name ^PointerByReference %))]
        (swap! op-handles assoc op-name h)
        h)))

(defn- invoke-op
  "Runs operator `op-name` imperatively with no inputs and string `params`; returns its outputs."
  [^String op-name params]
  (let [ks (keys params)
        kp (native/strings ks)
        vp (native/strings (map params ks))
        n-out (IntByReference. 0)
        outs (PointerByReference.)]
    (mx MXImperativeInvoke (op-handle op-name) 0 nil n-out outs (count ks) kp vp)
    (mapv #(NDArray. %) (.getPointerArray (.getValue outs) 0 (.getValue n-out)))))

(defn random-uniform
  "A new float32 array of `shape` drawn uniformly from [low, high) (operator _random_uniform,
  C: MXImperativeInvoke). Options: {:ctx (context/cpu)}."
  (^NDArray [low high shape] (random-uniform low high shape {}))
  (^NDArray [low high shape {:keys [ctx] :or {ctx (context/cpu)}}]
   (first (invoke-op "_random_uniform" {"low" (str (double low)) "high" (str (double high))
                                        "shape" (shape-param shape) "ctx" (context/->str ctx)
                                        "dtype" "float32"}))))

(defn wait-to-read
  "Blocks until pending writes to `nd` are done (C: MXNDArrayWaitToRead); returns `nd`."
  ^NDArray [^NDArray nd]
  (mx MXNDArrayWaitToRead (.pointer nd))
  nd)

(defn wait-all
  "Blocks until all pending MXNet work is done (C: MXNDArrayWaitAll)."
  []
  (mx MXNDArrayWaitAll)
  nil)

(defn shape
  "The shape of `nd` as a vector of longs (C: MXNDArrayGetShapeEx)."
  [^NDArray nd]
  (let [ndim (IntByReference.)
        data (PointerByReference.)]
    (mx MXNDArrayGetShapeEx (.pointer nd) ndim data)
    (if (pos? (.getValue ndim))
      (mapv long (.getIntArray (.getValue data) 0 (.getValue ndim)))
      [])))

(defn size
  "Number of elements of `nd`."
  ^long [nd]
  (reduce * 1 (shape nd)))

(defn ->float-array
  "The values of the float32 array `nd`, row-major (C: MXNDArraySyncCopyToCPU, which waits)."
  ^floats [^NDArray nd]
  (let [dtype (let [out (IntByReference.)]
                (mx MXNDArrayGetDType (.pointer nd) out)
                (.getValue out))]
    (when-not (= float32 dtype)
      (throw (ex-info (str "->float-array needs a float32 array, got MXNet dtype code " dtype
                           ". fix: create the array as float32 (the default)")
                      {:pyprof/error :invalid-option :dtype dtype})))
    (let [n (size nd)]
      (if (zero? n)
        (float-array 0)
        (let [buf (Memory. (* 4 n))]
          (MXNet/MXNDArraySyncCopyToCPU (.pointer nd) buf n)
          (.getFloatArray buf 0 (int n)))))))

(defn ->vec
  "The values of the float32 array `nd` as a flat vector of floats, row-major."
  [nd]
  (vec (->float-array nd)))

(defn close
  "Frees `nd` (C: MXNDArrayFree); safe to call again."
  [^NDArray nd]
  (.close nd))
