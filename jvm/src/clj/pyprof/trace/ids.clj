(ns pyprof.trace.ids
  "Ids that JavaScript viewers hold exactly: a port of `pyprof/trace/ids.py` for the traces the
  JVM writes (session windows, a file finished after a filename switch, recovered windows). The
  rule is trace.json `ids` (pyprof/spec, read through `pyprof.rules/read-spec`): strings, or
  integers below 2**53 in magnitude, are kept; every other pid, tid or async id (MXNet's 64-bit
  hashes) becomes the next integer 1, 2, ... that no kept integer of its kind uses, in order of
  first use, equal values to equal numbers (Python's `IdMap(renumber_all=False)`).

  - `safe-id?`: whether a value may be written as it is.
  - `id-values`: [kind field value] for each id of an event.
  - `renumber`: the events with their unsafe ids renumbered."
  (:require [pyprof.rules :as rules]))

(set! *warn-on-reflection* true)

(def spec
  "trace.json `ids` (string keys)."
  ((rules/read-spec "trace.json") "ids"))

(def ^java.math.BigInteger limit
  "Ids must be strings or integers v with -limit < v < limit (2**53)."
  (.shiftLeft java.math.BigInteger/ONE (int (spec "limit_bits"))))

(def ^:private fields
  "[kind field] for every id field, in trace.json's order (as Python's `id_values`)."
  (vec (for [[kind fs] (spec "kinds"), f fs] [kind f])))

(def ^:private id2-scopes (vec (spec "id2_scopes")))

(defn safe-id?
  "True for a string, or an integer (not a boolean) with |v| < 2**53."
  [v]
  (or (string? v)
      (and (integer? v)
           (neg? (.compareTo (.abs (biginteger v)) limit)))))

(defn id-values
  "[kind field value] for each id of `ev` (a map with string keys): pid, tid, id, bind_id, and
  id2 (field \"id2.local\" / \"id2.global\", or \"id2\" when it is not an object)."
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
  "A map key for an id value that keeps JSON types apart as Python's `id_key` does: integers
  of any width are equal when equal (Long, BigInt), 1 and 1.0 and true differ."
  [v]
  (if (integer? v) (bigint v) v))

(defn renumber
  "`events` (maps with string keys) with every id `safe-id?` refuses replaced by the next
  integer 1, 2, ... of its kind that no safe integer id of that kind among `events` uses, in
  order of first use; equal values get equal numbers. Returns a vector (two passes)."
  [events]
  (let [events (vec events)
        reserved (reduce (fn [r ev]
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
    (mapv (fn [ev]
            (reduce (fn [ev [kind field v]]
                      (if (safe-id? v)
                        ev
                        (let [n (number kind v)]
                          (if (.startsWith ^String field "id2.")
                            (assoc-in ev ["id2" (subs field 4)] n)
                            (assoc ev field n)))))
                    ev (id-values ev)))
          events)))
