(ns pyprof.profiler-test
  "Profiler calls that never start a trace session in this JVM (MXNet allows one per process);
  the full run -> dump session is tested in a child JVM by pyprof.matmul-test."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is are testing]]
            [pyprof.native :as native :refer [mx]]
            [pyprof.profiler :as profiler]
            [pyprof.test-util :refer [temp-dir]])
  (:import (pyprof.jvm MXNetException Profiler ProfileObject PyprofException)))

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
  (testing "as pyprof.profiler.dumps: an error that names the fix, not an empty string"
    (doseq [opts [{} {:format :json :sort-by "count" :ascending true}]]
      (let [e (caught (profiler/dumps opts))]
        (is (= :invalid-state (:pyprof/error (ex-data e))))
        (is (re-find #"aggregate-stats true" (ex-message e)))))))

(deftest profile-objects-close-exactly-once
  (let [d (profiler/domain "pyprof-test")]
    (is (= "pyprof-test" (.name d)))
    (doseq [^ProfileObject o [(profiler/task d "t") (profiler/frame d "f") (profiler/event "e")
                              (profiler/counter d "c")]]
      (is (not (.isClosed o)))
      (.close o)
      (.close o)
      (is (.isClosed o))
      (is (= :invalid-state (:pyprof/error (ex-data (caught (.pointer o))))))
      (is (re-find #"is closed; fix: create a new one" (ex-message (caught (.pointer o))))))
    (with-open [c (profiler/counter d "bytes")
                t (profiler/task d "work")]
      (profiler/set-counter c 10)
      (profiler/adjust-counter c -3)
      (is (= 7 (profiler/counter-value c)))
      (profiler/with-duration t (+ 1 1))
      (profiler/mark d "here")
      (profiler/mark d "there" :global))
    (is (= :invalid-option (:pyprof/error (ex-data (caught (profiler/mark d "x" :galaxy))))))))

(deftest java-facade-validates-like-clojure
  (let [e (caught (Profiler/setConfig {"profile_symbolc" true}))]
    (is (= "profile_symbolic" (:nearest (ex-data e)))))
  (is (= :invalid-state (:pyprof/error (ex-data (caught (Profiler/setState "go"))))))
  (is (instance? PyprofException (caught (Profiler/setState "go"))))
  (is (= "invalid-state" (.kind ^PyprofException (caught (Profiler/dumps)))))
  (is (instance? MXNetException (caught (Profiler/dump true)))))

(deftest objects-behave-like-pyprof-objects
  (let [d (profiler/domain "pyprof-objects")]
    (is (identical? d (profiler/domain "pyprof-objects")) "one domain per name")
    (with-open [t (profiler/task d "t")
                c (profiler/counter d "c" 3)]
      (profiler/start t)
      (let [e (caught (profiler/start t))]
        (is (= :invalid-state (:pyprof/error (ex-data e))))
        (is (re-find #"^Task 't' is already started; MXNet keeps one start time" (ex-message e))))
      (profiler/stop t)
      (is (re-find #"^Task 't' was not started. fix: start\(\) first" (ex-message (caught (profiler/stop t)))))
      (is (= 3 (profiler/counter-value c)))
      (profiler/increment c)
      (profiler/decrement c 2)
      (is (= 2 (profiler/counter-value c)))
      (let [e (caught (profiler/decrement c 5))]
        (is (= :invalid-state (:pyprof/error (ex-data e))))
        (is (re-find #"would go below zero \(2 -5\)" (ex-message e)))
        (is (= 2 (profiler/counter-value c)) "unchanged after the error"))
      (is (= :invalid-option (:pyprof/error (ex-data (caught (profiler/start c)))))))
    (doseq [bad ["" "a\"b" "back\\slash" (apply str (repeat 128 "x"))]]
      (is (= :invalid-option (:pyprof/error (ex-data (caught (profiler/event bad)))))))
    (is (= :invalid-option (:pyprof/error (ex-data (caught (profiler/task "not-a-domain" "t"))))))
    (testing "with-task: a new task per use, stopped and destroyed even when the body throws"
      (is (= 3 (profiler/with-task d "sum" (+ 1 2))))
      (is (= "boom" (ex-message (caught (profiler/with-task "pyprof-objects" "x" (throw (ex-info "boom" {}))))))))))
