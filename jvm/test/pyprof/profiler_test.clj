(ns pyprof.profiler-test
  "Profiler calls that never start a trace session in this JVM (MXNet allows one per process);
  the full run -> dump session is tested in a child JVM by pyprof.example.matmul-test
  (examples/matmul)."
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
  (are [state shown] (let [e (caught (profiler/profiler-set-state state))]
                       (and (= {:pyprof/error :invalid-state :pyprof/code "state.invalid"
                                :state state :choices ["stop" "run"]}
                               (select-keys (ex-data e) [:pyprof/error :pyprof/code :state :choices]))
                            (= (str "invalid profiler state " shown ": expected one of \"stop\","
                                    " \"run\". fix: pass one of \"stop\", \"run\"")
                               (ex-message e))))
    "start" "\"start\""
    :running "\"running\""
    "RUN" "\"RUN\""
    1 "1"
    true "true"
    nil "nil"))

(deftest dump-before-run-is-a-state-error
  (testing "as Python's StateError; MXNet's own error is the cause"
    (let [e (caught (profiler/dump-profile))
          cause (ex-cause e)]
      (is (= :invalid-state (:pyprof/error (ex-data e))))
      (is (= "state.dump_before_run" (:pyprof/code (ex-data e))))
      (is (= (str "dump before the profiler ran: nothing was recorded. fix: (profiler-set-config"
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
      (is (= "state.dump_before_run" (.code ^PyprofException e)))
      (is (instance? MXNetException (ex-cause e)) "MXNet's error stays the cause")
      (is (= (str "dump before the profiler ran: nothing was recorded. fix:"
                  " Profiler.setConfig(...) and Profiler.setState(\"run\") first")
             (ex-message e))))))

(deftest a-genuine-native-error
  (testing "an operator name MXNet does not know fails in C (NNGetOpHandle), unvalidated"
    (let [e (caught (native/out-pointer #(mx NNGetOpHandle "pyprof_no_such_op" %)))]
      (is (instance? MXNetException e))
      (is (= {:pyprof/error :mxnet :fn "NNGetOpHandle"} (select-keys (ex-data e) [:pyprof/error :fn])))
      (is (re-find #"Operator pyprof_no_such_op is not registered" (:mxnet-error (ex-data e))))
      (is (str/starts-with? (ex-message e) "NNGetOpHandle failed: ")))))

(deftest server-process-is-rejected-before-c
  (let [before (profiler/current-config)]
    (doseq [opts [{:profile-process :server} {"profile_process" "server" :profile-all true}]]
      (let [e (caught (profiler/profiler-set-config opts))]
        (is (= {:pyprof/error :invalid-state :pyprof/code "process.server_in_jvm"
                :key "profile_process" :value "server"}
               (select-keys (ex-data e) [:pyprof/error :pyprof/code :key :value])))
        (is (= (str "profile_process \"server\" needs a distributed kvstore: the JVM holds no kvstore"
                    " handle and profiles only its own (worker) process. fix: profile the servers"
                    " from the Python worker process with pyprof.dist.server_profiling(kv,"
                    " filename=...) in that Python worker; leave profile_process out (or \"worker\")"
                    " here")
               (ex-message e)))))
    (is (= before (profiler/current-config)) "nothing reached MXNet")
    (let [e (caught (Profiler/setConfig {"profile_process" "server"}))]
      (is (= "invalid-state" (.kind ^PyprofException e)))
      (is (re-find #"leave profile_process out \(or \"worker\"\) here$" (ex-message e))))
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
                 (ex-message (caught (Profiler/dumps))))))
  (testing "a catalogue error through the facade names Java calls, with the same data"
    (let [e (caught (Profiler/setConfig {"profile_process" "server"}))
          c (caught (profiler/profiler-set-config {"profile_process" "server"}))]
      (is (= (ex-data c) (ex-data e)))
      (is (str/ends-with? (ex-message c) (str "fix: " (:fix (ex-data c)))))
      (is (str/ends-with? (ex-message e) (str "fix: " (:java-fix (ex-data c)))))))
  (testing "null and nonsense from Java are catalogue errors, not NullPointerExceptions"
    (is (= "config.not_a_map" (.code ^PyprofException (caught (Profiler/setConfig nil)))))
    (is (= "state.invalid" (.code ^PyprofException (caught (Profiler/setState nil)))))
    (is (= "dumps.format" (.code ^PyprofException (caught (Profiler/dumps false nil "total" false)))))
    (is (= "dumps.sort_by" (.code ^PyprofException (caught (Profiler/dumps false "json" nil false)))))
    (is (= "object.bad_name" (.code ^PyprofException (caught (Profiler/event nil)))))
    (is (= "marker.scope" (.code ^PyprofException (caught (Profiler/mark (Profiler/domain "pyprof-java") "m" nil)))))
    (let [root (str (temp-dir))]
      (is (= ["root.null" "the session's options is null. fix: pass a map of options (Map.of() for the defaults)"]
             ((juxt #(.code ^PyprofException %) ex-message) (caught (pyprof.jvm.ProfilerSession. nil root)))))
      (is (= "root.null" (.code ^PyprofException (caught (pyprof.jvm.ProfilerSession. {} nil)))))
      (is (= "root.null" (.code ^PyprofException (caught (.dump (pyprof.jvm.ProfilerSession. {} root) nil))))))))

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
    (is (= (str "the finished trace (" (pr-str out) ") was already written; a second finished dump"
                " would corrupt it. fix: Profiler.dump(false) for intermediate dumps")
           java-dump))
    (is (= (str "the finished trace (" (pr-str out) ") was already written; a second finished dump"
                " would corrupt it. fix: (dump-profile false) for intermediate dumps")
           clj-dump))
    (let [fix (fn [what api] (str " fix: run " what " in a child JVM: nothing records again in this"
                                  " process (a process that records only through " api ", whose"
                                  " windows share one trace session, never finishes it)"))
          head (str "the profiler already wrote its finished trace (" (pr-str out) "); MXNet"
                    " cannot start a second trace session in one process.")]
      (is (= (str head (fix "each session" "pyprof.session")) clj-config))
      (is (= (str head (fix "each session" "pyprof.jvm.ProfilerSession")) java-config))
      (let [head (str "the profiler already wrote its finished trace (" (pr-str out) "); MXNet"
                      " cannot record a second session in one process.")]
        (is (= (str head (fix "the next session" "pyprof.session")) clj-run))
        (is (= (str head (fix "the next session" "pyprof.jvm.ProfilerSession")) java-run))))))

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
  (is (= {:pyprof/code "dumps.sort_by" :value :median :choices ["total" "avg" "min" "max" "count"]}
         (select-keys (ex-data (caught (profiler/dumps {:sort-by :median})))
                      [:pyprof/code :value :choices])))
  (is (= (str "invalid format \"xml\": expected one of \"table\", \"json\". fix: pass one of"
              " \"table\", \"json\"")
         (ex-message (caught (profiler/dumps {:format "xml"})))))
  (is (= "invalid ascending 1: expected true or false. fix: pass true or false"
         (ex-message (caught (profiler/dumps {:ascending 1})))))
  (is (= (str "unknown dumps option :sortby: did you mean :sort-by? dumps takes :reset, :format,"
              " :sort-by, :ascending. fix: use :sort-by")
         (ex-message (caught (profiler/dumps {:sortby :avg}))))
      "a misspelt option is refused, as every other options map of the API refuses one")
  (is (= {:pyprof/error :invalid-option :pyprof/code "state.dump_finished_arg" :value 2}
         (select-keys (ex-data (caught (profiler/dump-profile 2))) [:pyprof/error :pyprof/code :value])))
  (is (= {:reset false :format :table :sort-by :total :ascending false}
         profiler/default-dumps-options)))

(deftest dumps-without-aggregate-stats
  (testing "as pyprof.profiler.dumps: an error that names the fix, not an empty string"
    (doseq [opts [{} {:format :json :sort-by "count" :ascending true}]]
      (let [e (caught (profiler/dumps opts))]
        (is (= :invalid-state (:pyprof/error (ex-data e))))
        ;; which one depends on what earlier tests in this JVM configured
        (is (#{"dumps.empty" "dumps.no_aggregate_stats" "dumps.failed"} (:pyprof/code (ex-data e))))
        (is (re-find #"fix: \(profiler-set-config \{:aggregate-stats true \.\.\.\}\)"
                     (ex-message e)))))))

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
      (let [e (caught (if (= "Counter" (.display (.kind o)))
                        (profiler/set-counter o 1)
                        (profiler/start o)))]
        (is (= {:pyprof/error :invalid-state :pyprof/code "object.closed"
                :what (.display (.kind o)) :name (.name o)}
               (select-keys (ex-data e) [:pyprof/error :pyprof/code :what :name])))
        (is (= (str (.display (.kind o)) " " (pr-str (.name o)) " is closed. fix: create a new one")
               (ex-message e)))))
    (with-open [c (profiler/counter d "bytes")
                t (profiler/task d "work")]
      (profiler/set-counter c 10)
      (profiler/increment c -3)
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
        (is (= {:pyprof/error :invalid-state :pyprof/code "object.already_started"
                :what "Task" :name "t"}
               (select-keys (ex-data e) [:pyprof/error :pyprof/code :what :name])))
        (is (= (str "Task \"t\" is already started; MXNet keeps one start time per object."
                    " fix: (profiler/stop ...) it first, or use one Task per concurrent use")
               (ex-message e)))
        (is (= (str "Task \"t\" is already started; MXNet keeps one start time per object."
                    " fix: stop() it first, or use one Task per concurrent use")
               (ex-message (caught (.start t))))
            "the Java method names Java calls"))
      (profiler/stop t)
      (is (= "Task \"t\" was not started. fix: (profiler/start ...) first"
             (ex-message (caught (profiler/stop t)))))
      (is (= "Task \"t\" was not started. fix: start() first" (ex-message (caught (.stop t)))))
      (is (= 3 (profiler/counter-value c)))
      (profiler/increment c)
      (profiler/decrement c 2)
      (is (= 2 (profiler/counter-value c)))
      (let [e (caught (profiler/decrement c 5))]
        (is (= {:pyprof/error :invalid-state :pyprof/code "counter.below_zero"
                :name "c" :value 2 :delta "-5"}
               (select-keys (ex-data e) [:pyprof/error :pyprof/code :name :value :delta])))
        (is (= (str "Counter \"c\" would go below zero (2 -5); MXNet stores it as uint64 and would"
                    " wrap to 18446744073709551615. fix: decrement by at most the current value, or"
                    " (profiler/set-counter ...) first")
               (ex-message e)))
        (is (= 2 (profiler/counter-value c)) "unchanged after the error"))
      (let [e (caught (profiler/start c))]
        (is (= {:pyprof/error :invalid-option :pyprof/code "object.wrong_kind"}
               (select-keys (ex-data e) [:pyprof/error :pyprof/code])))
        (is (= (str "start() needs a Task, Frame or Event, not Counter \"c\". fix: call it on a"
                    " Task, Frame or Event")
               (ex-message e))))
      (is (= "object.wrong_kind" (:pyprof/code (ex-data (caught (profiler/increment t)))))))
    (are [bad code fields] (let [e (caught (profiler/event bad))]
                             (and (= :invalid-option (:pyprof/error (ex-data e)))
                                  (= code (:pyprof/code (ex-data e)))
                                  (= fields (select-keys (ex-data e) (keys fields)))))
      "" "object.bad_name" {:what "Event" :name ""}
      nil "object.bad_name" {:what "Event" :name nil}
      :kw "object.bad_name" {:what "Event" :name :kw}
      "a\"b" "object.name_bad_char" {:name "a\"b" :char "\""}
      "back\\slash" "object.name_bad_char" {:char "\\"}
      "tab\there" "object.name_bad_char" {:char "\t"}
      "nul\u0000" "object.name_bad_char" {:char "\u0000"}
      (apply str (repeat 128 "x")) "object.name_too_long" {:shown (apply str (repeat 40 "x"))
                                                            :bytes 128 :max 127}
      (apply str (repeat 32 "\ud83d\ude00")) "object.name_too_long"
      {:shown (apply str (repeat 32 "\ud83d\ude00")) :bytes 128 :max 127}
      (apply str (repeat 64 "\u00e9")) "object.name_too_long" {:bytes 128})
    (testing "the edges: 127 bytes, non-ASCII, and what Python shows of a long name (40 code points)"
      (with-open [_ (profiler/event (apply str (repeat 127 "x")))
                  _ (profiler/event (apply str (repeat 63 "\u00e9")))
                  _ (profiler/event (str (apply str (repeat 31 "\ud83d\ude00")) "abc"))]
        (is (= (apply str (repeat 40 "\ud83d\ude00"))
               (:shown (ex-data (caught (profiler/event (apply str (repeat 50 "\ud83d\ude00"))))))))))
    (let [e (caught (profiler/task "not-a-domain" "t"))]
      (is (= {:pyprof/error :invalid-option :pyprof/code "object.needs_domain"
              :what "Task" :value "not-a-domain"}
             (select-keys (ex-data e) [:pyprof/error :pyprof/code :what :value])))
      (is (= (str "Task needs a pyprof domain, got \"not-a-domain\". fix: create one with"
                  " (profiler/domain \"my-domain\") and pass it first")
             (ex-message e))))
    (let [e (caught (profiler/mark d "m" :galaxy))]
      (is (= {:pyprof/code "marker.scope" :scope :galaxy :choices profiler/marker-scopes}
             (select-keys (ex-data e) [:pyprof/code :scope :choices]))))
    (testing "with-task: a new task per use, stopped and destroyed even when the body throws"
      (is (= 3 (profiler/with-task d "sum" (+ 1 2))))
      (is (= "boom" (ex-message (caught (profiler/with-task "pyprof-objects" "x" (throw (ex-info "boom" {}))))))))))

(deftest counters-hold-uint64-as-python
  (let [d (profiler/domain "pyprof-counters")
        fields #(select-keys (ex-data %) [:pyprof/code :name :value :delta :what])]
    (with-open [c (profiler/counter d "big" 18446744073709551615N)]
      (is (= 18446744073709551615N (profiler/counter-value c)))
      (is (= {:pyprof/code "counter.above_max" :name "big" :value 18446744073709551615N :delta "+1"}
             (fields (caught (profiler/increment c)))))
      (is (= "Counter \"big\" would exceed 18446744073709551615 (2^64-1) (18446744073709551615 +1). fix: (profiler/set-counter ...) to a smaller value first"
             (ex-message (caught (profiler/increment c)))))
      (is (= {:pyprof/code "counter.step_range" :name "big" :value 18446744073709551615N
              :delta "-18446744073709551615"}
             (fields (caught (profiler/decrement c 18446744073709551615N))))
          "the result fits, the step does not fit MXNet's int64")
      (is (= 18446744073709551615N (profiler/counter-value c)) "unchanged")
      (profiler/increment c Long/MIN_VALUE)
      (is (= 9223372036854775807 (profiler/counter-value c)) "an int64 step of -2^63")
      (profiler/set-counter c 0)
      (is (= {:pyprof/code "counter.step_range" :delta "+9223372036854775808"}
             (select-keys (fields (caught (profiler/decrement c Long/MIN_VALUE))) [:pyprof/code :delta])))
      (is (= "counter.above_max" (:pyprof/code (ex-data (caught (profiler/increment c 18446744073709551616N))))))
      (is (= "counter.below_zero" (:pyprof/code (ex-data (caught (profiler/decrement c 18446744073709551616N))))))
      (are [v code] (= code (:pyprof/code (ex-data (caught (profiler/set-counter c v)))))
        -1 "counter.out_of_range"
        18446744073709551616N "counter.out_of_range"
        1.5 "counter.not_int"
        true "counter.not_int"
        nil "counter.not_int")
      (is (= {:pyprof/code "counter.out_of_range" :name "big" :value -1} (fields (caught (profiler/set-counter c -1)))))
      (is (= "Counter \"big\" cannot be set to -1: MXNet counters hold 0 ... 18446744073709551615 (2^64-1). fix: keep the value in that range"
             (ex-message (caught (profiler/set-counter c -1)))))
      (is (= {:pyprof/code "counter.not_int" :name "big" :what "delta" :value 0.5}
             (fields (caught (profiler/increment c 0.5)))))
      (is (= "Counter \"big\": delta must be an integer, got 0.5. fix: pass an integer"
             (ex-message (caught (profiler/decrement c 0.5)))))
      (is (= 0 (profiler/counter-value c)))
      (testing "from Java: setValue is signed, setUnsignedValue takes the whole range"
        (is (= "counter.out_of_range" (.code ^PyprofException (caught (.setValue c -1)))))
        (.setUnsignedValue c -1)
        (is (= 18446744073709551615N (bigint (.value c))) "exact, never -1")
        (is (= 18446744073709551615N (profiler/counter-value c)))
        (is (= "counter.above_max" (.code ^PyprofException (caught (.decrement c Long/MIN_VALUE)))))
        (is (= "Counter \"big\" would exceed 18446744073709551615 (2^64-1) (18446744073709551615 +1). fix: setValue() to a smaller value first"
               (ex-message (caught (.increment c 1)))))))
    (testing "a bad initial value: an error, and no handle left open"
      (is (= "counter.not_int" (:pyprof/code (ex-data (caught (profiler/counter d "c" 1.5))))))
      (is (= "counter.out_of_range" (:pyprof/code (ex-data (caught (profiler/counter d "c" -1)))))))))

(deftest profile-process-as-python-takes-it
  (testing "only the worker: an unknown process is process.invalid, the server process.server_in_jvm"
    (are [call] (= {:pyprof/error :invalid-state :pyprof/code "process.invalid" :value :both
                    :choices ["worker" "server"]}
                   (select-keys (ex-data (caught (call :both)))
                                [:pyprof/error :pyprof/code :value :choices]))
      #(profiler/profiler-set-state :run %)
      #(profiler/dump-profile true %)
      profiler/pause
      profiler/resume)
    (is (= (str "invalid profile_process \"both\": expected one of \"worker\", \"server\". fix: pass"
                " one of \"worker\", \"server\"")
           (ex-message (caught (profiler/pause "both")))))
    (are [call] (= "process.server_in_jvm" (:pyprof/code (ex-data (caught (call "server")))))
      #(profiler/profiler-set-state :stop %)
      #(profiler/dump-profile false %)
      profiler/pause
      profiler/resume)
    (is (= :stop-is-fine (do (profiler/profiler-set-state :stop :worker) :stop-is-fine)))))

(deftest dump-after-dumps-finished-the-trace-in-a-child-jvm
  (testing "as pyprof.profiler.dump: with continuous_dump off, MXNet's dumps finishes the file
           (pyprof's dumps refuses to, dumps.finishes_trace; a call straight to MXNet does)"
    (let [out (str (temp-dir) "/t.json")
          code (str "(require 'pyprof.profiler '[pyprof.native :refer [mx]])"
                    "(do (pyprof.profiler/profiler-set-config {:filename \"" out "\""
                    " :aggregate-stats true :continuous-dump false})"
                    " (pyprof.profiler/profiler-set-state :run)"
                    " (pyprof.profiler/profiler-set-state :stop)"
                    " (prn (try (pyprof.profiler/dumps) :read (catch Exception e (:pyprof/code (ex-data e)))))"
                    " (mx MXAggregateProfileStatsPrintEx (com.sun.jna.ptr.PointerByReference.) (int 0) (int 0)"
                    " (int 0) (int 0))"
                    " (prn (try (pyprof.profiler/dump-profile true) :no-error"
                    " (catch Exception e [(ex-message e) (select-keys (ex-data e) [:pyprof/code :trace])])))"
                    " (prn (:finished (pyprof.profiler/state))))")
          {:keys [exit] :as r} (java-child ["-e" code])
          [refused [message data] finished] (map read-string (str/split-lines (:out r)))]
      (is (= 0 exit) (:err r))
      (is (= "dumps.finishes_trace" refused))
      (is (= {:pyprof/code "state.trace_finished_by_dumps" :trace out} data))
      (is (= (str "MXNet already finished the trace file (" (pr-str out) ") when dumps read the"
                  " statistics with continuous_dump off. fix: dump before dumps, or configure"
                  " continuous_dump on")
             message))
      (is (true? finished)))))
