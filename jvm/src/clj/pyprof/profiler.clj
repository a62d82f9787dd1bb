(ns pyprof.profiler
  "MXNet's process-wide profiler, mirroring the retired `org.apache.clojure-mxnet.profiler`
  (profiler-set-config, profiler-set-state, dump-profile), plus dumps, pause/resume and
  `pyprof.objects` re-exported; the rules are Python's `pyprof.profiler`. Errors: catalogue
  errors (`pyprof.jvm.PyprofException`, ex-data :pyprof/error :pyprof/code :fix :java-fix and
  the fields), `pyprof.jvm.MXNetException` for a failing C call (ex-data {:pyprof/error :mxnet
  :fn :mxnet-error}). Only the worker process is profiled here."
  (:require [clojure.data.json :as json]
            [clojure.string :as str]
            [pyprof.claim :as claim]
            [pyprof.config :as config]
            [pyprof.native :refer [mx]]
            [pyprof.objects]
            [pyprof.output :as output]
            [pyprof.rules :as rules]
            [pyprof.trace-file :as trace-file]
            [pyprof.tracker :as tracker])
  (:import (com.sun.jna.ptr PointerByReference)
           (pyprof.jvm MXNetException)))

(set! *warn-on-reflection* true)

(def ^:private worker (rules/processes "worker"))

;; MXNet has no getters: pyprof.tracker (Python's under JPype) holds what the process asked;
;; its lock is held around each check and the call it guards.

(defn state
  "What this process has asked of the profiler: {:running :paused :finished :ever-ran :session}."
  []
  (select-keys (tracker/snapshot) [:running :paused :finished :ever-ran :session]))

(defn current-config
  "The effective configuration (C key -> C string) after the last config call, or nil."
  []
  (:config (tracker/snapshot)))

(defmacro ^:no-doc -as-owner
  "Runs `body` as the session `name`, past the ownership check."
  [name & body]
  `(tracker/with-lock
     (let [prev# (:internal (tracker/snapshot))]
       (tracker/write! {:internal (tracker/owner)})
       (try ~@body
            (finally (tracker/write! {:internal prev#}))))))

(defn- check-owner
  "Refuses `call` (:api/x) while a session owns the profiler, and with `steady-code` in steady
  mode; the owner's own calls pass."
  ([call] (check-owner call nil))
  ([call steady-code]
   (let [{:keys [session steady internal]} (tracker/snapshot)
         other? (not= internal (tracker/owner))]
     (when (and session other?)
       (throw (rules/error "state.session_owns" {:call call :session session})))
     (when (and steady-code steady other?)
       (throw (rules/error steady-code {:call call :steady steady}))))))

(defn- check-steady-config
  "steady.config_mode for a config that changes a mode key (api.json steady mode_keys)."
  [c-opts]
  (let [{:keys [steady config]} (tracker/snapshot)]
    (when steady
      (let [old (or config (config/effective {}))
            new (config/effective c-opts)
            changed (filterv #(not= (get old %) (get new %)) ((rules/api "steady") "mode_keys"))]
        (when (seq changed)
          (throw (rules/error "steady.config_mode" {:call :api/set_config
                                                    :steady steady
                                                    :keys (str/join ", " changed)})))))))

(defn- trace-name
  "The trace file of the effective configuration (MXNet's default when none)."
  []
  (get (or (:config (tracker/snapshot)) (config/effective {})) "filename"))

(defn- process-code
  "The C code of `profile-process`; process.invalid, process.server_in_jvm (no kvstore here)."
  [profile-process]
  (let [p (when (or (string? profile-process) (keyword? profile-process)) (name profile-process))
        code (or (get rules/processes p)
                 (throw (rules/error "process.invalid" {:value profile-process
                                                        :choices (rules/choices rules/processes)})))]
    (when (not= worker code)
      (throw (rules/error "process.server_in_jvm" {:key "profile_process" :value p})))
    code))

(defn- check-not-after-session
  "state.after_session for `call` while MXNet still names a closed session's raw trace."
  [call]
  (let [{:keys [steady internal]} (tracker/snapshot)]
    (when (and (nil? steady) (not= internal (tracker/owner)) (output/session-raw-trace? (trace-name)))
      (throw (rules/error "state.after_session" {:call call :trace (trace-name)})))))

(defn profiler-set-config
  "Configures the profiler (C: MXSetProcessProfilerConfig): `options` with keyword or C string
  keys (profiler_config.json; :dump-period in seconds); keys left out reset to their C default
  but :filename once the profiler ran. Returns the C strings sent. Throws config.*,
  state.finished_config, state.session_owns, steady.config_mode, process.*."
  [options]
  (let [c-opts (config/validate options)]
    (process-code (get c-opts "profile_process" "worker"))
    (tracker/with-lock
      (check-owner :api/set_config)
      (check-steady-config c-opts)
      (let [{:keys [finished running config ever-ran]} (tracker/snapshot)
            _ (when finished (throw (rules/error "state.finished_config" {:trace (trace-name)})))
            current ((or config (config/effective {})) "filename")
            ;; api.json keep_filename (never a session's raw trace: deleted by now)
            keeps (and ever-ran (not (output/session-raw-trace? current)))
            c-opts (if (and keeps (not (contains? c-opts "filename")))
                     (assoc c-opts "filename" current)
                     c-opts)
            moves (not (output/same-file? (get c-opts "filename" current) current))
            target ((config/effective c-opts) "filename") ; the C default when left out
            ;; api.json trace_claims, before MXNet deletes the file
            new-claim (and (not (output/session-raw-trace? target)) (claim/claim! "filename" target))]
        (try
          (cond (and moves (or running keeps))
                (trace-file/switch-file! c-opts)
                (and keeps (not moves))
                (trace-file/configure-same-file! c-opts)
                :else (trace-file/send-config! c-opts))
          (catch Throwable e
            (when new-claim (claim/release! target))
            (throw e)))
        (when (and moves (not ever-ran))
          (claim/release! current)) ; nothing of this process's can be in it
        (tracker/update! (fn [t] (assoc t :config (config/effective c-opts)
                                        :repair-on-finish (:ever-ran t))))
        c-opts))))

(defn profiler-set-state
  "Starts (:run, also un-pausing) or stops (:stop, the default) recording (C:
  MXSetProcessProfilerState). Throws state.invalid, state.finished_run, state.session_owns,
  steady.set_state, state.after_session, process.*."
  ([] (profiler-set-state :stop))
  ([state] (profiler-set-state state :worker))
  ([state profile-process]
   (let [s (when (or (string? state) (keyword? state)) (name state))
         code (or (get rules/states s)
                  (throw (rules/error "state.invalid" {:state state
                                                       :choices (rules/choices rules/states)})))
         _ (process-code profile-process)
         run? (= "run" s)]
     (tracker/with-lock
       (check-owner (keyword "api" s) "steady.set_state")
       (when (and run? (:finished (tracker/snapshot)))
         (throw (rules/error "state.finished_run" {:trace (trace-name)})))
       (when run? (check-not-after-session :api/run))
       (mx MXSetProcessProfilerState (int code) (int worker) nil)
       (tracker/update! (fn [t] (assoc t :running run? :ever-ran (or (:ever-ran t) run?)
                                       :paused (if run? false (:paused t))))))
     nil)))

(defn dump-profile
  "Writes the trace to the configured file (C: MXDumpProcessProfile). `finished` (a boolean,
  default true; false: an intermediate dump) ends the trace for this process. Throws
  state.dump_finished_arg, state.dump_before_run, state.finished_dump, state.session_owns,
  state.trace_finished_by_dumps, steady.finished_dump, dump.unwritable,
  dump.intermediate_finishes, dump.lost."
  ([] (dump-profile true))
  ([finished] (dump-profile finished :worker))
  ([finished profile-process]
   (process-code profile-process)
   (let [f (if (boolean? finished)
             finished
             (throw (rules/error "state.dump_finished_arg" {:value finished})))]
     (tracker/with-lock
       (check-owner (if f :api/dump :api/dump_intermediate) (when f "steady.finished_dump"))
       (when (:finished (tracker/snapshot))
         (throw (rules/error "state.finished_dump" {:trace (trace-name)})))
       (check-not-after-session (if f :api/dump :api/dump_intermediate))
       (when-let [path (get (:config (tracker/snapshot)) "filename")]
         (when-let [problem (output/file-problem path)]
           (throw (rules/error "dump.unwritable" (merge {:path path} problem)))))
       (let [{:keys [ever-ran config]} (tracker/snapshot)] ; MXNet would close the file
         (when (and (not f) ever-ran (= rules/c-false (get config "continuous_dump")))
           (throw (rules/error "dump.intermediate_finishes" {:call :api/dump_intermediate
                                                             :trace (trace-name)}))))
       (try
         (mx MXDumpProcessProfile (if f 1 0) (int worker) nil)
         (catch MXNetException e
           (when-not (trace-file/hasnt-run? e)
             (throw e))
           (let [mxnet {:fn (.function e) :mxnet-error (.mxnetMessage e)}]
             (when (:ever-ran (tracker/snapshot)) ; dumps finished the file (continuous_dump off)
               (tracker/put! :finished true)
               (claim/release! nil)
               (when-let [path (trace-name)] (trace-file/join-kept! path))
               (throw (rules/error "state.trace_finished_by_dumps"
                                   (assoc mxnet :trace (trace-name)) e)))
             (throw (rules/error "state.dump_before_run" mxnet e)))))
       (when f (tracker/put! :finished true :running false))
       (when-let [path (trace-name)] ; kept parts are joined even after a lost dump
         (try (output/check-dumped! path f)
              (finally (try (when f (trace-file/finish-file! path))
                            (finally (when f (claim/release! nil))))))))
     nil)))

(def default-dumps-options
  "api.json dumps_defaults, kebab-case keys and keyword values."
  (into {} (map (fn [[k v]] [(keyword (str/replace k "_" "-")) (if (string? v) (keyword v) v)]))
        rules/dumps-defaults))

(defn- option
  "The C code of option `k` of `opts` in `table`, else the catalogue error `code`."
  [opts k table code]
  (let [v (get opts k)]
    (or (get table (when (or (keyword? v) (string? v)) (name v)))
        (throw (rules/error code {:value v :choices (rules/choices table)})))))

(defn dumps
  "MXNet's aggregate statistics (C: MXAggregateProfileStatsPrintEx); needs :aggregate-stats.
  Options over `default-dumps-options`: :reset, :format (:table text, :json data with string
  keys; ms and kB), :sort-by (:total :avg :min :max :count), :ascending. Throws dumps.*."
  ([] (dumps {}))
  ([opts]
   (when-let [k (first (remove (set (keys default-dumps-options)) (keys opts)))]
     (throw (rules/error "dumps.unknown_option"
                         {:option k :nearest (config/nearest k (keys default-dumps-options))
                          :valid (str/join ", " (keys default-dumps-options))})))
   (let [{:keys [reset ascending] :as o} (merge default-dumps-options opts)
         fmt (option o :format rules/dumps-formats "dumps.format")
         sort-code (option o :sort-by rules/dumps-sort-keys "dumps.sort_by")
         _ (when-not (boolean? ascending)
             (throw (rules/error "dumps.ascending" {:value ascending})))
         out (PointerByReference.)
         s (tracker/with-lock
             (let [{cfg :config :keys [ever-ran finished]} (tracker/snapshot)]
               (when (and cfg (not= rules/c-true (get cfg "aggregate_stats")))
                 (throw (rules/error "dumps.no_aggregate_stats")))
               (when (and ever-ran (not finished) (= rules/c-false (get cfg "continuous_dump")))
                 (throw (rules/error "dumps.finishes_trace" {:trace (trace-name)}))))
             (try
               (mx MXAggregateProfileStatsPrintEx out (if reset 1 0) (int fmt) (int sort-code)
                   (if ascending 1 0))
               (catch MXNetException e
                 (throw (rules/error "dumps.failed"
                                     {:reason (or (first (str/split-lines (.mxnetMessage e))) "")
                                      :fn (.function e) :mxnet-error (.mxnetMessage e)}
                                     e))))
             (some-> (.getValue out) (.getString 0 "UTF-8")))]
     (when (empty? s)
       (throw (rules/error "dumps.empty")))
     (if (= fmt (rules/dumps-formats "json"))
       (json/read-str (str/replace s (re-pattern (rules/api "dumps_json_key_line")) ; unescaped keys
                                   (fn [[_ indent k]] (str indent (json/write-str k) ": {"))))
       s))))

(defn- set-paused! [profile-process paused?]
  (process-code profile-process)
  (tracker/with-lock
    (mx MXProcessProfilePause (if paused? 1 0) (int worker) nil)
    (tracker/put! :paused paused?))
  nil)

(defn pause
  "Pauses recording without leaving the run state (C: MXProcessProfilePause 1)."
  ([] (pause :worker))
  ([profile-process] (set-paused! profile-process true)))

(defn resume
  "Resumes recording after `pause` (C: MXProcessProfilePause 0)."
  ([] (resume :worker))
  ([profile-process] (set-paused! profile-process false)))

(defn name-thread!
  "Names the calling thread (its `Thread.getName()`) in the windows written from now on
  (trace.json thread_names). pyprof's own callers are named at their first call; another
  binding's threads (DJL's workers) call this at start and after a rename. False when not
  named (off Linux, past `pyprof.jvm.ThreadNames/LIMIT` living threads)."
  []
  (not= 0 (pyprof.jvm.ThreadNames/register)))

(def ^:private profiling-option-keys [:config :dump])

(defn- profiling-options
  "[options body] of `with-profiling`'s forms: a leading map literal is the options; a leading
  symbol or keyword (the retired forms) is profiling.options_not_map."
  [[head & more :as forms]]
  (cond (map? head)
        (if-let [k (first (remove (set profiling-option-keys) (keys head)))]
          (throw (rules/error "profiling.unknown_option"
                              {:option k :nearest (config/nearest k profiling-option-keys)}))
          [head more])
        (and more (or (symbol? head) (keyword? head)))
        (throw (rules/error "profiling.options_not_map" {:value head}))
        :else [nil forms]))

(defmacro with-profiling
  "Runs `body` with the profiler running; always stops it. An optional leading map literal of
  expressions: :config (`profiler-set-config`), :dump (truthy: (dump-profile true) after
  stopping); profiling.unknown_option, profiling.options_not_map as the form compiles.

    (with-profiling {:config {:filename \"t.json\"} :dump true} (work))
    (with-profiling {:config (:config opts)} (work))"
  [& forms]
  (let [[opts body] (profiling-options forms)]
    `(let [config# ~(:config opts) dump# ~(:dump opts)]
       (when config# (profiler-set-config config#))
       (profiler-set-state :run)
       (try ~@body
            (finally
              (profiler-set-state :stop)
              (when dump# (dump-profile true)))))))

;; ------------------------------------------------------------------ user-side objects

;; pyprof.objects' public vars, re-exported with their metadata (macros stay macros)
(doseq [[s v] (ns-publics 'pyprof.objects)]
  (reset-meta! (intern *ns* s @v) (assoc (meta v) :ns *ns*)))

;; ------------------------------------------------------------------ exit

(defonce ^:private exit-actions (atom (sorted-map)))

(defn ^:no-doc -on-exit!
  "Runs `f` at JVM exit, in key order, before a plain trace is finished."
  [k f]
  (swap! exit-actions assoc (str k) f))

(defn ^:no-doc jpype-host?
  "True in a JVM that JPype started (Python then owns the exit)."
  []
  (try (Class/forName "org.jpype.JPypeContext" false (ClassLoader/getSystemClassLoader)) true
       (catch Throwable _ false)))

(defn ^:no-doc -run-exit-actions!
  "The exit actions in key order, a failure one line on stderr (under JPype, Python's exit runs
  them)."
  []
  (doseq [[k f] @exit-actions]
    (try (f) (catch Throwable e
               (binding [*out* *err*] (println (str "pyprof: at exit, " k ": " (ex-message e))))))))

(defn ^:no-doc at-exit!
  "The shutdown hook: the exit actions, then finishes a plain trace left unfinished."
  []
  (-run-exit-actions!)
  (try
    (let [{:keys [ever-ran finished session running]} (tracker/snapshot)]
      (when (and ever-ran (not finished) (nil? session) (nil? (:steady (tracker/snapshot)))
                 (not (output/session-raw-trace? (trace-name)))) ; the session's exit finishes it
        (tracker/with-lock
          (when running (profiler-set-state :stop))
          (dump-profile true))))
    (catch Throwable e
      (binding [*out* *err*]
        (println (str "pyprof: could not finish the trace at exit: " (ex-message e)))))))

(defonce ^:private unknown-variables-said ; a misspelt PYPROF_* (Python's import says it)
  (when-not (jpype-host?)
    (binding [*out* *err*] (run! println (config/unknown-variables (System/getenv))))))

(defonce ^:private exit-hook
  (when-not (jpype-host?)
    (let [t (Thread. ^Runnable at-exit! "pyprof-exit")]
      (.addShutdownHook (Runtime/getRuntime) t)
      t)))
