(ns pyprof.stats
  "Exact per-operator statistics of MXNet traces, computed the way `pyprof.trace.stats` (the
  Python reference) computes them, so both agree on the same file.

  Units are in the keys: times in microseconds (`:total-us`; `ts` in MXNet traces is integer
  microseconds, so count, total, min and max are exact integers), memory in bytes.

  How calls are counted (as in Python):
  - `B`/`E` and frame `(`/`)` pairs are matched per [pid tid name] with a stack; one pair is one
    call. `X` events count as one call of `dur`.
  - Async `b`/`e` pairs are matched per [pid cat id name]; the copies MXNet writes of every
    operator (categories \"operator\" and \"Custom Operator\") are skipped, never counted twice.
  - `C` counters named \"Memory: <device>\" are memory samples in bytes; other counters are
    summarised as value series.
  - p50/p90/p99 are exact: numpy's default linear interpolation between order statistics."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str])
  (:import (java.util ArrayList Arrays HashMap Map)))

(set! *warn-on-reflection* true)

(def async-copy-categories
  "Async (b/e) categories that duplicate a B/E pair; never counted."
  #{"operator" "Custom Operator"})

(def ^:private memory-prefix "Memory: ")

(defn bulk-name?
  "True for names of MXNet bulk segments: \"Activation,Convolution\" or \"[dot]\"."
  [^String name]
  (boolean (or (re-find #"^\[.*\]$" name) (str/includes? name ","))))

(defn percentile
  "The `p`th percentile (0..100) of the sorted long array `sorted`, with numpy's default
  (linear) method, computed in the same floating-point steps as numpy 1.2x."
  ^double [^longs sorted p]
  (let [n (alength sorted)
        q (/ (double p) 100.0)
        virtual (- (+ (* n q) (+ 1.0 (* q -1.0))) 1.0)
        [lo hi] (cond (>= virtual (dec n)) [(dec n) (dec n)]
                      (< virtual 0.0) [0 0]
                      :else (let [lo (long (Math/floor virtual))] [lo (inc lo)]))
        gamma (- virtual (double lo))
        a (aget sorted lo)
        b (aget sorted hi)
        diff (- b a)]
    (if (>= gamma 0.5)
      (- (double b) (* (double diff) (- 1.0 gamma)))
      (+ (double a) (* (double diff) gamma)))))

(defn- op-record [[cat name device] ^ArrayList durations]
  (let [n (.size durations)
        arr (long-array n)]
    (dotimes [i n] (aset arr i (long (.get durations i))))
    (let [total (areduce arr i acc 0 (+ acc (aget arr i)))]
      (Arrays/sort arr)
      {:category cat :name name :device device :count n
       :total-us total :min-us (aget arr 0) :max-us (aget arr (dec n))
       :mean-us (/ (double total) n)
       :p50-us (percentile arr 50) :p90-us (percentile arr 90) :p99-us (percentile arr 99)
       :bulk (bulk-name? name)})))

(defn- memory-record [device samples]
  (let [sorted (sort-by first samples) ; stable, like numpy's argsort kind="stable"
        ts (mapv first sorted)
        vs (mapv second sorted)
        n (count vs)
        span (- (peek ts) (first ts))
        mean (/ (double (reduce + vs)) n)]
    {:device device :samples n
     :min-bytes (reduce min vs) :max-bytes (reduce max vs)
     :mean-bytes mean
     :time-weighted-mean-bytes
     (if (pos? span)
       (/ (reduce + 0.0 (map (fn [v t0 t1] (* (double v) (double (- t1 t0)))) vs ts (rest ts)))
          (double span))
       mean)
     :last-bytes (peek vs) :first-ts-us (first ts) :last-ts-us (peek ts)}))

(defn- push! [^Map m k v]
  (let [^ArrayList l (or (.get m k) (let [l (ArrayList.)] (.put m k l) l))]
    (.add l v)))

(defn- pop-stack! [^Map m k]
  (let [^ArrayList l (.get m k)]
    (when (and l (pos? (.size l)))
      (.remove l (dec (.size l))))))

(defn- accumulate
  "Consumes one file's `events` into the accumulator maps of `acc`."
  [{:keys [^Map durations ^Map memory ^Map counters unmatched] :as acc} events categories]
  (let [open-sync (HashMap.)
        open-async (HashMap.)
        by-pid (HashMap.)
        pid-names (HashMap.)
        keep? (fn [cat] (or (nil? categories) (contains? categories cat)))]
    (doseq [ev events
            :let [ph (get ev "ph")]]
      (case ph
        ("B" "(") (push! open-sync [ph (get ev "pid") (get ev "tid") (get ev "name")] (get ev "ts"))
        ("E" ")") (let [k [(if (= ph "E") "B" "(") (get ev "pid") (get ev "tid") (get ev "name")]
                        begin (pop-stack! open-sync k)
                        cat (get ev "cat" "")]
                    (cond (nil? begin) (swap! unmatched update :end inc)
                          (keep? cat) (push! by-pid [cat (get ev "name") (get ev "pid")]
                                             (- (long (get ev "ts")) (long begin)))))
        ("b" "e") (let [cat (get ev "cat" "")]
                    (when-not (async-copy-categories cat)
                      (let [k [(get ev "pid") cat (get ev "id" (get ev "id2")) (get ev "name")]]
                        (if (= ph "b")
                          (push! open-async k (get ev "ts"))
                          (let [begin (pop-stack! open-async k)]
                            (cond (nil? begin) (swap! unmatched update :end inc)
                                  (keep? cat) (push! by-pid [cat (get ev "name") (get ev "pid")]
                                                     (- (long (get ev "ts")) (long begin)))))))))
        "C" (let [ts (get ev "ts" 0)]
              (doseq [[^String cname value] (get ev "args")]
                (if (str/starts-with? cname memory-prefix)
                  (push! memory (subs cname (count memory-prefix)) [ts (long value)])
                  (let [k [(get ev "cat" "") cname]
                        s (.get counters k)]
                    (.put counters k
                          (if (nil? s)
                            {:count 1 :min value :max value :sum value :last-ts ts :last value}
                            (cond-> (-> s (update :count inc) (update :min min value)
                                        (update :max max value) (update :sum + value))
                              (>= ts (:last-ts s)) (assoc :last-ts ts :last value))))))))
        "X" (let [cat (get ev "cat" "")]
              (when (keep? cat)
                (push! by-pid [cat (get ev "name") (get ev "pid")] (long (get ev "dur" 0)))))
        "M" (when (= "process_name" (get ev "name"))
              (.put pid-names (get ev "pid") (str (get-in ev ["args" "name"] ""))))
        nil))
    (swap! unmatched update :begin +
           (reduce + 0 (map #(.size ^ArrayList %) (concat (.values open-sync) (.values open-async)))))
    (doseq [[[cat name pid] ^ArrayList ds] by-pid]
      (let [pname (.get pid-names pid)
            device (cond (and (nil? pname) (nil? pid)) ""
                         (some? pname) pname
                         :else (str "pid " pid))
            device (if (= device cat) "" device)
            ^ArrayList l (or (.get durations [cat (str name) device])
                             (let [l (ArrayList.)] (.put durations [cat (str name) device] l) l))]
        (.addAll l ds)))
    acc))

(defn read-events
  "The events of the trace file at `path` (a valid JSON trace: object or array form)."
  [path]
  (with-open [r (io/reader (io/file (str path)))]
    (let [doc (json/read r)]
      (if (map? doc) (get doc "traceEvents") doc))))

(defn stats
  "Exact statistics of one trace file or a sequence of them (records with the same
  [category name device] are pooled across files):

    {:units {:time \"us\" :memory \"bytes\"}
     :operators [{:category :name :device :count :total-us :min-us :max-us
                  :mean-us :p50-us :p90-us :p99-us :bulk} ...]   ; by :total-us, descending
     :memory    [{:device :samples :min-bytes :max-bytes :mean-bytes
                  :time-weighted-mean-bytes :last-bytes :first-ts-us :last-ts-us} ...]
     :counters  [{:category :name :count :min :max :mean :last} ...]
     :unmatched-begin n :unmatched-end n}

  Options: {:categories #{\"operator\"}} keeps only those categories. `paths` may also be
  sequences of event maps (already read traces)."
  ([paths] (stats paths {}))
  ([paths {:keys [categories]}]
   (let [sources (if (or (string? paths) (instance? java.io.File paths)) [paths] paths)
         _ (when (empty? sources)
             (throw (ex-info "no trace files given; pass at least one path"
                             {:pyprof/error :invalid-option})))
         acc {:durations (HashMap.) :memory (HashMap.) :counters (HashMap.)
              :unmatched (atom {:begin 0 :end 0})}
         cats (some-> categories set)]
     (doseq [src sources]
       (accumulate acc (if (sequential? src) src (read-events src)) cats))
     (let [{:keys [^Map durations ^Map memory ^Map counters unmatched]} acc]
       {:units {:time "us" :memory "bytes"}
        :operators (->> durations
                        (keep (fn [[k ^ArrayList ds]] (when (pos? (.size ds)) (op-record k ds))))
                        (sort-by (juxt (comp - :total-us) :category :name :device))
                        vec)
        :memory (->> memory (sort-by key) (mapv (fn [[dev samples]] (memory-record dev samples))))
        :counters (->> counters
                       (sort-by key)
                       (mapv (fn [[[cat n] {:keys [count min max sum last]}]]
                               {:category cat :name n :count count :min min :max max
                                :mean (/ (double sum) count) :last last})))
        :unmatched-begin (:begin @unmatched)
        :unmatched-end (:end @unmatched)}))))

(defn find-ops
  "The operator records of `result` named `name` (optionally of one category)."
  ([result name] (find-ops result name nil))
  ([result name category]
   (filterv #(and (= name (:name %)) (or (nil? category) (= category (:category %))))
            (:operators result))))
