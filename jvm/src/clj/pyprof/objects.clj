(ns pyprof.objects
  "The profiler's user-side objects (domains, tasks, frames, events, counters, markers), as
  Python's `pyprof.objects`; `pyprof.profiler` re-exports them. Errors: object.*, counter.*,
  marker.scope."
  (:require [pyprof.native :as native :refer [mx]]
            [pyprof.rules :as rules])
  (:import (com.sun.jna.ptr PointerByReference)
           (pyprof.jvm ProfileDomain ProfileObject ProfileObject$Kind PyprofException)))

(set! *warn-on-reflection* true)

(defmacro ^:private in-clojure
  "Runs `body` (ProfileObject's Java methods) so that a catalogue error names Clojure calls."
  [& body]
  `(try ~@body
        (catch PyprofException e# (throw (.inClojure e#)))))

(defn- check-name ^String [kind name]
  (in-clojure (ProfileObject/checkName kind name)))

(defonce ^:private domains (atom {}))

(defn domain
  "The domain `name` (C: MXProfileCreateDomain), one per name in this JVM, never destroyed."
  ^ProfileDomain [name]
  (let [name (check-name "Domain" name)]
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
    (throw (rules/error "object.needs_domain" {:what kind :value d})))
  d)

(defn- profile-object ^ProfileObject [kind kind-name name create]
  (let [name (check-name kind-name name)]
    (ProfileObject. kind name (native/out-pointer create))))

(defn task
  "A task `name` in `domain` (C: MXProfileCreateTask), an async b/e pair; close it (with-open)."
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

(declare set-counter)

(defn counter
  "A counter `name` in `domain` (C: MXProfileCreateCounter), set to `value` when given."
  (^ProfileObject [domain name] (counter domain name nil))
  (^ProfileObject [domain ^String name value]
   (let [d (check-domain "Counter" domain)
         c (profile-object ProfileObject$Kind/COUNTER "Counter" name
                           #(mx MXProfileCreateCounter (.pointer d) name ^PointerByReference %))]
     (when (some? value)
       (try (set-counter c value)
            (catch Throwable t (.close c) (throw t))))
     c)))

(def ^:private durations "Task, Frame or Event")

(defn- check-object
  "`o` when it is a ProfileObject; else object.not_an_object for `call`, which needs a `needs`."
  ^ProfileObject [o call needs]
  (when-not (instance? ProfileObject o)
    (throw (rules/error "object.not_an_object" {:call call :needs needs :value o})))
  o)

(defn start
  "Starts a task, frame or event (C: MXProfileDurationStart); object.already_started,
  object.closed, object.wrong_kind, object.not_an_object."
  [duration]
  (in-clojure (.start (check-object duration "start" durations)))
  nil)

(defn stop
  "Stops a task, frame or event (C: MXProfileDurationStop); object.not_started, else as `start`."
  [duration]
  (in-clojure (.stop (check-object duration "stop" durations)))
  nil)

(defmacro with-duration
  "Starts the task, frame or event `duration` around `body`; always stops it."
  [duration & body]
  `(let [d# ~duration]
     (start d#)
     (try ~@body (finally (stop d#)))))

(defmacro with-task
  "Runs `body` in a new task `name` of `domain` (a domain or its name), closed after it."
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

(defn- counter-arg
  "`v` when it is an integer (no booleans, no floats); else counter.not_int."
  [^ProfileObject counter what v]
  (when-not (integer? v)
    (throw (rules/error "counter.not_int" {:name (.name counter) :what what :value v})))
  v)

(defn set-counter
  "Sets a counter to `value`, 0 ... 2^64-1 (C: MXProfileSetCounter); counter.out_of_range outside."
  [counter value]
  (let [counter (check-object counter "set-counter" "Counter")]
    (in-clojure (.setValue counter (biginteger (counter-arg counter "value" value))))
    nil))

(defn- adjust! [^ProfileObject counter delta]
  (in-clojure (.increment counter (biginteger delta)))
  nil)

(defn increment
  "Adds `delta` (default 1; may be negative) to a counter (C: MXProfileAdjustCounter);
  counter.below_zero, counter.above_max, counter.step_range leave it unchanged."
  ([counter] (increment counter 1))
  ([counter delta]
   (let [counter (check-object counter "increment" "Counter")]
     (adjust! counter (counter-arg counter "delta" delta)))))

(defn decrement
  "Subtracts `delta` (default 1) from a counter."
  ([counter] (decrement counter 1))
  ([counter delta]
   (let [counter (check-object counter "decrement" "Counter")]
     (adjust! counter (-' (counter-arg counter "delta" delta))))))

(defn counter-value
  "The counter's value as pyprof last set it, 0 ... 2^64-1 (a BigInt from 2^63)."
  [counter]
  (let [^java.math.BigInteger v (in-clojure (.value (check-object counter "counter-value" "Counter")))]
    (if (< (.bitLength v) 64) (.longValue v) (bigint v))))

(def marker-scopes
  "Scopes `mark` accepts (api.json marker_scopes)."
  rules/marker-scopes)

(defn mark
  "Records the instant marker `name` in `domain` (C: MXProfileSetMarker); `scope` (default
  :process) of `marker-scopes`, else marker.scope."
  ([domain name] (mark domain name rules/default-marker-scope))
  ([domain name scope]
   (let [d (check-domain "Marker" domain)
         name (check-name "Marker" name)
         s (when (or (keyword? scope) (string? scope)) (clojure.core/name scope))]
     (when-not (some #{s} marker-scopes)
       (throw (rules/error "marker.scope" {:scope scope :choices marker-scopes})))
     (mx MXProfileSetMarker (.pointer d) ^String name ^String s)
     nil)))
