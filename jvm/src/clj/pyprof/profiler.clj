(ns pyprof.profiler
  "MXNet's process-wide profiler, mirroring the retired `org.apache.clojure-mxnet.profiler`
  namespace (profiler-set-config, profiler-set-state, dump-profile) plus aggregate statistics,
  pause/resume and the user-side objects (domains, tasks, frames, events, counters, markers).

  Errors (the same scheme across pyprof's JVM layer):
  - a key, value, state or option pyprof rejects before calling C: `ex-info` with
    `{:pyprof/error :invalid-config | :invalid-state | :invalid-option | :session-finished ...}`;
  - a failing C call: `pyprof.jvm.MXNetException`, whose `ex-data` is
    `{:pyprof/error :mxnet :fn \"<C function>\" :mxnet-error \"<MXGetLastError text>\"}`.
  Messages that name a fix end with `fix: <Clojure calls>`; their data holds the same advice as
  `:fix` and, phrased for Java, `:java-fix` (which the Java facade shows instead).

  The profiler is one C++ singleton per process: all calls act on it, whichever thread (or, in a
  JPype-hosted JVM, whichever language) makes them. Only the worker process is profiled here
  (`profile_process` \"server\" needs a distributed kvstore handle, which the JVM does not hold:
  profiler-set-config rejects it with :invalid-state before C)."
  (:require [clojure.data.json :as json]
            [clojure.string :as str]
            [pyprof.config :as config]
            [pyprof.native :as native :refer [mx]]
            [pyprof.util :as util])
  (:import (com.sun.jna.ptr PointerByReference)
           (pyprof.jvm MXNetException ProfileDomain ProfileObject ProfileObject$Kind)))

(set! *warn-on-reflection* true)

(def ^:private worker 0)

;; What this JVM has asked of the profiler singleton (MXNet has no getters), mirroring
;; pyprof.profiler._Tracker: for errors that name the fix, and for session ownership. A Python
;; process hosting this JVM through JPype keeps its own record; neither overrides MXNet's checks.
(defonce ^:private lock (Object.))
(defonce ^:private tracker
  (atom {:config nil        ; effective C strings after the last profiler-set-config
         :filename nil
         :running false :ever-ran false :paused false
         :finished false    ; a finished dump happened: no new trace session in this process
         :session nil       ; name of the pyprof.session that owns the profiler, or nil
         :internal nil}))   ; the thread making that session's own calls, while it makes them

(defn state
  "What this JVM has asked of the profiler: {:running :paused :finished :ever-ran :session}."
  []
  (select-keys @tracker [:running :paused :finished :ever-ran :session]))

(defn current-config
  "The effective configuration (C key -> C string, omitted keys at their C default) after the
  last profiler-set-config, or nil."
  []
  (:config @tracker))

(defn ^:no-doc -update-tracker!
  "Internal (pyprof.session): change the tracker under the profiler lock."
  [f & args]
  (locking lock (apply swap! tracker f args)))

(defmacro ^:no-doc -as-owner
  "Internal (pyprof.session): run `body` as the session `name`, past the ownership check."
  [name & body]
  `(locking @#'lock
     (let [prev# (:internal @@#'tracker)]
       (swap! @#'tracker assoc :internal (Thread/currentThread))
       (try ~@body
            (finally (swap! @#'tracker assoc :internal prev#))))))

(defn- check-owner [call]
  (let [{:keys [session internal]} @tracker]
    (when (and session (not (identical? internal (Thread/currentThread))))
      (throw (util/fix-error
              (str call " while the pyprof.session " session " is open: it owns the profiler's"
                   " configuration, state and trace file.")
              (str "call it after the session is closed, or give the session its own options"
                   " ((session/profile {:profile-api true ...}))")
              (str "call it after the ProfilerSession is closed, or give the session its own"
                   " options (new ProfilerSession(Map.of(\"profile_api\", true, ...)))")
              {:pyprof/error :invalid-state :session session :call call})))))

(defn- finished-error
  "After a finished dump: as pyprof.profiler's StateError for set_config (:config) and
  set_state('run') (:run)."
  [call]
  (let [{:keys [filename]} @tracker]
    (if (= call :config)
      (util/fix-error
       (str "the profiler already wrote its finished trace (dump(finished=True)); MXNet cannot"
            " start a second trace session in one process.")
       (str "run each session in its own process (a child JVM), or use pyprof.session, whose"
            " windows share one session (the finished trace is " (pr-str filename) ")")
       (str "run each session in its own process (a child JVM), or use"
            " pyprof.jvm.ProfilerSession, whose windows share one session (the finished trace"
            " is " (pr-str filename) ")")
       {:pyprof/error :session-finished :trace filename})
      (util/fix-error
       (str "the profiler already wrote its finished trace; MXNet cannot record a second"
            " session in one process.")
       "run the next session in a child JVM, or use pyprof.session"
       "run the next session in a child JVM, or use pyprof.jvm.ProfilerSession"
       {:pyprof/error :session-finished :trace filename}))))

(defn- server-error []
  (util/fix-error
   (str "profile_process='server' needs a distributed kvstore: create one with"
        " mx.kv.create('dist_sync') (or dist_async) in a process launched with the DMLC_*"
        " variables. The JVM holds no kvstore handle and profiles only its own (worker) process.")
   (str "profile the servers from that Python worker process with"
        " pyprof.dist.server_profiling(kv, filename=...); leave :profile-process out (or"
        " :worker) here")
   (str "profile the servers from that Python worker process with"
        " pyprof.dist.server_profiling(kv, filename=...); leave \"profile_process\" out (or"
        " \"worker\") here")
   {:pyprof/error :invalid-state :key "profile_process" :value "server"}))

(defn profiler-set-config
  "Configures the profiler (C: MXSetProcessProfilerConfig). `options` is a map of keyword keys
  (:profile-symbolic, :filename, :aggregate-stats, :dump-period, ...) or C's string keys
  (\"profile_symbolic\"), checked against profiler_config.json first. Every call resets the keys
  it leaves out to their C default, and deletes an existing file at :filename. :dump-period is in
  seconds. Returns the map of C strings sent.

  Throws ex-info :invalid-config (key or value; a :filename whose directory does not exist),
  :session-finished (after a finished dump), :invalid-state (changing the filename while
  running, while a pyprof.session is open, or :profile-process :server: the JVM holds no
  kvstore handle)."
  [options]
  (let [c-opts (config/validate options)]
    (when (= "server" (c-opts "profile_process")) (throw (server-error)))
    (locking lock
      (check-owner "profiler-set-config")
      (let [{:keys [finished running config]} @tracker]
        (when finished (throw (finished-error :config)))
        (when (and running (contains? c-opts "filename") config
                   (not= (c-opts "filename") (config "filename")))
          (throw (util/fix-error
                  (str "cannot change filename to " (pr-str (c-opts "filename"))
                       " while profiling into " (pr-str (config "filename")) ".")
                  "(profiler-set-state :stop) and (dump-profile) first"
                  "Profiler.setState(\"stop\") and Profiler.dump(true) first"
                  {:pyprof/error :invalid-state :filename (c-opts "filename")}))))
      (let [ks (keys c-opts)
            keys-ptr (native/strings ks)
            vals-ptr (native/strings (map c-opts ks))]
        (mx MXSetProcessProfilerConfig (count c-opts) keys-ptr vals-ptr nil)
        (swap! tracker assoc
               :config (config/effective c-opts)
               :filename (get c-opts "filename" "profile.json"))
        c-opts))))

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
     (locking lock
       (check-owner (str "profiler-set-state " (pr-str state)))
       (when (and (= 1 code) (:finished @tracker))
         (throw (finished-error :run)))
       (mx MXSetProcessProfilerState (int code) worker nil)
       (swap! tracker (fn [t] (let [run? (= 1 code)]
                                (assoc t :running run? :ever-ran (or (:ever-ran t) run?)
                                       :paused (if run? false (:paused t)))))))
     nil)))

(defn dump-profile
  "Writes the trace to the configured file (C: MXDumpProcessProfile). `finished` (default true;
  also 1, or false/0) ends the session: the file is valid JSON afterwards, and no second session
  can be written in this process. Throws ex-info :invalid-state when the profiler never ran
  (MXNet: \"Profiler hasn't been run\"), and :session-finished after a finished dump (a second
  one would corrupt the file)."
  ([] (dump-profile true))
  ([finished]
   (let [f (cond (boolean? finished) finished
                 (and (integer? finished) (or (== finished 0) (== finished 1))) (== finished 1)
                 :else (throw (ex-info (str "invalid dump-profile argument " (pr-str finished)
                                            ": expected true/false or 1/0")
                                       {:pyprof/error :invalid-option :finished finished})))]
     (locking lock
       (check-owner "dump-profile")
       (when (:finished @tracker)
         (throw (util/fix-error
                 "the finished trace was already written; a second dump would corrupt it."
                 "(dump-profile false) for intermediate dumps"
                 "Profiler.dump(false) for intermediate dumps"
                 {:pyprof/error :session-finished :trace (:filename @tracker)})))
       (try
         (mx MXDumpProcessProfile (if f 1 0) worker nil)
         (catch MXNetException e
           ;; MXNet itself knows whether anything ran (Python, in a JPype-hosted JVM, may have).
           (if (str/includes? (.mxnetMessage e) "hasn't been run")
             (throw (util/fix-error
                     "dump() before the profiler ran: nothing was recorded."
                     "(profiler-set-config {...}) and (profiler-set-state :run) first"
                     "Profiler.setConfig(...) and Profiler.setState(\"run\") first"
                     {:pyprof/error :invalid-state :fn (.function e)
                      :mxnet-error (.mxnetMessage e)}
                     e))
             (throw e))))
       (when f (swap! tracker assoc :finished true :running false)))
     nil)))

(def ^:private formats {:table 0, :json 1})
(def ^:private sort-codes {:total 0, :avg 1, :min 2, :max 3, :count 4})
(def default-dumps-options
  "Defaults of `dumps`."
  {:reset false, :format :table, :sort-by :total, :ascending false})

(defn- option [opts k allowed what]
  (let [v (get opts k)
        kw (cond (keyword? v) v (string? v) (keyword v))]
    (or (get allowed kw)
        (throw (ex-info (str "invalid " (name k) " " (pr-str v) ": expected " what)
                        {:pyprof/error :invalid-option :option k :value v :valid (vec (keys allowed))})))))

(defn dumps
  "MXNet's aggregate statistics per operator and category (C: MXAggregateProfileStatsPrintEx);
  needs :aggregate-stats true in the config. Options (merged over `default-dumps-options`):
    :reset     true clears the statistics after reading them (false)
    :format    :table -> the fixed-width text table; :json -> parsed data with string keys,
               {\"Time\" {category {name {\"Count\" \"Total\" \"Min\" \"Max\" \"Avg\"}}},
                \"Memory\" ..., \"Unit\" {\"Time\" \"ms\" \"Memory\" \"kB\"}} (:table)
    :sort-by   :total :avg :min :max or :count (:total)
    :ascending sort order (false)
  MXNet's numbers keep 4 significant digits; for exact statistics use `pyprof.stats/stats` on
  the trace. Throws ex-info :invalid-option for a bad option and :invalid-state when aggregate
  statistics are off (as pyprof.profiler.dumps does)."
  ([] (dumps {}))
  ([opts]
   (let [{:keys [reset ascending] :as o} (merge default-dumps-options opts)
         fmt (option o :format formats ":table or :json")
         sort-code (option o :sort-by sort-codes "one of :total, :avg, :min, :max, :count")
         _ (when-not (boolean? ascending)
             (throw (ex-info (str "invalid ascending " (pr-str ascending) ": expected true or false")
                             {:pyprof/error :invalid-option :option :ascending :value ascending})))
         out (PointerByReference.)
         s (locking lock
             (let [cfg (:config @tracker)]
               (when (and cfg (not= "true" (get cfg "aggregate_stats")))
                 (throw (util/fix-error
                         "dumps needs aggregate statistics, which are off."
                         "(profiler-set-config {:aggregate-stats true ...}) before profiling"
                         (str "Profiler.setConfig(Map.of(\"aggregate_stats\", true, ...)) before"
                              " profiling")
                         {:pyprof/error :invalid-state}))))
             (try
               (mx MXAggregateProfileStatsPrintEx out (if reset 1 0) (int fmt) (int sort-code)
                   (if ascending 1 0))
               (catch MXNetException e
                 (throw (util/fix-error
                         (str "dumps failed (" (first (str/split-lines (.mxnetMessage e))) ").")
                         (str "(profiler-set-config {:aggregate-stats true ...}) and profile"
                              " something first")
                         (str "Profiler.setConfig(Map.of(\"aggregate_stats\", true, ...)) and"
                              " profile something first")
                         {:pyprof/error :invalid-state :fn (.function e)
                          :mxnet-error (.mxnetMessage e)}
                         e))))
             (some-> (.getValue out) (.getString 0 "UTF-8")))]
     (when (empty? s)
       (throw (util/fix-error
               "MXNet returned no aggregate statistics."
               (str "(profiler-set-config {:aggregate-stats true ...}) before (profiler-set-state"
                    " :run) (statistics are kept only while it is on)")
               (str "Profiler.setConfig(Map.of(\"aggregate_stats\", true, ...)) before"
                    " Profiler.setState(\"run\") (statistics are kept only while it is on)")
               {:pyprof/error :invalid-state})))
     (if (= fmt 1) (json/read-str s) s))))

(defn pause
  "Pauses recording without leaving the run state (C: MXProcessProfilePause 1). A global flag,
  not a counter."
  []
  (locking lock
    (mx MXProcessProfilePause 1 worker nil)
    (swap! tracker assoc :paused true))
  nil)

(defn resume
  "Resumes recording after `pause` (C: MXProcessProfilePause 0)."
  []
  (locking lock
    (mx MXProcessProfilePause 0 worker nil)
    (swap! tracker assoc :paused false))
  nil)

(defmacro with-profiling
  "Runs `body` with the profiler in the run state and always stops it afterwards, without hiding
  the body's exception. An optional leading options map (a literal):
    :config  a profiler config, applied first with `profiler-set-config`
    :dump    true: (dump-profile true) after stopping, so the trace is valid JSON on exit
  Without :config, configure first with `profiler-set-config`.

    (with-profiling {:config {:filename \"t.json\" :aggregate-stats true} :dump true}
      (work))"
  [& body]
  (let [[opts body] (if (map? (first body)) [(first body) (rest body)] [nil body])]
    `(let [{config# :config dump# :dump} ~opts]
       (when config# (profiler-set-config config#))
       (profiler-set-state :run)
       (try ~@body
            (finally
              (profiler-set-state :stop)
              (when dump# (dump-profile true)))))))

;; ------------------------------------------------------------------ user-side objects
;; Semantics of pyprof.objects (the Python reference): domains cached by name and never
;; destroyed; names checked (MXNet writes them unescaped into 128-byte buffers); start twice or
;; stop before start throws; counters track their value and refuse to wrap below zero.

(defonce ^:private domains (atom {}))

(defn domain
  "The domain `name` (C: MXProfileCreateDomain): groups tasks, frames, counters and markers in
  the trace (their category). One per name in this JVM; domains are never destroyed."
  ^ProfileDomain [name]
  (let [name (ProfileObject/checkName "Domain" name)]
    (or (get @domains name)
        (locking domains
          (or (get @domains name)
              (let [d (ProfileDomain. name (native/out-pointer
                                            #(mx MXProfileCreateDomain ^String name
                                                 ^PointerByReference %)))]
                (swap! domains assoc name d)
                d))))))

(defn- check-domain ^ProfileDomain [kind d]
  (when-not (instance? ProfileDomain d)
    (throw (ex-info (str kind " needs a pyprof domain, got " (pr-str d) ". fix: (" (str/lower-case kind)
                         " (profiler/domain \"my-domain\") \"name\")")
                    {:pyprof/error :invalid-option :value d})))
  d)

(defn- profile-object ^ProfileObject [kind kind-name name create]
  (let [name (ProfileObject/checkName kind-name name)]
    (ProfileObject. kind name (native/out-pointer create))))

(defn task
  "A task `name` in `domain` (C: MXProfileCreateTask): a duration shown as an async b/e pair,
  category = the domain's name. Close it (with-open) to destroy the handle."
  ^ProfileObject [domain ^String name]
  (let [d (check-domain "Task" domain)]
    (profile-object ProfileObject$Kind/TASK "Task" name
                    #(mx MXProfileCreateTask (.pointer d) name ^PointerByReference %))))

(defn frame
  "A frame `name` in `domain` (C: MXProfileCreateFrame): a duration shown as a ( ) pair."
  ^ProfileObject [domain ^String name]
  (let [d (check-domain "Frame" domain)]
    (profile-object ProfileObject$Kind/FRAME "Frame" name
                    #(mx MXProfileCreateFrame (.pointer d) name ^PointerByReference %))))

(defn event
  "A duration `name` without a domain (C: MXProfileCreateEvent): a B/E pair, category event."
  ^ProfileObject [^String name]
  (profile-object ProfileObject$Kind/EVENT "Event" name
                  #(mx MXProfileCreateEvent name ^PointerByReference %)))

(defn counter
  "A counter `name` in `domain` (C: MXProfileCreateCounter), shown as C events; set to `value`
  when given. Change it with `set-counter`, `increment`, `decrement`."
  (^ProfileObject [domain name] (counter domain name nil))
  (^ProfileObject [domain ^String name value]
   (let [d (check-domain "Counter" domain)
         c (profile-object ProfileObject$Kind/COUNTER "Counter" name
                           #(mx MXProfileCreateCounter (.pointer d) name ^PointerByReference %))]
     (when (some? value)
       (try (.setValue c (long value))
            (catch Throwable t (.close c) (throw t))))
     c)))

(defn start
  "Starts a task, frame or event (C: MXProfileDurationStart); throws :invalid-state when it is
  already started."
  [^ProfileObject duration]
  (.start duration)
  nil)

(defn stop
  "Stops a task, frame or event and records it (C: MXProfileDurationStop); throws :invalid-state
  when it was not started."
  [^ProfileObject duration]
  (.stop duration)
  nil)

(defmacro with-duration
  "Starts the task, frame or event `duration` around `body`; always stops it."
  [duration & body]
  `(let [d# ~duration]
     (start d#)
     (try ~@body (finally (stop d#)))))

(defmacro with-task
  "Runs `body` as a new task `name` in `domain` (a domain or a domain name): created, started,
  stopped and destroyed around it, even when `body` throws. One task object per use, so
  concurrent and nested uses are safe."
  [domain name & body]
  `(let [d# ~domain]
     (with-open [t# (task (if (instance? ProfileDomain d#) d# (domain d#)) ~name)]
       (with-duration t# ~@body))))

(defmacro with-frame
  "Like `with-task`, for a frame."
  [domain name & body]
  `(let [d# ~domain]
     (with-open [f# (frame (if (instance? ProfileDomain d#) d# (domain d#)) ~name)]
       (with-duration f# ~@body))))

(defmacro with-event
  "Like `with-task`, for an event (no domain)."
  [name & body]
  `(with-open [e# (event ~name)]
     (with-duration e# ~@body)))

(defn- counter-arg ^long [what v]
  (when-not (and (integer? v) (not (boolean? v)))
    (throw (ex-info (str "counter " what " must be an integer, got " (pr-str v))
                    {:pyprof/error :invalid-option :value v})))
  (long v))

(defn set-counter
  "Sets a counter to `value` (0 ... 2^63-1) (C: MXProfileSetCounter)."
  [^ProfileObject counter value]
  (.setValue counter (counter-arg "value" value))
  nil)

(defn increment
  "Adds `delta` (default 1; may be negative) to a counter (C: MXProfileAdjustCounter); throws
  :invalid-state, leaving it unchanged, when it would go below zero."
  ([counter] (increment counter 1))
  ([^ProfileObject counter delta]
   (.increment counter (counter-arg "delta" delta))
   nil))

(defn decrement
  "Subtracts `delta` (default 1) from a counter."
  ([counter] (decrement counter 1))
  ([^ProfileObject counter delta]
   (.decrement counter (counter-arg "delta" delta))
   nil))

(defn adjust-counter
  "Adds the signed `delta` to a counter (same as `increment`)."
  [counter delta]
  (increment counter delta))

(defn counter-value
  "The counter's value as pyprof last set it."
  [^ProfileObject counter]
  (.value counter))

(def marker-scopes
  "Scopes `mark` accepts (MXNet's ProfileMarker scopes), as in pyprof.objects.MARKER_SCOPES."
  ["global" "process" "thread" "task" "marker"])

(defn mark
  "Records the instant marker `name` in `domain` now (C: MXProfileSetMarker); `scope` (default
  :process) is one of :global :process :thread :task :marker."
  ([domain name] (mark domain name :process))
  ([domain name scope]
   (let [d (check-domain "Marker" domain)
         name (ProfileObject/checkName "Marker" name)
         s (when (or (keyword? scope) (string? scope)) (clojure.core/name scope))]
     (when-not (some #{s} marker-scopes)
       (throw (ex-info (str "invalid marker scope " (pr-str scope) ": expected one of "
                            (str/join ", " marker-scopes))
                       {:pyprof/error :invalid-option :scope scope :valid marker-scopes})))
     (mx MXProfileSetMarker (.pointer d) ^String name ^String s)
     nil)))

;; ------------------------------------------------------------------ exit

(defonce ^:private exit-actions (atom (sorted-map)))

(defn ^:no-doc -on-exit!
  "Internal (pyprof.session): run `f` at JVM exit, before a plain trace is finished; actions run
  in the order of their keys, each even when another throws."
  [k f]
  (swap! exit-actions assoc (str k) f))

(defn jpype-host?
  "True in a JVM that JPype started inside Python: Python then owns MXNet's shutdown, and no
  MXNet call is made at JVM exit (Python may have shut MXNet down already)."
  []
  (try (Class/forName "org.jpype.JPypeContext" false (ClassLoader/getSystemClassLoader)) true
       (catch Throwable _ false)))

(defn at-exit!
  "What the shutdown hook does: the exit actions of open pyprof sessions, then, when the profiler
  ran in this JVM but its trace was never finished (code that relied on MXNet writing the file
  at exit, like MXNet's own Clojure example), stop and (dump-profile true), so the file is valid
  JSON."
  []
  (doseq [[_ f] @exit-actions]
    (try (f) (catch Throwable _)))
  (try
    (let [{:keys [ever-ran finished session running]} @tracker]
      (when (and ever-ran (not finished) (nil? session))
        (locking lock
          (when running (profiler-set-state :stop))
          (dump-profile true))))
    (catch Throwable _)))

(defonce ^:private exit-hook
  (when-not (jpype-host?)
    (let [t (Thread. ^Runnable at-exit! "pyprof-exit")]
      (.addShutdownHook (Runtime/getRuntime) t)
      t)))
