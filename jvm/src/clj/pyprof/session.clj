(ns pyprof.session
  "Sessions with a step schedule: many windows per process, each saved as a valid trace (the
  design of Python's `pyprof.session`; rules in schedule.json). Open sessions are stopped and
  saved at JVM exit (not under JPype). Thread safe: a session's calls are serialised on it."
  (:require [pyprof.capture :as capture]
            [pyprof.claim :as claim]
            [pyprof.config :as config]
            [pyprof.output :as output]
            [pyprof.profiler :as profiler]
            [pyprof.raw-file :as raw-file]
            [pyprof.rules :as rules]
            [pyprof.session.cap :as cap]
            [pyprof.session.leftovers :as leftovers]
            [pyprof.session.raw :as raw]
            [pyprof.session.saver :as saver]
            [pyprof.session.schedule :as sched]
            [pyprof.session.template :as template]
            [pyprof.stats :as stats]
            [pyprof.steady :as steady]
            [pyprof.tracker :as tracker]))

(set! *warn-on-reflection* true)

(def actions
  "schedule.json's actions: :none :warmup :record :record-and-save."
  sched/actions)

(def ^{:arglists '([] [opts])} schedule
  "A step schedule (fn step -> action); defaults {:wait 0 :warmup 0 :active 1 :repeat 0
  :skip-first 0}."
  sched/schedule)

(def ^{:arglists '([])} raw-trace-path
  "Path of this process's raw MXNet trace (nil before the first session)."
  raw/raw-trace-path)

;; ------------------------------------------------------------------ sessions

(def ^:private reserved (rules/api "reserved_session_keys"))

(defn- callable?
  "A function as Python's callable() sees one (maps, keywords, ... are data)."
  [x]
  (and (ifn? x) (not (coll? x)) (not (keyword? x)) (not (symbol? x))))

(defonce ^:private open-sessions (atom #{}))
(defonce ^:private counter (atom 0))

(defn- fill-path
  "The absolute path of window `window` starting at `step`."
  [parts window step]
  (output/abspath (template/fill parts {"window" window "step" step "pid" (raw/pid)})))

(declare make-session stop!)

(defn profile
  "A new session (not started). Options (all optional):
    :schedule        (schedule {...}) or any fn step -> action; default: one window
    :path            window template (grammar.json window_path: {window} {step} {pid},
                     {window:02d}, {{ }}); default \"pyprof_trace_{window}.json\"
    :on-trace-ready  called with each saved window {:index :path :first-step :last-step
                     :events :start-us :end-us} (microseconds since the epoch)
    :steady          true: begin steady mode (`pyprof.steady`) at `start!`
    :record-shapes, :with-stack, :with-flops
                     executors' shapes and attributes (and call sites) on the windows'
                     operator events (`pyprof.capture`); windows get :attribution
    and the recording keys of `profiler-set-config`.
  Throws session.unknown_option, session.reserved_option, session.not_callable,
  session.not_boolean, session.bad_path, session.path_needs_window, template.*, config.*."
  ([] (profile {}))
  ([opts] (make-session opts true)))

(defn ^:no-doc check-options
  "Throws what `profile` throws for `opts` but session.bad_path (ProfilerSession checks the path
  under its root)."
  [opts]
  (make-session opts false)
  nil)

(defn ^:no-doc first-file
  "The first window's file of the template `text`, relative if it is (ProfilerSession)."
  [text]
  (template/fill (template/parse text) {"window" 0 "step" 0 "pid" (raw/pid)}))

(defn ^:no-doc option-names
  "Every option a session takes, as C spells it (session.unknown_option's choices)."
  []
  (concat ["schedule" "on_trace_ready" "path" "steady"] capture/option-names
          (remove reserved (config/key-names))))

(defn- make-session
  "`profile`, with the window path's file check when `check-file?`."
  [opts check-file?]
  (let [{:keys [schedule on-trace-ready path] :or {path "pyprof_trace_{window}.json"}} opts
        all-rec (dissoc opts :schedule :on-trace-ready :path :steady ::within ::defer-saves
                        ::on-save-failed)
        c-of (into {} (map (juxt identity config/check-session-key!)) (keys all-rec))
        rec (into {} (remove #(capture/options (c-of (key %)))) all-rec)
        _ (doseq [k (keys rec) :let [c (c-of k)]]
            (when-not (some #{c} (config/key-names))
              (throw (config/unknown-option-error k c (option-names)))))
        c-opts (config/validate rec)
        attribution (into {} (for [[k v] all-rec :when (capture/options (c-of k))]
                               [(c-of k) (config/flag! (c-of k) v)]))
        steady (and (contains? opts :steady) (config/flag! "steady" (:steady opts)))
        _ (doseq [[option v expected] [[:schedule schedule :api/fn_schedule]
                                       [:on-trace-ready on-trace-ready :api/fn_on_trace_ready]]]
            (when (and (some? v) (not (callable? v)))
              (throw (rules/error "session.not_callable"
                                  {:option option :value v :expected expected}))))
        _ (when-not (or (string? path) (instance? java.io.File path) (instance? java.nio.file.Path path))
            (throw (rules/error "session.path_not_text" {:value path})))
        parts (template/parse (str path))
        ;; a NUL or lone surrogate always (Paths/get would refuse it untold)
        _ (when-let [problem (output/text-problem (str path))]
            (throw (rules/error "session.bad_path" (merge {:value (str path)} problem))))
        ;; MXNet is silent when it cannot write
        first-path (fill-path parts 0 0)
        _ (when-let [problem (and check-file? (or (output/file-problem first-path)
                                                   (output/replace-problem first-path)))]
            (throw (rules/error "session.bad_path" (merge {:value (str path)} problem))))]
    ;; windows 0 and 1 in one file: no {window}, or one a ".." cancels (w_{window}/../w.json)
    (when (and schedule (= first-path (fill-path parts 1 0)) (sched/saves-many? schedule))
      (throw (rules/error "session.path_needs_window" {:path (str (:path opts))})))
    {::name (str "<pyprof.session " (swap! counter inc) ">")
     ::recording rec
     ::options c-opts
     ::attribution (when (some true? (vals attribution)) attribution)
     ::schedule (or schedule (constantly sched/default-action))
     ::on-trace-ready on-trace-ready
     ::path first-path
     ::template parts
     ::template-text (str path)
     ;; the Java facade's: its output root, windows cut on the saver thread, failures to this
     ::within (::within opts)
     ::defer (boolean (::defer-saves opts))
     ::on-save-failed (::on-save-failed opts)
     ::steady steady
     ::state (atom {:state :new, :step 0, :action sched/initial-action, :running false,
                    :window nil      ; recording: {:index :start :first-step :path :start-us}
                    :ended nil       ; stopped, not cut: {:window :end :end-us :last-step}
                    :opened 0, :stopped-us nil, :final false, :saved-now [], :windows []
                    :saving nil})})) ; deferred: the Future of the last window handed to the saver

(defn- action-for [s step]
  (sched/check-action ((::schedule s) step) step))

;; schedule.json's operations. :stop, :open and :run run as the session's owner; :save cuts the
;; window outside the profiler lock.

(declare save-op! saved? owner-operations)

(defn- note-windows!
  "Names the windows not saved yet beside the raw trace (crash recovery)."
  [s]
  (let [{:keys [window ended]} @(::state s)]
    (raw/note-windows! (keep :path [(:window ended) window]))))

(defn- write-partial! [s]
  (let [{:keys [path start index start-us]} (:window @(::state s))]
    (raw/write-partial! path start index start-us)
    (note-windows! s)))

(defn- stop-op!
  "Stops (`paused?`, steady mode: pauses) recording; the open window ends here."
  ([s] (stop-op! s false))
  ([s paused?]
   (let [st (::state s)]
     (when (:running @st)
       (swap! st assoc :running false :cap-paused false)
       (swap! st assoc :stopped-us (raw/quiesce! paused?))
       (when (::attribution s) (capture/pause!)))
     (when-let [w (:window @st)]
       (when (:ended @st) (save-op! s)) ; a table that stops twice before saving
       (let [{:keys [step final stopped-us]} @st
             end (raw/size)]
         (swap! st assoc :window nil
                :ended {:window w :end end :end-us (or stopped-us (raw/now-us))
                        :last-step (max (:first-step w) (- step (if final 0 1)))
                        :forwards (when (::attribution s) (capture/take!))})
         (raw/write-partial! (:path w) (:start w) (:index w) (:start-us w) end))))))

(defn- open-op!
  "Opens a window at the raw trace's current end (the profiler stopped, drained)."
  [s]
  (let [st (::state s)]
    (when (nil? (:window @st))
      (when (:running @st) ; only a table that opens while recording gets here
        ((owner-operations (cond->> :stop (:steady @st) (get sched/steady-operations))) s))
      (when (::attribution s) (capture/take!)) ; a warm-up's forwards: their events are in no window
      (when (raw/rotation-due?)
        (save-op! s) ; a window that ended but is not cut yet lives in the old raw file
        (saved? s)
        (raw/rotate!))
      (raw/drain!)
      (let [{:keys [opened step ended]} @st
            start (raw/size)
            path (fill-path (::template s) opened step)
            ;; a link on the way may lead out of the Java facade's root
            _ (when (some-> (::within s) (output/outside? path))
                (throw (rules/error "root.outside" {:what "window file" :path path
                                                    :root (::within s)})))
            path (claim/claim-window! opened path)]
        (raw/harvest! start (when ended [(get-in ended [:window :start]) (:end ended)]))
        (swap! st assoc :opened (inc opened)
               :window (let [t (raw/now-us)]
                         {:index opened :start start :first-step step :start-us t
                          :steps [[step t]] ; [step began-us]
                          :path path}))
        (write-partial! s)))))

(defn- run-op!
  "Records (`resumed?`, steady mode's :resume: un-pauses)."
  ([s] (run-op! s false))
  ([s resumed?]
   (let [st (::state s)]
     ;; a window stopped at the cap records nothing in its later steps
     (when-not (or (:running @st) (and (not resumed?) (get-in @st [:window :truncated])))
       (when-let [a (::attribution s)] (capture/resume! a))
       (if resumed? (profiler/resume) (profiler/profiler-set-state :run))
       (swap! st assoc :running true)))))

(defn- write-window!
  "Cuts the window `ended` into its file and records it; returns the window map. Deferred (on
  the saver thread) it calls on-trace-ready itself, and a failure keeps the .partial for
  `pyprof recover`, says so and goes to ::on-save-failed."
  [s {:keys [window end end-us last-step forwards]} deferred?]
  (let [st (::state s)
        {:keys [index start first-step path start-us steps]} window]
    (try
      (let [n (raw/cut! start end path (sched/step-events index steps last-step end-us (raw/pid)))
            attribution (when (::attribution s)
                          (try (capture/annotate! path forwards)
                               (catch Exception e ; the window stays as cut
                                 (binding [*out* *err*]
                                   (println (rules/render (get-in capture/spec-capture ["annotate_note"])
                                                          {:index index :path path :why (str e)})))
                                 nil)))
            _ (raw/delete-partial! path)
            _ (claim/release-window! path)
            _ (claim/window-written! path) ; no later session of this process replaces it
            _ (note-windows! s)
            w (cond-> {:index index :path path :first-step first-step :last-step last-step :events n
                       :start-us start-us :end-us end-us :truncated (boolean (:truncated window))}
                attribution (assoc :attribution attribution))]
        (swap! st #(cond-> (update % :windows conj w) (not deferred?) (update :saved-now conj w)))
        (when (:window @st) (write-partial! s))
        (when-let [f (and deferred? (::on-trace-ready s))] (f w))
        w)
      (catch Throwable t
        (when-not deferred? (throw t))
        (claim/release-window! path)
        (binding [*out* *err*]
          (println (str "pyprof: window " index " was not saved to " path " (" (or (ex-message t) t)
                        "); its events stay in the raw trace: pyprof recover " path ".partial")))
        (when-let [f (::on-save-failed s)] (f t))
        nil))))

(def ^:private raw-spec (rules/api "raw_trace"))

(defn- leave-for-recovery!
  "At exit, a window over api.json raw_trace exit_max_bytes stays for `pyprof recover`, said."
  [s {:keys [window end]} limit]
  (let [{:keys [index path start]} window]
    (raw/keep-for-recovery! path)
    (claim/release-window! path)
    (binding [*out* *err*]
      (println (rules/render (raw-spec "exit_left_note")
                             {:index index :bytes (- (long end) (long start)) :limit limit
                              :raw (str (java.io.File. ^String (raw/raw-dir) ^String (raw-spec "exit_kept_file")))
                              :path path})))))

(defn- save-op!
  "Writes the window that ended at the last :stop; a deferring session hands it to the saver."
  [s]
  (let [st (::state s)
        limit (:exit-limit @st)]
    (when-let [{:keys [window end] :as ended} (:ended @st)]
      (swap! st assoc :ended nil)
      (cond
        (and limit (> (- (long end) (long (:start window))) (long limit)))
        (leave-for-recovery! s ended limit)
        ;; at exit the hook's thread cuts it, at the process's priority, not the saver's
        (and (::defer s) (not limit))
        (do (raw/reserve! (:start window) end)
            (swap! st assoc :saving (saver/submit! #(write-window! s ended true))))
        :else (write-window! s ended false)))))

(def ^:private owner-operations {:stop #'stop-op!, :open #'open-op!, :run #'run-op!,
                                 :pause #(stop-op! % true), :resume #(run-op! % true)})

(defn- enforce-cap!
  "At the cap (`pyprof.session.cap/check`) pauses MXNet; a step also stops it. As the owner."
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
        (swap! st assoc :stopped-us (raw/quiesce! (:steady @st)))))))

(defn- transition!
  "Performs the operations from action `prev` to `cur`; on-trace-ready gets each window saved."
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
  "Takes the profiler and begins step 0; a failed start leaves the profiler as it was.
  session.already_started, session.nested."
  [s]
  (locking s
    (let [st (::state s)]
      (when-not (= :new (:state @st))
        (throw (rules/error "session.already_started" {:session (::name s)})))
      (cap/max-bytes) ; a bad $PYPROF_RAW_MAX_BYTES fails before anything runs
      (leftovers/start-sweep! (str (.getParent (java.io.File. ^String (::path s)))) (::within s))
      (profiler/-as-owner (::name s)
        (when-let [other (:session (profiler/state))]
          (throw (rules/error "session.nested" {:session other})))
        (swap! st assoc :claimed (claim/claim-window-path! (::template-text s)
                                                           (template/canonical (::template s))
                                                           (::template s)))
        (try ; the claim is given back by stop!, or here
          (when (and (::steady s) (nil? (steady/active)))
            (steady/begin-as! (::recording s) (::name s)))
          (if (steady/active)
            (do (steady/check-session! (::options s))
                (swap! st assoc :steady true))
            (raw/configure! (::recording s) (::options s)))
          (catch Throwable t (some-> (:claimed @st) claim/release!) (throw t)))
        (tracker/put! :session (::name s)))
      (swap! st assoc :state :open
             :watchdog (cap/watchdog
                        #(profiler/-as-owner (::name s)
                           (when (= :open (:state @st)) (enforce-cap! s true)))))
      (swap! open-sessions conj s)
      (try
        (transition! s (:action @st) (action-for s 0) false)
        (catch Throwable t ; the profiler given back, the session closed
          (try (stop! s) (catch Throwable _))
          (throw t)))
      s)))

(defn step!
  "Ends one step; saves a window when its last active step ends. session.not_open."
  [s]
  (locking s
    (let [st (::state s)]
      (when-not (= :open (:state @st))
        (throw (rules/error "session.not_open" {:state (name (:state @st))})))
      (let [n (:step (swap! st update :step inc))]
        (when (and (:window @st) (:running @st))
          (swap! st update-in [:window :steps] conj [n (raw/now-us)]))
        (profiler/-as-owner (::name s) (enforce-cap! s false))
        (transition! s (:action @st) (action-for s n) false)))
    nil))

(defn stop!
  "Stops recording, saves an open window, gives the profiler back; returns the saved windows.
  Idempotent."
  [s]
  (locking s
    (let [st (::state s)]
      (when (= :open (:state @st))
        (try
          (transition! s (:action @st) sched/final-action true)
          (finally
            (saved? s) ; the raw trace is read until then
            (swap! st assoc :state :closed)
            (some-> (:claimed @st) claim/release!)
            (claim/release-window!) ; a window not saved
            (when-let [w (:watchdog @st)] ((:stop w)))
            (swap! open-sessions disj s)
            (let [t (tracker/update!
                     (fn [t] (if (= (:session t) (::name s)) (assoc t :session nil) t)))]
              (when-not (:session t) ; the last session closed
                (try (raw/release!)
                     (catch Exception e
                       (binding [*out* *err*]
                         (println "pyprof: could not delete the raw trace" (raw/raw-trace-path)
                                  (.getMessage e))))))))))
      (:windows @st))))

(defn windows
  "The windows saved so far (as given to :on-trace-ready), after any still being written."
  [s]
  (saved? s)
  (:windows @(::state s)))

(defn session-state
  "{:state (:new :open :closed) :step n :action a :windows [...]}, after any window still being
  written (`now?`: at once)."
  ([s] (session-state s false))
  ([s now?]
   (when-not now? (saved? s))
   (select-keys @(::state s) [:state :step :action :windows])))

(defn ^:no-doc saved?
  "Waits at most `timeout-ms` (nil: no bound) for the windows handed to the saver; true when
  all are written."
  ([s] (saved? s nil))
  ([s timeout-ms] (saver/await! (:saving @(::state s)) timeout-ms)))

(defn ^:no-doc recording-bytes
  "Raw-trace bytes the open window has recorded (0 when none)."
  [s]
  (if-let [w (:window @(::state s))] (max 0 (- (raw/size) (long (:start w)))) 0))

(defn session-stats
  "`pyprof.stats/stats` of all saved windows together; session.no_window when none."
  ([s] (session-stats s {}))
  ([s opts]
   (let [ws (windows s)]
     (when (empty? ws)
       (throw (rules/error "session.no_window")))
     (stats/stats (mapv :path ws) opts))))

(defmacro with-session
  "Runs `body` with `binding` bound to a started session of `opts` (`profile`); always stops it."
  [[binding opts] & body]
  `(let [~binding (start! (profile ~opts))]
     (try ~@body
          (finally (stop! ~binding)))))

(defn write-windows!
  "Writes the trace files `paths` as one valid trace at `out` (metadata once, first); returns
  `out`."
  [paths out]
  (let [evs (mapcat stats/read-events paths)
        meta (distinct (filter #(= "M" (get % "ph")) evs))]
    (raw-file/write-trace! (str out) (concat meta (remove #(= "M" (get % "ph")) evs)))
    (str out)))

;; ------------------------------------------------------------------ exit

;; In key order: the open windows first, then the raw trace.
(defn- stop-at-exit!
  "Stops `s` at exit, one line on stderr for each window written now."
  [s]
  (let [st (::state s)
        before (count (:windows @st))]
    (swap! st assoc :exit-limit (long (raw-spec "exit_max_bytes")))
    (stop! s)
    (binding [*out* *err*]
      (doseq [w (drop before (:windows @st))]
        (println (rules/render (raw-spec "exit_saved_note") w))))))

(profiler/-on-exit! "1-pyprof.session/sessions" (fn [] (doseq [s @open-sessions] (stop-at-exit! s))))
(profiler/-on-exit! "2-pyprof.session/raw" raw/finish!)
(profiler/-on-exit! "9-pyprof.raw-file/unfinished" raw-file/delete-unfinished!)
