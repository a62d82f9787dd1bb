(ns pyprof.context
  "Device contexts: plain maps `{:device-type :cpu|:gpu, :device-id n}`."
  (:require [pyprof.native :as native])
  (:import (pyprof.jvm.capi LibMXNet)))

(set! *warn-on-reflection* true)

(defn cpu-device-count
  "CPU devices MXNet's profiler has tables for: the processors this JVM may use
  (Runtime/availableProcessors, which honours the affinity mask, like omp_get_num_procs)."
  ^long []
  (.availableProcessors (Runtime/getRuntime)))

(defn- invalid-cpu [device-id n]
  (ex-info (str "cpu device id " device-id " is out of range: MXNet's profiler knows cpu/0 to cpu/"
                (dec n) " on this machine. fix: use a device id from 0 to " (dec n) " (CPU"
                " contexts share the same cores; the id only labels the trace)")
           {:pyprof/error :invalid-device :device-type :cpu :device-id device-id :cpu-count n
            :fix (str "use a device id from 0 to " (dec n) " (CPU contexts share the same cores;"
                      " the id only labels the trace)")}))

(defn cpu
  "The CPU context (device id 0 unless given). The id must be 0 <= id < the processors this JVM
  may use: MXNet's profiler indexes per-device tables by it and aborts the process past their
  end, so a bad id throws ex-info :invalid-device here, before anything reaches MXNet."
  ([] (cpu 0))
  ([device-id]
   (let [n (cpu-device-count)]
     (when-not (and (integer? device-id) (< -1 device-id n))
       (throw (invalid-cpu device-id n)))
     {:device-type :cpu, :device-id (long device-id)})))

(def cuda-hint
  "How to get a GPU build, as pyprof.context.CUDA_HINT says it in Python."
  (str "install a CUDA build of MXNet matching your driver, e.g. pip install 'mxnet-cu112==1.9.1'"
       " (cu102 ... cu117 exist), in place of 'mxnet'"))

(defn- no-gpu [device-id n]
  (let [path (native/load!)]
    (if (zero? n)
      (ex-info (str "GPU context requested, but this MXNet build (" path ") sees no GPU. fix: "
                    cuda-hint " (for the JVM: point MXNET_LIBRARY_PATH at its libmxnet.so); or"
                    " use --ctx cpu")
               {:pyprof/error :no-gpu :gpu-count 0 :library path})
      (ex-info (str "GPU " device-id " requested, but MXNet sees " n " GPU(s): use a device id"
                    " from 0 to " (dec n))
               {:pyprof/error :no-gpu :gpu-count n :device-id device-id :library path}))))

(defn gpu
  "A GPU context (device id 0 unless given). Checks MXGetGPUCount first, so a CPU-only build
  fails here with one clear message (ex-info :no-gpu) instead of inside MXNet."
  ([] (gpu 0))
  ([device-id]
   (let [n (try (native/gpu-count)
                (catch pyprof.jvm.MXNetException e
                  ;; a CPU build can fail here rather than return 0; no library at all still throws
                  (if (= "dlopen" (.function e)) (throw e) 0)))]
     (when-not (and (integer? device-id) (< -1 device-id n)) (throw (no-gpu device-id n)))
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
