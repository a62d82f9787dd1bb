(ns pyprof.tracker-test
  "The tracker of a JVM on its own (pyprof.jvm.LocalTracker), and that the profiler layer reads
  and writes whichever tracker is installed (pyprof.jvm.Tracker/use), as the JPype bridge
  installs Python's. No trace session starts here: a refused call is refused before C."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.profiler :as profiler]
            [pyprof.tracker :as tracker])
  (:import (java.util.concurrent TimeUnit TimeoutException)
           (pyprof.jvm LocalTracker Tracker)))

(def ^:private fields
  ["config" "running" "ever_ran" "paused" "finished" "session" "internal" "repair_on_finish"
   "kept_parts" "steady"])

(deftest fields-and-start-values
  (is (= fields (vec Tracker/FIELDS)) "the names of Python's pyprof.process.tracker.Tracker.FIELDS")
  (is (= {"config" nil "running" false "ever_ran" false "paused" false "finished" false
          "session" nil "internal" nil "repair_on_finish" false "kept_parts" [] "steady" nil}
         (into {} (.read (LocalTracker. nil))))))

(deftest writes-change-the-named-fields-and-reads-are-snapshots
  (let [t (LocalTracker. {"running" true})
        before (.read t)]
    (.write t {"session" "s" "kept_parts" ["p0"]})
    (is (= [true "s" ["p0"] false] (mapv #(get (.read t) %) ["running" "session" "kept_parts" "paused"])))
    (is (= [true nil] [(get before "running") (get before "session")]) "an earlier read is unchanged")
    (let [e (try (.write t {"runing" true}) nil (catch IllegalArgumentException e e))]
      (is (some? e))
      (is (str/includes? (ex-message e) "no tracker field runing"))
      (is (str/includes? (ex-message e) "fix: ")))
    (is (nil? (get (.read t) "runing")) "nothing of a refused write is written")))

(deftest the-lock-is-reentrant-and-keeps-other-threads-out
  (let [t (LocalTracker. nil)]
    (.lock t)
    (.lock t)                           ; reentrant
    (let [other (future (.lock t) (.unlock t) :got-it)]
      (is (thrown? TimeoutException (.get ^java.util.concurrent.Future other 200 TimeUnit/MILLISECONDS)))
      (.unlock t)
      (is (thrown? TimeoutException (.get ^java.util.concurrent.Future other 200 TimeUnit/MILLISECONDS))
          "held once more")
      (.unlock t)
      (is (= :got-it (deref other 5000 :timeout))))))

(deftest owner-is-the-thread
  (let [t (LocalTracker. nil)]
    (is (= (.owner t) (.owner t)))
    (is (not= (.owner t) @(future (.owner t))))
    (is (= (.getId (Thread/currentThread)) (.owner t)))))

(defn- recording-tracker
  "A Tracker over the atom `fields` (snake_case keys) that logs each call in `calls`, as the
  bridge's proxy forwards every call to Python's tracker."
  [fields calls owner-id]
  (let [lock (java.util.concurrent.locks.ReentrantLock.)]
    (reify Tracker
      (read [_] (swap! calls conj :read) (java.util.HashMap. ^java.util.Map @fields))
      (write [_ changes] (swap! calls conj [:write (into {} changes)]) (swap! fields merge changes))
      (lock [_] (swap! calls conj :lock) (.lock lock))
      (unlock [_] (swap! calls conj :unlock) (.unlock lock))
      (owner [_] owner-id))))

(deftest the-profiler-layer-uses-the-installed-tracker
  (let [fields (atom (into {} (.read (LocalTracker. nil))))
        calls (atom [])]
    (try
      (Tracker/use (recording-tracker fields calls 42))
      (swap! fields assoc "running" true "ever_ran" true "paused" true
             "config" {"filename" "a.json"})
      (testing "reads"
        (is (= {:running true :paused true :finished false :ever-ran true :session nil}
               (profiler/state)))
        (is (= {"filename" "a.json"} (profiler/current-config))))
      (testing "writes, under the lock"
        (reset! calls [])
        (tracker/put! :session "jvm-session" :repair-on-finish true)
        (is (= [:lock :read [:write {"session" "jvm-session" "repair_on_finish" true}] :unlock]
               @calls) "only the changed fields are written")
        (is (= "jvm-session" (get @fields "session"))))
      (testing "the session owner check asks the tracker who the caller is"
        (swap! fields assoc "internal" 41)     ; another thread makes the session's calls
        (let [e (try (profiler/profiler-set-state :run) nil (catch Exception e e))]
          (is (= "state.session_owns" (:pyprof/code (ex-data e))))
          (is (= "jvm-session" (:session (ex-data e)))))
        (reset! calls [])
        (profiler/-as-owner "jvm-session"
          (is (= 42 (get @fields "internal")) "the owner is the tracker's identity of this thread"))
        (is (= 41 (get @fields "internal")) "restored after")
        (is (= :lock (first @calls)))
        (is (= :unlock (last @calls))))
      (finally
        (Tracker/use nil)))
    (is (instance? LocalTracker (Tracker/current)) "nil restores the local tracker")
    (is (not= "jvm-session" (:session (profiler/state)))
        "whose fields the installed tracker's writes never touched")))

(deftest snapshots-are-clojure-data
  (let [t (LocalTracker. {"config" (java.util.HashMap. {"filename" "x.json"})
                          "kept_parts" (java.util.ArrayList. ["a" "b"])
                          "running" (Boolean. true)})]
    (try
      (Tracker/use t)
      (let [s (tracker/snapshot)]
        (is (map? (:config s)))
        (is (vector? (:kept-parts s)))
        (is (identical? true (:running s)) "a Boolean object is the canonical true"))
      (finally (Tracker/use nil)))))
