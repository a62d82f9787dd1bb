(ns pyprof.steady
  "Steady mode, the JVM side of Python's `pyprof.session.steady`, with the same rules (api.json
  steady, schedule.json steady): the profiler switches to run once, at `begin!` (before the
  service's own MXNet threads start: DJL's JNA engine, a JNI binding, anything pyprof does not
  gate), and nothing changes MXNet's `Profiler::IsProfiling` until `end!` or exit, so those
  threads never see it change mid-call (which aborts the process at c_api_profile.cc:140).

  - `begin!` configures (into pyprof's raw trace for sessions, or with :filename into that
    file), runs and pauses the profiler. `-Dpyprof.steady=true` (api.json steady property) does
    it at start-up: `from-property!`, called by `pyprof.jvm.ProfilerControl/register`
    and `pyprof.jvm.Profiler/steadyFromProperty`.
  - While steady, every session takes its windows by pause and resume; profiler-set-state and a
    finished dump-profile throw :invalid-state (steady.set_state, steady.finished_dump); a
    config that changes a mode key throws steady.config_mode; pause, resume, an intermediate
    dump and dumps work.
  - `end!` (the caller says its threads ended) stops and finishes the trace; at JVM exit steady
    mode not ended is finished without a stop (pause, finished dump: IsProfiling unchanged).

  The fact \"steady mode, begun by X\" is the tracker's :steady field: in a JPype-hosted JVM
  Python's, so a steady mode begun in either language holds for both."
  (:require [pyprof.config :as config]
            [pyprof.native :refer [mx]]
            [pyprof.profiler :as profiler]
            [pyprof.rules :as rules]
            [pyprof.session.raw :as raw]
            [pyprof.tracker :as tracker]
            [pyprof.util :as util]))

(set! *warn-on-reflection* true)

(def ^:private spec (rules/api "steady"))
(def ^:private reserved (rules/api "reserved_session_keys"))

(defn active
  "Who began steady mode (\"(pyprof.steady/begin! ...)\", a session's name,
  \"-Dpyprof.steady\", or Python's \"PYPROF_STEADY\" in a hosted JVM), or nil."
  []
  (:steady (tracker/snapshot)))

(defn- on-raw?
  "True when the profiler records into a session raw trace of this process: this JVM's, or, in a
  JPype-hosted JVM, Python's (api.json raw_trace: finished and deleted by its owner)."
  []
  (let [file (get (profiler/current-config) "filename")]
    (boolean (and file (or (= file (raw/raw-trace-path)) (profiler/-session-raw-trace? file))))))

(defn begin-as!
  "`begin!` on behalf of `by` (a session's name, the system property); throws the same."
  [opts by]
  (let [{:keys [filename]} opts
        rec (dissoc opts :filename "filename")
        _ (when-not filename
            (doseq [k (keys rec)]
              (let [c (util/key->c k)]
                (when-let [why (reserved c)]
                  (throw (rules/error "session.reserved_option" {:option c :why why}))))))
        c-opts (config/validate rec)]
    (tracker/with-lock
      (let [{:keys [steady session finished running]} (tracker/snapshot)]
        (when steady (throw (rules/error "steady.already" {:steady steady})))
        (when session (throw (rules/error "steady.session_open"
                                          {:call "(pyprof.steady/begin! ...)" :session session})))
        (when finished (throw (rules/error "session.profiler_finished")))
        (when running (throw (rules/error "steady.profiler_running"))))
      (profiler/-as-owner "steady"
        (if filename
          (profiler/profiler-set-config (assoc rec :filename (config/abspath (str filename))))
          (raw/configure! rec c-opts))
        (profiler/profiler-set-state :run)
        (profiler/pause))
      (tracker/put! :steady by))
    nil))

(defn begin!
  "Begins steady mode now, before the service's MXNet threads start: configures the profiler
  with `opts` (recording keys as in profiler-set-config: :profile-api, :profile-imperative,
  ..., :aggregate-stats, :dump-period in seconds; with :filename, into that file, recorded while
  resumed; without, into pyprof's raw trace, which sessions cut into windows), switches it to
  run and pauses it (C: MXSetProcessProfilerConfig, MXSetProcessProfilerState 1,
  MXProcessProfilePause 1). Throws ex-info :invalid-state steady.already, steady.session_open,
  steady.profiler_running, :session-finished session.profiler_finished, config errors."
  ([] (begin! {}))
  ([opts] (begin-as! opts "(pyprof.steady/begin! ...)")))

(defn from-property!
  "At start-up: begins steady mode when the system property -Dpyprof.steady (api.json steady
  property) is true, with MXNet's default recording options into pyprof's raw trace (what a
  session without options records). True when steady mode is on afterwards."
  []
  (let [p (spec "property")]
    (when (and (Boolean/parseBoolean (System/getProperty p)) (nil? (active)))
      (begin-as! {} (str "-D" p)))
    (some? (active))))

(defn check-session!
  "Internal (pyprof.session/start!, under the tracker lock, in steady mode): a session records
  in steady mode only on the raw trace, with steady mode's options (`c-opts`, C strings).
  Throws :invalid-state steady.own_file, :invalid-config steady.options_differ."
  [c-opts]
  (let [{:keys [steady config]} (tracker/snapshot)
        current (or config (config/effective {}))]
    (when-not (on-raw?)
      (throw (rules/error "steady.own_file" {:steady steady :trace (get current "filename")})))
    (let [wanted (config/effective (assoc c-opts "filename" (raw/raw-trace-path)
                                          "continuous_dump" "true"))
          differ (sort (filter #(not= (get wanted %) (get current %)) (keys wanted)))]
      (when (seq differ)
        (throw (rules/error "steady.options_differ"
                            {:steady steady :wanted (into (sorted-map) (select-keys wanted differ))
                             :current (into (sorted-map) (select-keys current differ))}))))))

(defn end!
  "Ends steady mode: the caller says its MXNet threads have ended. Waits for queued operators,
  stops the profiler, and with a :filename of `begin!` finishes that trace; on the raw trace,
  deletes it when no session is open. Idempotent (C: MXNDArrayWaitAll,
  MXSetProcessProfilerState 0, MXDumpProcessProfile 1). Throws :invalid-state
  steady.session_open while a session is open."
  []
  (let [raw? (tracker/with-lock
               (let [{:keys [steady session]} (tracker/snapshot)]
                 (when steady
                   (when session
                     (throw (rules/error "steady.session_open"
                                         {:call "(pyprof.steady/end!)" :session session})))
                   (let [raw? (on-raw?)]
                     (profiler/-as-owner "steady"
                       (try (mx MXNDArrayWaitAll)
                            (finally
                              (when (:running (tracker/snapshot))
                                (profiler/profiler-set-state :stop))
                              (tracker/put! :steady nil)))
                       (when-not (or raw? (:finished (tracker/snapshot)))
                         (profiler/dump-profile true)))
                     raw?))))]
    (when (and raw? (raw/raw-trace-path)) (raw/release!))
    nil))

(defn- at-exit!
  "At JVM exit, steady mode not ended: finish the trace without a stop (pause, finished dump:
  IsProfiling unchanged); the raw trace is finished and deleted (`pyprof.session.raw/finish!`)."
  []
  (let [{:keys [steady finished]} (tracker/snapshot)]
    (when (and steady (not finished))
      (if (on-raw?)
        (raw/finish!)
        (profiler/-as-owner "exit"
          (profiler/pause)
          (profiler/dump-profile true))))))

(profiler/-on-exit! "3-pyprof.steady" at-exit!)
