(ns pyprof.session-crash-test
  "kill -9 during a JVM session with a continuous dump: the next start leaves nothing behind and
  recovers every flushed event of the open window beside its path, never over a file (as
  tests/test_crash_leftovers.py in Python)."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.java.shell :as sh]
            [clojure.string :as str]
            [clojure.test :refer [deftest is]]
            [pyprof.example.ndarray :as nd]
            [pyprof.session :as session]
            [pyprof.session.leftovers :as leftovers]
            [pyprof.session.rawdir :as rawdir]
            [pyprof.test-util :refer [java-child temp-dir]])
  (:import (java.util.concurrent TimeUnit)))

(defn child-victim
  "Run in a child JVM: windows of 3 steps (a wait step between), MXNet appending every 20 ms,
  for at most 60 s (the test kills it long before)."
  [dir]
  (let [s (session/start! (session/profile {:schedule (session/schedule {:wait 1 :active 3})
                                            :path (str dir "/w_{window}.json")
                                            :profile-imperative true :dump-period 0.02}))
        deadline (+ (System/currentTimeMillis) 60000)]
    (while (< (System/currentTimeMillis) deadline)
      (dotimes [_ 4] (with-open [a (nd/random-uniform -1 1 [32 32])] (nd/wait-to-read a)))
      (Thread/sleep 40)
      (session/step! s))))

(def ^:private op-end
  "A complete end event of the victim's operator as MXNet writes it."
  #"\{\s*\"name\": \"_random_uniform\",\s*\"cat\": \"operator\",\s*\"ph\": \"E\",[^{}]*\}")

(defn- recovered
  "Where the next start writes window `w` of dead process `p` (none was there before)."
  [^String w p]
  (str (subs w 0 (- (count w) (count ".json"))) ".recovered-" p ".json"))

(defn- bytes-of ^bytes [f] (java.nio.file.Files/readAllBytes (.toPath (io/file f))))

(deftest a-killed-session-leaves-nothing-and-its-flushed-events-are-recovered
  (let [dir (str (temp-dir))
        rawbase (io/file dir "rawbase")
        java (str (io/file (System/getProperty "java.home") "bin" "java"))
        pb (doto (ProcessBuilder. ^java.util.List
                                  (cond-> [java "-cp" (System/getProperty "java.class.path")]
                                    (System/getProperty "mxnet.library.path")
                                    (conj (str "-Dmxnet.library.path=" (System/getProperty "mxnet.library.path")))
                                    true (into ["clojure.main" "-e"
                                                (str "(require 'pyprof.session-crash-test)"
                                                     "(pyprof.session-crash-test/child-victim \"" dir "\")")])))
             (.redirectError (io/file dir "victim.err")))
        _ (.put (.environment pb) "PYPROF_RAW_DIR" (str rawbase))
        p (.start pb)
        partial (io/file dir "w_1.json.partial")
        deadline (+ (System/currentTimeMillis) 120000)]
    (while (and (not (.exists partial)) (.isAlive p) (< (System/currentTimeMillis) deadline))
      (Thread/sleep 20))
    (is (.exists partial) (slurp (io/file dir "victim.err")))
    ;; freeze it and take what is on disk (the flushed events of the window recording): under
    ;; load a window may have flushed nothing yet, so it is let run again until one has
    (let [freeze (fn []
                   (sh/sh "kill" "-STOP" (str (.pid p)))
                   (let [partials (filter #(re-matches #"w_\d+\.json\.partial" (.getName ^java.io.File %))
                                          (.listFiles (io/file dir)))
                         pfile ^java.io.File (last (sort-by #(vector (count (str %)) (str %)) partials))
                         window (some-> pfile str (subs 0 (- (count (str pfile)) (count ".partial"))))
                         info (when pfile (json/read-str (slurp pfile)))
                         flushed (when info
                                   (let [raw (String. (bytes-of (info "raw")) "UTF-8")
                                         end (min (count raw) (or (info "end") (count raw)))]
                                     (count (re-seq op-end (subs raw (min end (info "start")) end)))))]
                     [window info flushed]))
          [window info flushed] (loop []
                                  (let [[_ _ flushed :as got] (freeze)]
                                    (if (or (pos? (or flushed 0)) (> (System/currentTimeMillis) deadline))
                                      got
                                      (do (sh/sh "kill" "-CONT" (str (.pid p)))
                                          (Thread/sleep 50)
                                          (recur)))))]
      (.destroyForcibly p)
      (.waitFor p 30 TimeUnit/SECONDS)
      (is (some? info) "window 1 was recording at the kill")
      (is (= 1 (count (.listFiles rawbase))) "the dead process's directory is there until the next start")
      ;; the next start (another JVM) recovers window 1 and deletes every leftover
      (let [{:keys [exit err]} (java-child ["-e" (str "(require 'pyprof.session)"
                                                       "(pyprof.session/stop! (pyprof.session/start! (pyprof.session/profile {:path \"" dir "/next.json\"})))")]
                                           :env {"PYPROF_RAW_DIR" (str rawbase)
                                                 ;; start! waits until the sweep is done (a
                                                 ;; bound, not a delay)
                                                 "PYPROF_RECOVER_WAIT_SECONDS" "60"})]
        (is (= 0 exit) err)
        (is (some #{(str "pyprof: recovered window " window " of dead process " (.pid p) " as "
                         (recovered window (.pid p)))}
                  (str/split-lines err))
            err))
      (is (empty? (.listFiles rawbase)) "no raw-trace directory is left")
      (is (= [] (remove #(re-matches #"w_\d+(\.recovered-\d+)?\.json|next\.json|rawbase|victim\.err" %)
                        (map #(.getName ^java.io.File %) (.listFiles (io/file dir)))))
          "no .partial, no temporary file is left")
      (is (not (.exists (io/file window))) "the window's own path is left for a rerun to write")
      (let [evs (get (json/read-str (slurp (recovered window (.pid p)))) "traceEvents")]
        (is (pos? flushed) (pr-str info))
        (is (= flushed (count (filter #(and (= "_random_uniform" (% "name")) (= "E" (% "ph"))) evs)))
            "every flushed end event of the window is recovered")))))

(def ^:private keep-victim
  "Continuous dump into t.json, 3 ops, a dump, a config without :filename (t.json is kept in a
  part), 4 more ops flushed by the dump timer, then kill -9 of itself."
  "(require '[pyprof.profiler :as p] '[pyprof.example.ndarray :as nd] '[clojure.java.shell :as sh])
   (defn work [n] (dotimes [_ n] (let [a (nd/random-uniform -1 1 [4 4])] (nd/wait-to-read a) (nd/close a))))
   (p/profiler-set-config {:filename \"t.json\" :profile-imperative true :continuous-dump true
                           :dump-period 0.05})
   (p/profiler-set-state :run)
   (work 3)
   (p/dump-profile false)
   (p/profiler-set-config {:profile-api false :continuous-dump true :dump-period 0.05})
   (work 4)
   (Thread/sleep 300)
   (sh/sh \"kill\" \"-9\" (str (.pid (java.lang.ProcessHandle/current))))
   (Thread/sleep 60000)")

(deftest the-parts-a-killed-process-kept-are-joined-not-lost
  (let [dir (temp-dir)
        {:keys [exit err]} (java-child ["-e" keep-victim] :dir (str dir) :timeout-s 120)
        part? #(re-matches #"\.pyprof-\d+-kept-\d+-t\.json\.json" %)
        parts (filter #(part? (.getName ^java.io.File %)) (.listFiles dir))
        ends #(count (re-seq op-end (String. (bytes-of %) "UTF-8")))
        in-part (some-> (first parts) ends)
        in-file (ends (io/file dir "t.json"))]
    (is (= 137 exit) err)
    (is (= 1 (count parts)) "the keep left a part")
    (is (and (= 3 in-part) (< 0 in-file 5)) (pr-str [in-part in-file]))
    ;; the next start's cleanup of this directory joins the dead process's part into t.json
    (rawdir/clean-dir-of! (str dir))
    (is (= ["t.json"] (vec (.list dir))) "no part (nor temporary file) is left")
    (let [joined (String. (bytes-of (io/file dir "t.json")) "UTF-8")]
      (is (= "{" (subs joined 0 (min 1 (count joined)))) "the part's header comes first")
      (is (= (+ in-part in-file) (count (re-seq op-end joined)))
          "every flushed event of the part and of the file is in t.json"))))

(deftest the-recovered-path-is-beside-the-window-and-never-a-file-there
  ;; the same table as RECOVERED_NAMES in tests/test_crash_leftovers.py
  (doseq [[n first-name] [["loop_0.json" "loop_0.recovered-7.json"] ["trace" "trace.recovered-7"]
                          [".hidden" ".hidden.recovered-7"] ["a.b.json" "a.b.recovered-7.json"]
                          ["..x" "..x.recovered-7"]]
          :let [dir (temp-dir)
                w (str (io/file dir n))
                [stem suffix] (if (str/ends-with? first-name ".json")
                                [(subs first-name 0 (- (count first-name) 5)) ".json"]
                                [first-name ""])
                names [first-name (str stem "-1" suffix) (str stem "-2" suffix)]]]
    (is (= (mapv #(str (io/file dir %)) names)
           (vec (for [i (range 3)
                      :let [tmp (io/file dir (str ".pyprof-" (rawdir/pid) "-recover-" i ".tmp"))]]
                  (do (spit tmp (str "window " i))
                      (let [dest (leftovers/link-beside! (str tmp) w 7)]
                        (.delete tmp)
                        dest))))))
    (is (= (sort names) (sort (.list dir))))
    (is (= (mapv #(str "window " %) (range 3)) (mapv #(slurp (io/file dir %)) names))
        "each recovered name holds its whole file")))
