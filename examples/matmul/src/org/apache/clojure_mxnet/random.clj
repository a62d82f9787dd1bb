(ns org.apache.clojure-mxnet.random
  "Compatibility: random arrays of MXNet's retired Clojure package."
  (:require [pyprof.example.context :as c]
            [pyprof.example.ndarray :as nd]))

(defn uniform
  "A new float32 NDArray of `shape-vec` drawn uniformly from [low, high). Options: {:ctx ctx}."
  ([low high shape-vec] (uniform low high shape-vec {}))
  ([low high shape-vec {:keys [ctx] :or {ctx (c/cpu)}}]
   (nd/random-uniform low high shape-vec {:ctx ctx})))
