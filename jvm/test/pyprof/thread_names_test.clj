(ns pyprof.thread-names-test
  "Windows name the Java threads that called MXNet (trace.json thread_names): threads that call
  through pyprof on their first call, a foreign binding's threads (DJL's) once they call
  Profiler.nameThread, each under the tid MXNet wrote for its calls."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.session.raw :as raw]
            [pyprof.test-util :refer [java-child python-json temp-dir]])
  (:import (com.sun.jna Memory NativeLibrary)
           (pyprof.jvm Profiler ProfilerSession ThreadNames)
           (pyprof.jvm.capi LibMXNet)))

(def ^:private spec ((json/read-str (slurp (io/resource "trace.json"))) "thread_names"))

(defn- foreign-call
  "Calls libmxnet's `fname` (whose one argument is an int out) as another binding does: through
  JNA straight to the library, past pyprof."
  [fname]
  (let [f (.getFunction (NativeLibrary/getInstance (LibMXNet/load)) ^String fname)]
    (assert (zero? (.invokeInt f (object-array [(Memory. 8)]))))))

(defn child-workers
  "Run in a child JVM: one window of a session with profile_api on, in which worker-0 calls
  MXNDArrayWaitAll 3 times through pyprof and records a profiler event, worker-1 (a foreign
  binding's thread that named itself) calls MXGetGPUCount 5 times past pyprof, and an unnamed
  foreign thread MXGetGPUCount 7 times, all three alive together; prints the window's path."
  [dir]
  (let [s (.start (ProfilerSession. {"path" "w_{window}.json" "profile_api" true} dir))
        ;; all alive until all are done: an ended thread's pthread_t, and so its tid, is reused
        done (java.util.concurrent.CountDownLatch. 3)
        run (fn [name f] (doto (Thread. ^Runnable #(do (f) (.countDown done) (.await done)) ^String name)
                           (.start)))
        ts [(run "worker-0" #(do (dotimes [_ 3] (LibMXNet/MXNDArrayWaitAll))
                                 (doto (Profiler/event "w0-step") (.start) (.stop))))
            (run "worker-1" #(do (Profiler/nameThread)
                                 (dotimes [_ 5] (foreign-call "MXGetGPUCount"))))
            (run "unnamed" #(dotimes [_ 7] (foreign-call "MXGetGPUCount")))]]
    (doseq [^Thread t ts] (.join t))
    (prn {:windows (mapv #(get % "path") (.stop s))})))

(defn- thread-names
  "{[pid tid] [name ...]} of the thread_name events of `events`."
  [events]
  (reduce (fn [m e] (update m [(e "pid") (e "tid")] (fnil conj []) (get-in e ["args" "name"])))
          {} (filter #(and (= "M" (% "ph")) (= "thread_name" (% "name"))) events)))

(defn- tracks-of
  "The [pid tid] of the begins (ph b) of `fname` in `events`, with their counts."
  [events fname]
  (frequencies (map #(vector (% "pid") (% "tid")) (filter #(and (= fname (% "name")) (= "b" (% "ph"))) events))))

(deftest a-window-names-the-threads-that-called-mxnet
  (let [dir (str (temp-dir))
        {:keys [exit out err]} (java-child ["-e" (str "(require 'pyprof.thread-names-test)"
                                                       "(pyprof.thread-names-test/child-workers \"" dir "\")")])
        _ (is (= 0 exit) err)
        path (first (:windows (read-string (last (str/split-lines out)))))
        events ((json/read-str (slurp path)) "traceEvents")
        names (thread-names events)
        name-of #(first (names %))
        waits (tracks-of events "MXNDArrayWaitAll")
        w0 (some (fn [[k n]] (when (= 3 n) k)) waits)
        gpu (tracks-of events "MXGetGPUCount")
        w1 (some (fn [[k n]] (when (= 5 n) k)) gpu)
        unnamed (some (fn [[k n]] (when (= 7 n) k)) gpu)]
    (testing "each thread's API calls lie on one track (pid, tid as the window writes MXNet's)"
      (is (contains? (set (vals waits)) 3)
          "worker-0's calls (beside the session's own wait at stop, on the main thread)")
      (is (= #{5 7} (set (vals gpu))))
      (is (every? some? [w0 w1 unnamed])))
    (testing "the names: worker-0 (through pyprof), worker-1 (named itself), none for the other"
      (is (= "worker-0" (name-of w0)))
      (is (= "worker-1" (name-of w1)))
      (is (nil? (names unnamed)) "a foreign thread that never named itself"))
    (testing "one thread_name per track, each for a track the window holds, before its first event"
      (is (every? #(= 1 (count %)) (vals names)))
      (let [tracks (set (map #(vector (% "pid") (% "tid")) (remove #(= "M" (% "ph")) events)))]
        (is (every? tracks (keys names))))
      (doseq [k (keys names)
              :let [meta-at (first (keep-indexed #(when (and (= "M" (%2 "ph")) (= k [(%2 "pid") (%2 "tid")])) %1) events))
                    first-at (first (keep-indexed #(when (and (not= "M" (%2 "ph")) (= k [(%2 "pid") (%2 "tid")])) %1) events))]]
        (is (< meta-at first-at) (str k))))
    (testing "worker-0's profiler event (B/E) is on a track of that name too"
      (let [tracks (set (map #(vector (% "pid") (% "tid")) (filter #(= "w0-step" (% "name")) events)))]
        (is (= 1 (count tracks)))
        (is (= ["worker-0"] (names (first tracks))))))
    (testing "Python: pyprof validate passes; the report's timeline shows the name"
      (when-let [r (python-json (str "import json, sys\n"
                                     "from pyprof.trace.validation import validate\n"
                                     "from pyprof.trace.html.columns import timeline\n"
                                     "p = sys.argv[1] if len(sys.argv) > 1 else " (pr-str path) "\n"
                                     "print(json.dumps({'ok': validate(p).ok,"
                                     " 'threads': [t['thread'] for t in timeline(p)['tracks']]}))"))]
        (is (true? (r "ok")))
        (is (some #{"worker-0"} (r "threads")) (pr-str r))))))

(deftest the-tid-is-libstdcxx-hash-of-pthread-self
  (testing "ThreadNames.tid is std::hash<std::thread::id> as libstdc++ computes it (std::_Hash_bytes)"
    (let [hash-bytes (.getFunction (NativeLibrary/getInstance "stdc++") "_ZSt11_Hash_bytesPKvmm")
          seed (long (spec "hash_seed"))
          libstdcxx (fn [^long p] (.invokeLong hash-bytes (object-array [(doto (Memory. 8) (.setLong 0 p)) (long 8) seed])))]
      (when (ThreadNames/available)
        (doseq [p [(ThreadNames/self) 0 1 -1 140444161799872 Long/MIN_VALUE]]
          (is (= (libstdcxx p) (ThreadNames/tid p seed)) (str p)))))))

(deftest the-tolerant-path-names-threads-too
  (testing "events read the slow way get the same thread_name events as the streamed cut"
    (let [big 12101159336013737211N
          evs [{"ph" "b" "name" "A" "pid" 7 "tid" big}
               {"ph" "e" "name" "A" "pid" 7 "tid" big}
               {"ph" "B" "name" "B" "pid" 8 "tid" big}
               {"ph" "B" "name" "C" "pid" 8 "tid" 5}]
          out (#'raw/with-thread-names evs {(.longValue (biginteger big)) "worker-0"})]
      (is (= [{"ph" "M" "name" "thread_name" "pid" 7 "tid" big "args" {"name" "worker-0"}}
              (evs 0) (evs 1)
              {"ph" "M" "name" "thread_name" "pid" 8 "tid" big "args" {"name" "worker-0"}}
              (evs 2) (evs 3)]
             (vec out)))
      (is (= evs (vec (#'raw/with-thread-names evs {})))))))
