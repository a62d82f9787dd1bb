(ns pyprof.stats-test
  (:require [clojure.data :as data]
            [clojure.data.json :as json]
            [clojure.edn :as edn]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.stats :as stats]
            [pyprof.stats-parity :as parity]
            [pyprof.test-util :as tu]
            [pyprof.trace.reader :as reader]))

(def ^:private events
  [{"ph" "M" "name" "process_name" "pid" 0 "args" {"name" "cpu/0"}}
   {"ph" "M" "name" "process_name" "pid" 77 "args" {"name" "demo"}}
   {"ph" "B" "name" "dot" "cat" "operator" "pid" 0 "tid" 1 "ts" 100}
   {"ph" "b" "name" "dot" "cat" "operator" "pid" 9 "tid" 1 "ts" 100 "id" 1}
   {"ph" "E" "name" "dot" "cat" "operator" "pid" 0 "tid" 1 "ts" 110}
   {"ph" "e" "name" "dot" "cat" "operator" "pid" 9 "tid" 1 "ts" 110 "id" 1}
   {"ph" "B" "name" "dot" "cat" "operator" "pid" 0 "tid" 1 "ts" 200}
   {"ph" "B" "name" "dot" "cat" "operator" "pid" 0 "tid" 1 "ts" 205}
   {"ph" "E" "name" "dot" "cat" "operator" "pid" 0 "tid" 1 "ts" 215}
   {"ph" "E" "name" "dot" "cat" "operator" "pid" 0 "tid" 1 "ts" 240}
   {"ph" "b" "name" "step" "cat" "demo" "pid" 77 "tid" 1 "ts" 0 "id" 5}
   {"ph" "e" "name" "step" "cat" "demo" "pid" 77 "tid" 1 "ts" 1000 "id" 5}
   {"ph" "C" "name" "Memory: cpu/0" "pid" 0 "ts" 10 "args" {"Memory: cpu/0" 1000}}
   {"ph" "C" "name" "Memory: cpu/0" "pid" 0 "ts" 30 "args" {"Memory: cpu/0" 3000}}
   {"ph" "C" "name" "items" "cat" "demo" "pid" 77 "ts" 40 "args" {"items" 4}}
   {"ph" "E" "name" "orphan" "cat" "operator" "pid" 0 "tid" 1 "ts" 1}])

(deftest percentiles-are-linear-between-closest-ranks
  (let [a (long-array [1 2 3 4])]
    (is (= 2.5 (stats/percentile a 50)))
    (is (< (Math/abs (- 3.7 (stats/percentile a 90))) 1e-12))
    (is (< (Math/abs (- 3.97 (stats/percentile a 99))) 1e-12))
    (is (= 7.0 (stats/percentile (long-array [7]) 99)))
    (is (= 1.0 (stats/percentile a 0)))
    (is (= 4.0 (stats/percentile a 100)))
    (is (= 2.5 (stats/percentile (double-array [1.0 2.0 3.0 4.0]) 50))))
  (testing "numpy's values of int64 arrays with large values, within the stated tolerance"
    (let [{:strs [percentiles]} (json/read-str (slurp (io/file parity/repo-root "tests" "fixtures"
                                                              "stats_cases" "numerics.json")))
          big (Math/pow 2 61)]                ; the values' scale: the differences' rounding
      (is (= 44 (count percentiles)))
      (doseq [{:strs [values p50 p90 p99]} percentiles
              :let [a (long-array values)]
              [q expected] [[50 p50] [90 p90] [99 p99]]]
        (is (<= (Math/abs (- (double expected) (stats/percentile a q))) (* stats/stats-tolerance big))
            (str "n=" (count values) " p" q))))))

(deftest pairs-copies-devices-memory-counters
  (let [r (stats/stats [events])
        [step dot] (:operators r)]
    (testing "sorted by total, async operator copies skipped, nested B/E matched by stack"
      (is (= {:category "demo" :name "step" :device "" :count 1 :total-us 1000} (select-keys step [:category :name :device :count :total-us])))
      (is (= {:category "operator" :name "dot" :device "cpu/0" :count 3 :total-us 60 :min-us 10
              :max-us 40 :mean-us 20.0 :p50-us 10.0 :bulk false}
             (select-keys dot [:category :name :device :count :total-us :min-us :max-us :mean-us :p50-us :bulk]))))
    (is (= [{:device "cpu/0" :samples 2 :min-bytes 1000 :max-bytes 3000 :mean-bytes 2000.0
             :time-weighted-mean-bytes 1000.0 :last-bytes 3000 :first-ts-us 10 :last-ts-us 30}]
           (:memory r)))
    (is (= [{:category "demo" :name "items" :count 1 :min 4 :max 4 :mean 4.0 :last 4}] (:counters r)))
    (is (= 1 (:unmatched-end r)))
    (is (= ["1 end event(s) without a begin were ignored"] (:notes r)))
    (is (= {:time "us" :memory "bytes"} (:units r)))
    (is (stats/bulk-name? "[dot]"))
    (is (= ["operator"] (map :category (:operators (stats/stats [events] {:categories #{"operator"}})))))
    (is (= ["operator"] (map :category (:operators (stats/stats [events] {:exclude-categories #{"demo"}})))))
    (doseq [option [:categories :exclude-categories]]
      (let [e (try (stats/stats [events] {option "operator"}) nil (catch Exception e e))]
        (is (= "trace.categories_not_collection" (:pyprof/code (ex-data e))) "a string is no set of names")
        (is (= (str option " takes a collection of category names, got the string \"operator\": a string"
                    " would be read as its characters. fix: pass a set of names, e.g. #{\"operator\"}")
               (ex-message e)))))))

(defn- first-difference [expected actual]
  (let [[only-expected only-actual] (data/diff expected actual)]
    {:python only-expected :jvm only-actual}))

(defn- damaged? [result] (some #(get % "damaged") (get result "reports")))

(defn- python-figures
  "Python's result without what only its damaged-trace reader reports (the read reports and
  their notes, which begin with a file name)."
  [result inputs]
  (let [names (set (map #(.getName (io/file ^String %)) inputs))]
    (-> (dissoc result "reports")
        (update "notes" (fn [ns] (vec (remove #(contains? names (first (str/split % #": " 2))) ns)))))))

(def ^:private python-only
  "Valid fixtures whose figures come from Python's runtime, not from the trace: why."
  {"number_keys.json" (str "Python's dict keys take 1, 1.0 and true as one pid, tid or id; the JVM's "
                           "keys are the JSON values, which differ")})

(def ^:private python-diverges
  "Fixtures in MXNet's layout that Python's damaged-trace reader reads wrongly (reported for
  pyprof/trace/bodyparser.py): why; the JVM's reading is checked instead."
  {"escapes.json" (str "Python reads a raw back slash that happens to form a JSON escape ('a\\b') "
                       "as that escape (a backspace), and escapes a metadata name's quote and back "
                       "slash twice ('cpu\\\"0'); MXNet never escapes, so the names are a\\b, cpu\"0")})

(defn- gz? [inputs] (some #(str/ends-with? % ".gz") inputs))

(deftest equals-python-on-every-valid-fixture
  ;; Expected values: tests/fixtures/make_expected_stats.py (Python's pyprof.trace.stats). The
  ;; JVM reads valid traces and MXNet's layout; a fixture Python reports damaged is Python's,
  ;; unless it is in MXNet's layout (a name copied unescaped, a crash's cut): then the JVM
  ;; reads it too, to the same figures. Figures agree within stats/stats-tolerance.
  (let [files (parity/expected-files)
        seen (atom {:valid 0 :mxnet-layout 0 :refused 0 :errors 0 :python-only 0 :python-diverges 0})]
    (is (<= 25 (count files)) "the generator's expected values are committed")
    (doseq [^java.io.File f files
            :let [{:strs [inputs runs]} (json/read-str (slurp f))]
            {:strs [options result]} runs
            :when (not (contains? options "chunk_bytes"))]
      (let [expected (parity/normalize result)
            actual (parity/jvm-result inputs options)
            where (str (.getName f) " " (pr-str options))]
        (cond
          (get expected "error")
          (do (swap! seen update :errors inc)
              (is (= (get-in expected ["error" "type"]) (get-in actual ["error" "type"])) where))
          (python-only (.getName (io/file ^String (first inputs))))
          (swap! seen update :python-only inc)
          (python-diverges (.getName (io/file ^String (first inputs))))
          (let [ops (get actual "operators")]
            (swap! seen update :python-diverges inc)
            (is (some #(= "a\\b" (get % "name")) ops) where)
            (is (some #(= "x\", \"y" (get % "name")) ops) where)
            (is (= #{"cpu\"0" "cpu\\1"} (set (remove #(str/starts-with? % "pid ") (map #(get % "device") ops)))) where))
          (and (or (damaged? expected) (gz? inputs)) (get actual "error"))
          (do (swap! seen update :refused inc)
              (is (= "trace.not_valid" (get-in actual ["error" "code"])) where)
              (is (str/includes? (get-in actual ["error" "message"]) "pyprof repair") where))
          :else
          (let [py (python-figures expected inputs)]
            (swap! seen update (if (damaged? expected) :mxnet-layout :valid) inc)
            (is (parity/close? py actual)
                (str where ": " (pr-str (first-difference py actual))))))))
    (println "stats fixtures:" @seen)
    (is (<= 40 (:valid @seen)))
    (is (<= 5 (:mxnet-layout @seen)))
    (is (<= 10 (:refused @seen)))))

(deftest reader-reads-mxnet-layout-and-refuses-damage
  (testing "a name copied unescaped (MXNet's layout): the quote kept; 64-bit ids exactly"
    (let [evs (reader/read-events "../tests/fixtures/traces/quote.json")]
      (is (= 20 (count evs)))
      (is (some #(= "re\"lu" (get % "name")) evs))
      (is (= 11063534467229197503N (get (nth evs 3) "tid")))))
  (testing "a damaged file: one line naming pyprof repair"
    (let [e (try (stats/stats "../tests/fixtures/stats_cases/appended_dump.json")
                 (catch clojure.lang.ExceptionInfo e e))]
      (is (= :trace-format (:pyprof/error (ex-data e))))
      (is (= "trace.not_valid" (:pyprof/code (ex-data e))))
      (is (= 1 (count (str/split-lines (ex-message e)))))
      (is (re-find #"^\.\./tests/fixtures/stats_cases/appended_dump.json: not a valid trace \(.+\); .* fix: .*pyprof repair \.\./tests/fixtures/stats_cases/appended_dump.json -o repaired.json"
                   (ex-message e)))))
  (testing "errors carry Python's messages"
    (let [e (try (stats/stats "../tests/fixtures/traces/nope.json") (catch clojure.lang.ExceptionInfo e e))]
      (is (= :trace-not-found (:pyprof/error (ex-data e))))
      (is (= "cannot open trace '../tests/fixtures/traces/nope.json': No such file or directory. fix: check the path"
             (ex-message e))))
    (is (thrown-with-msg? clojure.lang.ExceptionInfo #"no trace files given" (stats/stats [])))
    ;; a new user's finds: a directory was "Permission denied", and a file that is no trace at
    ;; all (a Python source) was told to `pyprof repair`, which then found nothing
    (let [dir (tu/temp-dir)
          source (io/file dir "train.py")
          code+message #(try (stats/stats [(str %)]) nil
                             (catch clojure.lang.ExceptionInfo e [(:pyprof/code (ex-data e)) (ex-message e)]))]
      (spit source "import mxnet\n")
      (is (= ["trace.cannot_open" (str "cannot open trace '" dir "': Is a directory. fix: check the path")]
             (code+message dir)))
      (is (= "trace.no_events" (first (code+message source))))
      (is (not (str/includes? (second (code+message source)) "repair"))))))

(deftest trace-cut-after-a-ph-line-drops-the-cut-event-as-in-python
  ;; MXNet's layout cut short by a crash: the cut event is dropped, the rest read, as Python does.
  (let [dir (tu/temp-dir)
        f (io/file dir "cut.json")
        text (slurp "../tests/fixtures/traces/small.json")
        i (.indexOf ^String text "\"ph\": \"B\"" 1500)]
    (try
      (spit f (subs text 0 (+ i (count "\"ph\": \"B\",\n"))))
      (let [r (stats/stats (str f))]
        (is (= 0 (:no-timestamp r)))
        (is (= ["1 begin event(s) without an end were ignored (trace cut short?)"] (:notes r)))
        (when (parity/python)
          (let [py (python-figures (parity/python-result f) ["cut.json"])
                jvm (parity/jvm-result [(str f)] {})]
            (is (parity/close? py jvm) (pr-str (first-difference py jvm))))))
      (finally (doseq [^java.io.File x (reverse (file-seq dir))] (.delete x))))))

(deftest large-trace-streams-in-a-small-heap
  ;; A 200 MB trace summarised by a child JVM limited to a 64 MiB heap (reading it whole took
  ;; several GB), and the result equals Python's on the same file.
  (let [dir (tu/temp-dir)
        trace (io/file dir "large.json")
        out (io/file dir "jvm.json")]
    (try
      (let [size (parity/write-large-trace! trace (* 200 1000 1000) 42)
            {:keys [exit err] child-out :out}
            (tu/java-child ["-e" (str "(require 'pyprof.stats-parity) (pyprof.stats-parity/summarise-child "
                                      (pr-str (str trace)) " " (pr-str (str out)) ")")]
                           :jvm-args ["-Xmx64m"] :timeout-s 600)]
        (is (>= size (* 200 1000 1000)))
        (is (zero? exit) (str "child JVM failed: " err))
        (when (zero? exit)
          (let [summary (edn/read-string child-out)
                jvm (parity/normalize (json/read-str (slurp out)))
                py (parity/python-result trace)
                twm "time_weighted_mean_bytes"
                strip (fn [r] (update r "memory" (partial mapv #(dissoc % twm))))]
            (println "large trace:" size "bytes," (:calls summary) "calls; JVM" (format "%.1f s" (:seconds summary))
                     "peak used heap" (:peak-used-bytes summary) "of max" (:max-heap-bytes summary)
                     "(old gen peak" (str (:old-gen-peak-bytes summary) ")"))
            (is (< 100000 (:calls summary)))
            (is (parity/close? (strip (python-figures py ["large.json"])) (strip jvm))
                (pr-str (first-difference (strip py) (strip jvm))))
            ;; Python sums this one with BLAS ddot (order depends on CPU and threads); the JVM's is
            ;; the correctly rounded value: equal within a few ulps.
            (is (= (count (get py "memory")) (count (get jvm "memory"))))
            (doseq [[p j] (map vector (get py "memory") (get jvm "memory"))]
              (is (<= (Math/abs (- (double (get p twm)) (double (get j twm))))
                      (* 1e-12 (Math/abs (double (get p twm)))))
                  (str "time-weighted mean " (get p twm) " vs " (get j twm)))))))
      (finally
        (doseq [^java.io.File f (reverse (file-seq dir))] (.delete f))))))
