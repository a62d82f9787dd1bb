(ns pyprof.stats-parity
  "Comparing `pyprof.stats` with the Python reference: the JVM result in the shape of Python's
  expected values (`tests/fixtures/make_expected_stats.py`), a generator of large MXNet-style
  traces, and the entry point of the child JVM that summarises one with a small heap."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [pyprof.stats :as stats])
  (:import (java.io Writer)
           (java.lang.management ManagementFactory MemoryPoolMXBean MemoryType)
           (java.util Random)))

(set! *warn-on-reflection* true)

(def repo-root
  "The repository root (tests run in jvm/)."
  (.getCanonicalFile (io/file "..")))

(defn- snake [k] (str/replace (name k) "-" "_"))

(defn- snake-keys [m] (into {} (map (fn [[k v]] [(snake k) v])) m))

(defn normalize
  "JSON-read data made comparable: integers that fit in a long as Long (data.json reads 18+
  digit numbers as BigInt), maps and vectors recursively."
  [x]
  (cond (map? x) (into {} (map (fn [[k v]] [k (normalize v)])) x)
        (sequential? x) (mapv normalize x)
        (and (integer? x) (<= Long/MIN_VALUE x Long/MAX_VALUE)) (long x)
        :else x))

(defn ->python
  "A `pyprof.stats/stats` result in the shape of the generator's \"result\": Python's
  `to_dict()` plus the counts of events left out, unknown and all phases (no read reports: the
  JVM reads valid traces and MXNet's layout only)."
  [r]
  (normalize
   {"units" {"time" (get-in r [:units :time]) "memory" (get-in r [:units :memory])}
    "operators" (mapv snake-keys (:operators r))
    "memory" (mapv snake-keys (:memory r))
    "counters" (mapv snake-keys (:counters r))
    "notes" (:notes r)
    "unmatched_begin" (:unmatched-begin r)
    "unmatched_end" (:unmatched-end r)
    "negative_durations" (:negative-durations r)
    "no_timestamp" (:no-timestamp r)
    "bad_counter_values" (:bad-counter-values r)
    "unknown_phases" (:unknown-phases r)
    "phase_counts" (:phase-counts r)}))

(def ^:private error-types
  {:trace-format "TraceFormatError" :trace-not-found "TraceNotFoundError"})

(defn jvm-result
  "What the JVM computes for `inputs` (paths relative to the repository root, or absolute) with
  the generator's `options` (string keys as in Python; chunk_bytes, a read size of Python's,
  is ignored), in the generator's shape; {\"error\" {\"type\" \"code\" \"message\"}} when it throws."
  [inputs options]
  (let [paths (mapv #(str (if (.isAbsolute (io/file %)) (io/file %) (io/file repo-root %))) inputs)
        opts (cond-> {}
               (contains? options "categories") (assoc :categories (set (options "categories")))
               (contains? options "exclude_categories")
               (assoc :exclude-categories (set (options "exclude_categories"))))]
    (try
      (->python (stats/stats paths opts))
      (catch clojure.lang.ExceptionInfo e
        (if-let [t (error-types (:pyprof/error (ex-data e)))]
          {"error" {"type" t "code" (:pyprof/code (ex-data e))
                    "message" (reduce #(str/replace %1 %2 "{path}") (ex-message e) paths)}}
          (throw e))))))

(defn close?
  "True when `jvm` equals `python` (JSON-read data) with every number within the relative
  tolerance `pyprof.stats/stats-tolerance` (integers, strings, booleans exactly)."
  [python jvm]
  (cond (map? python) (and (map? jvm) (= (set (keys python)) (set (keys jvm)))
                           (every? #(close? (python %) (jvm %)) (keys python)))
        (sequential? python) (and (sequential? jvm) (= (count python) (count jvm))
                                  (every? true? (map close? python jvm)))
        (and (number? python) (number? jvm))
        (let [a (double python) b (double jvm)]
          (or (== python jvm)
              (<= (Math/abs (- a b)) (* stats/stats-tolerance (max (Math/abs a) (Math/abs b))))))
        :else (= python jvm)))

(defn expected-files
  "Every `*.stats.json` written by the generator next to the trace fixtures."
  []
  (->> ["tests/fixtures" "tests/trace/fixtures"]
       (mapcat #(file-seq (io/file repo-root %)))
       (filter #(str/ends-with? (.getName ^java.io.File %) ".stats.json"))
       (sort-by str)))

(defn python
  "The project's Python (the .venv of the repository), or nil."
  []
  (let [f (io/file repo-root ".venv" "bin" "python")]
    (when (.canExecute f) (str f))))

(defn python-result
  "What Python computes for the trace at `path` (options {}), by the generator's `result_of`."
  [path]
  (let [out (java.io.File/createTempFile "pyprof-expected" ".json")
        code (str "import json, sys; sys.path.insert(0, sys.argv[1]); import make_expected_stats as m; "
                  "json.dump(m.result_of([sys.argv[2]], {}), open(sys.argv[3], 'w'))")
        p (-> (ProcessBuilder. ^"[Ljava.lang.String;"
                               (into-array String [(python) "-c" code (str (io/file repo-root "tests" "fixtures"))
                                                   (str path) (str out)]))
              (.redirectErrorStream true)
              (.start))
        log (slurp (.getInputStream p))]
    (try
      (when-not (zero? (.waitFor p))
        (throw (ex-info (str "Python failed: " log) {})))
      (normalize (json/read-str (slurp out)))
      (finally (.delete out)))))

;; ------------------------------------------------------------------ a large MXNet-style trace

(def ^:private tid 11063534467229197503N)
(def ^:private op-pid 3060606181218273969)
(def ^:private api-pid 849786139768988538)
(def ^:private mem-pid 9785678402843609691N)
(def ^:private dom-pid 13643738130282713016N)

(defn- event ^String [name cat ph ts pid tid extra]
  (str "    {\n        \"name\": \"" name "\",\n        \"cat\": \"" cat "\",\n        \"ph\": \"" ph
       "\",\n        \"ts\": " ts ",\n" extra "        \"pid\": " pid ",\n        \"tid\": " tid
       "\n    }\n"))

(defn- meta-event ^String [name pid]
  (str "        {\n            \"ph\": \"M\",\n            \"args\": {\n                \"name\": \""
       name "\"\n            },\n            \"pid\": " pid ",\n            \"name\": \"process_name\"\n        }"))

(defn- header ^String [comma?]
  (str "{\n    \"traceEvents\": [" (when comma? ",") "\n"
       (str/join ",\n" [(meta-event "cpu/0" 0) (meta-event "cpu/1" 1) (meta-event "operator" op-pid)
                        (meta-event "MXNET_C_API" api-pid)])
       ",\n\n"))

(def ^:private tail "\n\n    ],\n    \"displayTimeUnit\": \"ms\"\n}\n")

(defn write-large-trace!
  "Writes a valid trace in MXNet's layout of about `target-bytes` at `file` (deterministic for
  `seed`): operators with their async copies (nested, some never ended), C API calls, memory
  and other counters, domain tasks, frames and markers, and a few names with quotes and back
  slashes, escaped (the JVM reads valid traces; damaged ones are Python's)."
  [file ^long target-bytes ^long seed]
  (let [rng (Random. seed)
        names ["dot" "Activation,Convolution" "[dot]" "_plus_scalar" "FullyConnected" "na\u00efve"]
        written (long-array 1)]
    (with-open [^Writer w (io/writer file)]
      (let [emit (fn [^String s] (.write w s) (aset written 0 (+ (aget written 0) (.length s))))
            sep (fn [first?] (when-not first? (emit ",\n")))]
        (emit (header false))
        (loop [ts 1795937667000000, first? true, open {0 [] 1 []}, half? false, i 0]
          (let [ts (long ts)
                i (long i)]
            (cond
              false
              ;; (a marker last: Python's prefilter would drop an async copy with the seam)
              (do (sep first?)
                  (emit (event "mk" "dom,instant_marker" "n" ts 6 tid "        \"s\": \"p\",\n"))
                  (emit tail) (emit (header false)) (recur ts true open true i))

              (>= (aget written 0) target-bytes)
              (emit tail)

              :else
              (let [damaged? (== 99999 (mod i 100000))         ; a name with a quote and a back slash, escaped
                    r (if damaged? 0.0 (.nextDouble rng))
                    dev (.nextInt rng 2)
                    nm (if damaged? "bro\\\"k\\\\en" (nth names (.nextInt rng (count names))))
                    t (+ tid dev)
                    copy-id (str "        \"id\": " t ",\n")
                    evs (cond
                          (< r 0.35)
                          (let [end (+ ts (.nextInt rng 50))]
                            (if (< (.nextDouble rng) 0.2)
                              [[(event nm "operator" "B" ts dev t "") (event nm "operator" "b" ts op-pid t copy-id)]
                               [:open dev nm]]
                              [[(event nm "operator" "B" ts dev t "") (event nm "operator" "b" ts op-pid t copy-id)
                                (event nm "operator" "E" end dev t "") (event nm "operator" "e" end op-pid t copy-id)]]))
                          (and (< r 0.42) (seq (open dev)))
                          (let [nm (peek (open dev))]
                            [[(event nm "operator" "E" ts dev t "") (event nm "operator" "e" ts op-pid t copy-id)]
                             [:close dev]])
                          (< r 0.6)
                          (let [api (if (zero? (.nextInt rng 2)) "MXImperativeInvokeEx" "MXNDArrayFree")]
                            [[(event "MXNet C API Calls" "MXNET_C_API" "C" ts api-pid 7
                                     (str "        \"args\": { \"MXNet C API Calls\": " i " },\n"))
                              (event api "MXNET_C_API" "b" ts api-pid 7 "        \"id\": 7,\n")
                              (event api "MXNET_C_API" "e" (+ ts (.nextInt rng 30)) api-pid 7 "        \"id\": 7,\n")]])
                          (< r 0.78)
                          [[(event (str "Memory: cpu/" dev) "Device Storage" "C" (- ts (.nextInt rng 3)) mem-pid tid
                                   (str "        \"args\": { \"Memory: cpu/" dev "\": "
                                        (bit-and (.nextLong rng) (dec (bit-shift-left 1 33))) " },\n"))]]
                          (< r 0.85)
                          [[(event "ctr" "dom" "C" ts dom-pid tid
                                   (str "        \"args\": { \"ctr\": " (- (.nextInt rng 60) 5) " },\n"))]]
                          (< r 0.92)
                          (let [id (.nextInt rng 3)]
                            [[(event nm "dom" "b" ts dom-pid tid (str "        \"id\": " id ",\n"))
                              (event nm "dom" "e" (+ ts (.nextInt rng 9)) dom-pid tid (str "        \"id\": " id ",\n"))]])
                          (< r 0.97)
                          [[(event nm "dom,frame" "(" ts 5 tid "") (event nm "dom,frame" ")" (+ ts 3) 5 tid "")]]
                          :else
                          [[(event "mk" "dom,instant_marker" "n" ts 6 tid "        \"s\": \"p\",\n")]])
                    [texts [action dev2 nm2]] evs]
                (doseq [[k e] (map-indexed vector texts)]
                  (sep (and first? (zero? k)))
                  (emit e))
                (recur (+ ts 1 (.nextInt rng 100)) false
                       (case action
                         :open (update open dev2 conj nm2)
                         :close (update open dev2 pop)
                         open)
                       half? (inc i))))))))
    (aget written 0)))

;; ------------------------------------------------------------------ the child JVM

(defn- old-gen-peak ^long []
  (reduce + 0 (for [^MemoryPoolMXBean p (ManagementFactory/getMemoryPoolMXBeans)
                    :when (and (= MemoryType/HEAP (.getType p)) (re-find #"Old|Tenured" (.getName p)))]
                (.getUsed (.getPeakUsage p)))))

(defn summarise-child
  "Entry point of the child JVM: the statistics of the trace at `path` written as the generator's
  JSON shape to `out`; prints {:seconds :max-heap-bytes :peak-used-bytes :old-gen-peak-bytes
  :operators n} (peak used heap sampled every 2 ms)."
  [path out]
  (let [mem (ManagementFactory/getMemoryMXBean)
        peak (atom 0)
        done (atom false)
        sampler (doto (Thread. ^Runnable
                               (fn [] (while (not @done)
                                        (swap! peak max (.getUsed (.getHeapMemoryUsage mem)))
                                        (Thread/sleep 2))))
                  (.setDaemon true) (.start))
        t0 (System/nanoTime)
        r (stats/stats path)
        secs (/ (- (System/nanoTime) t0) 1e9)]
    (reset! done true)
    (.join sampler)
    (spit out (json/write-str (->python r)))
    (prn {:seconds secs :max-heap-bytes (.maxMemory (Runtime/getRuntime)) :peak-used-bytes @peak
          :old-gen-peak-bytes (old-gen-peak) :operators (count (:operators r))
          :calls (reduce + (map :count (:operators r)))})))
