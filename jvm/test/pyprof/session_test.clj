(ns pyprof.session-test
  "Sessions record, so each scenario runs in a child JVM (one raw trace per process)."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.ndarray :as nd]
            [pyprof.profiler :as profiler]
            [pyprof.session :as session]
            [pyprof.test-util :refer [java-child temp-dir]])
  (:import (pyprof.jvm ProfilerSession PyprofException)))

(deftest schedule-matches-pyprof-schedule
  (is (= [:none :none :warmup :record :record-and-save :none :warmup :record :record-and-save :none :none]
         (mapv (session/schedule {:skip-first 1 :wait 1 :warmup 1 :active 2 :repeat 2}) (range 11))))
  (is (= [:record-and-save :record-and-save] (mapv (session/schedule) (range 2))))
  (is (thrown-with-msg? clojure.lang.ExceptionInfo #"invalid schedule active=0: expected an int >= 1"
                        (session/schedule {:active 0}))))

(deftest parse-range-accepts-what-mxnet-appends
  (is (= [{"ph" "M"} {"ph" "B"}] (session/parse-range "{\n  \"traceEvents\": [\n{\"ph\":\"M\"}\n,\n{\"ph\":\"B\"}\n")))
  (is (= [{"ph" "E"}] (session/parse-range ",\n{\"ph\":\"E\"}\n\n\n    ],\n    \"displayTimeUnit\": \"ms\"\n}\n")))
  (is (= [] (session/parse-range "  ,\n ")))
  (is (= [{"a" 1}] (session/parse-range ",{\"a\": 1}\n,\n{\"b\": 2, \"c"))) "a cut-off tail is dropped")

(deftest options-are-checked-before-anything-runs
  (is (= :invalid-config (:pyprof/error (ex-data (try (session/profile {:filename "x.json"}) (catch Exception e e))))))
  (is (= :invalid-option (:pyprof/error (ex-data (try (session/profile {:schedule (session/schedule {:active 1 :repeat 2})
                                                                         :path "fixed.json"})
                                                      (catch Exception e e)))))))

(defn- load-trace [path]
  (with-open [r (io/reader path)] (json/read r)))

(defn child-scenario
  "Run in a child JVM: windows by schedule, ownership, a failed start, the Java facade."
  [dir]
  (let [d (profiler/domain "sess")
        c (profiler/counter d "items")
        ready (atom [])
        work (fn [] (with-open [a (nd/random-uniform -1 1 [32 32])] (nd/wait-to-read a))
               (profiler/increment c))
        windows (session/with-session [s {:schedule (session/schedule {:wait 1 :warmup 1 :active 2 :repeat 2})
                                          :path (str dir "/w_{window}.json")
                                          :profile-imperative true :aggregate-stats true
                                          :on-trace-ready #(swap! ready conj (:index %))}]
                  (let [e (try (profiler/profiler-set-state :stop) nil (catch Exception e e))]
                    (prn [:owned (:pyprof/error (ex-data e))]))
                  (dotimes [_ 9] (profiler/with-task d "step" (work)) (session/step! s))
                  (session/windows s))
        failed (try (session/start! (session/profile {:schedule (fn [_] :bogus) :path (str dir "/bad.json")}))
                    nil (catch Exception e (:pyprof/error (ex-data e))))
        java (ProfilerSession. {"path" (str dir "/j_{window}.json") "profile_imperative" true})]
    (prn [:windows (mapv #(select-keys % [:index :first-step :last-step]) windows) @ready])
    (prn [:failed-start failed (:session (profiler/state))])
    (.start java)
    (work)
    (prn [:java (count (.dump java)) (count (.dump java)) (count (.stop java)) (boolean (seq (.stats java)))])
    (.close java)
    (prn [:java-second-start (try (.start java) nil (catch PyprofException e (.kind e)))])))

(deftest windows-in-a-child-jvm
  (let [dir (str (temp-dir))
        {:keys [exit out err]} (java-child ["-e" (str "(require 'pyprof.session-test)"
                                                       "(pyprof.session-test/child-scenario \"" dir "\")")])
        lines (mapv read-string (str/split-lines out))]
    (is (= 0 exit) err)
    (is (= [[:owned :invalid-state]
            [:windows [{:index 0 :first-step 2 :last-step 3} {:index 1 :first-step 6 :last-step 7}] [0 1]]
            [:failed-start :invalid-option nil]
            [:java 1 1 1 true]
            [:java-second-start "invalid-state"]]
           lines))
    (testing "every window is a valid trace holding its own tasks, metadata first"
      (doseq [i [0 1]]
        (let [evs (get (load-trace (str dir "/w_" i ".json")) "traceEvents")]
          (is (= "M" (get (first evs) "ph")))
          (is (= 2 (count (filter #(and (= "step" (% "name")) (= "b" (% "ph"))) evs))))
          (is (some #(= "_random_uniform" (% "name")) evs)))))
    (is (seq (get (load-trace (str dir "/j_0.json")) "traceEvents")))
    (is (not (.exists (io/file dir "w_0.json.partial"))))
    (is (empty? (filter #(str/starts-with? (.getName ^java.io.File %) ".pyprof-raw") (.listFiles (io/file dir))))
        "the raw trace is finished and deleted at exit")))

(defn child-exit-with-open-session
  "Run in a child JVM: a session left open when the JVM exits."
  [dir]
  (let [s (session/start! (session/profile {:path (str dir "/open_{window}.json")
                                            :profile-imperative true}))]
    (with-open [a (nd/random-uniform -1 1 [16 16])] (nd/wait-to-read a))
    (prn (some? s))))

(deftest an-open-session-is-saved-at-jvm-exit
  (let [dir (str (temp-dir))
        {:keys [exit err]} (java-child ["-e" (str "(require 'pyprof.session-test)"
                                                   "(pyprof.session-test/child-exit-with-open-session \""
                                                   dir "\")")])]
    (is (= 0 exit) err)
    (let [evs (get (load-trace (str dir "/open_0.json")) "traceEvents")]
      (is (some #(= "_random_uniform" (% "name")) evs) "the window recorded before exit is written"))
    (is (not (.exists (io/file dir "open_0.json.partial"))))))
