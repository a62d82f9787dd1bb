(ns pyprof.objects
  "The profiler's user-side objects: domains, tasks, frames, events, counters and markers, with
  the semantics of pyprof.objects (the Python reference): domains cached by name and never
  destroyed; names checked (MXNet writes them unescaped into 128-byte buffers); start twice or
  stop before start throws; counters track their value (0 ... 2^64-1) and refuse to wrap.
  `pyprof.profiler` re-exports every public var here (users call `pyprof.profiler/task`, ...).

  Errors are the catalogue's (`pyprof.rules`), with the codes and fields of the Python reference:
  object.bad_name, object.name_too_long, object.name_bad_char, object.needs_domain, object.closed,
  object.already_started, object.not_started, counter.not_int, counter.out_of_range,
  counter.below_zero, counter.above_max, counter.step_range, marker.scope; and the JVM's own
  object.wrong_kind (a counter call on a task, or the reverse) and object.not_an_object (a call
  given something other than a task, frame, event or counter). Every error is a
  `pyprof.jvm.PyprofException`, an ex-info with `:pyprof/code` in its ex-data."
  (:require [pyprof.native :as native :refer [mx]]
            [pyprof.rules :as rules])
  (:import (com.sun.jna.ptr PointerByReference)
           (pyprof.jvm ProfileDomain ProfileObject ProfileObject$Kind PyprofException)))

(set! *warn-on-reflection* true)

(defmacro ^:private in-clojure
  "Runs `body` (calls of ProfileObject's Java methods, whose errors name Java calls) so that a
  catalogue error names Clojure calls instead."
  [& body]
  `(try ~@body
        (catch PyprofException e# (throw (.inClojure e#)))))

(defn- check-name ^String [kind name]
  (in-clojure (ProfileObject/checkName kind name)))

(defonce ^:private domains (atom {}))

(defn domain
  "The domain `name` (C: MXProfileCreateDomain): groups tasks, frames, counters and markers in
  the trace (their category). One per name in this JVM; domains are never destroyed."
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

(declare set-counter)

(defn counter
  "A counter `name` in `domain` (C: MXProfileCreateCounter), shown as C events; set to `value`
  when given. Change it with `set-counter`, `increment`, `decrement`."
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
  "`o` when it is a ProfileObject (a task, frame, event or counter); else object.not_an_object
  for `call`, which needs a `needs`."
  ^ProfileObject [o call needs]
  (when-not (instance? ProfileObject o)
    (throw (rules/error "object.not_an_object" {:call call :needs needs :value o})))
  o)

(defn start
  "Starts a task, frame or event (C: MXProfileDurationStart); throws :invalid-state when it is
  already started (object.already_started) or closed (object.closed), :invalid-option for a
  counter (object.wrong_kind) or anything else (object.not_an_object)."
  [duration]
  (in-clojure (.start (check-object duration "start" durations)))
  nil)

(defn stop
  "Stops a task, frame or event and records it (C: MXProfileDurationStop); throws :invalid-state
  when it was not started (object.not_started); other errors as `start`."
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

(defn- counter-arg
  "`v` when it is an integer (Python's `__index__`: no booleans, no floats); else counter.not_int."
  [^ProfileObject counter what v]
  (when-not (integer? v)
    (throw (rules/error "counter.not_int" {:name (.name counter) :what what :value v})))
  v)

(defn set-counter
  "Sets a counter to `value`, 0 ... 2^64-1 (C: MXProfileSetCounter); throws counter.out_of_range
  outside it."
  [counter value]
  (let [counter (check-object counter "set-counter" "Counter")
        v (counter-arg counter "value" value)]
    (when-not (<= rules/counter-min v rules/counter-max)
      (throw (rules/error "counter.out_of_range" {:name (.name counter) :value v})))
    (in-clojure (.setUnsignedValue counter (.longValue (biginteger v))))
    nil))

(defn- adjust! [^ProfileObject counter delta]
  (in-clojure
   (if (<= Long/MIN_VALUE delta Long/MAX_VALUE)
     (.increment counter (long delta))
     (.refuseStep counter (biginteger delta))))
  nil)

(defn increment
  "Adds `delta` (default 1; may be negative) to a counter (C: MXProfileAdjustCounter); throws
  :invalid-state, leaving it unchanged, when it would leave 0 ... 2^64-1 (counter.below_zero,
  counter.above_max) or the step does not fit MXNet's int64 (counter.step_range)."
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
  "Scopes `mark` accepts (MXNet's ProfileMarker scopes), as in pyprof.objects.MARKER_SCOPES."
  rules/marker-scopes)

(defn mark
  "Records the instant marker `name` in `domain` now (C: MXProfileSetMarker); `scope` (default
  :process) is one of :global :process :thread :task :marker."
  ([domain name] (mark domain name rules/default-marker-scope))
  ([domain name scope]
   (let [d (check-domain "Marker" domain)
         name (check-name "Marker" name)
         s (when (or (keyword? scope) (string? scope)) (clojure.core/name scope))]
     (when-not (some #{s} marker-scopes)
       (throw (rules/error "marker.scope" {:scope scope :choices marker-scopes})))
     (mx MXProfileSetMarker (.pointer d) ^String name ^String s)
     nil)))
