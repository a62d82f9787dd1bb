(ns org.apache.clojure-mxnet.executor
  "Compatibility: the executor calls of MXNet's retired Clojure package that the profiler example
  uses."
  (:require [pyprof.example.executor :as e]))

(defn forward
  "Runs the forward pass (asynchronous); returns `executor`."
  ([executor] (e/forward executor))
  ([executor is-train] (e/forward executor {:is-train is-train}))
  ([executor is-train _kwargs] (e/forward executor {:is-train is-train})))

(defn outputs
  "The executor's outputs as a vector of NDArrays."
  [executor]
  (e/outputs executor))
