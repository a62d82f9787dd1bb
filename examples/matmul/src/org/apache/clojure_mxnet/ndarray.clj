(ns org.apache.clojure-mxnet.ndarray
  "Compatibility: the NDArray calls of MXNet's retired Clojure package that the profiler example
  uses. Arrays are `pyprof.jvm.example.NDArray` (AutoCloseable)."
  (:require [pyprof.example.ndarray :as nd]))

(defn wait-to-read
  "Blocks until pending writes to `ndarray` are done; returns it."
  [ndarray]
  (nd/wait-to-read ndarray))

(defn wait-all
  "Blocks until all pending MXNet work is done."
  []
  (nd/wait-all))

(defn shape-vec
  "The shape of `ndarray` as a vector."
  [ndarray]
  (nd/shape ndarray))

(defn ->vec
  "The values of the float32 `ndarray`, row-major."
  [ndarray]
  (nd/->vec ndarray))

(defn dispose
  "Frees `ndarray` now (safe to call again, from any thread)."
  [ndarray]
  (nd/close ndarray))
