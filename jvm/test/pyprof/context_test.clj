(ns pyprof.context-test
  (:require [clojure.test :refer [deftest is are]]
            [pyprof.context :as context]
            [pyprof.native :as native]))

(deftest cpu-contexts
  (is (= {:device-type :cpu :device-id 0} (context/cpu)))
  (is (= "cpu(2)" (context/->str (context/cpu 2))))
  (is (= 1 (context/dev-type (context/cpu))))
  (is (= (context/cpu 1) (context/context "cpu" 1) (context/context :cpu 1))))

(deftest gpu-on-this-build
  (if (zero? (native/gpu-count))
    (let [e (is (thrown? clojure.lang.ExceptionInfo (context/gpu)))]
      (is (= :no-gpu (:pyprof/error (ex-data e))))
      (is (re-find #"^this MXNet build has no GPU support" (ex-message e)))
      (is (re-find #"pip install mxnet-cu112==1.9.1" (ex-message e)))
      (is (not (re-find #"\n" (ex-message e))) "one line"))
    (is (= "gpu(0)" (context/->str (context/gpu 0)))))
  (is (= :no-gpu (:pyprof/error (ex-data (is (thrown? clojure.lang.ExceptionInfo
                                                      (context/gpu 1000))))))))

(deftest bad-device-type
  (is (thrown-with-msg? clojure.lang.ExceptionInfo #"expected cpu or gpu" (context/context :tpu 0))))
