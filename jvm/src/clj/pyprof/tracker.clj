(ns ^:no-doc pyprof.tracker
  "The process's tracker (`pyprof.jvm.Tracker/current`, which documents it) seen from the
  profiler layer: fields as keywords (:ever-ran for \"ever_ran\"), each read a fresh `snapshot`,
  each change an `update!` under the tracker's lock (`with-lock`)."
  (:require [clojure.string :as str])
  (:import (pyprof.jvm Tracker)))

(set! *warn-on-reflection* true)

(defn- field-key [^String field] (keyword (str/replace field "_" "-")))
(defn- field-name ^String [k] (str/replace (name k) "-" "_"))

(defn- from-tracker
  "A field's value as the profiler layer uses it: config a Clojure map, kept parts a vector,
  Booleans the canonical ones (a Boolean is false in Clojure only when it is Boolean/FALSE)."
  [k v]
  (cond (= k :config) (when v (into {} v))
        (= k :kept-parts) (vec v)
        (instance? Boolean v) (boolean v)
        :else v))

(defn snapshot
  "Every field now, by keyword."
  []
  (into {} (map (fn [[f v]] (let [k (field-key f)] [k (from-tracker k v)])))
        (.read (Tracker/current))))

(defn owner
  "The calling thread's identity (`pyprof.jvm.Tracker/owner`), as :internal holds it."
  []
  (.owner (Tracker/current)))

(defmacro with-lock
  "Runs `body` holding the tracker's lock (reentrant)."
  [& body]
  `(let [t# (Tracker/current)]
     (.lock ^Tracker t#)
     (try ~@body
          (finally (.unlock ^Tracker t#)))))

(defn write!
  "Sets the fields of the map `changes` (keyword keys), the others unchanged."
  [changes]
  (.write (Tracker/current)
          ^java.util.Map (into {} (map (fn [[k v]] [(field-name k) v])) changes)))

(defn update!
  "Under the lock: the snapshot passed through (f snapshot & args); writes the fields that
  changed and returns the new map."
  [f & args]
  (with-lock
    (let [old (snapshot)
          new (apply f old args)
          changed (into {} (remove (fn [[k v]] (= v (get old k)))) new)]
      (when (seq changed) (write! changed))
      new)))

(defn put!
  "Under the lock: sets the fields given as key value pairs; returns the new map."
  [& kvs]
  (apply update! assoc kvs))
