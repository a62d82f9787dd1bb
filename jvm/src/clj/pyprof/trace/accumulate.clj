(ns pyprof.trace.accumulate
  "Streaming state of `pyprof.stats/stats`: pairing begin/end events and pooling their numbers,
  a port of `pyprof/trace/accumulate.py` (`Accumulator`, `FileState`).

  An accumulator (`new-acc`) takes one file at a time, in file order, each with a fresh file state
  (`new-file-state`): `add-event!` is Python's `_add_events` for one event, `end-file!` resolves
  the file's pids to device names and pools its durations with those of earlier files, `result`
  builds the statistics (records of `pyprof.trace.records`). Nothing here reads files:
  `pyprof.stats` does, and describes how calls are counted."
  (:require [clojure.string :as str]
            [pyprof.trace.naming :refer [async-copy-categories memory-prefix]]
            [pyprof.trace.pycompat :refer [compare-keys compare-py py-str py-truthy true-div]]
            [pyprof.trace.records :as records])
  (:import (java.util ArrayList Arrays HashMap LinkedHashMap List Map)))

(set! *warn-on-reflection* true)

(definterface ILongs
  (^void add [^long x])
  (^long size [])
  (^long pop [])
  (^longs toArray [])
  (^void addAll [other]))

(deftype ^:private Longs [^:unsynchronized-mutable ^longs a ^:unsynchronized-mutable ^long n]
  ILongs
  (add [_ x]
    (when (== n (alength a)) (set! a (Arrays/copyOf a (int (max 8 (* 2 n))))))
    (aset a n x)
    (set! n (inc n)))
  (size [_] n)
  (pop [_] (set! n (dec n)) (aget a n))
  (toArray [_] (Arrays/copyOf a (int n)))
  (addAll [this other]
    (let [^longs b (.toArray ^ILongs other)]
      (dotimes [i (alength b)] (.add this (aget b i))))))

(alter-meta! #'->Longs assoc :private true)

(defn- longs-list ^ILongs [] (Longs. (long-array 8) 0))

(defn- fail [ev why]
  (throw (ex-info (str "trace event " (pr-str ev) ": " why "; the statistics need integer "
                       "microsecond timestamps and numeric counter values (MXNet writes them)")
                  {:pyprof/error :trace-format :event ev})))

(defn- int64
  "An integer JSON value as a long (Python stores it in an int64 array), else an error."
  ^long [x ev what]
  (cond (instance? Long x) (long x)
        (and (integer? x) (<= Long/MIN_VALUE x Long/MAX_VALUE)) (long x)
        :else (fail ev (str what " is " (pr-str x) ", not a 64-bit integer"))))

(defn- py-int
  "Python's int() of a number (floats truncated toward zero), as a long."
  ^long [x ev what]
  (if (and (instance? Double x) (not (Double/isNaN x)) (not (Double/isInfinite x)))
    (int64 (bigint (double x)) ev what)
    (int64 x ev what)))

(defn- required-ts [ev]
  (if (contains? ev "ts") (get ev "ts") (fail ev "no \"ts\"")))

(defn- push! [^Map m k v]
  (let [^List l (or (.get m k) (let [l (ArrayList.)] (.put m k l) l))]
    (.add l v)))

(defn- pop-stack! [^Map m k]
  (let [^List l (.get m k)]
    (when (and l (pos? (.size l)))
      (.remove l (dec (.size l))))))

(defn- append! [^Map m k ^long v]
  (let [^ILongs l (or (.get m k) (let [l (longs-list)] (.put m k l) l))]
    (.add l v)))

(defn new-acc
  "Python's `Accumulator`: an empty accumulator keeping `categories` (a set, nil: all) and
  leaving out `excluded` (a set or nil)."
  [categories excluded]
  {:categories categories :excluded excluded
   :durations (LinkedHashMap.) :memory (HashMap.) :counters (HashMap.) :phases (LinkedHashMap.)
   :unmatched (long-array 2)})                              ; [begin end]

(defn new-file-state
  "Python's `FileState`: the open begin events, durations by pid and process names of one file."
  []
  {:open-sync (HashMap.) :open-async (HashMap.) :by-pid (LinkedHashMap.) :pid-names (HashMap.)})

(defn- args-map
  "`ev.get(\"args\") or {}` as a map."
  [ev]
  (let [a (get ev "args")]
    (cond (map? a) a
          (py-truthy a) (fail ev "\"args\" is not an object")
          :else {})))

(defn- counter-sample! [^Map counters k ts value ev]
  (when-not (number? value) (fail ev (str "counter value " (pr-str value) " is not a number")))
  (let [^objects s (.get counters k)]
    (if (nil? s)
      (.put counters k (object-array [1 value value value ts value]))
      (do (aset s 0 (Long/valueOf (inc (long (aget s 0)))))
          (when (< value (aget s 1)) (aset s 1 value))             ; min(s[1], value)
          (when (> value (aget s 2)) (aset s 2 value))             ; max(s[2], value)
          (aset s 3 (+' (aget s 3) value))                         ; unbounded, as Python ints
          (when (>= (compare ts (aget s 4)) 0) (aset s 4 ts) (aset s 5 value))))))

(defn- duration!
  "Appends `end - begin` (Python: `ev[\"ts\"] - begin` into an int64 array) under k."
  [^Map by-pid k ev begin]
  (let [end (required-ts ev)]
    (append! by-pid k (int64 (-' (int64 end ev "ts") (int64 begin ev "the begin event's ts"))
                             ev "the duration"))))

(defn add-event!
  "Python's `_Accumulator._add_events` for one event."
  [{:keys [categories excluded ^Map memory ^Map counters ^Map phases ^longs unmatched]}
   {:keys [^Map open-sync ^Map open-async ^Map by-pid ^Map pid-names]} ev]
  (when-not (and excluded (contains? excluded (get ev "cat")))
    (let [ph (get ev "ph")
          keep? (fn [cat] (or (nil? categories) (contains? categories cat)))]
      (.put phases ph (inc (long (or (.get phases ph) 0))))
      (case ph
        ("B" "(") (push! open-sync [ph (get ev "pid") (get ev "tid") (get ev "name")] (required-ts ev))
        ("E" ")") (let [k [(if (= ph "E") "B" "(") (get ev "pid") (get ev "tid") (get ev "name")]
                        begin (pop-stack! open-sync k)
                        cat (get ev "cat" "")]
                    (cond (nil? begin) (aset unmatched 1 (inc (aget unmatched 1)))
                          (keep? cat) (duration! by-pid [cat (get ev "name") (get ev "pid")] ev begin)))
        ("b" "e") (let [cat (get ev "cat" "")]
                    (when-not (contains? async-copy-categories cat)
                      (let [k [(get ev "pid") cat (if (contains? ev "id") (get ev "id") (get ev "id2"))
                               (get ev "name")]]
                        (if (= ph "b")
                          (push! open-async k (required-ts ev))
                          (let [begin (pop-stack! open-async k)]
                            (cond (nil? begin) (aset unmatched 1 (inc (aget unmatched 1)))
                                  (keep? cat) (duration! by-pid [cat (get ev "name") (get ev "pid")]
                                                         ev begin)))))))
        "C" (let [ts (get ev "ts" 0)]
              (doseq [[^String cname value] (args-map ev)]
                (if (str/starts-with? cname memory-prefix)
                  (let [dev (subs cname (count memory-prefix))
                        ^objects series (or (.get memory dev)
                                            (let [s (object-array [(longs-list) (longs-list)])]
                                              (.put memory dev s)
                                              s))]
                    (.add ^ILongs (aget series 0) (int64 ts ev "ts"))
                    (.add ^ILongs (aget series 1) (py-int value ev "the memory value")))
                  (counter-sample! counters [(get ev "cat" "") cname] ts value ev))))
        "X" (let [cat (get ev "cat" "")]
              (when (keep? cat)
                (append! by-pid [cat (get ev "name") (get ev "pid")] (py-int (get ev "dur" 0) ev "dur"))))
        "M" (when (= "process_name" (get ev "name"))
              (.put pid-names (get ev "pid") (py-str (get (args-map ev) "name" ""))))
        nil))))

(defn end-file!
  "Python's `_end_file`: unmatched begins counted, durations pooled by [category name device]."
  [{:keys [^Map durations ^longs unmatched]} {:keys [^Map open-sync ^Map open-async ^Map by-pid ^Map pid-names]}]
  (doseq [^Map m [open-sync open-async], ^List stack (.values m)]
    (aset unmatched 0 (+ (aget unmatched 0) (.size stack))))
  (doseq [[[cat name pid] ds] by-pid]
    (let [pname (.get pid-names pid)
          device (cond (and (nil? pname) (nil? pid)) ""
                       (some? pname) pname
                       :else (str "pid " (py-str pid)))
          device (if (= device cat) "" device) ; a category pid (API calls, tasks), not a device
          k [cat (py-str name) device]]
      (if-let [^ILongs l (.get durations k)]
        (.addAll l ds)
        (.put durations k ds)))))

(defn result
  "Python's `Accumulator.result`: the statistics of every file added so far (`reports`: the read
  reports of the files), in the shape `pyprof.stats/stats` returns."
  [{:keys [^Map durations ^Map memory ^Map counters ^Map phases ^longs unmatched]} reports]
  (let [result {:units {:time "us" :memory "bytes"}
                :operators (->> durations
                                (map (fn [[k ds]] (records/op-record k (.toArray ^ILongs ds))))
                                (sort (fn [a b]
                                        (let [c (Long/compare (:total-us b) (:total-us a))]
                                          (if (zero? c)
                                            (compare-keys (map a [:category :name :device])
                                                          (map b [:category :name :device]))
                                            c))))
                                vec)
                :memory (->> memory
                             (sort-by key compare-py)
                             (mapv (fn [[dev ^objects s]]
                                     (records/memory-record dev (.toArray ^ILongs (aget s 0))
                                                            (.toArray ^ILongs (aget s 1))))))
                :counters (->> counters
                               (sort-by key compare-keys)
                               (mapv (fn [[[cat n] ^objects s]]
                                       (let [c (long (aget s 0))]
                                         {:category cat :name n :count c :min (aget s 1)
                                          :max (aget s 2) :mean (true-div (aget s 3) c)
                                          :last (aget s 5)}))))
                :unmatched-begin (aget unmatched 0)
                :unmatched-end (aget unmatched 1)
                :phase-counts (into {} phases)
                :reports (vec reports)}]
    (assoc result :notes (records/notes result))))
