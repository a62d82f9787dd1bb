(ns pyprof.example.context
  "Device contexts: plain maps `{:device-type :cpu|:gpu, :device-id n}`."
  (:require [clojure.string :as str]
            [pyprof.example.gpu :as gpu]
            [pyprof.native :as native :refer [mx]]
            [pyprof.rules :as rules])
  (:import (com.sun.jna.ptr IntByReference)))

(set! *warn-on-reflection* true)

(defn cpu-device-count
  "CPU devices MXNet's profiler has tables for: the processors this JVM may use
  (Runtime/availableProcessors, which honours the affinity mask, like omp_get_num_procs)."
  ^long []
  (.availableProcessors (Runtime/getRuntime)))

(defn- invalid-cpu [device-id n]
  (rules/error "device.cpu_out_of_range" {:device_id device-id :last (dec n)}))

(defn cpu
  "The CPU context (device id 0 unless given). The id must be 0 <= id < the processors this JVM
  may use: MXNet's profiler indexes per-device tables by it and aborts the process past their
  end, so a bad id throws :invalid-device (device.cpu_out_of_range) here, before anything reaches MXNet."
  ([] (cpu 0))
  ([device-id]
   (let [n (cpu-device-count)]
     (when-not (and (integer? device-id) (< -1 device-id n))
       (throw (invalid-cpu device-id n)))
     {:device-type :cpu, :device-id (long device-id)})))

(def cuda-hint
  "How to get a GPU build (errors.json's API names, as the JVM says it)."
  (get-in rules/catalogue ["api" "cuda_build" "clojure"]))

(defn- no-gpu [device-id n]
  (let [path (native/load!)]
    (if (zero? n)
      (rules/error "device.no_gpu" {:library path})
      (rules/error "device.gpu_out_of_range" {:device_id device-id :count n :last (dec n)}))))

(defn- check-arch
  "Throws :no-gpu (device.gpu_unsupported) when the build has no kernels for GPU `device-id`'s
  compute capability (see pyprof.example.gpu); nothing when the driver or the kernels are unknown.
  PYPROF_GPU_ARCH_CHECK=0 or -Dpyprof.gpuArchCheck=false turns it off."
  [device-id]
  (when-not (or (= "0" (some-> (System/getenv "PYPROF_GPU_ARCH_CHECK") str/trim))
                (= "false" (System/getProperty "pyprof.gpuArchCheck")))
    (when-let [[card-name major minor] (gpu/cuda-device device-id)]
      (when-let [fields (gpu/unsupported card-name [major minor] (gpu/describe-build (native/load!)))]
        (throw (rules/error "device.gpu_unsupported" (assoc fields :device_id device-id)))))))

(defn gpu-count
  "Number of GPUs this MXNet build sees (C: MXGetGPUCount); 0 on a CPU-only build."
  ^long []
  (let [out (IntByReference.)]
    (mx MXGetGPUCount out)
    (.getValue out)))

(defn gpu
  "A GPU context (device id 0 unless given). Checks MXGetGPUCount first, so a CPU-only build
  fails here with one clear message (:no-gpu, device.no_gpu) instead of inside MXNet; then that
  the build has kernels for the card (device.gpu_unsupported)."
  ([] (gpu 0))
  ([device-id]
   (let [n (try (gpu-count)
                (catch pyprof.jvm.MXNetException e
                  ;; a CPU build can fail here rather than return 0; no library at all still throws
                  (if (= "dlopen" (.function e)) (throw e) 0)))]
     (when-not (and (integer? device-id) (< -1 device-id n)) (throw (no-gpu device-id n)))
     (check-arch device-id)
     {:device-type :gpu, :device-id (long device-id)})))

(defn context
  "The context for `device-type` (:cpu or :gpu, or their names) and `device-id`."
  [device-type device-id]
  (case (keyword (name device-type))
    :cpu (cpu device-id)
    :gpu (gpu device-id)
    (throw (rules/error "device.invalid" {:kind device-type :choices ["cpu" "gpu"]}))))

(defn dev-type
  "MXNet's dev_type code of a context (cpu 1, gpu 2)."
  ^long [{:keys [device-type]}]
  (case device-type :cpu 1 :gpu 2))

(defn ->str
  "A context as MXNet's operator parameter `ctx` spells it: \"cpu(0)\", \"gpu(1)\"."
  ^String [{:keys [device-type device-id]}]
  (str (name device-type) "(" device-id ")"))
