(ns pyprof.written-traces-test
  "Every trace the JVM writes passes Python's `pyprof validate` (docs/trace-format.md, What the
  writers guarantee): session windows (Clojure and Java), write-windows!, and the old file
  finished after a filename switch while running. Real MXNet in child JVMs (one profiler
  session per process); MXNet's 64-bit tids and async ids must be renumbered (trace.json ids)."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.test :refer [deftest is testing]]
            [pyprof.example.ndarray :as nd]
            [pyprof.profiler :as profiler]
            [pyprof.session :as session]
            [pyprof.test-util :refer [java-child python-json temp-dir]]
            [pyprof.trace.ids :as ids])
  (:import (pyprof.jvm ProfilerSession)))

(defn- work []
  (with-open [a (nd/random-uniform -1 1 [16 16])] (nd/wait-to-read a)))

(defn child-windows
  "Run in a child JVM: two windows of a Clojure session, one of a Java session, one file of
  both Clojure windows."
  [dir]
  (let [d (profiler/domain "written")]
    (session/with-session [s {:schedule (session/schedule {:wait 1 :active 1 :repeat 2})
                              :path (str dir "/w_{window}.json") :profile-imperative true}]
      (dotimes [_ 4] (profiler/with-task d "step" (work)) (session/step! s)))
    (session/write-windows! [(str dir "/w_0.json") (str dir "/w_1.json")] (str dir "/all.json"))
    (let [j (ProfilerSession. {"path" (str dir "/j_{window}.json") "profile_imperative" true})]
      (.start j)
      (work)
      (.close j))))

(defn child-switch
  "Run in a child JVM: a filename switch while running (the old file is rewritten)."
  [dir]
  (let [opts {:profile-imperative true :profile-api false :profile-memory false}]
    (profiler/profiler-set-config (assoc opts :filename (str dir "/first.json")))
    (profiler/profiler-set-state :run)
    (dotimes [_ 2] (work))
    (profiler/profiler-set-config (assoc opts :filename (str dir "/second.json")))
    (dotimes [_ 3] (work))
    (profiler/profiler-set-state :stop)
    (profiler/dump-profile)))

(defn child-dropin
  "Run in a child JVM: the drop-in's one trace, finished by dump-profile (MXNet's own file)."
  [dir]
  (profiler/profiler-set-config {:profile-all true :filename (str dir "/dropin.json")})
  (profiler/profiler-set-state :run)
  (dotimes [_ 2] (work))
  (profiler/profiler-set-state :stop)
  (profiler/dump-profile))

(defn- run-child [f dir]
  (java-child ["-e" (str "(require 'pyprof.written-traces-test)"
                         "(pyprof.written-traces-test/" f " \"" dir "\")")]))

(defn- validation
  "{file name: [problem counts, problem lines]} of Python's pyprof.trace.validate for `files`
  in `dir` (nil without the repository's .venv)."
  [dir files]
  (python-json (str "import json, sys\n"
                    "from pyprof import trace\n"
                    "out = {}\n"
                    "for path in json.load(sys.stdin):\n"
                    "    r = trace.validate(path, progress=False)\n"
                    "    out[path.rsplit('/', 1)[1]] = [r.counts, r.problems]\n"
                    "print(json.dumps(out))\n")
               (mapv #(str dir "/" %) files)))

(defn- events [path] (get (with-open [r (io/reader path)] (json/read r)) "traceEvents"))

(defn- unsafe-ids [evs]
  (count (for [e evs, [_ _ v] (ids/id-values e) :when (not (ids/safe-id? v))] v)))

(deftest jvm-written-windows-pass-pyprof-validate
  (let [dir (str (temp-dir))
        {:keys [exit err]} (run-child "child-windows" dir)
        files ["w_0.json" "w_1.json" "all.json" "j_0.json"]]
    (is (= 0 exit) err)
    (doseq [f files]
      (let [evs (events (str dir "/" f))]
        (is (some #(= "_random_uniform" (get % "name")) evs) f)
        (is (zero? (unsafe-ids evs)) f)))
    (testing "the renumbered async ids still pair: every task begins and ends with one id"
      (let [tasks (filter #(= "step" (get % "name")) (events (str dir "/w_0.json")))]
        (is (= ["b" "e"] (sort (map #(get % "ph") tasks))))
        (is (= 1 (count (distinct (map #(get % "id") tasks)))))))
    (let [v (validation dir files)]
      (is (some? v) "pyprof validate needs the checkout's .venv (scripts/setup.sh makes it)")
      (doseq [f files]
        (is (= [{} []] (some-> v (get f))) f)))))

(deftest the-file-switched-away-from-passes-pyprof-validate
  (let [dir (str (temp-dir))
        {:keys [exit err]} (run-child "child-switch" dir)
        first-evs (events (str dir "/first.json"))
        ops (fn [evs] (count (filter #(and (= "_random_uniform" (get % "name")) (= "B" (get % "ph"))) evs)))]
    (is (= 0 exit) err)
    (is (= 2 (ops first-evs)))
    (is (= 3 (ops (events (str dir "/second.json")))))
    (is (zero? (unsafe-ids first-evs)))
    (testing "pids as Python writes them: MXNet's process_name pids 0..3 are kept, the async
              events' 64-bit pid becomes the first free one"
      (is (= #{0 4} (set (map #(get % "pid") (filter #(= "_random_uniform" (get % "name")) first-evs))))))
    (let [v (validation dir ["first.json" "second.json"])]
      (is (some? v) "pyprof validate needs the checkout's .venv (scripts/setup.sh makes it)")
      (is (= [{} []] (some-> v (get "first.json"))))
      (is (= [{} []] (some-> v (get "second.json")))))))

(deftest the-drop-ins-finished-dump-passes-pyprof-validate
  ;; api.json finished_dump: MXNet's file, its 64-bit ids renumbered at the finished dump
  (let [dir (str (temp-dir))
        {:keys [exit err]} (run-child "child-dropin" dir)
        evs (events (str dir "/dropin.json"))]
    (is (= 0 exit) err)
    (is (= 2 (count (filter #(and (= "_random_uniform" (get % "name")) (= "B" (get % "ph"))) evs))))
    (is (zero? (unsafe-ids evs)))
    (let [v (validation dir ["dropin.json"])]
      (is (some? v) "pyprof validate needs the checkout's .venv (scripts/setup.sh makes it)")
      (is (= [{} []] (some-> v (get "dropin.json")))))))
