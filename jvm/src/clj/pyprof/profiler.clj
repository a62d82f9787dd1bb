(ns pyprof.profiler
  "MXNet's process-wide profiler, mirroring the retired `org.apache.clojure-mxnet.profiler`
  namespace (profiler-set-config, profiler-set-state, dump-profile) plus aggregate statistics,
  pause/resume and, re-exported from `pyprof.objects`, the user-side objects (domains, tasks,
  frames, events, counters, markers).

  Errors (the same scheme across pyprof's JVM layer):
  - a key, value, state or option pyprof rejects before calling C: an error of the catalogue
    shared with the Python package (pyprof/spec/errors.json, through `pyprof.rules`): a
    `pyprof.jvm.PyprofException` (an ex-info) whose `ex-data` holds
    `{:pyprof/error :invalid-config | :invalid-state | :invalid-option | :session-finished ...
      :pyprof/code \"state.finished_run\" ...}` and the fields of the Python reference's error;
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
            [pyprof.claim :as claim]
            [pyprof.config :as config]
            [pyprof.native :as native :refer [mx]]
            [pyprof.objects]
            [pyprof.output :as output]
            [pyprof.rules :as rules]
            [pyprof.trace-file :as trace-file]
            [pyprof.tracker :as tracker])
  (:import (com.sun.jna.ptr PointerByReference)
           (pyprof.jvm MXNetException)))

(set! *warn-on-reflection* true)

(def ^:private worker (rules/processes "worker"))

;; What this process has asked of the profiler singleton (MXNet has no getters), for errors
;; that name the fix and for session ownership: pyprof.tracker, the one tracker of the process
;; (Python's, through the bridge, when JPype hosts this JVM; else this JVM's own). Its lock is
;; held around each check and the call it guards.

(defn state
  "What this process has asked of the profiler: {:running :paused :finished :ever-ran :session}
  (in a JPype-hosted JVM, Python's calls included: one tracker)."
  []
  (select-keys (tracker/snapshot) [:running :paused :finished :ever-ran :session]))

(defn current-config
  "The effective configuration (C key -> C string, omitted keys at their C default) after the
  last profiler-set-config (or Python's set_config, in a JPype-hosted JVM), or nil."
  []
  (:config (tracker/snapshot)))

(defn ^:no-doc -update-tracker!
  "Internal (pyprof.session): change the tracker under its lock: (f snapshot & args), keyword
  keys; returns the new map."
  [f & args]
  (apply tracker/update! f args))

(defmacro ^:no-doc -as-owner
  "Internal (pyprof.session): run `body` as the session `name`, past the ownership check."
  [name & body]
  `(tracker/with-lock
     (let [prev# (:internal (tracker/snapshot))]
       (tracker/write! {:internal (tracker/owner)})
       (try ~@body
            (finally (tracker/write! {:internal prev#}))))))

(defn- check-owner
  "Refuses calls that would break an open pyprof.session (it owns the trace file), as
  pyprof.profiler._check_owner; `call` names the call."
  [call]
  (let [{:keys [session internal]} (tracker/snapshot)]
    (when (and session (not= internal (tracker/owner)))
      (throw (rules/error "state.session_owns" {:call call :session session})))))

(defn- check-steady-switch
  "In steady mode (api.json steady), refuses a call that would change MXNet's IsProfiling: a
  state switch or a finished dump (`call` names it), except pyprof's own (steady mode's
  beginning and end, the exit actions, run as the owner); as pyprof.process.steady_checks."
  [call dump?]
  (let [{:keys [steady internal]} (tracker/snapshot)]
    (when (and steady (not= internal (tracker/owner)))
      (throw (rules/error (if dump? "steady.finished_dump" "steady.set_state")
                          {:call call :steady steady})))))

(defn- check-steady-config
  "In steady mode, refuses a config (C strings) that changes the effective value of a mode key
  (api.json steady mode_keys: MXNet's mode bits, which IsProfiling reads)."
  [c-opts]
  (let [{:keys [steady config]} (tracker/snapshot)]
    (when steady
      (let [old (or config (config/effective {}))
            new (config/effective c-opts)
            changed (filterv #(not= (get old %) (get new %)) ((rules/api "steady") "mode_keys"))]
        (when (seq changed)
          (throw (rules/error "steady.config_mode" {:call "(profiler-set-config ...)"
                                                    :steady steady
                                                    :keys (str/join ", " changed)})))))))

(defn- trace-name
  "The trace file of the effective configuration, or nil (pyprof.profiler._trace_name)."
  []
  (get (:config (tracker/snapshot)) "filename"))

(defn- process-code
  "The C code of `profile-process` (\"worker\" or :worker), as pyprof.profiler._process_code:
  process.invalid for a name api.json does not list; process.server_in_jvm for the server, where
  Python would use a kvstore handle (process.server_needs_kvstore): the JVM holds none."
  [profile-process]
  (let [p (when (or (string? profile-process) (keyword? profile-process)) (name profile-process))
        code (or (get rules/processes p)
                 (throw (rules/error "process.invalid" {:value profile-process
                                                        :choices (rules/choices rules/processes)})))]
    (when (not= worker code)
      (throw (rules/error "process.server_in_jvm" {:key "profile_process" :value p})))
    code))

(defn ^:no-doc -session-raw-trace?
  "True for this process's session raw trace (api.json raw_trace: <file> in a directory
  <dir_prefix><pid>-...), which sessions own: keep_filename does not keep it."
  [^String path]
  (let [spec (rules/api "raw_trace")
        f (java.io.File. path)
        parent (some-> (.getParentFile f) .getName)]
    (and (= (.getName f) (spec "file"))
         (some? parent)
         (str/starts-with? parent (str (spec "dir_prefix") (.pid (java.lang.ProcessHandle/current)) "-")))))

(defn profiler-set-config
  "Configures the profiler (C: MXSetProcessProfilerConfig). `options` is a map of keyword keys
  (:profile-symbolic, :filename, :aggregate-stats, :dump-period, ...) or C's string keys
  (\"profile_symbolic\"), checked against profiler_config.json first. Every call resets the keys
  it leaves out to their C default, except :filename once the profiler has run (until the
  finished dump): it is kept (api.json keep_filename; on purpose unlike MXNet, which would send
  the rest of the trace to ./profile.json), and the events already dumped there are kept in a
  hidden part that the finished dump joins back (docs/configuration.md). It deletes an existing
  file at a new :filename. :dump-period is in seconds. Returns the map of C strings sent.

  Throws ex-info :invalid-config (key or value; a :filename MXNet could not write:
  config.missing_directory, config.bad_path), :session-finished (after a finished dump),
  :invalid-state (while a pyprof.session is open, or :profile-process :server: the JVM holds no
  kvstore handle), :invalid-config config.filename_claimed when another process configured the
  file first and has not finished its trace (api.json trace_claims: the file is claimed for this
  process until its finished dump or exit; config.claim_failed when no claim can be taken). A new :filename while profiling runs works as in MXNet and loses nothing: the
  events so far end in the old file, rewritten as a valid trace; later ones go to the new file."
  [options]
  (let [c-opts (config/validate options)]
    (process-code (get c-opts "profile_process" "worker"))
    (tracker/with-lock
      (check-owner "(profiler-set-config ...)")
      (check-steady-config c-opts)
      (let [{:keys [finished running config ever-ran]} (tracker/snapshot)
            _ (when finished (throw (rules/error "state.finished_config" {:trace (trace-name)})))
            current ((or config (config/effective {})) "filename")
            ;; api.json keep_filename: once the profiler ran, a config without it keeps it
            ;; (never a session's raw trace: internal, and deleted by now)
            keeps (and ever-ran (not (-session-raw-trace? current)))
            c-opts (if (and keeps (not (contains? c-opts "filename")))
                     (assoc c-opts "filename" current)
                     c-opts)
            ;; another file, by grammar.json paths ("./a.json" is "a.json")
            moves (not (config/same-file? (get c-opts "filename" current) current))
            target ((config/effective c-opts) "filename") ; the C default when left out
            ;; api.json trace_claims, before MXNet deletes the file (a session's raw trace is
            ;; private)
            new-claim (and (not (-session-raw-trace? target)) (claim/claim! "filename" target))]
        (try
          (cond (and running config moves)
                (trace-file/switch-file! c-opts)
                (and keeps (not moves))
                (trace-file/configure-same-file! c-opts)
                :else (do (when moves
                            ;; stopped, away from a kept file: its parts end there
                            (trace-file/join-kept! current))
                          (trace-file/send-config! c-opts)))
          (catch Throwable e
            (when new-claim (claim/release! target))
            (throw e)))
        (when (and moves (not ever-ran))
          (claim/release! current)) ; nothing of this process's can be in it
        (tracker/update! (fn [t] (assoc t :config (config/effective c-opts)
                                        :repair-on-finish (:ever-ran t))))
        c-opts))))

(defn profiler-set-state
  "Starts (\"run\" or :run) or stops (\"stop\" or :stop, the default) recording
  (C: MXSetProcessProfilerState). Running also un-pauses. `profile-process` (as Python's
  set_state) may only be :worker here: the JVM profiles its own process."
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
       (check-owner (str "(profiler-set-state " (pr-str state) ")"))
       (check-steady-switch (str "(profiler-set-state " (pr-str state) ")") false)
       (when (and run? (:finished (tracker/snapshot)))
         (throw (rules/error "state.finished_run" {:trace (trace-name)})))
       (mx MXSetProcessProfilerState (int code) (int worker) nil)
       (tracker/update! (fn [t] (assoc t :running run? :ever-ran (or (:ever-ran t) run?)
                                       :paused (if run? false (:paused t))))))
     nil)))

(defn dump-profile
  "Writes the trace to the configured file (C: MXDumpProcessProfile). `finished` (default true;
  also 1, or false/0) ends the session: the file is valid JSON afterwards, and no second session
  can be written in this process. Throws ex-info :invalid-state when the profiler never ran
  (MXNet: \"Profiler hasn't been run\"), and :session-finished after a finished dump (a second
  one would corrupt the file) or when `dumps` already finished it (continuous_dump off); and,
  since MXNet reports no failure to write, :invalid-state dump.unwritable when the file cannot be
  written (checked first: nothing dumped, the events stay for another :filename) or dump.lost
  when MXNet wrote no file or a finished one lacks its closing bytes.
  `profile-process` (as Python's dump) may only be :worker here."
  ([] (dump-profile true))
  ([finished] (dump-profile finished :worker))
  ([finished profile-process]
   (process-code profile-process)
   (let [f (cond (boolean? finished) finished
                 (and (integer? finished) (or (== finished 0) (== finished 1))) (== finished 1)
                 :else (throw (rules/error "state.dump_finished_arg" {:value finished})))]
     (tracker/with-lock
       (check-owner "(dump-profile ...)")
       (when f (check-steady-switch "(dump-profile true)" true))
       (when (:finished (tracker/snapshot))
         (throw (rules/error "state.finished_dump" {:trace (trace-name)})))
       (when-let [path (trace-name)]
         (when-let [problem (output/file-problem path (config/parent-directory path))]
           ;; nothing dumped: MXNet keeps its queued events for another filename
           (throw (rules/error "dump.unwritable" (merge {:path path} problem)))))
       (try
         (mx MXDumpProcessProfile (if f 1 0) (int worker) nil)
         (catch MXNetException e
           ;; MXNet itself knows whether anything ran (Python, in a JPype-hosted JVM, may have).
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
       (let [{:keys [config]} (tracker/snapshot)
             final? (or f (= rules/c-false (get config "continuous_dump")))]
         (when-let [path (trace-name)]
           ;; kept parts are joined even when the check reports a lost dump
           (try (trace-file/check-dumped! path final?)
                (finally (try (when final? (trace-file/finish-file! path))
                              ;; the trace is finished: its files are free again
                              (finally (when f (claim/release! nil)))))))))
     nil)))

(def default-dumps-options
  "Defaults of `dumps` (api.json dumps_defaults, keys kebab-case, names as keywords)."
  (into {} (map (fn [[k v]] [(keyword (str/replace k "_" "-")) (if (string? v) (keyword v) v)]))
        rules/dumps-defaults))

(defn- option
  "The C code of option `k` of `opts` (a keyword or string naming an entry of `table`); else the
  catalogue error `code`."
  [opts k table code]
  (let [v (get opts k)]
    (or (get table (when (or (keyword? v) (string? v)) (name v)))
        (throw (rules/error code {:value v :choices (rules/choices table)})))))

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
         fmt (option o :format rules/dumps-formats "dumps.format")
         sort-code (option o :sort-by rules/dumps-sort-keys "dumps.sort_by")
         _ (when-not (boolean? ascending)
             (throw (rules/error "dumps.ascending" {:value ascending})))
         out (PointerByReference.)
         s (tracker/with-lock
             (let [cfg (:config (tracker/snapshot))]
               (when (and cfg (not= rules/c-true (get cfg "aggregate_stats")))
                 (throw (rules/error "dumps.no_aggregate_stats"))))
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
     (if (= fmt (rules/dumps-formats "json")) (json/read-str s) s))))

(defn pause
  "Pauses recording without leaving the run state (C: MXProcessProfilePause 1). A global flag,
  not a counter. `profile-process` (as Python's pause) may only be :worker here."
  ([] (pause :worker))
  ([profile-process]
   (process-code profile-process)
   (tracker/with-lock
     (mx MXProcessProfilePause 1 (int worker) nil)
     (tracker/put! :paused true))
   nil))

(defn resume
  "Resumes recording after `pause` (C: MXProcessProfilePause 0). `profile-process` (as Python's
  resume) may only be :worker here."
  ([] (resume :worker))
  ([profile-process]
   (process-code profile-process)
   (tracker/with-lock
     (mx MXProcessProfilePause 0 (int worker) nil)
     (tracker/put! :paused false))
   nil))

(def ^:private profiling-option-keys #{:config :dump})

(defn ^:no-doc -profiling-options
  "Internal (`with-profiling`): `opts` checked at run time, nil for none; a non-map, or a map with
  other keys than :config and :dump (a profiler config given directly, say), is
  profiling.options_not_map."
  [opts]
  (when (some? opts)
    (when-not (and (map? opts) (every? profiling-option-keys (keys opts)))
      (throw (rules/error "profiling.options_not_map" {:value opts})))
    opts))

(defmacro with-profiling
  "Runs `body` with the profiler in the run state and always stops it afterwards, without hiding
  the body's exception. An optional leading options map, evaluated at run time: a map literal,
  or a symbol (a local or a var holding the map) followed by the body; nil is no options:
    :config  a profiler config, applied first with `profiler-set-config`
    :dump    true: (dump-profile true) after stopping, so the trace is valid JSON on exit
  Without :config, configure first with `profiler-set-config`. Options that are not such a map
  (a profiler config given directly, a vector, ...) throw :invalid-option
  (profiling.options_not_map) before the profiler starts. Any other map expression follows
  `:options` (a call cannot be told from the body's first form otherwise):
  `(with-profiling :options (merge base {:dump true}) (work))`.

    (with-profiling {:config {:filename \"t.json\" :aggregate-stats true} :dump true}
      (work))
    (def opts {:config {:filename \"t.json\"} :dump true})
    (with-profiling opts (work))"
  [& body]
  (let [[opts body] (cond (= :options (first body)) [(second body) (nnext body)]
                          (or (map? (first body)) (and (symbol? (first body)) (next body)))
                          [(first body) (rest body)]
                          :else [nil body])]
    `(let [{config# :config dump# :dump} (-profiling-options ~opts)]
       (when config# (profiler-set-config config#))
       (profiler-set-state :run)
       (try ~@body
            (finally
              (profiler-set-state :stop)
              (when dump# (dump-profile true)))))))

;; ------------------------------------------------------------------ user-side objects

(defmacro ^:private re-export
  "Interns each public var of `ns` named in `syms` here, with its value (a function, a macro or
  a value) and its metadata (docstring, arglists, :macro), so `pyprof.profiler/task` is
  `pyprof.objects/task`."
  [ns & syms]
  `(do ~@(for [s syms]
           `(let [v# (var ~(symbol (name ns) (name s)))]
              (doto (intern *ns* '~s @v#)
                (reset-meta! (merge (dissoc (meta v#) :ns :name) {:ns *ns* :name '~s})))))))

;; pyprof.objects (the Python reference re-exports its objects from pyprof.profiler too).
(re-export pyprof.objects
           domain task frame event counter start stop with-duration with-task with-frame
           with-event set-counter increment decrement counter-value marker-scopes
           mark)

;; ------------------------------------------------------------------ exit

(defonce ^:private exit-actions (atom (sorted-map)))

(defn ^:no-doc -on-exit!
  "Internal (pyprof.session): run `f` at JVM exit, before a plain trace is finished; actions run
  in the order of their keys, each even when another throws."
  [k f]
  (swap! exit-actions assoc (str k) f))

(defn ^:no-doc jpype-host?
  "True in a JVM that JPype started inside Python: Python then owns MXNet's shutdown, and no
  MXNet call is made at JVM exit (Python may have shut MXNet down already)."
  []
  (try (Class/forName "org.jpype.JPypeContext" false (ClassLoader/getSystemClassLoader)) true
       (catch Throwable _ false)))

(defn ^:no-doc at-exit!
  "What the shutdown hook does: the exit actions of open pyprof sessions, then, when the profiler
  ran in this JVM but its trace was never finished (code that relied on MXNet writing the file
  at exit, like MXNet's own Clojure example), stop and (dump-profile true), so the file is valid
  JSON."
  []
  (doseq [[k f] @exit-actions]
    (try (f) (catch Throwable e
               (binding [*out* *err*] (println (str "pyprof: at exit, " k ": " (ex-message e)))))))
  (try
    (let [{:keys [ever-ran finished session running]} (tracker/snapshot)]
      (when (and ever-ran (not finished) (nil? session) (nil? (:steady (tracker/snapshot))))
        (tracker/with-lock
          (when running (profiler-set-state :stop))
          (dump-profile true))))
    (catch Throwable e  ; a trace that cannot be finished is said, as Python's exit handler does
      (binding [*out* *err*]
        (println (str "pyprof: could not finish the trace at exit: " (ex-message e)))))))

(defonce ^:private exit-hook
  (when-not (jpype-host?)
    (let [t (Thread. ^Runnable at-exit! "pyprof-exit")]
      (.addShutdownHook (Runtime/getRuntime) t)
      t)))
