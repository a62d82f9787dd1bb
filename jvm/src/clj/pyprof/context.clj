(ns pyprof.context
  "Device contexts: plain maps `{:device-type :cpu|:gpu, :device-id n}`."
  (:require [pyprof.native :as native])
  (:import (pyprof.jvm LibMXNet)))

(set! *warn-on-reflection* true)

(defn cpu
  "The CPU context (device id 0 unless given)."
  ([] (cpu 0))
  ([device-id] {:device-type :cpu, :device-id (long device-id)}))

(defn- no-gpu [device-id n]
  (let [path (native/load!)]
    (if (zero? n)
      (ex-info (str "this MXNet build has no GPU support (MXGetGPUCount = 0 for " path "); "
                    "for a GPU context install a CUDA build of the same version, e.g. "
                    "pip install mxnet-cu112==1.9.1, and point MXNET_LIBRARY_PATH at its libmxnet.so")
               {:pyprof/error :no-gpu :gpu-count 0 :library path})
      (ex-info (str "gpu(" device-id ") requested, but MXNet sees " n " GPU(s): ids 0.." (dec n))
               {:pyprof/error :no-gpu :gpu-count n :device-id device-id :library path}))))

(defn gpu
  "A GPU context (device id 0 unless given). Checks MXGetGPUCount first, so a CPU-only build
  fails here with one clear message instead of inside MXNet."
  ([] (gpu 0))
  ([device-id]
   (let [n (native/gpu-count)]
     (when-not (< -1 device-id n) (throw (no-gpu device-id n)))
     {:device-type :gpu, :device-id (long device-id)})))

(defn context
  "The context for `device-type` (:cpu or :gpu, or their names) and `device-id`."
  [device-type device-id]
  (case (keyword (name device-type))
    :cpu (cpu device-id)
    :gpu (gpu device-id)
    (throw (ex-info (str "invalid device type " (pr-str device-type) ": expected cpu or gpu")
                    {:pyprof/error :invalid-option :device-type device-type}))))

(defn dev-type
  "MXNet's dev_type code of a context (cpu 1, gpu 2)."
  ^long [{:keys [device-type]}]
  (case device-type :cpu LibMXNet/DEV_CPU :gpu LibMXNet/DEV_GPU))

(defn ->str
  "A context as MXNet's operator parameter `ctx` spells it: \"cpu(0)\", \"gpu(1)\"."
  ^String [{:keys [device-type device-id]}]
  (str (name device-type) "(" device-id ")"))
