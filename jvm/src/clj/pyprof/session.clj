(ns pyprof.session
  "Profiling sessions with a step schedule: many windows per process, each saved as its own
  valid Chrome trace. The JVM side of `pyprof.session` (Python), with the same design:

  - One raw trace per process. MXNet can finish only one trace file per process, so pyprof never
    finishes one while the process lives: it configures MXNet once with continuous_dump on and a
    file it owns (`.pyprof-raw-<pid>.json` beside the first window, or in $PYPROF_RAW_DIR), and
    only ever dumps with finished = false, which appends. The raw file only grows.
  - Windows are byte ranges of the raw file. Every boundary is made at a quiescent point:
    MXNDArrayWaitAll, state stop, dump(false); the file size then is an exact boundary. A window
    is [size at its start, size at its end), read tolerantly (header only in the first range,
    leading or trailing commas) and written as a new valid trace (temporary file, then rename).
    Warm-up steps record too, but their range is skipped.
  - Metadata (`ph` M) seen in any range is carried to the head of every window.
  - While a session is open it owns the profiler: profiler-set-config, profiler-set-state and
    dump-profile from anyone else throw :invalid-state (pause, resume and dumps still work).
    Sessions do not nest; consecutive sessions in one process are fine.
  - While a window records, `<window>.partial` names the raw file and the start offset, in the
    format Python's `pyprof.session.recover` reads, to rebuild a window after a crash.
  - At JVM exit (a shutdown hook; not in a JVM hosted by JPype, where Python owns MXNet's end)
    open sessions are stopped, their windows saved, and the raw file finished and deleted.

  All functions are thread safe: one session's calls are serialised on the session."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [pyprof.config :as config]
            [pyprof.native :as native :refer [mx]]
            [pyprof.profiler :as profiler]
            [pyprof.stats :as stats]
            [pyprof.util :as util])
  (:import (java.io File RandomAccessFile)
           (java.nio.charset StandardCharsets)
           (java.nio.file Files LinkOption Path Paths StandardCopyOption)
           (java.nio.file.attribute FileAttribute)))

(set! *warn-on-reflection* true)

(def actions
  "What the profiler does during one step (the value of a schedule for a step number)."
  #{:none          ; not recording
    :warmup        ; recording, discarded
    :record        ; recording into the current window
    :record-and-save}) ; last step of a window: saved at the next step

(defn- bad-option [msg data]
  (ex-info msg (merge {:pyprof/error :invalid-option} data)))

(defn schedule
  "A step schedule: a function from step number (0, 1, ...) to an action. After :skip-first
  steps, cycles of :wait idle steps, :warmup discarded steps and :active recorded steps repeat
  :repeat times (0 = for ever). Each cycle's active steps form one window. Defaults:
  {:wait 0 :warmup 0 :active 1 :repeat 0 :skip-first 0}."
  ([] (schedule {}))
  ([{:keys [wait warmup active repeat skip-first]
     :or {wait 0 warmup 0 active 1 repeat 0 skip-first 0} :as opts}]
   (doseq [[k v low] [[:wait wait 0] [:warmup warmup 0] [:active active 1] [:repeat repeat 0]
                      [:skip-first skip-first 0]]]
     (when-not (and (integer? v) (>= v low))
       (throw (bad-option (str "invalid schedule " (name k) "=" (pr-str v) ": expected an int >= " low)
                          {:option k :value v}))))
   (let [unknown (remove #{:wait :warmup :active :repeat :skip-first} (keys opts))]
     (when (seq unknown)
       (throw (bad-option (str "unknown schedule option(s) " (vec unknown) ": expected :wait"
                               " :warmup :active :repeat :skip-first") {:option (vec unknown)}))))
   (let [cycle (+ wait warmup active)]
     (with-meta
       (fn [step]
         (if (< step skip-first)
           :none
           (let [step (- step skip-first)]
             (if (and (pos? repeat) (>= step (* repeat cycle)))
               :none
               (let [pos (mod step cycle)]
                 (cond (< pos wait) :none
                       (< pos (+ wait warmup)) :warmup
                       (= pos (dec cycle)) :record-and-save
                       :else :record))))))
       {::schedule (merge {:wait wait :warmup warmup :active active :repeat repeat
                           :skip-first skip-first})}))))

;; ------------------------------------------------------------------ the raw trace

(defonce ^:private raw (atom {:path nil, :metadata [], :metadata-keys #{}, :finished false,
                              :scanned 0})) ; bytes before this offset were read for metadata

(defn raw-trace-path
  "Path of this process's raw MXNet trace (nil before the first session)."
  []
  (:path @raw))

(defn- pid [] (.pid (java.lang.ProcessHandle/current)))

(defn- raw-size ^long []
  (let [f (io/file (:path @raw))] (if (.isFile f) (.length f) 0)))

(defn- configure-raw!
  "Make MXNet record with `c-opts` into the raw file, reconfiguring only when needed. Called
  as the owner, under the profiler lock."
  [c-opts directory]
  (let [{:keys [finished running]} (profiler/state)]
    (when (or finished (:finished @raw))
      (throw (util/fix-error
              (str "the profiler already wrote its finished trace in this process"
                   " (dump-profile true); MXNet cannot record again.")
              (str "use only pyprof.session in this process (it never finishes the trace), or"
                   " run the session in a child process")
              (str "use only ProfilerSession in this process (it never finishes the trace), or"
                   " run the session in a child process")
              {:pyprof/error :session-finished})))
    (when running
      (throw (util/fix-error
              (str "the profiler is already recording ((profiler-set-state :run) outside"
                   " pyprof.session).")
              "(profiler-set-state :stop) and (dump-profile) first"
              "Profiler.setState(\"stop\") and Profiler.dump(true) first"
              {:pyprof/error :invalid-state}))))
  (when-not (:path @raw)
    (let [dir (or (not-empty (System/getenv "PYPROF_RAW_DIR")) directory)]
      (swap! raw assoc :path (str (.toAbsolutePath (Paths/get (str dir) (into-array String [(str ".pyprof-raw-" (pid) ".json")])))))))
  (let [wanted (assoc c-opts "filename" (:path @raw) "continuous_dump" "true")]
    (when (not= (profiler/current-config) (config/effective wanted))
      (profiler/profiler-set-config wanted)
      (swap! raw assoc :scanned 0))))

(defn- read-range
  "Bytes [start, end) of the raw file as a string (\"\" when it does not exist)."
  ^String [path ^long start ^long end]
  (let [f (io/file path)]
    (if (or (not (.isFile f)) (>= start end))
      ""
      (with-open [r (RandomAccessFile. f "r")]
        (let [n (int (- (min end (.length r)) start))
              buf (byte-array (max n 0))]
          (.seek r start)
          (.readFully r buf)
          (String. buf StandardCharsets/UTF_8))))))

(defn parse-range
  "The events in a byte range of an MXNet trace that MXNet appended to: an optional header
  `{\"traceEvents\": [`, events separated by commas (possibly leading or trailing ones), an
  optional footer `], \"displayTimeUnit\": \"ms\" }`. A last event cut mid-way (a crash) is
  dropped."
  [^String text]
  (let [body (-> text
                 (str/replace-first #"^\s*\{\s*\"traceEvents\"\s*:\s*\[" "")
                 (str/replace-first #"\]\s*,\s*\"displayTimeUnit\"\s*:\s*\"[^\"]*\"\s*\}\s*$" "")
                 (str/replace #"^[\s,]+|[\s,]+$" ""))]
    (if (str/blank? body)
      []
      (try
        (json/read-str (str "[" body "]"))
        (catch Exception _
          ;; a cut-off tail: keep the events up to the last complete one
          (let [cut (str/last-index-of body "}\n,")]
            (if cut (json/read-str (str "[" (subs body 0 (inc cut)) "]")) [])))))))

(defn- write-trace!
  "Writes `events` as a valid trace at `path`, atomically (temporary file, then rename)."
  [^String path events]
  (let [target (.toAbsolutePath (Paths/get path (make-array String 0)))
        dir (or (.getParent target) (Paths/get "." (make-array String 0)))
        _ (Files/createDirectories dir (make-array FileAttribute 0))
        tmp (Files/createTempFile dir ".pyprof-" ".tmp" (make-array FileAttribute 0))]
    (try
      (with-open [w (io/writer (.toFile tmp))]
        (.write w "{\"traceEvents\":[\n")
        (loop [[e & more] events, first? true]
          (when e
            (when-not first? (.write w ",\n"))
            (json/write e w)
            (recur more false)))
        (.write w "\n],\"displayTimeUnit\":\"ms\"}\n"))
      (try (Files/setPosixFilePermissions tmp (java.nio.file.attribute.PosixFilePermissions/fromString "rw-r--r--"))
           (catch UnsupportedOperationException _))
      (Files/move tmp target (into-array [StandardCopyOption/REPLACE_EXISTING
                                          StandardCopyOption/ATOMIC_MOVE]))
      (finally (Files/deleteIfExists tmp)))))

(defn- cut!
  "Writes raw bytes [start, end) as a valid trace at `out`, known metadata first; returns the
  number of events written."
  [start end out]
  (let [{:keys [scanned path]} @raw
        skipped (when (< scanned start) (parse-range (read-range path scanned start)))
        events (parse-range (read-range path start end))
        _ (swap! raw assoc :scanned end)
        {:keys [metadata metadata-keys]}
        (swap! raw (fn [r]
                     (reduce (fn [r e]
                               (if (and (= "M" (get e "ph")) (not ((:metadata-keys r) e)))
                                 (-> r (update :metadata conj e) (update :metadata-keys conj e))
                                 r))
                             r (concat (filter #(= "M" (get % "ph")) skipped) events))))
        body (remove #(= "M" (get % "ph")) events)
        all (concat metadata body)]
    (write-trace! out all)
    (+ (count metadata) (count body))))

(defn- partial-path ^String [path] (str path ".partial"))

(defn- write-partial! [path start index]
  (spit (partial-path path)
        (json/write-str {"raw" (:path @raw) "start" start "window" index "pid" (pid)
                         "metadata" (:metadata @raw)})))

;; ------------------------------------------------------------------ sessions

(def ^:private reserved
  {"filename" "a session writes one file per window: pass :path \"trace_{window}.json\""
   "continuous_dump" "a session always appends continuously (that is how windows are cut)"
   "profile_process" "server profiling needs a distributed kvstore, not a session"})

(defonce ^:private open-sessions (atom #{}))
(defonce ^:private counter (atom 0))

(defn- many-windows? [sched]
  (< 1 (count (take 2 (filter #(= :record-and-save (sched %)) (range 10000))))))

(defn- fill-path [template window step]
  (-> template
      (str/replace "{window}" (str window))
      (str/replace "{step}" (str step))
      (str/replace "{pid}" (str (pid)))))

(defn profile
  "A new session (not started). Options (all optional):
    :schedule        (schedule {...}) or any fn step -> action; default: one window from
                     `start!` to `stop!`
    :path            trace file of each window, \"{window}\" (0, 1, ...), \"{step}\" (first
                     step) and \"{pid}\" filled in; must hold {window} when the schedule saves
                     several windows (\"pyprof_trace_{window}.json\")
    :on-trace-ready  called with each saved window map {:index :path :first-step :last-step
                     :events}, after its file is written
    recording keys as in `profiler-set-config`: :profile-symbolic :profile-imperative
    :profile-api :profile-memory :profile-all :aggregate-stats :dump-period.
  Use `with-session`, or `start!`, `step!` after each step, and `stop!`."
  ([] (profile {}))
  ([opts]
   (let [{:keys [schedule on-trace-ready path] :or {path "pyprof_trace_{window}.json"}} opts
         rec (dissoc opts :schedule :on-trace-ready :path)
         _ (doseq [k (keys rec)]
             (when-let [why (reserved (pyprof.util/key->c k))]
               (throw (ex-info (str "a session does not take " (pr-str k) ": " why)
                               {:pyprof/error :invalid-config :key k}))))
         c-opts (config/validate rec)
         _ (when (and schedule (not (ifn? schedule)))
             (throw (bad-option (str "schedule must be a function ((schedule {...})), got "
                                     (pr-str schedule)) {:schedule schedule})))
         _ (when (and on-trace-ready (not (ifn? on-trace-ready)))
             (throw (bad-option (str "on-trace-ready must be a function, got "
                                     (pr-str on-trace-ready)) {:on-trace-ready on-trace-ready})))
         path (str (.toAbsolutePath (Paths/get (str path) (make-array String 0))))]
     (when (and schedule (not (str/includes? path "{window}")) (many-windows? schedule))
       (throw (util/fix-error
               (str "path " (pr-str (str (:path opts))) " has no {window} placeholder, but the"
                    " schedule records several windows, which would overwrite each other.")
               ":path \"trace_{window}.json\""
               "\"path\", \"trace_{window}.json\""
               {:pyprof/error :invalid-option :path path})))
     {::name (str "<pyprof.session " (swap! counter inc) ">")
      ::options c-opts
      ::schedule (or schedule (constantly :record))
      ::on-trace-ready on-trace-ready
      ::path path
      ::state (atom {:state :new, :step 0, :action :none, :running false, :window nil,
                     :windows []})})))

(defn- action-for [s step]
  (let [a ((::schedule s) step)]
    (when-not (actions a)
      (throw (bad-option (str "schedule(" step ") returned " (pr-str a) ", expected one of "
                              (sort actions)) {:action a})))
    a))

(defn- quiesce! [s]
  (try
    (mx MXNDArrayWaitAll)
    (finally
      (profiler/profiler-set-state :stop)
      (swap! (::state s) assoc :running false)
      (profiler/dump-profile false))))

(defn- save-window! [s last-step]
  (let [st (::state s)
        [start first-step path] (:window @st)]
    (swap! st assoc :window nil)
    (when (:running @st) (quiesce! s))
    (let [n (cut! start (raw-size) path)
          _ (Files/deleteIfExists (Paths/get (partial-path path) (make-array String 0)))
          w {:index (count (:windows @st)) :path path :first-step first-step
             :last-step (max first-step last-step) :events n}]
      (swap! st update :windows conj w)
      (when-let [f (::on-trace-ready s)] (f w))
      w)))

(defn- transition! [s prev cur final?]
  (let [st (::state s)
        want-window (contains? #{:record :record-and-save} cur)
        want-run (not= :none cur)]
    (profiler/-as-owner (::name s)
      (let [{:keys [window step]} @st]
        (when (and window (or (= prev :record-and-save) (not want-window)))
          (save-window! s (- step (if final? 0 1)))))
      (when (and (:running @st) (or (not want-run) (and want-window (nil? (:window @st)))))
        (quiesce! s))
      (when (and want-window (nil? (:window @st)))
        (let [{:keys [windows step]} @st
              path (fill-path (::path s) (count windows) step)
              start (raw-size)]
          (swap! st assoc :window [start step path])
          (write-partial! path start (count windows))))
      (when (and want-run (not (:running @st)))
        (profiler/profiler-set-state :run)
        (swap! st assoc :running true)))
    (swap! st assoc :action cur)))

(defn start!
  "Takes ownership of the profiler and begins step 0. A failed start (bad schedule, MXNet
  error, another session open) leaves the profiler as it was and the session unstarted."
  [s]
  (locking s
    (let [st (::state s)]
      (when-not (= :new (:state @st))
        (throw (ex-info (str (::name s) " was already started; fix: create a new session for"
                             " each use")
                        {:pyprof/error :invalid-state})))
      (profiler/-as-owner (::name s)
        (when-let [other (:session (profiler/state))]
          (throw (ex-info (str "a pyprof.session (" other ") is already open; sessions do not"
                               " nest. fix: close it first, or use one session with a schedule")
                          {:pyprof/error :invalid-state :session other})))
        (configure-raw! (::options s) (str (.getParent (io/file (::path s)))))
        (profiler/-update-tracker! assoc :session (::name s)))
      (swap! st assoc :state :open)
      (swap! open-sessions conj s)
      (try
        (transition! s :none (action-for s 0) false)
        (catch Throwable t
          (try (transition! s (:action @st) :none true) (catch Throwable _))
          (swap! st assoc :state :closed)
          (swap! open-sessions disj s)
          (profiler/-update-tracker! assoc :session nil)
          (throw t)))
      s)))

(defn step!
  "Marks the end of one step; saves a window when its last active step ends."
  [s]
  (locking s
    (let [st (::state s)]
      (when-not (= :open (:state @st))
        (throw (ex-info (str "step! on a session that is " (name (:state @st)) "; fix: call it"
                             " between start! and stop! (inside with-session)")
                        {:pyprof/error :invalid-state
                         :fix "call it between start! and stop! (inside with-session)"
                         :java-fix "call step() between start() and stop()"})))
      (let [n (:step (swap! st update :step inc))]
        (transition! s (:action @st) (action-for s n) false)))
    nil))

(defn stop!
  "Stops recording, saves an open window and gives the profiler back; returns the saved
  windows. Idempotent."
  [s]
  (locking s
    (let [st (::state s)]
      (when (= :open (:state @st))
        (try
          (transition! s (:action @st) :none true)
          (finally
            (swap! st assoc :state :closed)
            (swap! open-sessions disj s)
            (profiler/-update-tracker!
             (fn [t] (if (= (:session t) (::name s)) (assoc t :session nil) t))))))
      (:windows @st))))

(defn windows
  "The windows saved so far: [{:index :path :first-step :last-step :events} ...]."
  [s]
  (:windows @(::state s)))

(defn session-state
  "{:state (:new :open :closed) :step n :action a :windows [...]}."
  [s]
  (select-keys @(::state s) [:state :step :action :windows]))

(defn session-stats
  "Exact statistics (`pyprof.stats/stats`) of all saved windows together."
  ([s] (session-stats s {}))
  ([s opts]
   (let [ws (windows s)]
     (when (empty? ws)
       (throw (ex-info "no window was saved yet; fix: profile at least one active step"
                       {:pyprof/error :invalid-state})))
     (stats/stats (mapv :path ws) opts))))

(defmacro with-session
  "Runs `body` with `binding` bound to a started session made from `opts` (see `profile`);
  always stops it (saving an open window), without hiding the body's exception.

    (with-session [s {:schedule (schedule {:wait 1 :active 2 :repeat 2})
                      :path \"trace_{window}.json\"}]
      (dotimes [_ 6] (train-step) (step! s)))"
  [[binding opts] & body]
  `(let [~binding (start! (profile ~opts))]
     (try ~@body
          (finally (stop! ~binding)))))

;; ------------------------------------------------------------------ one file of many windows

(defn write-windows!
  "Writes the events of the trace files `paths` (windows) as one valid trace at `out`: metadata
  events once, first, then every window's events in order. Returns `out`."
  [paths out]
  (let [evs (mapcat stats/read-events paths)
        meta (distinct (filter #(= "M" (get % "ph")) evs))]
    (write-trace! (str out) (concat meta (remove #(= "M" (get % "ph")) evs)))
    (str out)))

;; ------------------------------------------------------------------ exit

(defn- finish-raw! []
  (let [{:keys [path]} @raw
        {:keys [finished running]} (profiler/state)]
    (when (and path (not finished) (not (:finished @raw))
               (= path (get (profiler/current-config) "filename")))
      (profiler/-as-owner "exit"
        (when running (profiler/profiler-set-state :stop))
        (profiler/dump-profile true))
      (swap! raw assoc :finished true)
      (when-not (System/getenv "PYPROF_KEEP_RAW")
        (.delete (io/file ^String path))))))

;; Run by pyprof.profiler's shutdown hook, before it finishes a plain trace.
;; Exit actions run in key order: save the open windows first, then finish the raw trace.
(profiler/-on-exit! "1-pyprof.session/sessions" (fn [] (doseq [s @open-sessions] (stop! s))))
(profiler/-on-exit! "2-pyprof.session/raw" finish-raw!)
