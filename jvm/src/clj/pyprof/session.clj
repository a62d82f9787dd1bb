(ns pyprof.session
  "Profiling sessions with a step schedule: many windows per process, each saved as its own
  valid Chrome trace. The JVM side of `pyprof.session` (Python), with the same design:

  - The schedule is data: `schedule.json` (pyprof/spec, shared with Python) holds the schedule's
    parameters, the phases of a cycle with the action of each step, and the transition table:
    for the action of the step that ended and that of the step that begins, the operations to
    perform, in order (:stop, :save, :open, :run). `pyprof.session.schedule` reads it; this
    namespace performs the operations. start! moves from :none to step 0's action, step! from
    one step's action to the next, stop! to :none. Between back-to-back windows the table saves
    after the next window started recording: only the boundary separates them.
  - One raw trace per process. MXNet can finish only one trace file per process, so pyprof never
    finishes one while the process lives: it configures MXNet once with continuous_dump on and a
    file it owns (in a private directory `pyprof-raw-<pid>-<start>-<random>` of $PYPROF_RAW_DIR
    or java.io.tmpdir, `pyprof.session.rawdir`), and only ever dumps with finished = false, which
    appends. Between windows it is deleted once past 64 MiB ($PYPROF_RAW_ROTATE_BYTES) or half
    the cap: MXNet's next dump starts a new one. The cap (512 MiB, $PYPROF_RAW_MAX_BYTES,
    `pyprof.session.cap`: a step check and a watchdog) holds whatever the workload: past it the
    recording stops and the window is saved :truncated. The directory is deleted when no session
    is open; leftovers of dead processes are recovered (beside each window's path, as
    `<stem>.recovered-<pid><suffix>`, never over a file) and deleted at the next start, whose
    start! waits for that sweep at most 1 s (`pyprof.session.leftovers`). See
    `pyprof.session.raw`.
  - Windows are byte ranges of the raw file. Every boundary is made at a quiescent point:
    MXNDArrayWaitAll, state stop, dump(false); the file size then is an exact boundary. A window
    is [size at its start, size at its end), read tolerantly (header only in the first range,
    leading or trailing commas) and written as a new valid trace (temporary file, then rename).
    Warm-up steps record too, but their range is skipped.
  - A window holds exactly its active steps: opening one waits for queued operators with the
    profiler stopped and appends what MXNet queued while stopped before the window's start
    (before MXNet's first run it keeps custom-object events, being neither running nor paused:
    pyprof starts and stops it once first).
  - Every window records its real time span, :start-us and :end-us (microseconds since the
    epoch, the clock of the trace's ts): a slow step shows as a longer window.
  - Metadata (`ph` M) seen in any range is carried to the head of every window.
  - While a session is open it owns the profiler: profiler-set-config, profiler-set-state and
    dump-profile from anyone else throw :invalid-state (pause, resume and dumps still work).
    Sessions do not nest; consecutive sessions in one process are fine.
  - While a window records, `<window>.partial` names the raw file, the start offset and time, in
    the format Python's `pyprof.session.recover` reads, to rebuild a window after a crash.
  - At JVM exit (a shutdown hook; not in a JVM hosted by JPype, where Python owns MXNet's end)
    open sessions are stopped, their windows saved, and the raw file finished and deleted.

  All functions are thread safe: one session's calls are serialised on the session."
  (:require [pyprof.claim :as claim]
            [pyprof.config :as config]
            [pyprof.output :as output]
            [pyprof.profiler :as profiler]
            [pyprof.rules :as rules]
            [pyprof.session.cap :as cap]
            [pyprof.session.leftovers :as leftovers]
            [pyprof.session.raw :as raw]
            [pyprof.session.schedule :as sched]
            [pyprof.session.template :as template]
            [pyprof.stats :as stats]
            [pyprof.steady :as steady]
            [pyprof.util :as util]))

(set! *warn-on-reflection* true)

(def actions
  "What the profiler does during one step (the value of a schedule for a step number): the
  actions of schedule.json, :none :warmup :record :record-and-save."
  sched/actions)

(def ^{:arglists '([] [opts])} schedule
  "A step schedule: a function from step number (0, 1, ...) to an action. After :skip-first
  steps, cycles of :wait idle steps, :warmup discarded steps and :active recorded steps repeat
  :repeat times (0 = for ever). Each cycle's active steps form one window. Defaults:
  {:wait 0 :warmup 0 :active 1 :repeat 0 :skip-first 0}. See `pyprof.session.schedule`."
  sched/schedule)

(def ^{:arglists '([text]) :no-doc true} parse-range
  "The events in a byte range of an MXNet trace that MXNet appended to (see
  `pyprof.session.raw/parse-range`)."
  raw/parse-range)

(def ^{:arglists '([])} raw-trace-path
  "Path of this process's raw MXNet trace (nil before the first session)."
  raw/raw-trace-path)

;; ------------------------------------------------------------------ sessions

(def ^:private reserved
  "Recording keys (C names) a session does not take, with why (api.json reserved_session_keys)."
  (rules/api "reserved_session_keys"))

(defn- callable?
  "A function, as Python's callable() sees one: maps, vectors, sets, keywords and symbols are
  IFn (look-ups) but data, not a schedule."
  [x]
  (and (ifn? x) (not (coll? x)) (not (keyword? x)) (not (symbol? x))))

(defonce ^:private open-sessions (atom #{}))
(defonce ^:private counter (atom 0))

(defn- fill-path
  "The absolute path of window `window` starting at step `step`: the template filled
  (grammar.json window_path), then made absolute (grammar.json paths)."
  [parts window step]
  (config/abspath (template/fill parts {"window" window "step" step "pid" (raw/pid)})))

(declare make-session)

(defn profile
  "A new session (not started). Options (all optional):
    :schedule        (schedule {...}) or any fn step -> action; default: one window from
                     `start!` to `stop!`
    :path            trace file of each window, a template (grammar.json window_path,
                     `pyprof.session.template`): \"{window}\" (0, 1, ...), \"{step}\" (first
                     step) and \"{pid}\" filled in, optionally zero-padded to a width
                     (\"{window:02d}\"), \"{{\" and \"}}\" literal braces; must hold {window}
                     when the schedule saves several windows (\"pyprof_trace_{window}.json\");
                     relative to the working directory
    :on-trace-ready  called with each saved window map {:index :path :first-step :last-step
                     :events :start-us :end-us}, after its file is written
    :steady          true: at `start!`, begin steady mode (`pyprof.steady`) with these
                     recording keys unless it began; in steady mode every session takes its
                     windows by pause and resume (schedule.json steady)
    recording keys as in `profiler-set-config`: :profile-symbolic :profile-imperative
    :profile-api :profile-memory :profile-all :aggregate-stats :dump-period.
  Use `with-session`, or `start!`, `step!` after each step, and `stop!`. Throws ex-info
  (errors.json): session.unknown_option, session.reserved_option, config errors of the
  recording keys,
  session.not_callable, template.unknown_field, template.bad_spec, template.unbalanced,
  session.bad_path (the first window's file cannot be written: its directory is missing, it is a
  directory, nothing can be created there, too little space), session.path_needs_window."
  ([] (profile {}))
  ([opts] (make-session opts true)))

(defn ^:no-doc check-options
  "Throws what `profile` throws for `opts`, except session.bad_path: the Java session checks
  its caller's options first, in the caller's words, then the path resolved under its output
  root (pyprof.jvm.ProfilerSession). Returns nil."
  [opts]
  (make-session opts false)
  nil)

(defn- make-session
  "`profile`, with the window path's file check when `check-file?`."
  [opts check-file?]
  (let [{:keys [schedule on-trace-ready path] :or {path "pyprof_trace_{window}.json"}} opts
        rec (dissoc opts :schedule :on-trace-ready :path :steady)
        _ (doseq [k (keys rec)]
            (let [c (util/key->c k)]
              (when-let [why (reserved c)]
                (throw (rules/error "session.reserved_option" {:option c :why why})))
              (when-not (some #{c} (config/key-names)) ; the own options and recording keys
                (throw (config/unknown-option-error
                        k c (concat ["schedule" "on_trace_ready" "path" "steady"]
                                    (remove reserved (config/key-names))))))))
        c-opts (config/validate rec)
        ;; nil is no schedule (no callback); false, a map, ... are not functions
        _ (when (and (some? schedule) (not (callable? schedule)))
            (throw (rules/error "session.not_callable" {:option "schedule" :value schedule})))
        _ (when (and (some? on-trace-ready) (not (callable? on-trace-ready)))
            (throw (rules/error "session.not_callable" {:option "on_trace_ready"
                                                        :value on-trace-ready})))
        parts (template/parse (str path)) ; template.* errors
        ;; a NUL or lone surrogate always (Paths/get would refuse it untold)
        _ (when-let [problem (output/text-problem (str path))]
            (throw (rules/error "session.bad_path" (merge {:value (str path)} problem))))
        ;; windows are written there, and MXNet is silent when it cannot write: checked now,
        ;; as pyprof.session.profile does, when asked
        first-path (fill-path parts 0 0)
        _ (when-let [problem (and check-file?
                                  (output/file-problem first-path
                                                       (config/parent-directory first-path)))]
            (throw (rules/error "session.bad_path" (merge {:value (str path)} problem))))]
    (when (and schedule (not (template/has? parts template/window-field))
               (sched/saves-many? schedule))
      (throw (rules/error "session.path_needs_window" {:path (str (:path opts))})))
    {::name (str "<pyprof.session " (swap! counter inc) ">")
     ::recording rec
     ::options c-opts
     ::schedule (or schedule (constantly sched/default-action))
     ::on-trace-ready on-trace-ready
     ::path first-path ; the first window's file
     ::template parts
     ::template-text (str path)
     ::steady (boolean (:steady opts))
     ::state (atom {:state :new, :step 0, :action sched/initial-action, :running false,
                    :window nil      ; recording: {:index :start :first-step :path :start-us}
                    :ended nil       ; stopped, not cut: {:window :end :end-us :last-step}
                    :opened 0, :stopped-us nil, :final false, :saved-now [], :windows []})}))

(defn- action-for [s step]
  (sched/check-action ((::schedule s) step) step))

;; The operations of schedule.json's transition table (its "operations" say what each does).
;; :stop, :open and :run make profiler calls and run as the session's owner; :save cuts the
;; window's file outside (the profiler lock is not held while a large window is written).
;; The session's state holds the :window recording now and the :ended one (stopped, not cut).

(declare save-op! owner-operations)

(defn- note-windows!
  "Names the windows not saved yet in the raw trace's directory (recovery after a crash)."
  [s]
  (let [{:keys [window ended]} @(::state s)]
    (raw/note-windows! (keep :path [(:window ended) window]))))

(defn- write-partial! [s]
  (let [{:keys [path start index start-us]} (:window @(::state s))]
    (raw/write-partial! path start index start-us)
    (note-windows! s)))

(defn- stop-op!
  "Stops (steady mode's :pause: pauses, with `quiesce` raw/quiesce-paused!) recording; the open
  window ends here (cut by the next :save)."
  ([s] (stop-op! s raw/quiesce!))
  ([s quiesce]
  (let [st (::state s)]
    (when (:running @st)
      (swap! st assoc :running false :cap-paused false)
      (swap! st assoc :stopped-us (quiesce)))
    (when-let [w (:window @st)]
      (when (:ended @st) (save-op! s)) ; a table that stops twice before saving
      (let [{:keys [step final stopped-us]} @st
            end (raw/size)]
        (swap! st assoc :window nil
               :ended {:window w :end end :end-us (or stopped-us (raw/now-us))
                       :last-step (max (:first-step w) (- step (if final 0 1)))})
        ;; recovery reads the window's range only
        (raw/write-partial! (:path w) (:start w) (:index w) (:start-us w) end))))))

(defn- open-op!
  "Opens a window at the raw trace's current end (the profiler stopped, drained)."
  [s]
  (let [st (::state s)]
    (when (nil? (:window @st))
      (when (:running @st) ; only a table that opens while recording gets here
        ((owner-operations (cond->> :stop (:steady @st) (get sched/steady-operations))) s))
      (when (raw/rotation-due?)
        (save-op! s) ; a window that ended but is not cut yet lives in the old raw file
        (raw/rotate!))
      (raw/drain!)
      (let [{:keys [opened step ended]} @st
            start (raw/size)]
        (raw/harvest! start (when ended [(get-in ended [:window :start]) (:end ended)]))
        (swap! st assoc :opened (inc opened)
               :window {:index opened :start start :first-step step :start-us (raw/now-us)
                        :path (fill-path (::template s) opened step)})
        (write-partial! s)))))

(defn- run-op! [s]
  (let [st (::state s)]
    ;; a window stopped at the cap records nothing in its later steps
    (when-not (or (:running @st) (get-in @st [:window :truncated]))
      (profiler/profiler-set-state :run)
      (swap! st assoc :running true))))

(defn- resume-op! "Steady mode's :run." [s]
  (let [st (::state s)]
    (when-not (:running @st)
      (profiler/resume)
      (swap! st assoc :running true))))

(defn- pause-op! "Steady mode's :stop." [s] (stop-op! s raw/quiesce-paused!))

(defn- save-op!
  "Writes the window that ended at the last :stop: its raw bytes, as a valid trace."
  [s]
  (let [st (::state s)]
    (when-let [{:keys [window end end-us last-step]} (:ended @st)]
      (swap! st assoc :ended nil)
      (let [{:keys [index start first-step path start-us]} window
            n (raw/cut! start end path)
            _ (raw/delete-partial! path)
            _ (note-windows! s)
            w {:index index :path path :first-step first-step :last-step last-step :events n
               :start-us start-us :end-us end-us :truncated (boolean (:truncated window))}]
        (swap! st #(-> % (update :windows conj w) (update :saved-now conj w)))
        ;; the window recording now: its .partial gets the metadata of the range just cut
        (when (:window @st) (write-partial! s))
        w))))

(def ^:private owner-operations {:stop #'stop-op!, :open #'open-op!, :run #'run-op!,
                                 :pause #'pause-op!, :resume #'resume-op!})

(let [missing (remove (set (conj (keys owner-operations) :save)) (keys sched/operation-names))]
  (when (seq missing) ; schedule.json names an operation this namespace does not perform
    (throw (ex-info (str "schedule.json: unknown session operations " (vec missing)
                         ". fix: name only operations pyprof.session performs")
                    {:pyprof/error :invalid-spec :operations (vec missing)}))))

(defn- enforce-cap!
  "At the cap (`pyprof.session.cap/check`) MXNet is paused (any thread may: IsProfiling stays;
  queued operators then run unrecorded); a step also stops it, as Python's _enforce_cap. Run
  as the owner (the tracker's lock held)."
  [s watchdog?]
  (let [st (::state s)
        {:keys [running cap-paused window step]} @st]
    (when (and running (raw/raw-trace-path) (not (and watchdog? cap-paused))
               (cap/check (raw/size) window step))
      (when window (swap! st assoc-in [:window :truncated] true))
      (when-not cap-paused
        (profiler/pause)
        (swap! st assoc :cap-paused true))
      (when-not watchdog?
        (swap! st assoc :running false :cap-paused false)
        (swap! st assoc :stopped-us (if (:steady @st) (raw/quiesce-paused!) (raw/quiesce!)))))))

(defn- transition!
  "Moves from `prev` (the last step's action) to `cur` (the next step's): performs the
  operations schedule.json lists for the pair, in order; then calls on-trace-ready with each
  window saved (outside the owner's rights)."
  [s prev cur final?]
  (let [st (::state s)]
    (swap! st assoc :final final? :saved-now [])
    (doseq [op (sched/operations prev cur (:steady @st))]
      (if (= :save op)
        (save-op! s)
        (profiler/-as-owner (::name s) ((owner-operations op) s))))
    (swap! st assoc :action cur)
    (when-let [f (::on-trace-ready s)]
      (doseq [w (:saved-now @st)] (f w)))))

(defn start!
  "Takes ownership of the profiler and begins step 0. A failed start (bad schedule, MXNet
  error, another session open) leaves the profiler as it was and the session unstarted."
  [s]
  (locking s
    (let [st (::state s)]
      (when-not (= :new (:state @st))
        (throw (rules/error "session.already_started" {:session (::name s)})))
      (cap/max-bytes) ; a bad $PYPROF_RAW_MAX_BYTES fails here, before anything runs
      ;; dead processes' leftovers: waited for at most start_wait_seconds, outside the lock
      (leftovers/start-sweep! (str (.getParent (java.io.File. ^String (::path s)))))
      (profiler/-as-owner (::name s)
        (when-let [other (:session (profiler/state))]
          (throw (rules/error "session.nested" {:session other})))
        (swap! st assoc :claimed (claim/claim-window-path! (::template-text s) (::template s)))
        (try ; api.json trace_claims: the claim is given back by stop!, or here if this fails
          (when (and (::steady s) (nil? (steady/active)))
            (steady/begin-as! (::recording s) (::name s)))
          (if (steady/active)
            (do (steady/check-session! (::options s))
                (swap! st assoc :steady true))
            (raw/configure! (::recording s) (::options s)))
          (catch Throwable t (some-> (:claimed @st) claim/release!) (throw t)))
        (profiler/-update-tracker! assoc :session (::name s)))
      (swap! st assoc :state :open
             :watchdog (cap/watchdog ; every watch_seconds, as the owner
                        #(profiler/-as-owner (::name s)
                           (when (= :open (:state @st)) (enforce-cap! s true)))))
      (swap! open-sessions conj s)
      (try
        (transition! s (:action @st) (action-for s 0) false)
        (catch Throwable t
          (try (transition! s (:action @st) sched/final-action true) (catch Throwable _))
          (when-let [w (:watchdog @st)] ((:stop w)))
          (swap! st assoc :state :closed)
          (some-> (:claimed @st) claim/release!)
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
        (throw (rules/error "session.not_open" {:state (name (:state @st))})))
      (let [n (:step (swap! st update :step inc))]
        (profiler/-as-owner (::name s) (enforce-cap! s false))
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
          (transition! s (:action @st) sched/final-action true)
          (finally
            (swap! st assoc :state :closed)
            (some-> (:claimed @st) claim/release!)
            (when-let [w (:watchdog @st)] ((:stop w)))
            (swap! open-sessions disj s)
            (let [t (profiler/-update-tracker!
                     (fn [t] (if (= (:session t) (::name s)) (assoc t :session nil) t)))]
              (when-not (:session t) ; the last session closed: delete the raw trace
                (try (raw/release!)
                     (catch Exception e
                       (binding [*out* *err*]
                         (println "pyprof: could not delete the raw trace" (raw/raw-trace-path)
                                  (.getMessage e))))))))))
      (:windows @st))))

(defn windows
  "The windows saved so far: [{:index :path :first-step :last-step :events :start-us :end-us}
  ...]."
  [s]
  (:windows @(::state s)))

(defn session-state
  "{:state (:new :open :closed) :step n :action a :windows [...]}."
  [s]
  (select-keys @(::state s) [:state :step :action :windows]))

(defn ^:no-doc recording-bytes
  "Internal (pyprof.jvm.ProfilerSession's limits): raw-trace bytes the open window of `s` has
  recorded so far (0 when none is open)."
  [s]
  (if-let [w (:window @(::state s))] (max 0 (- (raw/size) (long (:start w)))) 0))

(defn session-stats
  "Exact statistics (`pyprof.stats/stats`) of all saved windows together."
  ([s] (session-stats s {}))
  ([s opts]
   (let [ws (windows s)]
     (when (empty? ws)
       (throw (rules/error "session.no_window")))
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
    (raw/write-trace! (str out) (concat meta (remove #(= "M" (get % "ph")) evs)))
    (str out)))

;; ------------------------------------------------------------------ exit

;; Run by pyprof.profiler's shutdown hook, before it finishes a plain trace.
;; Exit actions run in key order: save the open windows first, then finish the raw trace.
(profiler/-on-exit! "1-pyprof.session/sessions" (fn [] (doseq [s @open-sessions] (stop! s))))
(profiler/-on-exit! "2-pyprof.session/raw" raw/finish!)
