(ns ^:no-doc pyprof.trace-file
  "What `pyprof.profiler` does around MXNet's trace file, under the tracker's lock (Python's
  _switch_file, _configure_same_file, _finish_file)."
  (:require [clojure.string :as str]
            [pyprof.config :as config]
            [pyprof.keep-file :as keep-file]
            [pyprof.native :as native :refer [mx]]
            [pyprof.output :as output]
            [pyprof.raw-file :as raw-file]
            [pyprof.rules :as rules]
            [pyprof.tracker :as tracker])
  (:import (pyprof.jvm MXNetException)))

(set! *warn-on-reflection* true)

(def ^:private worker (rules/processes "worker"))

(defn join-kept!
  "Joins the parts kept of `path` with it; false when there are none."
  [path]
  (let [parts (:kept-parts (tracker/snapshot))]
    (when (seq parts)
      (raw-file/join-traces! parts path)
      (tracker/put! :kept-parts [])
      true)))

(defn finish-file!
  "After a dump that finished `path`: joins its kept parts, or rewrites it valid (api.json
  finished_dump: a file too big, or a failed rewrite, is said)."
  [path]
  (when-not (join-kept! path)
    (when-let [size (output/size path)]
      (let [rule (rules/api "finished_dump")
            limit (long (get rule "max_bytes"))
            say #(binding [*out* *err*] (println (rules/render (get rule %1) %2)) (flush))]
        (cond (:repair-on-finish (tracker/snapshot)) (raw-file/rewrite-trace! path)
              (> (long size) limit) (say "left_note" {:path path :size size :max_bytes limit})
              :else (try (raw-file/rewrite-trace! path) ; beside, then moved in place
                         (catch Exception e (say "failed_note" {:path path :reason (first (str/split-lines (str (.getMessage e))))}))))))))

(defn send-config!
  "MXSetProcessProfilerConfig with `c-opts`, retried while a stopped dump timer exits (api.json
  timer_exit)."
  [c-opts]
  (let [ks (keys c-opts)
        period #(Double/parseDouble (str (get % "dump_period" "1")))
        wait (+ (max (period (or (:config (tracker/snapshot)) {})) (period c-opts))
                (double (get (rules/api "timer_exit") "extra_s")))]
    (keep-file/retry-while-timer-exits!
     #(mx MXSetProcessProfilerConfig (count c-opts) (native/strings ks)
          (native/strings (map c-opts ks)) nil)
     wait)))

(defn hasnt-run?
  "True when MXNet refused because the profiler never ran."
  [^MXNetException e]
  (str/includes? (.mxnetMessage e) "hasn't been run"))

(defn switch-file!
  "A new filename once the profiler ran: the old file gets the events so far, rewritten valid."
  [c-opts]
  (let [{:keys [paused running]} (tracker/snapshot)
        config (or (:config (tracker/snapshot)) (config/effective {}))
        ^String old (config "filename")
        dumped (and (nil? (output/file-problem old))
                    (try (mx MXDumpProcessProfile 0 (int worker) nil)
                         true
                         (catch MXNetException e
                           (if (hasnt-run? e) false (throw e)))))]
    (send-config! c-opts)
    (when (= rules/c-false (config "continuous_dump")) ; output back on: run (and stop again)
      (mx MXSetProcessProfilerState (int (rules/states "run")) (int worker) nil)
      (cond (not running) (mx MXSetProcessProfilerState (int (rules/states "stop"))
                              (int worker) nil)
            paused (mx MXProcessProfilePause 1 (int worker) nil)))
    (when (and (not (join-kept! old)) dumped (output/size old))
      (raw-file/rewrite-trace! old))))

(defn configure-same-file!
  "A config naming the file being written: its events are kept in a part first."
  [c-opts]
  (let [^String path (c-opts "filename")
        config (:config (tracker/snapshot))]
    (when (and (not= rules/c-false (get config "continuous_dump"))
               (nil? (output/size path))
               (nil? (output/file-problem path)))
      ;; dump now, so that no timer write lands between link and config
      (try (mx MXDumpProcessProfile 0 (int worker) nil)
           (catch MXNetException e (when-not (hasnt-run? e) (throw e)))))
    (when-let [part (keep-file/keep! path (count (:kept-parts (tracker/snapshot)))
                                     (fn [scratch]
                                       (send-config! (assoc config "filename" scratch
                                                            "continuous_dump" rules/c-false))))]
      (tracker/update! update :kept-parts conj part))
    (send-config! c-opts)))
