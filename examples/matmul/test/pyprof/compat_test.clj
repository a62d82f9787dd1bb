(ns pyprof.compat-test
  "The org.apache.clojure-mxnet.* compatibility namespaces."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [org.apache.clojure-mxnet.util :as util]
            [pyprof.test-util :refer [java-child temp-dir]]))

(deftest convert-io-map-as-the-old-package
  (is (= {"profile_symbolic" "True" "filename" "a.json" "dump_period" "2" "profile_process" ":server"}
         (util/convert-io-map {:profile-symbolic true :filename "a.json" :dump-period 2
                               :profile-process :server})))
  (is (= "profile_all" (util/keyword->snake-case :profile-all))))

(deftest old-code-runs-and-the-trace-is-finished-at-exit
  (testing "no dump-profile: the trace is valid JSON after the JVM exits"
    (let [out (str (temp-dir) "/old.json")
          code (str "(require '[org.apache.clojure-mxnet.profiler :as profiler]"
                    " '[org.apache.clojure-mxnet.context :as context]"
                    " '[org.apache.clojure-mxnet.executor :as executor]"
                    " '[org.apache.clojure-mxnet.ndarray :as nd]"
                    " '[org.apache.clojure-mxnet.random :as random]"
                    " '[org.apache.clojure-mxnet.symbol :as sym])"
                    "(let [ctx (context/cpu)"
                    "      exec (sym/bind (sym/dot \"dot\" [(sym/variable \"A\") (sym/variable \"B\")]) ctx"
                    "                     {\"A\" [(random/uniform -1.0 1.0 [128 128] {:ctx ctx})]"
                    "                      \"B\" [(random/uniform -1.0 1.0 [128 128] {:ctx ctx})]})]"
                    "  (profiler/profiler-set-config {:filename \"" out "\" :profile-symbolic 1})"
                    "  (doseq [i (range 3)]"
                    "    (when (= i 0) (profiler/profiler-set-state \"run\"))"
                    "    (when (= i 1) (profiler/profiler-set-state))"
                    "    (-> exec (executor/forward) (executor/outputs) (first) (nd/wait-to-read))))")
          {:keys [exit err]} (java-child ["-e" code])
          evs (get (with-open [r (io/reader out)] (json/read r)) "traceEvents")]
      (is (= 0 exit) err)
      (is (= {"B" 1 "E" 1} (frequencies (for [e evs :when (and (= "[dot]" (e "name")) (#{"B" "E"} (e "ph"))
                                                                (= 0 (e "pid")))]
                                          (e "ph"))))))))
