(ns org.apache.clojure-mxnet.context
  "Compatibility: device contexts of MXNet's retired Clojure package."
  (:require [pyprof.example.context :as c]))

(defn cpu
  "The CPU context."
  ([] (c/cpu))
  ([device-id] (c/cpu device-id)))

(defn gpu
  "A GPU context; fails with one clear message on a CPU-only MXNet build."
  ([] (c/gpu))
  ([device-id] (c/gpu device-id)))

(defn default-context
  "The default context: cpu(0)."
  []
  (c/cpu))
