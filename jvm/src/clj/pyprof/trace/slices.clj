(ns ^:no-doc pyprof.trace.slices
  "The slices of a trace the JVM writes made valid for viewers, ids renumbered: Python's
  `pyprof/trace/slices.py` plan (`plan_slices`, then `Rewriter` with `keep_pairs`), which
  documents the rules."
  (:require [pyprof.trace.ids :as ids]))

(set! *warn-on-reflection* true)

(defn- number?* [v] (or (integer? v) (and (float? v) (Double/isFinite (double v)))))

(defn- track [e] [(get e "pid") (get e "tid")])

(defn- pairing
  "Python's `Pairing`: per track its open begins [name payload]; `close!` takes the latest of
  the end's name (a nameless end: the innermost) and gives its payload, or nil."
  []
  (let [open (volatile! {})]
    {:open! (fn [t name payload] (vswap! open update t (fnil conj []) [name payload]))
     :close! (fn [t name]
               (let [s (get @open t)]
                 (when-let [i (last (keep-indexed (fn [i [n]] (when (or (nil? name) (= name n)) i)) s))]
                   (vswap! open assoc t (into (subvec s 0 i) (subvec s (inc i))))
                   (second (s i)))))
     :open (fn [] (for [[t s] @open, [_ p] s] [t p]))}))

(defn- each-slice
  "Calls (f ph track ordinal e) on each slice event with a numeric ts, as both passes count them."
  [events f]
  (let [ordinals (java.util.HashMap.)]
    (doseq [e events
            :let [ph (get e "ph")]]
      (if-not (#{"B" "E" "X"} ph)
        (f ph nil nil e)
        (let [t (track e)
              o (when-not (= "E" ph) (let [o (.getOrDefault ordinals t 0)] (.put ordinals t (inc (long o))) o))]
          (when (number?* (get e "ts")) (f ph t o e)))))))

(defn- levels
  "[ordinal level] of each slice [begin end ordinal] of one thread that cannot stay on it: sorted
  by begin, then end descending, placed greedily on the first track where it nests."
  [slices]
  (let [stacks (java.util.ArrayList.)
        top (fn [^java.util.ArrayList s] (.get s (int (dec (.size s)))))]
    (into [] (for [[b e o] (sort-by (fn [[b e o]] [b (- e) o]) slices)
                   :let [level (loop [level 0]
                                 (when (= level (.size stacks)) (.add stacks (java.util.ArrayList.)))
                                 (let [^java.util.ArrayList s (.get stacks (int level))]
                                   (while (and (pos? (.size s)) (<= (top s) b))
                                     (.remove s (int (dec (.size s)))))
                                   (if (or (zero? (.size s)) (<= e (top s)))
                                     (do (.add s e) level)
                                     (recur (inc level)))))]
                   :when (pos? level)]
               [o level]))))

(defn plan
  "The first pass: {:moved {[track ordinal] level}, :unmatched, :negative (sets of [track
  ordinal]), :names {track thread name}}."
  [events]
  (let [p (pairing), intervals (volatile! {}), negative (volatile! #{}), names (volatile! {})]
    (each-slice events
                (fn [ph t o e]
                  (case ph
                    "X" (let [d (get e "dur")]
                          (when (and (number?* d) (>= d 0))
                            (vswap! intervals update t conj [(get e "ts") (+ (get e "ts") d) o])))
                    "B" ((:open! p) t (get e "name") [o (get e "ts")])
                    "E" (when-let [[o b] ((:close! p) t (get e "name"))]
                          (if (neg? (- (get e "ts") b))
                            (vswap! negative conj [t o])
                            (vswap! intervals update t conj [b (get e "ts") o])))
                    (let [args (get e "args")]
                      (when (and (= "M" ph) (= "thread_name" (get e "name")) (map? args) (contains? args "name"))
                        (vswap! names assoc (track e) (args "name")))))))
    {:moved (into {} (for [[t slices] @intervals, [o level] (levels slices)] [[t o] level]))
     :unmatched (set (for [[t [o]] ((:open p))] [t o])) :negative @negative :names @names}))

(defn- complete
  "One X event for a B/E pair: the begin's fields, dur, the args of both (the end's win)."
  [b e]
  (let [x (assoc b "ph" "X" "dur" (- (get e "ts") (get b "ts")))
        args (get e "args")]
    (cond-> x (and (map? args) (seq args)) (assoc "args" (merge (let [a (get b "args")] (if (map? a) a {})) args)))))

(defn rewrite
  "`events` as a writer writes them (see the namespace): the plan's second pass; a vector."
  [events]
  (let [events (vec events)
        {:keys [moved unmatched negative names]} (plan events)
        {:keys [fresh] apply-ids :apply} (ids/id-map events)
        p (pairing), overlap (java.util.HashMap.), out (java.util.ArrayList.)
        place (fn [x t o]
                (if-let [level (moved [t o])]
                  (let [tid (or (.get overlap [t level])
                                (let [tid (fresh "tid")
                                      name (get names t (get x "tid"))]
                                  (.put overlap [t level] tid)
                                  (.add out (cond-> {"ph" "M" "name" "thread_name" "tid" tid
                                                     "args" {"name" (str (if (nil? name) "None" name) " (overlap " level ")")}}
                                              (contains? x "pid") (assoc "pid" (get x "pid"))))
                                  tid))]
                    (.add out (assoc x "tid" tid)))
                  (.add out x)))]
    (each-slice events
                (fn [ph t o e]
                  (case ph
                    "X" (let [d (get e "dur")]
                          (when (and (number?* d) (>= d 0)) (place (apply-ids e) t o)))
                    "B" (when-not (unmatched [t o])
                          ((:open! p) t (get e "name") [o e])
                          (when-not (or (negative [t o]) (moved [t o])) (.add out (apply-ids e))))
                    "E" (when-let [[o b] ((:close! p) t (get e "name"))]
                          (cond (negative [t o]) nil
                                (moved [t o]) (place (apply-ids (complete b e)) t o)
                                :else (.add out (apply-ids e))))
                    (.add out (apply-ids e)))))
    (vec out)))
