(ns pyprof.profiler-test
  "Profiler calls that never start a trace session in this JVM (MXNet allows one per process);
  the full run -> dump session is tested in a child JVM by pyprof.matmul-test."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is are testing]]
            [pyprof.native :as native :refer [mx]]
            [pyprof.profiler :as profiler]
            [pyprof.test-util :refer [temp-dir]])
  (:import (pyprof.jvm MXNetException Profiler ProfileObject)))

(defmacro ^:private caught
  "The exception `body` throws (nil when none)."
  [& body]
  `(try ~@body nil (catch Exception e# e#)))

(deftest bad-state-fails-before-c
  (are [state] (let [e (caught (profiler/profiler-set-state state))]
                 (and (= :invalid-state (:pyprof/error (ex-data e)))
                      (= state (:state (ex-data e)))
                      (re-find #"expected \"run\"/:run or \"stop\"/:stop" (ex-message e))))
    "start" :running "RUN" 1 true nil))

(deftest dump-before-run-is-a-native-error
  (let [e (caught (profiler/dump-profile))]
    (is (instance? MXNetException e))
    (is (= "MXDumpProcessProfile" (.function ^MXNetException e)))
    (is (= "MXDumpProcessProfile" (:fn (ex-data e))))
    (is (= :mxnet (:pyprof/error (ex-data e))))
    (is (re-find #"Profiler hasn't been run" (:mxnet-error (ex-data e))))
    (is (str/starts-with? (ex-message e) "MXDumpProcessProfile failed: "))))

(deftest config-that-c-rejects-is-a-native-error
  (testing "bypassing validation, MXNet's own parser rejects the value"
    (let [file (str (temp-dir) "/never.json")
          e (caught (mx MXSetProcessProfilerConfig 2 (native/strings ["filename" "profile_all"])
                        (native/strings [file "yes"]) nil))]
      (is (instance? MXNetException e))
      (is (= {:pyprof/error :mxnet :fn "MXSetProcessProfilerConfig"}
             (select-keys (ex-data e) [:pyprof/error :fn])))
      (is (re-find #"profile_all" (:mxnet-error (ex-data e))))))
  (testing "through profiler-set-config the same mistake never reaches C"
    (is (= :invalid-config (:pyprof/error (ex-data (caught (profiler/profiler-set-config
                                                            {:profile-all "yes"}))))))))

(deftest invalid-options
  (is (= :invalid-option (:pyprof/error (ex-data (caught (profiler/dump-profile 2))))))
  (is (= :invalid-option (:pyprof/error (ex-data (caught (profiler/dumps {:format :xml}))))))
  (is (= [:total :avg :min :max :count]
         (:valid (ex-data (caught (profiler/dumps {:sort-by :median})))))))

(deftest dumps-without-aggregate-stats
  (is (= "" (profiler/dumps)))
  (is (nil? (profiler/dumps {:format :json :sort-by "count" :ascending true}))))

(deftest profile-objects-close-exactly-once
  (let [d (profiler/domain "pyprof-test")]
    (is (= "pyprof-test" (.name d)))
    (doseq [^ProfileObject o [(profiler/task d "t") (profiler/frame d "f") (profiler/event "e")
                              (profiler/counter d "c")]]
      (is (not (.isClosed o)))
      (.close o)
      (.close o)
      (is (.isClosed o))
      (is (thrown? IllegalStateException (.pointer o))))
    (with-open [c (profiler/counter d "bytes")
                t (profiler/task d "work")]
      (profiler/set-counter c 10)
      (profiler/adjust-counter c -3)
      (profiler/with-duration t (+ 1 1))
      (profiler/mark d "here")
      (profiler/mark d "there" :global))
    (is (= :invalid-option (:pyprof/error (ex-data (caught (profiler/mark d "x" :galaxy))))))))

(deftest java-facade-validates-like-clojure
  (let [e (caught (Profiler/setConfig {"profile_symbolc" true}))]
    (is (= "profile_symbolic" (:nearest (ex-data e)))))
  (is (= :invalid-state (:pyprof/error (ex-data (caught (Profiler/setState "go"))))))
  (is (= "" (Profiler/dumps)))
  (is (instance? MXNetException (caught (Profiler/dump true)))))
