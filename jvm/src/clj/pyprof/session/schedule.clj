(ns ^:no-doc pyprof.session.schedule
  "Step schedules by `schedule.json` (as Python's `pyprof.session.scheduling`); its names as
  keywords with dashes (:record-and-save)."
  (:require [clojure.string :as str]
            [pyprof.rules :as rules]))

(set! *warn-on-reflection* true)

(def ^:private spec (rules/read-spec "schedule.json"))

(defn- kw [s] (keyword (str/replace s "_" "-")))

(def ^:private action-names (vec (keys (spec "actions")))) ; schedule.bad_action's choices

(def actions "The actions a schedule returns for a step." (set (map kw action-names)))

(def ^:private transitions
  "{[previous-action next-action] [operation ...]}, every pair of actions."
  (into {} (for [{:strs [from to do]} (spec "transitions")] [[(kw from) (kw to)] (mapv kw do)])))

(def steady-operations
  "An operation -> the one a steady session performs instead (:stop -> :pause, :run -> :resume)."
  (into {} (map (fn [[k v]] [(kw k) (kw v)])) (get-in spec ["steady" "operations"])))

(defn operations
  "The operations from action `prev` to `cur`, in order (`steady?`: a steady session's)."
  [prev cur steady?]
  (cond->> (transitions [prev cur])
    steady? (mapv #(get steady-operations % %))))

(def default-action "Each step's action without a schedule." (kw (spec "without_schedule")))
(def initial-action "The action before step 0." (kw (spec "before_first_step")))
(def final-action "The action after stop!." (kw (spec "after_stop")))

(def ^:private parameters
  (mapv (fn [{:strs [name min default]}] {:key (kw name) :name name :min min :default default})
        (spec "parameters")))

(def parameter-names "The parameters' names as schedule.json spells them." (mapv :name parameters))

(defn schedule
  "A step schedule (fn step -> action): after :skip-first steps, cycles of :wait, :warmup and
  :active steps repeat :repeat times (0: for ever), each cycle's active steps one window.
  Defaults {:wait 0 :warmup 0 :active 1 :repeat 0 :skip-first 0}; keys are keywords (:skip_first
  too) or strings as schedule.json spells them. schedule.unknown_option, schedule.bad_value."
  ([] (schedule {}))
  ([opts]
   (let [known (mapv :key parameters)
         unknown (remove (set (concat known (map :name parameters) (map (comp keyword :name) parameters)))
                         (keys opts))]
     (when (seq unknown)
       ;; the choices spelt as the caller spells keys
       (throw (rules/error "schedule.unknown_option"
                           {:options (vec unknown)
                            :choices (if (every? keyword? unknown) known (mapv :name parameters))})))
     (let [values (reduce (fn [m {:keys [key name min default]}]
                            (let [v (get opts key (get opts name (get opts (keyword name) default)))]
                              (when-not (and (integer? v) (>= v min))
                                (throw (rules/error "schedule.bad_value"
                                                    {:option name :value v :min min})))
                              (assoc m key v)))
                          {} parameters)
           {:strs [steps action]} (spec "skip_first")
           skip (values (kw steps))
           skip-action (kw action)
           phases (mapv (fn [{:strs [steps action last_step_action]}]
                          [(values (kw steps)) (kw action) (kw (or last_step_action action))])
                        (spec "cycle"))
           cycle (reduce +' (map first phases))
           cycles (values (kw (spec "cycles")))
           after (kw (spec "after_cycles"))]
       (with-meta
         (fn [step]
           (if (< step skip)
             skip-action
             (let [step (- step skip)]
               (if (and (pos? cycles) (>= step (*' cycles cycle)))
                 after
                 (loop [pos (mod step cycle), [[n each last] & more] phases]
                   (cond (< pos n) (if (= pos (dec n)) last each)
                         :else (recur (- pos n) more)))))))
         {:pyprof.session/schedule values})))))

(defn check-action
  "`a` (what a schedule returned for `step`) when it is an action, else schedule.bad_action."
  [a step]
  (when-not (actions a)
    (throw (rules/error "schedule.bad_action" {:value a :step step :choices action-names})))
  a)

(defn saves-many?
  "True when `sched` saves more than one window: `schedule`'s by its cycles, another fn within
  its first `steps` (10000) steps."
  ([sched] (saves-many? sched 10000))
  ([sched steps]
   (if-let [values (:pyprof.session/schedule (meta sched))]
     (not (== 1 (values (kw (spec "cycles"))))) ; one window each
     (loop [step 0, prev initial-action, saves 0]
       (let [cur (if (< step steps) (check-action (sched step) step) final-action)
             saves (cond-> saves (some #{:save} (operations prev cur false)) inc)]
         (cond (> saves 1) true
               (>= step steps) false
               :else (recur (inc step) cur saves)))))))

(defn step-events
  "The step marks of window `window` (schedule.json step_marks): an instant per step of `starts`
  ([step began-us], us since the epoch) up to `last-step`, the last running to `end-us`; on the
  main thread (tid = pid)."
  [window starts last-step end-us pid]
  (let [{:strs [name cat ph scope]} (spec "step_marks")
        kept (vec (filter #(<= (first %) last-step) starts))]
    (vec (for [[i [step began]] (map-indexed vector kept)
               :let [end (if-let [[_ t] (get kept (inc i))] t (max end-us began))]]
           {"name" (rules/render name {:step step}) "cat" cat "ph" ph "s" scope "ts" began
            "pid" pid "tid" pid "args" {"step" step "window" window "step_us" (- end began)}}))))
