(ns pyprof.claim-child
  "The JVM half of tests/test_trace_claims.py: one process of several configured with one trace
  filename (MXNet #16702). `run` configures `shared` through the Clojure API or the Java facade,
  says so by a marker file in `dir`, waits until all `n` processes have tried, then profiles
  `ops` `_random_uniform` operators into the file it got: `shared`, or, when refused, the file
  the error's fix names. Prints one JSON line: what happened."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [pyprof.example.ndarray :as nd]
            [pyprof.profiler :as profiler]
            [pyprof.session :as session])
  (:import (pyprof.jvm Profiler)))

(defn- configure!
  "Configures `path` through `api` (\"clojure\" or \"java\"): nil, or the catalogue error's data."
  [api path]
  (try
    (if (= api "java")
      (Profiler/setConfig {"filename" path "profile_imperative" true})
      (profiler/profiler-set-config {:filename path :profile-imperative true}))
    nil
    (catch clojure.lang.ExceptionInfo e
      (assoc (ex-data e) :message (ex-message e)))))

(defn- await-markers
  "Waits (up to 180 s: a JVM under load starts slowly) until `n` processes left their marker
  in `dir`."
  [dir n]
  (let [deadline (+ (System/currentTimeMillis) 180000)]
    (while (and (< (count (filter #(.startsWith (.getName ^java.io.File %) "configured-")
                                  (.listFiles (io/file dir))))
                   n)
                (< (System/currentTimeMillis) deadline))
      (Thread/sleep 20))))

(defn run
  "One child: see the namespace doc. `api` \"clojure\" or \"java\"."
  [api shared dir n ops]
  (let [pid (.pid (java.lang.ProcessHandle/current))
        err (configure! api shared)
        file (if err (:example err) shared)
        retry (when err (configure! api file))]
    (spit (io/file dir (str "configured-" pid)) "")
    (await-markers dir n)
    (when-not retry
      (if (= api "java") (Profiler/setState "run") (profiler/profiler-set-state :run))
      (dotimes [_ ops]
        (with-open [a (nd/random-uniform -1 1 [4 4])]
          (nd/wait-to-read a)))
      (nd/wait-all)
      (if (= api "java")
        (do (Profiler/setState "stop") (Profiler/dump true))
        (do (profiler/profiler-set-state :stop) (profiler/dump-profile true))))
    (println (json/write-str {:pid pid :lang "jvm" :api api :file file :op "_random_uniform"
                              :code (:pyprof/code err) :fields (dissoc err :pyprof/error :pyprof/code :fix :java-fix)
                              :message (:message err) :retry (:message retry)}))
    (shutdown-agents)))

(defn- open-session
  "A started session writing windows at template `path`: [session nil], or [nil error data]."
  [path]
  (try
    (let [s (session/profile {:path path :profile-imperative true})]
      (session/start! s)
      [s nil])
    (catch clojure.lang.ExceptionInfo e
      [nil (assoc (ex-data e) :message (ex-message e))])))

(defn run-session
  "As `run`, for a session with the window path `shared` (a template): refused, it starts one at
  the template the error's fix names."
  [shared dir n ops]
  (let [pid (.pid (java.lang.ProcessHandle/current))
        [s err] (open-session shared)
        [s retry] (if err (open-session (:example err)) [s nil])]
    (spit (io/file dir (str "configured-" pid)) "")
    (await-markers dir n)
    (when s
      (dotimes [_ ops]
        (with-open [a (nd/random-uniform -1 1 [4 4])]
          (nd/wait-to-read a)))
      (nd/wait-all))
    (let [windows (when s (session/stop! s))]
      (println (json/write-str {:pid pid :lang "jvm" :api "session" :file (:path (first windows))
                                :op "_random_uniform" :code (:pyprof/code err)
                                :fields (dissoc err :pyprof/error :pyprof/code :fix :java-fix)
                                :message (:message err) :retry (:message retry)})))
    (shutdown-agents)))
