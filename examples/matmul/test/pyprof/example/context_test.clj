(ns pyprof.example.context-test
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is are testing]]
            [pyprof.example.context :as context]
            [pyprof.native :as native]))

(deftest cpu-contexts
  (is (= {:device-type :cpu :device-id 0} (context/cpu)))
  (is (= "cpu(2)" (context/->str {:device-type :cpu :device-id 2})))
  (is (= 1 (context/dev-type (context/cpu))))
  (let [id (dec (context/cpu-device-count))]
    (is (= (context/cpu id) (context/context "cpu" id) (context/context :cpu id)))))

(deftest gpu-on-this-build
  (if (zero? (context/gpu-count))
    (let [e (is (thrown? clojure.lang.ExceptionInfo (context/gpu)))]
      (is (= :no-gpu (:pyprof/error (ex-data e))))
      (is (str/starts-with?
           (ex-message e)
           (str "GPU context requested, but this MXNet build (" (native/load!) ") sees no GPU."
                " fix: install a CUDA build of MXNet matching your driver, e.g. pip install"
                " 'mxnet-cu112==1.9.1' (cu102 ... cu117 exist), and point MXNET_LIBRARY_PATH at"
                " its libmxnet.so")))
      (is (= "device.no_gpu" (:pyprof/code (ex-data e))))
      (is (str/ends-with? (ex-message e) "; or use --ctx cpu"))
      (is (not (re-find #"\n" (ex-message e))) "one line"))
    (is (= "gpu(0)" (context/->str (context/gpu 0)))))
  (is (= :no-gpu (:pyprof/error (ex-data (is (thrown? clojure.lang.ExceptionInfo
                                                      (context/gpu 1000))))))))

(deftest bad-device-type
  (let [e (is (thrown-with-msg? clojure.lang.ExceptionInfo #"invalid context \"tpu\": expected one of \"cpu\", \"gpu\""
                                (context/context :tpu 0)))]
    (is (= {:pyprof/error :invalid-device :pyprof/code "device.invalid"}
           (select-keys (ex-data e) [:pyprof/error :pyprof/code])))))

(deftest cpu-ids-past-the-processors-are-rejected-before-mxnet
  (let [n (.availableProcessors (Runtime/getRuntime))]
    (is (= n (context/cpu-device-count)))
    (is (= {:device-type :cpu :device-id (dec n)} (context/cpu (dec n))))
    (doseq [id [n (+ n 3) -1]]
      (let [e (is (thrown? clojure.lang.ExceptionInfo (context/cpu id)))]
        (is (= {:pyprof/error :invalid-device :pyprof/code "device.cpu_out_of_range"
                :device_id id :last (dec n)}
               (dissoc (ex-data e) :fix :java-fix)))
        (is (= (str "cpu device id " id " is out of range: MXNet's profiler knows cpu/0 to cpu/"
                    (dec n) " on this machine. fix: use a device id from 0 to " (dec n) " (CPU"
                    " contexts share the same cores; the id only labels the trace)")
               (ex-message e)))))
    (testing "every way to a cpu context checks the id"
      (is (= :invalid-device (:pyprof/error (ex-data (is (thrown? clojure.lang.ExceptionInfo
                                                                  (context/context :cpu n))))))))
    (is (= :invalid-device (:pyprof/error (ex-data (is (thrown? clojure.lang.ExceptionInfo
                                                                (context/cpu 1.5)))))))))
