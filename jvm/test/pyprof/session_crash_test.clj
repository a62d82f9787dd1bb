(ns pyprof.session-crash-test
  "kill -9 during a JVM session with a continuous dump: the next start leaves nothing behind and
  recovers every flushed event of the open window (as tests/test_crash_leftovers.py in Python)."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.java.shell :as sh]
            [clojure.test :refer [deftest is]]
            [pyprof.ndarray :as nd]
            [pyprof.session :as session]
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
    (Thread/sleep 100)
    ;; freeze it, take what is on disk (the flushed events), kill it
    (sh/sh "kill" "-STOP" (str (.pid p)))
    (let [partials (sort-by #(count (str %)) (filter #(re-matches #"w_\d+\.json\.partial" (.getName ^java.io.File %))
                                                      (.listFiles (io/file dir))))
          pfile ^java.io.File (last (sort-by #(vector (count (str %)) (str %)) partials))
          window (some-> pfile str (subs 0 (- (count (str pfile)) (count ".partial"))))
          info (when pfile (json/read-str (slurp pfile)))
          flushed (when info
                    (let [raw (String. (bytes-of (info "raw")) "UTF-8")
                          end (min (count raw) (or (info "end") (count raw)))]
                      (count (re-seq op-end (subs raw (min end (info "start")) end)))))]
      (.destroyForcibly p)
      (.waitFor p 30 TimeUnit/SECONDS)
      (is (some? info) "window 1 was recording at the kill")
      (is (= 1 (count (.listFiles rawbase))) "the dead process's directory is there until the next start")
      ;; the next start (another JVM) recovers window 1 and deletes every leftover
      (let [{:keys [exit err]} (java-child ["-e" (str "(require 'pyprof.session)"
                                                       "(pyprof.session/stop! (pyprof.session/start! (pyprof.session/profile {:path \"" dir "/next.json\"})))")]
                                           :env {"PYPROF_RAW_DIR" (str rawbase)})]
        (is (= 0 exit) err))
      (is (empty? (.listFiles rawbase)) "no raw-trace directory is left")
      (is (= [] (remove #(re-matches #"w_\d+\.json|next\.json|rawbase|victim\.err" %)
                        (map #(.getName ^java.io.File %) (.listFiles (io/file dir)))))
          "no .partial, no temporary file is left")
      (let [evs (get (json/read-str (slurp window)) "traceEvents")]
        (is (pos? flushed) (pr-str info))
        (is (= flushed (count (filter #(and (= "_random_uniform" (% "name")) (= "E" (% "ph"))) evs)))
            "every flushed end event of the window is recovered")))))
