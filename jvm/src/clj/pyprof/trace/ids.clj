(ns ^:no-doc pyprof.trace.ids
  "Ids that JavaScript viewers hold exactly, for the traces the JVM writes: `pyprof/trace/ids.py`'s
  rule (trace.json `ids`, `IdMap(renumber_all=False)`): strings and integers below 2**53 in
  magnitude are kept; other pids, tids and async ids become the next integer 1, 2, ... of their
  kind that no kept one uses, in order of first use."
  (:require [pyprof.rules :as rules]))

(set! *warn-on-reflection* true)

(def spec
  "trace.json `ids` (string keys)."
  ((rules/read-spec "trace.json") "ids"))

(def ^java.math.BigInteger limit
  "2**53: ids must be strings or integers of smaller magnitude."
  (.shiftLeft java.math.BigInteger/ONE (int (spec "limit_bits"))))

(def ^:private fields
  "[kind field] for every id field, in trace.json's order."
  (vec (for [[kind fs] (spec "kinds"), f fs] [kind f])))

(def ^:private id2-scopes (vec (spec "id2_scopes")))

(defn safe-id?
  "True for a string, or an integer with |v| < 2**53."
  [v]
  (or (string? v)
      (and (integer? v)
           (neg? (.compareTo (.abs (biginteger v)) limit)))))

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

(defn- key-of
  "A map key for an id value as Python's `id_key` (integers equal when equal; 1, 1.0 and true
  apart)."
  [v]
  (if (integer? v) (bigint v) v))

(defn id-map
  "The renumbering of one trace of `events` (Python's `IdMap(renumber_all=False)`, every event
  reserved): {:apply (fn [ev]) the event with its unsafe ids numbered at first use, :fresh (fn
  [kind]) a number of `kind` no id uses (an overlap track's tid)}."
  [events]
  (let [reserved (reduce (fn [r ev]
                           (reduce (fn [r [kind _ v]]
                                     (if (and (integer? v) (safe-id? v))
                                       (update r kind (fnil conj #{}) (long v))
                                       r))
                                   r (id-values ev)))
                         {} events)
        numbers (volatile! {})   ; kind -> {key new}
        next-free (volatile! {}) ; kind -> the next candidate
        fresh (fn [kind]
                (let [taken (get reserved kind #{})
                      n (loop [n (long (get @next-free kind 1))]
                          (if (contains? taken n) (recur (inc n)) n))]
                  (vswap! next-free assoc kind (inc n))
                  n))
        number (fn [kind v]
                 (let [k (key-of v)]
                   (or (get-in @numbers [kind k])
                       (let [n (fresh kind)]
                         (vswap! numbers assoc-in [kind k] n)
                         n))))]
    {:fresh fresh
     :apply (fn [ev]
              (reduce (fn [ev [kind field v]]
                        (if (safe-id? v)
                          ev
                          (let [n (number kind v)]
                            (if (.startsWith ^String field "id2.")
                              (assoc-in ev ["id2" (subs field 4)] n)
                              (assoc ev field n)))))
                      ev (id-values ev)))}))
