(ns pyprof.stats
  "Statistics of valid traces (the JVM's windows): the fields of Python's
  `pyprof.trace.stats(...).to_dict()`, within `stats-tolerance`; rules (phases, pairs,
  categories, bulk names, notes) from trace.json. Damaged traces are refused naming `pyprof
  repair`. Times in microseconds, memory in bytes."
  (:require [clojure.data.json :as json]
            [clojure.string :as str]
            [pyprof.rules :as rules]
            [pyprof.trace.reader :as reader])
  (:import (java.util ArrayList Arrays HashMap LinkedHashMap List Map)))

(set! *warn-on-reflection* true)

(def stats-tolerance "Relative tolerance of the figures against Python's." 1e-12)

(def ^:private spec (rules/read-spec "trace.json"))
(def ^:private phases (spec "phases"))
(def ^:private begin->end (into {} (for [[_ p] (spec "pairs")] [(p "begin") (p "end")])))
(def ^:private end->begin (into {} (for [[b e] begin->end] [e b])))
(def ^:private thread-phases
  (set (for [[_ p] (spec "pairs") :when (some #{"tid"} (p "scope")) ph [(p "begin") (p "end")]] ph)))
(def ^:private counted-only (set (spec "counted_only_roles")))
(def ^:private categories (spec "categories"))
(def ^:private async-copy-categories (set (categories "async_copies")))
(def ^:private ^String memory-prefix (categories "memory_prefix"))
(def bulk-note "trace.json bulk.note." ((spec "bulk") "note"))
(def ^:private bulk-re
  (re-pattern (str "(?d)" (str/join "|" (map #(str "(?:" (% "pattern") ")") ((spec "bulk") "names"))))))

(def ^:private one-operator ((spec "bulk") "one_operator")) ; e.g. "[dot]"
(def ^:private one-operator-re (re-pattern (str "(?d)" (one-operator "pattern"))))

(defn- listed
  "The first 3 of `names`, each through `f`, then \", ...\" when there are more."
  [f names]
  (str (str/join ", " (map f (take 3 names))) (when (> (count names) 3) ", ...")))

(defn bulk-name?
  "True for names of MXNet bulk segments (trace.json bulk.names)."
  [^String name]
  (boolean (re-find bulk-re name)))

(defn- code-point-compare
  "Strings in code point order (Python's), other values by their text."
  [a b]
  (let [^String a (if (string? a) a (str a)) ^String b (if (string? b) b (str b))]
    (Arrays/compare ^ints (.toArray (.codePoints a)) ^ints (.toArray (.codePoints b)))))

(defn- in-turn
  "`a` against `b` by the values of `keyfns` in turn, each in `code-point-compare` order."
  [keyfns a b]
  (or (some #(let [c (code-point-compare (% a) (% b))] (when-not (zero? c) c)) keyfns) 0))

(defn- text
  "A JSON value as the text of a name or device (lists and objects as compact JSON)."
  ^String [v]
  (cond (string? v) v (nil? v) "" (coll? v) (json/write-str v :escape-unicode false :escape-slash false)
        :else (str v)))

(defn percentile
  "The `p`th percentile (0..100) of `sorted` (numbers, not empty), linear between closest ranks."
  ^double [sorted p]
  (let [n (count sorted)
        h (/ (* (dec n) (double p)) 100.0)
        lo (long (Math/floor h))
        a (double (nth sorted lo))]
    (+ a (* (- h lo) (- (double (nth sorted (min (dec n) (inc lo)))) a)))))

;; ------------------------------------------------------------------ one file's events

(defn- number [x] (when (number? x) x))

(defn- async-id
  "What pairs an async event besides pid and cat: `id`, else `id2`, within its `scope`."
  [ev]
  (let [i (get ev "id2")
        ident (cond (contains? ev "id") (get ev "id")
                    (and (map? i) (contains? i "local")) {:local (get i "local")}
                    (and (map? i) (contains? i "global")) {:global (get i "global")}
                    :else i)]
    (if-some [s (get ev "scope")] {:scope s :id ident} ident)))

(defn- inc! [^Map m k n] (.put m k (+ (long (.getOrDefault m k 0)) (long n))))

(defn- list-of ^List [^Map m k] (or (.get m k) (let [l (ArrayList.)] (.put m k l) l)))

(defn- counter! [{:keys [^Map memory ^Map counters]} ^Map counts ev cat ts]
  (let [args (get ev "args")
        bad! #(inc! counts :bad-counter 1)]
    (if-not (map? args)
      (bad!)
      (let [bad-ts (volatile! false)]
        (doseq [[^String cname value] args]
          (cond
            (not (number? value)) (bad!)
            (str/starts-with? cname memory-prefix)
            (let [in64 #(when (<= Long/MIN_VALUE % Long/MAX_VALUE) (long %))
                  t (in64 (bigint ts)) v (in64 (bigint value))]   ; whole bytes and us
              (cond (nil? t) (when-not @bad-ts (inc! counts :no-ts 1) (vreset! bad-ts true))
                    (nil? v) (bad!)
                    :else (let [^List s (or (.get memory (subs cname (count memory-prefix)))
                                            (let [s [(ArrayList.) (ArrayList.)]]
                                              (.put memory (subs cname (count memory-prefix)) s) s))]
                            (.add ^List (first s) t) (.add ^List (second s) v))))
            :else
            (let [k [cat cname]
                  [n mn mx sum last-ts last] (.get counters k)]
              (.put counters k (if (nil? n)
                                 [1 value value value ts value]
                                 [(inc n) (if (< value mn) value mn) (if (> value mx) value mx)
                                  (+' sum value) (if (>= ts last-ts) ts last-ts)
                                  (if (>= ts last-ts) value last)])))))))))

(defn- pair!
  "A begin or an end of a slice, context or async pair."
  [{:keys [^Map open ^Map order ^Map cat-of ^Map by-pid ^Map counts]} wanted? ev ph cat ts]
  (let [name (get ev "name")
        pid (get ev "pid")
        scope (if (thread-phases ph)
                [(end->begin ph ph) pid (get ev "tid")]
                [(end->begin ph ph) pid cat (async-id ev)])]
    (if (begin->end ph)
      (let [key (conj scope name)]
        (.add (list-of open key) ts)
        (.add (list-of order scope) key)
        (.put cat-of key cat))
      (let [^List keys (.get order scope)
            key (if (nil? name)
                  (loop [] (when (and keys (pos? (.size keys)))
                             (let [k (.remove keys (int (dec (.size keys))))
                                   ^List s (.get open k)]
                               (if (and s (pos? (.size s))) k (recur)))))
                  (let [k (conj scope name) ^List s (.get open k)]
                    (when (and s (pos? (.size s)))
                      (.remove keys (int (.lastIndexOf keys k)))
                      k)))
            ^List stack (when key (.get open key))]
        (if (nil? key)
          (inc! counts :unmatched-end 1)
          (let [dur (-' ts (.remove stack (int (dec (.size stack)))))
                cat (if (and (thread-phases ph) (not (contains? ev "cat"))) (.get cat-of key) cat)]
            (cond (neg? dur) (inc! counts :negative 1)
                  (wanted? cat) (.add (list-of by-pid [cat (peek key) pid]) dur))))))))

(defn- add-event! [{:keys [^Map phase-counts] :as acc} {:keys [^Map by-pid ^Map pid-names ^Map counts] :as st}
                   wanted? ev]
  (let [cat (text (get ev "cat"))     ; trace.json categories: a category is its text
        ph (get ev "ph")
        role (phases ph)]
    (when-not (and (async-copy-categories cat) (#{"b" "e"} ph))
      (inc! phase-counts ph 1)
      (cond
        (or (nil? role) (counted-only role)) nil
        (= role "metadata")
        (let [args (get ev "args")]
          (when (and (= "process_name" (get ev "name")) (map? args) (contains? args "name"))
            (.put pid-names (get ev "pid") (text (get args "name")))))
        (not (number (get ev "ts"))) (inc! counts :no-ts 1)
        (= role "complete")
        (let [dur (number (get ev "dur"))]
          (cond (nil? dur) (inc! counts :no-ts 1)
                (neg? dur) (inc! counts :negative 1)
                (wanted? cat) (.add (list-of by-pid [cat (get ev "name") (get ev "pid")]) dur)))
        (= role "counter") (counter! acc counts ev cat (get ev "ts"))
        :else (pair! st wanted? ev ph cat (get ev "ts"))))))

(defn- end-file!
  "Counts the file's unmatched begins; pools its durations by [category name device]."
  [{:keys [^Map durations ^Map counts]} {:keys [^Map open ^Map by-pid ^Map pid-names] :as st}]
  (doseq [[k n] (:counts st)] (inc! counts k n))
  (inc! counts :unmatched-begin (reduce + 0 (map #(.size ^List %) (.values open))))
  (doseq [[[cat name pid] ^List ds] by-pid]
    (let [pname (.get pid-names pid)
          device (cond (some? pname) pname (nil? pid) "" :else (str "pid " (text pid)))
          device (if (= device cat) "" device)]         ; a category pid (API calls, tasks)
      (.addAll (list-of durations [cat (text name) device]) ds))))

;; ------------------------------------------------------------------ records

(defn- op-record [[cat name device] ^List ds]
  (let [n (.size ds)
        dbl? (some #(not (instance? Long %)) ds)
        total (if dbl? (reduce + 0.0 (map double ds)) (reduce + 0 ds))
        sorted (if dbl? (doto (double-array (map double ds)) Arrays/sort) (doto (long-array ds) Arrays/sort))
        at #(nth sorted %)]
    {:category cat :name name :device device :count n :total-us total
     :min-us (at 0) :max-us (at (dec n)) :mean-us (/ (double total) n)
     :p50-us (percentile sorted 50) :p90-us (percentile sorted 90) :p99-us (percentile sorted 99)
     :bulk (bulk-name? name)}))

(defn- memory-record [device [^List ts0 ^List vs0]]
  (let [order (sort-by #(.get ts0 (int %)) (range (.size ts0)))   ; stable, by ts
        ts (mapv #(.get ts0 (int %)) order)
        vs (mapv #(.get vs0 (int %)) order)
        n (count vs)
        span (- (long (peek ts)) (long (first ts)))
        mean (/ (double (reduce +' vs)) n)]
    {:device device :samples n :min-bytes (reduce min vs) :max-bytes (reduce max vs)
     :mean-bytes mean
     :time-weighted-mean-bytes (if (pos? span)
                                 (/ (reduce + 0.0 (map #(* (double %1) (double (- (long %3) (long %2))))
                                                       vs ts (rest ts)))
                                    span)
                                 mean)
     :last-bytes (peek vs) :first-ts-us (first ts) :last-ts-us (peek ts)}))

(defn- note ^String [kind fields] (rules/render (get-in spec ["notes" kind]) fields))

(defn- repr
  "A phase as the notes quote it (Python's repr of a string)."
  [^String s]
  (if (and (str/includes? s "'") (not (str/includes? s "\""))) (str "\"" s "\"") (str "'" s "'")))

(defn- notes [{:keys [unknown-phases operators] :as r}]
  (let [bulk (->> operators (filter :bulk) (map :name) distinct (sort code-point-compare))
        {ones true merged false} (group-by #(boolean (re-find one-operator-re %)) bulk)]
    (cond-> (vec (for [[kind k] [["unmatched_begin" :unmatched-begin] ["unmatched_end" :unmatched-end]
                                 ["negative_duration" :negative-durations] ["no_timestamp" :no-timestamp]
                                 ["non_numeric_counter" :bad-counter-values]]
                       :when (pos? (long (r k)))]
                   (note kind {:n (r k)})))
      (seq unknown-phases)
      (conj (note "unknown_phase" {:n (reduce + (vals unknown-phases))
                                   :phases (str/join ", " (map repr (sort code-point-compare (keys unknown-phases))))}))
      (seq merged) (conj (str (count merged) " bulk-merged name(s) (" (listed identity merged) "): "
                              bulk-note))
      (seq ones) (conj (rules/render (one-operator (if (= 1 (count ones)) "note" "note_many"))
                                     {:names (listed #(str "'" % "'") ones)})))))

;; ------------------------------------------------------------------ API

(defn read-events
  "The events of the valid trace file at `path`, in a vector."
  [path]
  (reader/read-events path))

(defn- path-like? [x]
  (or (string? x) (instance? java.io.File x) (instance? java.nio.file.Path x)))

(defn- many? [x] (or (sequential? x) (instance? java.util.List x)))

(defn- category-names
  "The category names of `option` (strings, or a map's keys); nil gives `none`."
  [option v none]
  (cond (nil? v) none
        (string? v) (throw (rules/error "trace.categories_not_collection"
                                        {:option option :value v :example "#{\"operator\"}"}))
        (not (or (map? v) (instance? java.util.Map v) (coll? v) (instance? java.util.Collection v)))
        (throw (rules/error "trace.category_not_name" {:option option :value v :example "#{\"operator\"}"}))
        :else (let [names (if (or (map? v) (instance? java.util.Map v)) (keys v) (seq v))]
                (doseq [n names :when (not (string? n))]
                  (throw (rules/error "trace.category_not_name" {:option option :value n :example "#{\"operator\"}"})))
                (set names))))

(defn stats
  "Statistics of one valid trace file or a sequence of them (or of sequences of event maps):

    {:units {:time \"us\" :memory \"bytes\"}
     :operators [{:category :name :device :count :total-us :min-us :max-us
                  :mean-us :p50-us :p90-us :p99-us :bulk} ...]   ; by :total-us, descending
     :memory    [{:device :samples :min-bytes :max-bytes :mean-bytes
                  :time-weighted-mean-bytes :last-bytes :first-ts-us :last-ts-us} ...]
     :counters  [{:category :name :count :min :max :mean :last} ...]
     :unmatched-begin n :unmatched-end n :negative-durations n :no-timestamp n
     :bad-counter-values n :unknown-phases {\"Q\" n} :phase-counts {\"B\" n}
     :notes [\"...\"]}

  Options `:categories` (kept) and `:exclude-categories`: collections of strings, e.g.
  #{\"operator\"} (nil: all kept, none left out). Throws trace.no_paths, trace.not_a_path,
  trace.categories_not_collection, trace.category_not_name, trace.cannot_open, trace.not_valid."
  ([paths] (stats paths {}))
  ([paths {:keys [categories exclude-categories]}]
   (let [sources (cond (path-like? paths) [paths]
                       (many? paths) paths
                       :else (throw (rules/error "trace.not_a_path" {:value paths})))
         _ (when (empty? sources) (throw (rules/error "trace.no_paths")))
         _ (doseq [src sources :when (not (or (path-like? src) (many? src)))]
             (throw (rules/error "trace.not_a_path" {:value src})))
         kept (category-names :categories categories nil)
         excluded (category-names :exclude-categories exclude-categories #{})
         wanted? (fn [cat] (or (nil? kept) (contains? kept cat)))
         acc {:durations (LinkedHashMap.) :memory (HashMap.) :counters (HashMap.)
              :phase-counts (LinkedHashMap.) :counts (HashMap.)}]
     (doseq [src sources]
       (let [st {:open (HashMap.) :order (HashMap.) :cat-of (HashMap.) :by-pid (LinkedHashMap.)
                 :pid-names (HashMap.) :counts (HashMap.)}
             add! (fn [ev] (when-not (excluded (text (get ev "cat"))) (add-event! acc st wanted? ev)))]
         (if (path-like? src) (reader/read-trace! src add!) (run! add! src))
         (end-file! acc st)))
     (let [{:keys [^Map durations ^Map memory ^Map counters ^Map phase-counts ^Map counts]} acc
           c #(long (.getOrDefault counts % 0))
           ops (->> (for [[k ^List ds] durations :when (pos? (.size ds))] (op-record k ds))
                    (sort (fn [a b] (let [t (compare (:total-us b) (:total-us a))]
                                      (if (zero? t) (in-turn [:category :name :device] a b) t))))
                    vec)
           r {:units {:time "us" :memory "bytes"}
              :operators ops
              :memory (mapv (fn [[d s]] (memory-record d s)) (sort-by key code-point-compare memory))
              :counters (->> counters
                             (sort-by key #(in-turn [first second] %1 %2))
                             (mapv (fn [[[cat n] [cnt mn mx sum _ last]]]
                                     {:category cat :name n :count cnt :min mn :max mx
                                      :mean (/ (double sum) cnt) :last last})))
              :unmatched-begin (c :unmatched-begin) :unmatched-end (c :unmatched-end)
              :negative-durations (c :negative) :no-timestamp (c :no-ts)
              :bad-counter-values (c :bad-counter)
              :unknown-phases (into {} (for [[ph n] phase-counts :when (not (phases ph))] [(text ph) n]))
              :phase-counts (into {} phase-counts)}]
       (assoc r :notes (notes r))))))

(defn find-ops
  "The operator records of `result` named `name` (optionally of one category)."
  ([result name] (find-ops result name nil))
  ([result name category]
   (filterv #(and (= name (:name %)) (or (nil? category) (= category (:category %))))
            (:operators result))))
