(ns ^:no-doc pyprof.trace.ids
  "Ids that JavaScript viewers hold exactly, for the traces the JVM writes: trace.json `ids`
  (Python's `IdMap(renumber_all=False)`), numbered by the JVM's one implementation,
  `pyprof.jvm.WindowCutter$Ids`."
  (:require [pyprof.rules :as rules])
  (:import (pyprof.jvm WindowCutter$Ids)))

(set! *warn-on-reflection* true)

(def spec
  "trace.json `ids` (string keys)."
  ((rules/read-spec "trace.json") "ids"))

(def ^:private limit (bit-shift-left 1 (long (spec "limit_bits"))))

(def ^:private fields
  "[kind field] for every id field, in trace.json's order."
  (vec (for [[kind fs] (spec "kinds"), f fs] [kind f])))

(def ^:private id2-scopes (vec (spec "id2_scopes")))

(defn safe-id?
  "True for a string, or an integer with |v| < 2**53."
  [v]
  (or (string? v)
      (and (integer? v) (< (- limit) v limit))))

(defn id-values
  "[kind field value] for each id of `ev` (id2 as \"id2.local\" / \"id2.global\" when an object)."
  [ev]
  (for [[kind field] fields
        :when (contains? ev field)
        :let [v (get ev field)]
        item (if (and (= "id2" field) (map? v))
               (for [scope id2-scopes :when (contains? v scope)]
                 [kind (str "id2." scope) (get v scope)])
               [[kind field v]])]
    item))

(defn id-map
  "The renumbering of one trace of `events`, every safe id reserved first: {:apply (fn [ev]) the
  event with its unsafe ids numbered at first use, :fresh (fn [kind]) a number of `kind` no id
  uses (an overlap track's tid)}."
  [events]
  (let [reserving (WindowCutter$Ids. limit (java.util.HashMap.))
        _ (doseq [ev events, [kind _ v] (id-values ev)] (.id reserving kind v))
        ids (WindowCutter$Ids. limit (.reserved reserving))]
    {:fresh #(.fresh ids %)
     :apply (fn [ev]
              (reduce (fn [ev [kind ^String field v]]
                        (if (safe-id? v)
                          ev
                          (let [n (.id ids kind v)]
                            (if (.startsWith field "id2.")
                              (assoc-in ev ["id2" (subs field 4)] n)
                              (assoc ev field n)))))
                      ev (id-values ev)))}))
