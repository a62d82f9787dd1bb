(ns pyprof.stress-test
  "8 threads mix NDArray work and counter updates while another thread switches profiling on and
  off (sessions, pause/resume) and dumps windows; arrays are freed by yet another thread. Runs in
  a child JVM: no abort, and every window is a valid trace with events."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.example.ndarray :as nd]
            [pyprof.profiler :as profiler]
            [pyprof.session :as session]
            [pyprof.test-util :refer [java-child temp-dir]])
  (:import (java.util.concurrent LinkedBlockingQueue TimeUnit)
           (pyprof.jvm.example NDArray)))

(defn child-stress
  "Child JVM body; prints one EDN summary line."
  [dir seconds]
  (let [deadline (+ (System/nanoTime) (* seconds 1000000000))
        hard-stop (+ deadline 60000000000)
        toggling (promise)              ; delivered once the toggler has ended
        running? #(not (realized? toggling))
        d (profiler/domain "stress")
        shared (profiler/counter d "shared")
        garbage (LinkedBlockingQueue.)
        ops (atom 0)
        errors (atom [])
        workers (for [i (range 8)]
                  (future
                    (try
                      (with-open [own (profiler/counter d (str "worker-" i))]
                        (while (running?)
                          (let [a (nd/random-uniform -1 1 [64 64])]
                            (nd/wait-to-read a)
                            (.put garbage a))       ; freed by the closer thread
                          (profiler/increment own 2)
                          (profiler/decrement own)
                          (profiler/increment shared)
                          (swap! ops inc)
                          ;; Paced: unpaced pushers starve the window's MXNDArrayWaitAll
                          ;; (stops of 6 to 19 s seen, 88 s for a 10 s run); a state switch
                          ;; while threads are inside C calls is as likely either way
                          (Thread/sleep 1)))
                      (catch Throwable t (swap! errors conj (str t))))))
        closer (future (loop [] (when-let [^NDArray a (.poll garbage 200 TimeUnit/MILLISECONDS)]
                                  (.close a))
                         (when (or (running?) (not (.isEmpty garbage))) (recur))))
        windows (atom [])
        toggler (future
                  (try
                    ;; At least 3 windows even when a loaded machine makes each one slow
                    ;; (8 busy threads lengthen stop!'s wait-all); 60 s past the deadline at most.
                    (loop [i 0]
                      (when (let [now (System/nanoTime)]
                              (and (< now hard-stop) (or (< now deadline) (< (count @windows) 3))))
                        (session/with-session [s {:path (str dir "/s" i "_{window}.json")
                                                  :profile-imperative true :aggregate-stats true}]
                          (Thread/sleep 150)
                          (profiler/pause)
                          (Thread/sleep 30)
                          (profiler/resume)
                          (Thread/sleep 100)
                          (swap! windows into (map :path (session/stop! s))))
                        (Thread/sleep 20)
                        (recur (inc i))))
                    (catch Throwable t (swap! errors conj (str t)))
                    (finally (deliver toggling true))))]
    (run! deref workers)
    @toggler
    @closer
    (prn {:ops @ops :errors @errors :windows @windows})))

(deftest eight-threads-with-profiling-switched-on-and-off
  (let [dir (str (temp-dir))
        seconds (Long/parseLong (or (System/getenv "PYPROF_STRESS_SECONDS") "10"))
        {:keys [exit out err]} (java-child ["-e" (str "(require 'pyprof.stress-test)"
                                                       "(pyprof.stress-test/child-stress \"" dir "\" " seconds ")")]
                                           :jvm-args [] ; full JIT: 20 s of busy threads
                                           :timeout-s (+ 120 seconds))
        summary (try (read-string (last (str/split-lines out))) (catch Exception _ nil))
        {:keys [ops errors windows]} summary]
    (is (= 0 exit) (str "the JVM must not abort\n" err))
    (is (map? summary) (str "the child printed no summary line\nstdout: " out "\nstderr: " err))
    (is (= [] errors))
    (is (< 100 ops))
    (is (<= 3 (count windows)) "the toggler cut several windows")
    (testing "every dump is a valid trace with events"
      (let [traces (for [w windows] (get (with-open [r (io/reader w)] (json/read r)) "traceEvents"))]
        (is (every? #(some (fn [e] (not= "M" (e "ph"))) %) traces))
        (is (some (fn [t] (some #(= "_random_uniform" (% "name")) t)) traces))
        (is (some (fn [t] (some #(and (= "C" (% "ph")) (= "stress" (% "cat"))) t)) traces))))))
