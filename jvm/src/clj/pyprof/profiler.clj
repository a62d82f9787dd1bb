(ns pyprof.profiler
  "MXNet's process-wide profiler, mirroring the retired `org.apache.clojure-mxnet.profiler`
  namespace (profiler-set-config, profiler-set-state, dump-profile) plus aggregate statistics,
  pause/resume and the user-side objects (domains, tasks, frames, events, counters, markers).

  Errors (the same scheme across pyprof's JVM layer):
  - a key, value, state or option pyprof rejects before calling C: `ex-info` with
    `{:pyprof/error :invalid-config | :invalid-state | :invalid-option | :session-finished ...}`;
  - a failing C call: `pyprof.jvm.MXNetException`, whose `ex-data` is
    `{:pyprof/error :mxnet :fn \"<C function>\" :mxnet-error \"<MXGetLastError text>\"}`.

  The profiler is one C++ singleton per process: all calls act on it, whichever thread (or, in a
  JPype-hosted JVM, whichever language) makes them. Only the worker process is profiled here
  (`profile_process` \"server\" needs a distributed kvstore handle, which pyprof does not hold)."
  (:require [clojure.data.json :as json]
            [pyprof.config :as config]
            [pyprof.native :as native :refer [mx]])
  (:import (com.sun.jna.ptr PointerByReference)
           (pyprof.jvm ProfileDomain ProfileObject ProfileObject$Kind)))

(set! *warn-on-reflection* true)

(def ^:private worker 0)

;; A finished dump ends the only trace session MXNet can write in this process: a second
;; run -> dump writes invalid JSON, and config right after a finished dump can trip a C++ check.
(defonce ^:private session (atom {:filename nil, :finished? false}))

(defn- ensure-session-open [what]
  (let [{:keys [filename finished?]} @session]
    (when finished?
      (throw (ex-info (str "cannot " what ": this process already finished its profiler session"
                           " (dump-profile wrote " (or filename "the trace") "); MXNet writes only"
                           " one valid trace per process, so profile again in a new process")
                      {:pyprof/error :session-finished :trace filename})))))

(defn profiler-set-config
  "Configures the profiler (C: MXSetProcessProfilerConfig). `options` is a map of keyword keys
  (:profile-symbolic, :filename, :aggregate-stats, :dump-period, ...) or C's string keys
  (\"profile_symbolic\"), checked against profiler_config.json first. Every call resets the keys
  it leaves out to their C default, and deletes an existing file at :filename. :dump-period is in
  seconds. Returns the map of C strings sent."
  [options]
  (let [c-opts (config/validate options)]
    (ensure-session-open "configure the profiler")
    (let [ks (keys c-opts)
          keys-ptr (native/strings ks)
          vals-ptr (native/strings (map c-opts ks))]
      (mx MXSetProcessProfilerConfig (count c-opts) keys-ptr vals-ptr nil)
      (swap! session assoc :filename (get c-opts "filename" "profile.json"))
      c-opts)))

(def ^:private states {"run" 1, "stop" 0})

(defn profiler-set-state
  "Starts (\"run\" or :run) or stops (\"stop\" or :stop, the default) recording
  (C: MXSetProcessProfilerState). Running also un-pauses."
  ([] (profiler-set-state :stop))
  ([state]
   (let [s (when (or (string? state) (keyword? state)) (name state))
         code (or (get states s)
                  (throw (ex-info (str "invalid profiler state " (pr-str state)
                                       ": expected \"run\"/:run or \"stop\"/:stop")
                                  {:pyprof/error :invalid-state :state state
                                   :valid ["run" "stop"]})))]
     (when (= 1 code) (ensure-session-open "start the profiler"))
     (mx MXSetProcessProfilerState (int code) worker nil)
     nil)))

(defn dump-profile
  "Writes the trace to the configured file (C: MXDumpProcessProfile). `finished` (default true;
  also 1, or false/0) ends the session: the file is valid JSON afterwards, and no second session
  can be written in this process. Fails with MXNetException when the profiler has not run."
  ([] (dump-profile true))
  ([finished]
   (let [f (cond (boolean? finished) finished
                 (and (integer? finished) (or (== finished 0) (== finished 1))) (== finished 1)
                 :else (throw (ex-info (str "invalid dump-profile argument " (pr-str finished)
                                            ": expected true/false or 1/0")
                                       {:pyprof/error :invalid-option :finished finished})))]
     (mx MXDumpProcessProfile (if f 1 0) worker nil)
     (when f (swap! session assoc :finished? true))
     nil)))

(def ^:private formats {:table 0, :json 1})
(def ^:private sort-codes {:total 0, :avg 1, :min 2, :max 3, :count 4})
(def default-dumps-options
  "Defaults of `dumps`."
  {:reset false, :format :table, :sort-by :total, :ascending false})

(defn- option [opts k allowed]
  (let [v (get opts k)
        kw (cond (keyword? v) v (string? v) (keyword v))]
    (or (get allowed kw)
        (throw (ex-info (str "invalid " k " " (pr-str v) ": expected one of "
                             (pr-str (vec (keys allowed))))
                        {:pyprof/error :invalid-option :option k :value v :valid (vec (keys allowed))})))))

(defn dumps
  "Aggregate statistics per operator and category (C: MXAggregateProfileStatsPrintEx); needs
  :aggregate-stats true in the config. Options (merged over `default-dumps-options`):
    :reset     true clears the statistics after reading them (false)
    :format    :table -> the fixed-width text table; :json -> parsed data with string keys,
               {\"Time\" {category {name {\"Count\" \"Total\" \"Min\" \"Max\" \"Avg\"}}},
                \"Memory\" ..., \"Unit\" {\"Time\" \"ms\" \"Memory\" \"kB\"}} (:table)
    :sort-by   :total :avg :min :max or :count (:total)
    :ascending sort order (false)
  With aggregate stats off the table is \"\" and the :json result nil."
  ([] (dumps {}))
  ([opts]
   (let [{:keys [reset ascending] :as o} (merge default-dumps-options opts)
         fmt (option o :format formats)
         out (PointerByReference.)]
     (mx MXAggregateProfileStatsPrintEx out (if reset 1 0) (int fmt) (int (option o :sort-by sort-codes))
         (if ascending 1 0))
     (let [s (some-> (.getValue out) (.getString 0))]
       (if (= fmt 1)
         (when-not (empty? s) (json/read-str s))
         (or s ""))))))

(defn pause
  "Pauses recording without leaving the run state (C: MXProcessProfilePause 1). A global flag,
  not a counter."
  []
  (mx MXProcessProfilePause 1 worker nil)
  nil)

(defn resume
  "Resumes recording after `pause` (C: MXProcessProfilePause 0)."
  []
  (mx MXProcessProfilePause 0 worker nil)
  nil)

(defmacro with-profiling
  "Runs `body` with the profiler in the run state and always stops it afterwards, without hiding
  the body's exception. Configure first with `profiler-set-config`."
  [& body]
  `(do (profiler-set-state :run)
       (try ~@body
            (finally (profiler-set-state :stop)))))

;; ------------------------------------------------------------------ user-side objects

(defn domain
  "A named domain (C: MXProfileCreateDomain) grouping tasks, frames, counters and markers in the
  trace (its category). Domains live as long as the process and are never destroyed."
  ^ProfileDomain [^String name]
  (ProfileDomain. name (native/out-pointer #(mx MXProfileCreateDomain name ^PointerByReference %))))

(defn- profile-object ^ProfileObject [kind ^String name create]
  (ProfileObject. kind name (native/out-pointer create)))

(defn task
  "A task in `domain` (C: MXProfileCreateTask): a duration shown as an async b/e pair. Close it
  (with-open) to destroy the handle."
  ^ProfileObject [^ProfileDomain domain ^String name]
  (profile-object ProfileObject$Kind/TASK name
                  #(mx MXProfileCreateTask (.pointer domain) name ^PointerByReference %)))

(defn frame
  "A frame in `domain` (C: MXProfileCreateFrame): a duration shown as a ( ) pair."
  ^ProfileObject [^ProfileDomain domain ^String name]
  (profile-object ProfileObject$Kind/FRAME name
                  #(mx MXProfileCreateFrame (.pointer domain) name ^PointerByReference %)))

(defn event
  "A thread-local event (C: MXProfileCreateEvent): a duration shown as a B/E pair, category event."
  ^ProfileObject [^String name]
  (profile-object ProfileObject$Kind/EVENT name
                  #(mx MXProfileCreateEvent name ^PointerByReference %)))

(defn counter
  "A counter in `domain` (C: MXProfileCreateCounter), shown as C events; set with `set-counter`,
  change with `adjust-counter`."
  ^ProfileObject [^ProfileDomain domain ^String name]
  (profile-object ProfileObject$Kind/COUNTER name
                  #(mx MXProfileCreateCounter (.pointer domain) name ^PointerByReference %)))

(defn start
  "Starts a task, frame or event (C: MXProfileDurationStart)."
  [^ProfileObject duration]
  (mx MXProfileDurationStart (.pointer duration))
  nil)

(defn stop
  "Stops a task, frame or event (C: MXProfileDurationStop)."
  [^ProfileObject duration]
  (mx MXProfileDurationStop (.pointer duration))
  nil)

(defmacro with-duration
  "Starts the task, frame or event `duration` around `body`; always stops it."
  [duration & body]
  `(let [d# ~duration]
     (start d#)
     (try ~@body (finally (stop d#)))))

(defn set-counter
  "Sets a counter to the unsigned 64-bit `value` (C: MXProfileSetCounter)."
  [^ProfileObject counter value]
  (when (neg? value)
    (throw (ex-info (str "counter value must be >= 0, got " value)
                    {:pyprof/error :invalid-option :value value})))
  (mx MXProfileSetCounter (.pointer counter) (long value))
  nil)

(defn adjust-counter
  "Adds the signed 64-bit `delta` to a counter (C: MXProfileAdjustCounter)."
  [^ProfileObject counter delta]
  (mx MXProfileAdjustCounter (.pointer counter) (long delta))
  nil)

(def marker-scopes #{"global" "process" "thread" "task" "marker"})

(defn mark
  "An instant marker `name` in `domain` (C: MXProfileSetMarker); scope (default :process) is one of
  :global :process :thread :task :marker."
  ([domain name] (mark domain name :process))
  ([^ProfileDomain domain ^String name scope]
   (let [s (when (or (keyword? scope) (string? scope)) (clojure.core/name scope))]
     (when-not (marker-scopes s)
       (throw (ex-info (str "invalid marker scope " (pr-str scope) ": expected one of "
                            (sort marker-scopes))
                       {:pyprof/error :invalid-option :scope scope :valid (sort marker-scopes)})))
     (mx MXProfileSetMarker (.pointer domain) name ^String s)
     nil)))
