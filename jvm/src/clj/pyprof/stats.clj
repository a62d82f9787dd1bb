(ns pyprof.stats
  "Exact per-operator statistics of MXNet traces, computed the way `pyprof.trace.stats` (the
  Python reference) computes them, so both agree on the same file; streamed in bounded memory.

  Units are in the keys: times in microseconds (`:total-us`; `ts` in MXNet traces is integer
  microseconds, so count, total, min and max are exact integers), memory in bytes.

  How calls are counted (as in Python):
  - `B`/`E` and frame `(`/`)` pairs are matched per [pid tid name] with a stack; one pair is one
    call, of the category of its end event. `X` events count as one call of `dur`.
  - Async `b`/`e` pairs are matched per [pid cat id name]; the copies MXNet writes of every
    operator (categories \"operator\" and \"Custom Operator\") are skipped, never counted twice.
  - `C` counters named \"Memory: <device>\" are memory samples in bytes; other counters are
    summarised as value series.
  - Every category is included by default, C API calls (\"MXNET_C_API\") too; `:exclude-categories`
    leaves some out before parsing, as Python's `exclude_categories`.
  - Files are read by `pyprof.trace-reader`: one event at a time, damaged MXNet files repaired as
    Python's reader does (the damage is listed in `:notes`). Memory holds the per-operator
    durations (8 bytes a call, for exact percentiles, as Python's `array('q')`), the memory
    samples (16 bytes each) and the open begin events; never the file.
  - p50/p90/p99 are exact: numpy's default linear interpolation between order statistics, in
    the same floating-point steps as numpy 1.23."
  (:require [clojure.string :as str]
            [pyprof.trace-reader :as reader])
  (:import (java.math BigInteger)
           (java.util ArrayList Arrays Comparator HashMap LinkedHashMap List Map)))

(set! *warn-on-reflection* true)

(def async-copy-categories
  "Async (b/e) categories that duplicate a B/E pair; never counted."
  #{"operator" "Custom Operator"})

(def api-category
  "Category of MXNet's C API call events (included unless `:exclude-categories` names it)."
  "MXNET_C_API")

(def bulk-note
  "Python's `BULK_NOTE`: what bulk-merged operator names mean."
  (str "names like 'A,B' or '[op]' are operators MXNet ran as one bulk segment; for "
       "per-operator numbers set MXNET_EXEC_BULK_EXEC_INFERENCE=0 and "
       "MXNET_EXEC_BULK_EXEC_TRAIN=0 in the environment before MXNet's engine starts "
       "(before `import mxnet`)"))

(def ^:private memory-prefix "Memory: ")

(defn bulk-name?
  "True for names of MXNet bulk segments: \"Activation,Convolution\" or \"[dot]\"."
  [^String name]
  ;; (?d): only \n ends a line, as in Python's re
  (boolean (or (re-find #"(?d)^\[.*\]$" name) (str/includes? name ","))))

;; ------------------------------------------------------------------ Python's arithmetic

(defn percentile
  "The `p`th percentile (0..100) of the sorted long array `sorted`, with numpy's default
  (linear) method, computed in the same floating-point steps as numpy 1.23 (`_quantile`,
  `_lerp`): virtual index (n-1)*p/100, int64 difference, interpolation from the nearer end."
  ^double [^longs sorted p]
  (let [n (alength sorted)
        virtual (* (double (dec n)) (/ (double p) 100.0))
        above (>= virtual (double (dec n)))
        prev (if above -1 (long (Math/floor virtual)))
        lo (if above (dec n) prev)
        hi (if above (dec n) (inc prev))
        gamma (- virtual (double prev))
        a (aget sorted lo)
        b (aget sorted hi)
        diff (unchecked-subtract b a)]
    (if (>= gamma 0.5)
      (- (double b) (* (double diff) (- 1.0 gamma)))
      (+ (double a) (* (double diff) gamma)))))

(defn- true-div
  "Python's `num / d` for a positive count `d`: float division for a float `num`; for an integer
  the correctly rounded quotient (as Python's int / int, exact even beyond 2^53)."
  ^double [num ^long d]
  (if (instance? Double num)
    (/ (double num) (double d))
    (let [a (biginteger num)
          b (BigInteger/valueOf d)]
      (if (<= (.bitLength a) 53)
        (/ (.doubleValue a) (double d))
        ;; quotient with >= 55 bits and a sticky bit: one correct rounding in doubleValue
        (let [neg (neg? (.signum a))
              a (.abs a)
              shift (max 0 (+ 56 (- (.bitLength b) (.bitLength a))))
              qr (.divideAndRemainder (.shiftLeft a shift) b)
              q (cond-> ^BigInteger (aget qr 0) (pos? (.signum ^BigInteger (aget qr 1))) (.setBit 0))
              r (Math/scalb (.doubleValue q) (int (- shift)))]
          (if neg (- r) r))))))

(defn- pairwise-sum
  "numpy's pairwise summation (`pairwise_sum` in loops_utils.h) of v[off, off+n) as doubles."
  ^double [^longs v ^long off ^long n]
  (cond
    (< n 8) (loop [i 0, res 0.0]
              (if (< i n) (recur (inc i) (+ res (double (aget v (+ off i))))) res))
    (<= n 128) (let [r (double-array 8)
                     whole (- n (rem n 8))]
                 (dotimes [j 8] (aset r j (double (aget v (+ off j)))))
                 (loop [i 8]
                   (when (< i whole)
                     (dotimes [j 8] (aset r j (+ (aget r j) (double (aget v (+ off i j))))))
                     (recur (+ i 8))))
                 (loop [i whole
                        res (+ (+ (+ (aget r 0) (aget r 1)) (+ (aget r 2) (aget r 3)))
                               (+ (+ (aget r 4) (aget r 5)) (+ (aget r 6) (aget r 7))))]
                   (if (< i n) (recur (inc i) (+ res (double (aget v (+ off i))))) res)))
    :else (let [n2 (quot n 2)
                n2 (- n2 (rem n2 8))]
            (+ (pairwise-sum v off n2) (pairwise-sum v (+ off n2) (- n n2))))))

(defn- numpy-mean
  "`float(v.mean())` of an int64 array: the values cast to float64 in buffers of 8192, each
  buffer summed pairwise into the running total, divided by n."
  ^double [^longs v]
  (let [n (alength v)]
    (/ (loop [off 0, acc 0.0]
         (if (< off n)
           (recur (+ off 8192) (+ acc (pairwise-sum v off (min 8192 (- n off)))))
           acc))
       (double n))))

(defn- dot-exact
  "sum v[i] * (t[i+1] - t[i]), i < n-1, exactly, rounded once to a double. numpy computes it with
  BLAS ddot, whose summation order depends on the CPU and thread count: equal whenever the sum
  is exact in doubles (every product and partial sum an integer below 2^53), else within ulps."
  ^double [^longs v ^longs t]
  (let [n (alength v)]
    (loop [i 0, acc 0, ^BigInteger big nil]
      (if (>= i (dec n))
        (if big (.doubleValue (.add big (BigInteger/valueOf acc))) (double acc))
        (let [x (aget v i)
              dt (unchecked-subtract (aget t (inc i)) (aget t i))
              hi (Math/multiplyHigh x dt)
              lo (unchecked-multiply x dt)]
          (if (== hi (bit-shift-right lo 63))
            (let [s (unchecked-add acc lo)]
              (if (neg? (bit-and (bit-xor acc s) (bit-xor lo s))) ; overflow of acc + lo
                (recur (inc i) 0 (.add (or big BigInteger/ZERO)
                                       (.add (BigInteger/valueOf acc) (BigInteger/valueOf lo))))
                (recur (inc i) s big)))
            (recur (inc i) acc (.add (or big BigInteger/ZERO)
                                     (.multiply (BigInteger/valueOf x) (BigInteger/valueOf dt))))))))))

(defn- py-float-str ^String [^double d]
  (cond (Double/isNaN d) "nan"
        (Double/isInfinite d) (if (pos? d) "inf" "-inf")
        (and (== d (Math/rint d)) (< (Math/abs d) 1e16)) (str (long d) ".0")
        :else (let [s (str d)] (-> s (str/replace "E" "e+") (str/replace "e+-" "e-")))))

(defn- py-str
  "Python's str() of a JSON value, as Python names devices and operators."
  ^String [x]
  (cond (string? x) x
        (nil? x) "None"
        (true? x) "True"
        (false? x) "False"
        (instance? Double x) (py-float-str x)
        (map? x) (str "{" (str/join ", " (map (fn [[k v]] (str (pr-str k) ": " (py-str v))) x)) "}")
        (sequential? x) (str "[" (str/join ", " (map #(if (string? %) (pr-str %) (py-str %)) x)) "]")
        :else (str x)))

(defn- compare-py
  "Python's ordering of the sort keys used here: strings by code point (not UTF-16 unit), None
  (nil) first, numbers by value."
  ^long [a b]
  (cond (and (string? a) (string? b))
        (let [^String a a ^String b b
              na (.length a) nb (.length b)]
          (loop [i 0 j 0]
            (cond (and (>= i na) (>= j nb)) 0
                  (>= i na) -1
                  (>= j nb) 1
                  :else (let [ca (.codePointAt a i) cb (.codePointAt b j)]
                          (if (== ca cb)
                            (recur (+ i (Character/charCount ca)) (+ j (Character/charCount cb)))
                            (compare ca cb))))))
        (nil? a) (if (nil? b) 0 -1)
        (nil? b) 1
        :else (compare a b)))

(defn- compare-keys ^long [ka kb]
  (loop [[a & as] ka, [b & bs] kb]
    (let [c (compare-py a b)]
      (if (and (zero? c) (or as bs)) (recur as bs) c))))

;; ------------------------------------------------------------------ accumulators

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

(defn- new-acc [categories excluded]
  {:categories categories :excluded excluded
   :durations (LinkedHashMap.) :memory (HashMap.) :counters (HashMap.) :phases (LinkedHashMap.)
   :unmatched (long-array 2)})                              ; [begin end]

(defn- new-file-state []
  {:open-sync (HashMap.) :open-async (HashMap.) :by-pid (LinkedHashMap.) :pid-names (HashMap.)})

(defn- py-truthy [x]
  (not (or (nil? x) (false? x) (and (number? x) (zero? x)) (and (string? x) (empty? x))
           (and (coll? x) (empty? x)))))

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

(defn- add-event!
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

(defn- end-file!
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

;; ------------------------------------------------------------------ records

(defn- op-record [[cat name device] ^ILongs durations]
  (let [arr (.toArray durations)
        n (alength arr)
        total (areduce arr i acc 0 (unchecked-add acc (aget arr i)))] ; int64, as numpy's sum
    (Arrays/sort arr)
    {:category cat :name name :device device :count n
     :total-us total :min-us (aget arr 0) :max-us (aget arr (dec n))
     :mean-us (true-div total n)
     :p50-us (percentile arr 50) :p90-us (percentile arr 90) :p99-us (percentile arr 99)
     :bulk (bulk-name? name)}))

(defn- memory-record [device ^ILongs ts-list ^ILongs value-list]
  (let [ts0 (.toArray ts-list)
        vs0 (.toArray value-list)
        n (alength ts0)
        sorted? (loop [i 1] (cond (>= i n) true
                                  (> (aget ts0 (dec i)) (aget ts0 i)) false
                                  :else (recur (inc i))))
        [^longs ts ^longs vs]
        (if sorted?
          [ts0 vs0]
          ;; stable sort by ts, like numpy's argsort(kind="stable") (TimSort is stable)
          (let [^"[Ljava.lang.Integer;" order (make-array Integer n)
                ts (long-array n)
                vs (long-array n)]
            (dotimes [i n] (aset order i (Integer/valueOf i)))
            (Arrays/sort order (reify Comparator
                                 (compare [_ i j]
                                   (Long/compare (aget ts0 (.intValue ^Integer i))
                                                 (aget ts0 (.intValue ^Integer j))))))
            (dotimes [i n]
              (let [j (.intValue ^Integer (aget order i))]
                (aset ts i (aget ts0 j))
                (aset vs i (aget vs0 j))))
            [ts vs]))
        span (- (aget ts (dec n)) (aget ts 0))
        mean (numpy-mean vs)]
    {:device device :samples n
     :min-bytes (areduce vs i m Long/MAX_VALUE (min m (aget vs i)))
     :max-bytes (areduce vs i m Long/MIN_VALUE (max m (aget vs i)))
     :mean-bytes mean
     :time-weighted-mean-bytes (if (pos? span) (/ (dot-exact vs ts) (double span)) mean)
     :last-bytes (aget vs (dec n)) :first-ts-us (aget ts 0) :last-ts-us (aget ts (dec n))}))

(defn- notes
  "Warnings worth showing the user, Python's `TraceStats.notes`: damage repaired per file,
  unmatched events, bulk-merged names."
  [{:keys [reports unmatched-begin unmatched-end operators]}]
  (let [bulk (->> operators (filter :bulk) (map :name) distinct (sort compare-py) vec)]
    (cond-> (vec (for [r reports
                       :let [path (str (:path r))
                             base (subs path (inc (.lastIndexOf path "/")))]
                       p (:problems r)]
                   (str base ": " p)))
      (pos? unmatched-begin) (conj (str unmatched-begin " begin event(s) without an end were ignored "
                                        "(trace cut short?)"))
      (pos? unmatched-end) (conj (str unmatched-end " end event(s) without a begin were ignored"))
      (seq bulk) (conj (str (count bulk) " bulk-merged name(s) (" (str/join ", " (take 3 bulk))
                            (when (> (count bulk) 3) ", ...") "): " bulk-note)))))

;; ------------------------------------------------------------------ API

(defn read-events
  "The events of the trace file at `path`, valid or damaged (see `pyprof.trace-reader`), in a
  vector: the whole file in memory; `stats` streams instead."
  [path]
  (reader/read-events path))

(defn- path-like? [x]
  (or (string? x) (instance? java.io.File x) (instance? java.nio.file.Path x)))

(defn stats
  "Exact statistics of one trace file or a sequence of them (records with the same
  [category name device] are pooled across files; device names, not pids, identify a device):

    {:units {:time \"us\" :memory \"bytes\"}
     :operators [{:category :name :device :count :total-us :min-us :max-us
                  :mean-us :p50-us :p90-us :p99-us :bulk} ...]   ; by :total-us, descending
     :memory    [{:device :samples :min-bytes :max-bytes :mean-bytes
                  :time-weighted-mean-bytes :last-bytes :first-ts-us :last-ts-us} ...]
     :counters  [{:category :name :count :min :max :mean :last} ...]
     :unmatched-begin n :unmatched-end n
     :phase-counts {\"B\" n ...}   ; events parsed per ph (async copies, excluded categories not)
     :reports [read report per file, see pyprof.trace-reader/read-trace]
     :notes [\"...\"]}             ; Python's TraceStats.notes

  The same numbers as Python's `pyprof.trace.stats(...).to_dict()`. Files (plain or gzip,
  damaged ones too) are streamed: memory grows with the number of calls, not the file size.

  Options: `:categories` keeps only those categories; `:exclude-categories` skips those before
  parsing (e.g. #{\"MXNET_C_API\"}; C API calls are included by default, as in Python);
  `:chunk-bytes` the read size. `paths` may also be sequences of event maps (already read
  traces; no report).

  Throws ex-info with `:pyprof/error` `:trace-not-found` or `:trace-format` (a file that cannot
  be opened or holds no trace event), `:invalid-option` (no paths)."
  ([paths] (stats paths {}))
  ([paths {:keys [categories exclude-categories chunk-bytes]}]
   (let [sources (if (path-like? paths) [paths] paths)
         _ (when (empty? sources)
             (throw (ex-info "no trace files given; pass at least one path"
                             {:pyprof/error :invalid-option})))
         excluded (not-empty (set exclude-categories))
         acc (new-acc (some-> categories set) excluded)
         reports (ArrayList.)]
     (doseq [src sources]
       (let [st (new-file-state)]
         (if (or (sequential? src) (instance? List src))
           (doseq [ev src] (add-event! acc st ev))
           (.add reports (reader/read-trace (str src)
                                            (cond-> {:drop-async-copies true
                                                     :exclude-categories excluded}
                                              chunk-bytes (assoc :chunk-bytes chunk-bytes))
                                            #(add-event! acc st %))))
         (end-file! acc st)))
     (let [{:keys [^Map durations ^Map memory ^Map counters ^Map phases ^longs unmatched]} acc
           result {:units {:time "us" :memory "bytes"}
                   :operators (->> durations
                                   (map (fn [[k ds]] (op-record k ds)))
                                   (sort (fn [a b]
                                           (let [c (Long/compare (:total-us b) (:total-us a))]
                                             (if (zero? c)
                                               (compare-keys (map a [:category :name :device])
                                                             (map b [:category :name :device]))
                                               c))))
                                   vec)
                   :memory (->> memory
                                (sort-by key compare-py)
                                (mapv (fn [[dev ^objects s]] (memory-record dev (aget s 0) (aget s 1)))))
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
       (assoc result :notes (notes result))))))

(defn find-ops
  "The operator records of `result` named `name` (optionally of one category)."
  ([result name] (find-ops result name nil))
  ([result name category]
   (filterv #(and (= name (:name %)) (or (nil? category) (= category (:category %))))
            (:operators result))))
