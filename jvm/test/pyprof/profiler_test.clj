(ns pyprof.profiler-test
  "Profiler calls that never start a trace session in this JVM (MXNet allows one per process);
  the full run -> dump session is tested in a child JVM by pyprof.matmul-test."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is are testing]]
            [pyprof.native :as native :refer [mx]]
            [pyprof.profiler :as profiler]
            [pyprof.test-util :refer [java-child temp-dir]])
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

(deftest dump-before-run-is-a-state-error
  (testing "as Python's StateError; MXNet's own error is the cause"
    (let [e (caught (profiler/dump-profile))
          cause (ex-cause e)]
      (is (= :invalid-state (:pyprof/error (ex-data e))))
      (is (= (str "dump() before the profiler ran: nothing was recorded. fix: (profiler-set-config"
                  " {...}) and (profiler-set-state :run) first")
             (ex-message e)))
      (is (= "MXDumpProcessProfile" (:fn (ex-data e))))
      (is (re-find #"Profiler hasn't been run" (:mxnet-error (ex-data e))))
      (is (instance? MXNetException cause))
      (is (= "MXDumpProcessProfile" (.function ^MXNetException cause)))))
  (testing "the Java facade says it in Java"
    (let [e (caught (Profiler/dump true))]
      (is (instance? PyprofException e))
      (is (not (instance? MXNetException e)))
      (is (= "invalid-state" (.kind ^PyprofException e)))
      (is (= (str "dump() before the profiler ran: nothing was recorded. fix:"
                  " Profiler.setConfig(...) and Profiler.setState(\"run\") first")
             (ex-message e))))))

(deftest a-genuine-native-error
  (testing "an operator name MXNet does not know fails in C (NNGetOpHandle), unvalidated"
    (let [e (caught (native/op-handle "pyprof_no_such_op"))]
      (is (instance? MXNetException e))
      (is (= {:pyprof/error :mxnet :fn "NNGetOpHandle"} (select-keys (ex-data e) [:pyprof/error :fn])))
      (is (re-find #"Operator pyprof_no_such_op is not registered" (:mxnet-error (ex-data e))))
      (is (str/starts-with? (ex-message e) "NNGetOpHandle failed: ")))))

(deftest server-process-is-rejected-before-c
  (let [before (profiler/current-config)]
    (doseq [opts [{:profile-process :server} {"profile_process" "server" :profile-all true}]]
      (let [e (caught (profiler/profiler-set-config opts))]
        (is (= {:pyprof/error :invalid-state :key "profile_process" :value "server"}
               (select-keys (ex-data e) [:pyprof/error :key :value])))
        (is (str/starts-with? (ex-message e) "profile_process='server' needs a distributed kvstore: "))
        (is (re-find #"The JVM holds no kvstore handle" (ex-message e)))
        (is (re-find #"fix: profile the servers from that Python worker process with pyprof\.dist\.server_profiling\(kv, filename=\.\.\.\); leave :profile-process out"
                     (ex-message e)))
        (is (not (re-find #"KVStoreHandle" (ex-message e))))))
    (is (= before (profiler/current-config)) "nothing reached MXNet")
    (let [e (caught (Profiler/setConfig {"profile_process" "server"}))]
      (is (= "invalid-state" (.kind ^PyprofException e)))
      (is (re-find #"leave \"profile_process\" out \(or \"worker\"\) here$" (ex-message e))))
    (testing "the worker process is still accepted by validation"
      (is (= {"profile_process" "worker"} (pyprof.config/validate {:profile-process :worker}))))))

(deftest java-messages-name-java-calls
  (testing "wrap puts :java-fix in place of :fix, keeping the data"
    (let [e (PyprofException/wrap (ex-info "no. fix: (a b) now" {:pyprof/error :invalid-state
                                                                 :fix "(a b) now" :java-fix "a.b() now"}))]
      (is (= "no. fix: a.b() now" (ex-message e)))
      (is (= "(a b) now" (:fix (ex-data e))))
      (is (= "invalid-state" (.kind ^PyprofException e)))))
  (testing "without :java-fix, or when the message does not hold :fix, the message stays"
    (is (= "x. fix: y" (ex-message (PyprofException/wrap (ex-info "x. fix: y" {:pyprof/error :invalid-state
                                                                              :fix "y"})))))
    (is (= "x" (ex-message (PyprofException/wrap (ex-info "x" {:pyprof/error :invalid-state
                                                              :fix "y" :java-fix "z"}))))))
  (testing "the facade's own errors"
    (is (re-find #"fix: Profiler\.setConfig\(Map\.of\(\"aggregate_stats\", true, \.\.\.\)\)"
                 (ex-message (caught (Profiler/dumps)))))))

(deftest finished-trace-messages-in-a-child-jvm
  (let [out (str (temp-dir) "/t.json")
        code (str "(require 'pyprof.profiler)"
                  "(defmacro msg [& body] `(try ~@body :no-error (catch Exception e# (ex-message e#))))"
                  "(pyprof.profiler/profiler-set-config {:filename \"" out "\"})"
                  "(pyprof.profiler/profiler-set-state :run)"
                  "(pyprof.profiler/profiler-set-state :stop)"
                  "(pyprof.jvm.Profiler/dump true)"
                  "(prn (msg (pyprof.jvm.Profiler/dump true)))"
                  "(prn (msg (pyprof.profiler/dump-profile true)))"
                  "(prn (msg (pyprof.profiler/profiler-set-config {:filename \"" out "\"})))"
                  "(prn (msg (pyprof.jvm.Profiler/setConfig {\"filename\" \"" out "\"})))"
                  "(prn (msg (pyprof.profiler/profiler-set-state :run)))"
                  "(prn (msg (pyprof.jvm.Profiler/setState \"run\")))")
        {:keys [exit] :as r} (java-child ["-e" code])
        [java-dump clj-dump clj-config java-config clj-run java-run]
        (map read-string (filter #(str/starts-with? % "\"") (str/split-lines (:out r))))]
    (is (= 0 exit) (:err r))
    (is (= "the finished trace was already written; a second dump would corrupt it. fix: Profiler.dump(false) for intermediate dumps"
           java-dump))
    (is (= "the finished trace was already written; a second dump would corrupt it. fix: (dump-profile false) for intermediate dumps"
           clj-dump))
    (let [head (str "the profiler already wrote its finished trace (dump(finished=True)); MXNet"
                    " cannot start a second trace session in one process. fix: ")]
      (is (str/starts-with? clj-config head))
      (is (str/includes? clj-config "use pyprof.session,"))
      (is (str/starts-with? java-config head))
      (is (str/includes? java-config "use pyprof.jvm.ProfilerSession,"))
      (is (str/includes? java-config (pr-str out))))
    (is (str/starts-with? clj-run "the profiler already wrote its finished trace; MXNet cannot record a second session in one process. fix: "))
    (is (str/ends-with? java-run "or use pyprof.jvm.ProfilerSession"))))

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
  (is (= "invalid-state" (.kind ^PyprofException (caught (Profiler/dump true))))))

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
