(ns pyprof.trace.accumulate
  "Streaming state of `pyprof.stats/stats`: pairing begin/end events and pooling their numbers,
  a port of `pyprof/trace/accumulate.py` (`Accumulator`, `FileState`, the reference dict loop).
  The rules are docs/trace-format.md's; the phases, pairs and notes come from trace.json
  (`pyprof.trace.phases`).

  An accumulator (`new-acc`) takes one file at a time, in file order, each with a fresh file state
  (`new-file-state`): `add-event!` is Python's `add_events` for one event, `end-file!` resolves
  the file's pids to device names and pools its durations with those of earlier files, `result`
  builds the statistics (records of `pyprof.trace.records`). Nothing here reads files:
  `pyprof.stats` does, and describes how calls are counted.

  Keys compare as Python's dict keys do (`pycompat/py-key`: 1, 1.0 and true are one pid); the
  values shown (names, pids in device names, categories) are those of the first event that
  used the key, as Python's dicts keep."
  (:require [clojure.string :as str]
            [pyprof.trace.naming :refer [async-copy-categories memory-prefix]]
            [pyprof.trace.phases :as phases :refer [async-id hashable json-text]]
            [pyprof.trace.pycompat :refer [compare-keys compare-py num-compare py-key py-str
                                           true-div]]
            [pyprof.trace.records :as records])
  (:import (clojure.lang BigInt)
           (java.util ArrayList Arrays HashMap LinkedHashMap List Map)))

(set! *warn-on-reflection* true)

;; ------------------------------------------------------------------ durations

(definterface IDurs
  (^void addLong [^long x])
  (^void addDouble [^double x])
  (^long size [])
  (^boolean isDouble [])
  (^void toDouble [])
  (^longs longs [])
  (^doubles doubles [])
  (^void addAll [other]))

;; Python's array('q') that becomes array('d') once a float (or an integer beyond 64 bits)
;; arrives: one long array, holding the doubles' bits in the double mode (8 bytes a call).
(deftype ^:private Durs [^:unsynchronized-mutable ^longs a ^:unsynchronized-mutable ^long n
                         ^:unsynchronized-mutable ^boolean dbl]
  IDurs
  (addLong [_ x]
    (when (== n (alength a)) (set! a (Arrays/copyOf a (int (max 8 (* 2 n))))))
    (aset a n x)
    (set! n (inc n)))
  (addDouble [this x]
    (when-not dbl (.toDouble this))
    (when (== n (alength a)) (set! a (Arrays/copyOf a (int (max 8 (* 2 n))))))
    (aset a n (Double/doubleToRawLongBits x))
    (set! n (inc n)))
  (size [_] n)
  (isDouble [_] dbl)
  (toDouble [_]
    (when-not dbl
      (dotimes [i n] (aset a i (Double/doubleToRawLongBits (double (aget a i)))))
      (set! dbl (boolean true))))
  (longs [_] (Arrays/copyOf a (int n)))
  (doubles [_]
    (let [out (double-array n)]
      (dotimes [i n] (aset out i (if dbl (Double/longBitsToDouble (aget a i)) (double (aget a i)))))
      out))
  (addAll [this other]
    (let [^IDurs o other]
      (if (or dbl (.isDouble o))
        (let [^doubles d (.doubles o)] (dotimes [i (alength d)] (.addDouble this (aget d i))))
        (let [^longs l (.longs o)] (dotimes [i (alength l)] (.addLong this (aget l i))))))))

(alter-meta! #'->Durs assoc :private true)

(defn- durs ^IDurs [] (Durs. (long-array 8) 0 false))

(defn- int64? [x]
  (or (instance? Long x) (and (instance? BigInt x) (<= Long/MIN_VALUE x Long/MAX_VALUE))))

(defn- append!
  "Python's `_append`: `dur` (a number) under the key `k` of `by-pid` (py-key -> [k durations])."
  [^Map by-pid k dur]
  (let [ck (py-key k)
        ^objects h (or (.get by-pid ck) (let [h (object-array [k (durs)])] (.put by-pid ck h) h))
        ^IDurs d (aget h 1)]
    (if (and (not (.isDouble d)) (int64? dur))
      (.addLong d (long dur))
      (.addDouble d (double dur)))))

;; ------------------------------------------------------------------ open begins

(defn- push-begin!
  "Python's `FileState.push`: opens a begin of pairing `key` (a vector, scope + name) at `ts`."
  [^Map open ^Map order key ts]
  (let [ck (py-key key)
        ^List stack (or (.get open ck) (let [l (ArrayList.)] (.put open ck l) l))
        cs (pop ck)
        ^List keys (or (.get order cs) (let [l (ArrayList.)] (.put order cs l) l))]
    (.add stack ts)
    (.add keys key)))

(defn- pop-begin!
  "Python's `FileState.pop`: the ts of the latest open begin of `key` (closed now), or nil."
  [^Map open ^Map order key]
  (let [ck (py-key key)
        ^List stack (.get open ck)]
    (when (and stack (pos? (.size stack)))
      (when-let [^List keys (.get order (pop ck))]
        (loop [i (dec (.size keys))]         ; usually the last; overlapping slices: search back
          (when (>= i 0)
            (if (= ck (py-key (.get keys i)))
              (.remove keys (int i))
              (recur (dec i))))))
      (.remove stack (int (dec (.size stack)))))))

(defn- pop-innermost!
  "Python's `FileState.pop_innermost`: closes the begin opened last in `scope` (a py-key):
  [its key, its ts], or nil."
  [^Map open ^Map order scope]
  (when-let [^List keys (.get order scope)]
    (loop []
      (when (pos? (.size keys))
        (let [key (.remove keys (int (dec (.size keys))))
              ^List stack (.get open (py-key key))]
          (if (and stack (pos? (.size stack)))
            [key (.remove stack (int (dec (.size stack))))]
            (recur)))))))

;; ------------------------------------------------------------------ the reference loop

(def ^:private sync-roles
  "Roles of the phases that pair within a thread (slices, contexts), from trace.json's pairs."
  (set (for [[begin [end kind]] phases/pairs :when (= kind "thread") ph [begin end]]
         (phases/phases ph))))
(def ^:private ignored-roles
  "Roles the statistics count but do not use: trace.json's counted_only_roles."
  (set (phases/spec "counted_only_roles")))

;; indices of the counts of a file state and of an accumulator
(def ^:private unmatched-end 0)
(def ^:private negative 1)
(def ^:private no-ts 2)
(def ^:private bad-counter 3)
(def ^:private unmatched-begin 4)

(defn- count! [^longs counts ^long i] (aset counts i (inc (aget counts i))))

(defn new-acc
  "Python's `Accumulator`: an empty accumulator keeping `categories` (a set, nil: all) and
  leaving out `excluded` (a set or nil)."
  [categories excluded]
  {:categories categories :excluded excluded
   :durations (LinkedHashMap.) :memory (HashMap.) :counters (HashMap.) :phases (LinkedHashMap.)
   :counts (long-array 5)})

(defn new-file-state
  "Python's `FileState`: the open begin events (per pairing key, and per scope in the order they
  were opened), the category of the latest begin of each slice key (for an end without `cat`),
  durations by pid and process names of one file, and its counts."
  []
  {:open-sync (HashMap.) :open-async (HashMap.) :order-sync (HashMap.) :order-async (HashMap.)
   :cat-of (HashMap.) :by-pid (LinkedHashMap.) :pid-names (HashMap.) :counts (long-array 4)})

(defn- key-of
  "Python's `_key`: a JSON value as part of a key (lists and objects as their JSON text)."
  [v]
  (if (or (string? v) (instance? Long v) (nil? v)) v (hashable v)))

(defn- int64-of
  "Python's `int(x)` of a number when it is a 64-bit integer, else nil."
  [x]
  (cond (instance? Long x) x
        (instance? Double x) (let [d (double x)]
                               (when (and (>= d -9.223372036854775808E18) (< d 9.223372036854775808E18))
                                 (long d)))
        (int64? x) (long x)
        :else nil))

(defn- counter!
  "Python's `_counter`: one `C` event, memory samples (bytes) or plain value series."
  [{:keys [^Map memory ^Map counters]} ^longs counts ev cat ts]
  (let [args (get ev "args")]
    (if-not (map? args)
      (count! counts bad-counter)
      (let [bad-ts (volatile! false)]
        (doseq [[^String cname value] args]
          (cond
            (not (number? value)) (count! counts bad-counter)
            (str/starts-with? cname memory-prefix)
            (let [v (int64-of value) t (int64-of ts)]  ; bytes and us: whole numbers, as MXNet writes
              (cond
                (nil? t) (when-not @bad-ts           ; a sample time beyond 64 bits: not a usable ts
                           (count! counts no-ts)
                           (vreset! bad-ts true))
                (nil? v) (count! counts bad-counter)
                :else
                (let [dev (subs cname (count memory-prefix))
                      ^objects series (or (.get memory dev)
                                          (let [s (object-array [(durs) (durs)])] (.put memory dev s) s))]
                  (.addLong ^IDurs (aget series 0) (long t))
                  (.addLong ^IDurs (aget series 1) (long v)))))
            :else
            (let [k [cat cname]
                  ck (py-key k)
                  ^objects s (.get counters ck)]
              (if (nil? s)
                (.put counters ck (object-array [k 1 value value value ts value]))
                (do (aset s 1 (Long/valueOf (inc (long (aget s 1)))))
                    (when (neg? (num-compare value (aget s 2))) (aset s 2 value)) ; min(s[1], value)
                    (when (pos? (num-compare value (aget s 3))) (aset s 3 value)) ; max(s[2], value)
                    (aset s 4 (+' (aget s 4) value))                           ; exact, as Python
                    (when-not (neg? (num-compare ts (aget s 5))) (aset s 5 ts) (aset s 6 value)))))))))))

(defn- negative? [x]
  (if (instance? Long x) (neg? (long x)) (neg? (num-compare x 0))))

(defn- pair!
  "A begin or end of a slice, frame or async pair (role `role`, phase `ph`)."
  [categories {:keys [^Map open-sync ^Map open-async ^Map order-sync ^Map order-async
                      ^Map cat-of ^Map by-pid ^longs counts]} ev ph role cat ts]
  (let [name (key-of (get ev "name"))
        pid (key-of (get ev "pid"))
        sync? (contains? sync-roles role)]
    (when-not (and (not sync?) (contains? async-copy-categories cat) (or (= ph "b") (= ph "e")))
      (let [scope (if sync?
                    [(if (or (= role "slice_begin") (= role "context_begin")) ph (phases/end-phases ph))
                     pid (key-of (get ev "tid"))]
                    [(if (contains? phases/pairs ph) ph (phases/end-phases ph)) pid cat (async-id ev)])
            ^Map open (if sync? open-sync open-async)
            ^Map order (if sync? order-sync order-async)]
        (if (contains? phases/pairs ph)
          (let [key (conj scope name)]
            (push-begin! open order key ts)
            (when sync? (.put cat-of (py-key key) cat)))
          (let [[key begin] (if (nil? name)
                              (pop-innermost! open order (py-key scope))
                              (let [key (conj scope name)] [key (pop-begin! open order key)]))]
            (if (or (nil? key) (nil? begin))
              (count! counts unmatched-end)
              (let [dur (-' ts begin)
                    ;; an end may leave its category to the begin
                    cat (if (and sync? (not (contains? ev "cat")))
                          (let [ck (py-key key)] (if (.containsKey cat-of ck) (.get cat-of ck) cat))
                          cat)]
                (cond (negative? dur) (count! counts negative)
                      (or (nil? categories) (contains? categories cat))
                      (append! by-pid [cat (peek key) pid] dur))))))))))

(defn add-event!
  "Python's `Accumulator.add_events` for one event (rules: docs/trace-format.md)."
  [{:keys [categories excluded ^Map phases] :as acc}
   {:keys [^Map by-pid ^Map pid-names ^longs counts] :as st} ev]
  (let [cat (let [c (get ev "cat" "")] (if (string? c) c (key-of c)))]
    (when-not (and excluded (contains? excluded cat)) ; the reader's prefilter missed it
      (let [ph (let [p (get ev "ph")] (if (string? p) p (key-of p)))
            cp (py-key ph)
            ^objects pc (.get phases cp)
            role (when (string? ph) (phases/phases ph))]
        (if pc
          (aset pc 1 (Long/valueOf (inc (long (aget pc 1)))))
          (.put phases cp (object-array [ph 1])))
        (cond
          (or (nil? role) (contains? ignored-roles role)) nil
          (= role "metadata")
          (let [args (get ev "args")]
            (when (and (= "process_name" (get ev "name")) (map? args) (contains? args "name"))
              (let [pname (get args "name")]
                (.put pid-names (py-key (key-of (get ev "pid")))
                      (if (string? pname) pname (json-text pname false))))))
          :else
          (let [ts (get ev "ts")]
            (cond
              (not (number? ts)) (count! counts no-ts)
              (= role "complete")
              (let [dur (get ev "dur")]
                (cond (not (number? dur)) (count! counts no-ts)
                      (negative? dur) (count! counts negative)
                      (or (nil? categories) (contains? categories cat))
                      (append! by-pid [cat (key-of (get ev "name")) (key-of (get ev "pid"))] dur)))
              (= role "counter") (counter! acc counts ev cat ts)
              :else (pair! categories st ev ph role cat ts))))))))

(defn end-file!
  "Python's `end_file`: the file's counts added, its unmatched begins counted, its durations
  pooled by [category name device]."
  [{:keys [^Map durations ^longs counts]}
   {:keys [^Map open-sync ^Map open-async ^Map by-pid ^Map pid-names] :as st}]
  (let [^longs fc (:counts st)]
    (dotimes [i 4] (aset counts i (+ (aget counts i) (aget fc i)))))
  (doseq [^Map m [open-sync open-async], ^List stack (.values m)]
    (aset counts unmatched-begin (+ (aget counts unmatched-begin) (.size stack))))
  (doseq [^objects h (.values by-pid)]
    (let [[cat name pid] (aget h 0)
          pname (.get pid-names (py-key pid))
          device (cond (and (nil? pname) (nil? pid)) ""
                       (some? pname) pname
                       :else (str "pid " (py-str pid)))
          device (if (= device cat) "" device) ; a category pid (API calls, tasks), not a device
          k [cat (if (nil? name) "" (py-str name)) device]
          ck (py-key k)]
      (if-let [^objects pooled (.get durations ck)]
        (.addAll ^IDurs (aget pooled 1) (aget h 1)) ; integer and float durations pool as floats
        (.put durations ck (object-array [k (aget h 1)]))))))

(defn result
  "Python's `Accumulator.result`: the statistics of every file added so far (`reports`: the read
  reports of the files), in the shape `pyprof.stats/stats` returns."
  [{:keys [^Map durations ^Map memory ^Map counters ^Map phases ^longs counts]} reports]
  (let [phase-counts (into {} (map (fn [^objects pc] [(aget pc 0) (aget pc 1)])) (.values phases))
        unknown (reduce (fn [m ^objects pc]
                          (let [ph (aget pc 0)]
                            (if (and (string? ph) (contains? phases/phases ph))
                              m
                              (assoc m (py-str ph) (aget pc 1)))))
                        {} (.values phases))
        result {:units {:time "us" :memory "bytes"}
                :operators (->> (.values durations)
                                (keep (fn [^objects h]
                                        (let [^IDurs d (aget h 1)]
                                          (when (pos? (.size d))
                                            (if (.isDouble d)
                                              (records/op-record (aget h 0) (.doubles d))
                                              (records/op-record (aget h 0) (.longs d)))))))
                                (sort (fn [a b]
                                        (let [c (num-compare (:total-us b) (:total-us a))]
                                          (if (zero? c)
                                            (compare-keys (map a [:category :name :device])
                                                          (map b [:category :name :device]))
                                            c))))
                                vec)
                :memory (->> memory
                             (sort-by key compare-py)
                             (mapv (fn [[dev ^objects s]]
                                     (records/memory-record dev (.longs ^IDurs (aget s 0))
                                                            (.longs ^IDurs (aget s 1))))))
                :counters (->> (.values counters)
                               (sort-by #(aget ^objects % 0) compare-keys)
                               (mapv (fn [^objects s]
                                       (let [[cat n] (aget s 0)
                                             c (long (aget s 1))]
                                         {:category cat :name n :count c :min (aget s 2)
                                          :max (aget s 3) :mean (true-div (aget s 4) c)
                                          :last (aget s 6)}))))
                :unmatched-begin (aget counts unmatched-begin)
                :unmatched-end (aget counts unmatched-end)
                :negative-durations (aget counts negative)
                :no-timestamp (aget counts no-ts)
                :bad-counter-values (aget counts bad-counter)
                :unknown-phases unknown
                :phase-counts phase-counts
                :reports (vec reports)}]
    (assoc result :notes (records/notes result))))
