(ns ^:no-doc pyprof.session.cap
  "The bounds of the raw trace and of the sweep of leftovers, and the watchdog of the cap: the JVM
  side of Python's `pyprof.session.cap` (api.json raw_trace), which documents them."
  (:require [clojure.string :as str]
            [pyprof.rules :as rules]))

(set! *warn-on-reflection* true)

(def spec "api.json raw_trace." (rules/api "raw_trace"))

(defn- number
  "The spec's `k`, else the number in the variable named at `env-k`; raw.bad_limit
  (:invalid-config) unless positive (with `zero-ok?` non-negative), of the default's type."
  [k env-k zero-ok? what]
  (let [default (spec k)
        env (spec env-k)
        text (str/trim (or (System/getenv ^String env) ""))
        integer? (integer? default)]
    (if (empty? text)
      default
      (let [v (try (if integer? (Long/parseLong text) (Double/parseDouble text))
                   (catch NumberFormatException _ -1))]
        (if (or (neg? v) (and (zero? v) (not zero-ok?)) (and (double? v) (Double/isNaN v)))
          (throw (rules/error "raw.bad_limit"
                              {:variable env :value text :what what :default default
                               :expected (str (if zero-ok? "a non-negative" "a positive")
                                              (if integer? " integer" " number"))}))
          v)))))

(defn max-bytes
  "The cap of the raw trace, bytes: $PYPROF_RAW_MAX_BYTES, else max_bytes (raw.bad_limit)."
  ^long []
  (long (number "max_bytes" "max_env" false
                "bytes of raw trace past which a session stops recording")))

(defn start-wait-seconds
  "Seconds a session's start waits at most for the sweep of leftovers (0: not at all)."
  ^double []
  (double (number "start_wait_seconds" "start_wait_env" true
                  "seconds a session's start waits for the recovery of leftovers")))

(defn recover-max-bytes
  "The largest window range, bytes, the sweep converts (a larger one is reported)."
  ^long []
  (long (number "recover_max_bytes" "recover_max_env" false
                "bytes of a dead process's window the next start recovers")))

(defn check
  "nil while `size` (bytes) is under the cap; else the cap, with one truncated_note line on stderr
  when `window` is not marked :truncated yet, as Python's check."
  [size window step]
  (let [cap (max-bytes)]
    (when (>= (long size) cap)
      (when (and window (not (:truncated window)))
        (binding [*out* *err*]
          (println (rules/render (spec "truncated_note")
                                 {:index (:index window) :path (:path window) :step step
                                  :bytes size :cap cap :env (spec "max_env")}))))
      cap)))

(defn watchdog
  "Starts a daemon thread calling `(check!)` every watch_seconds until `((:stop it))`."
  [check!]
  (let [done (java.util.concurrent.CountDownLatch. 1)
        period (long (* 1000 (double (spec "watch_seconds"))))
        t (Thread. ^Runnable
                   (fn []
                     (try
                       (while (not (.await done period java.util.concurrent.TimeUnit/MILLISECONDS))
                         (check!))
                       (catch Throwable _ nil)))
                   "pyprof-raw-cap")]
    (.setDaemon t true)
    (.start t)
    {:stop #(.countDown done)}))
