(ns pyprof.steady
  "Steady mode (Python's `pyprof.session.steady`): the profiler runs once, at `begin!`, and
  nothing changes MXNet's `Profiler::IsProfiling` until `end!` or exit (a change mid-call aborts
  at c_api_profile.cc:140). `-Dpyprof.steady=true` begins it at start-up."
  (:require [pyprof.config :as config]
            [pyprof.native :refer [mx]]
            [pyprof.output :as output]
            [pyprof.profiler :as profiler]
            [pyprof.rules :as rules]
            [pyprof.session.raw :as raw]
            [pyprof.tracker :as tracker]
            [pyprof.util :as util]))

(set! *warn-on-reflection* true)

(def ^:private spec (rules/api "steady"))

(defn active
  "Who began steady mode, or nil."
  []
  (:steady (tracker/snapshot)))

(defn- on-raw?
  "True when the profiler records into a session raw trace of this process."
  []
  (let [file (get (profiler/current-config) "filename")]
    (boolean (and file (or (= file (raw/raw-trace-path)) (output/session-raw-trace? file))))))

(defn- split-filename
  "[filename, the other options] of `opts`, its key spelt as any config key (:filename,
  \"filename\"); config.duplicate_key when spelt twice."
  [opts]
  (let [given (when (map? opts) (filter #(= "filename" (util/key->c %)) (keys opts)))]
    (when (next given)
      (throw (rules/error "config.duplicate_key"
                          {:key "filename" :value (get opts (second given)) :given (second given)})))
    [(some->> (first given) (get opts)) (apply dissoc opts given)]))

(defn begin-as!
  "`begin!` on behalf of `by` (a session's name, the system property)."
  [opts by]
  (let [[filename rec] (split-filename opts)
        _ (when-not filename (run! config/check-session-key! (keys rec)))
        c-opts (config/validate rec)]
    (tracker/with-lock
      (let [{:keys [steady session finished running]} (tracker/snapshot)]
        (when steady (throw (rules/error "steady.already" {:steady steady})))
        (when session (throw (rules/error "steady.session_open"
                                          {:call :api/steady_begin :session session})))
        (when finished (throw (rules/error "session.profiler_finished")))
        (when running (throw (rules/error "steady.profiler_running"))))
      (profiler/-as-owner "steady"
        (if filename
          (profiler/profiler-set-config (assoc rec :filename (output/abspath (str filename))))
          (raw/configure! rec c-opts))
        (profiler/profiler-set-state :run)
        (profiler/pause))
      (tracker/put! :steady by))
    nil))

(defn begin!
  "Begins steady mode before the service's MXNet threads start: configures with `opts`
  (recording keys; :filename, else pyprof's raw trace), runs and pauses (C:
  MXSetProcessProfilerConfig, MXSetProcessProfilerState 1, MXProcessProfilePause 1). Throws
  steady.already, steady.session_open, steady.profiler_running, session.profiler_finished,
  config.*."
  ([] (begin! {}))
  ([opts] (begin-as! opts "(pyprof.steady/begin! ...)")))

(defn from-property!
  "Begins steady mode when -Dpyprof.steady is true; true when steady mode is on."
  []
  (let [p (spec "property")]
    (when (and (Boolean/parseBoolean (System/getProperty p)) (nil? (active)))
      (begin-as! {} (str "-D" p)))
    (some? (active))))

(defn check-session!
  "A session in steady mode records only on the raw trace with its options (`c-opts`);
  steady.other_layer, steady.own_file, steady.options_differ."
  [c-opts]
  (let [{:keys [steady config]} (tracker/snapshot)
        current (or config (config/effective {}))
        file (get current "filename")]
    (when (and (not= file (raw/raw-trace-path)) (output/session-raw-trace? file))
      (throw (rules/error "steady.other_layer" {:call :api/session_start :steady steady
                                                :layer "Python" :trace file
                                                :end (get-in rules/catalogue ["api" "steady_end" "python"])})))
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
  "Ends steady mode after the MXNet threads ended: waits, stops, finishes a :filename trace or
  deletes the raw trace; idempotent (C: MXNDArrayWaitAll, MXSetProcessProfilerState 0,
  MXDumpProcessProfile 1). steady.session_open while a session is open."
  []
  (let [raw? (tracker/with-lock
               (let [{:keys [steady session]} (tracker/snapshot)]
                 (when steady
                   (when session
                     (throw (rules/error "steady.session_open"
                                         {:call :api/steady_end :session session})))
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
  "At exit in steady mode: finishes the trace without a stop."
  []
  (let [{:keys [steady finished]} (tracker/snapshot)]
    (when (and steady (not finished))
      (if (on-raw?)
        (raw/finish!)
        (profiler/-as-owner "exit"
          (profiler/pause)
          (profiler/dump-profile true))))))

(profiler/-on-exit! "3-pyprof.steady" at-exit!)
