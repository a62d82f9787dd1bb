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
            [pyprof.trace.pycompat :as pycompat]
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

(deftest percentiles-are-numpy-linear
  (let [a (long-array [1 2 3 4])]
    (is (= 2.5 (stats/percentile a 50)))
    (is (< (Math/abs (- 3.7 (stats/percentile a 90))) 1e-12))
    (is (< (Math/abs (- 3.97 (stats/percentile a 99))) 1e-12))
    (is (= 7.0 (stats/percentile (long-array [7]) 99))))
  (testing "numpy's virtual index is (n-1)*q, not n*q + (1-q) - 1: they differ in the last bit"
    ;; np.percentile(np.array([0, 10**15]), 90) == 900000000000000.0 exactly; the other formula
    ;; gives 899999999999999.9 (virtual index 0.8999999999999999)
    (is (= 9.0E14 (stats/percentile (long-array [0 1000000000000000]) 90)))))

(deftest percentiles-and-means-equal-numpy-bit-for-bit
  ;; numpy's values of int64 arrays with large values (tests/fixtures/make_expected_stats.py)
  (let [{:strs [percentiles means]} (json/read-str (slurp (io/file parity/repo-root "tests" "fixtures"
                                                                    "stats_cases" "numerics.json")))
        numpy-mean pycompat/numpy-mean]
    (is (= 44 (count percentiles)))
    (doseq [{:strs [values p50 p90 p99]} percentiles
            :let [a (long-array values)]]
      (is (= [p50 p90 p99] [(stats/percentile a 50) (stats/percentile a 90) (stats/percentile a 99)])
          (str "n=" (count values))))
    (is (= 9 (count means)))
    (doseq [{:strs [values mean]} means]
      (is (= mean (numpy-mean (long-array values))) (str "n=" (count values))))))

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
    (is (= ["operator"] (map :category (:operators (stats/stats [events] {:exclude-categories #{"demo"}})))))))

(defn- first-difference [expected actual]
  (let [[only-expected only-actual] (data/diff expected actual)]
    {:python only-expected :jvm only-actual}))

(deftest equals-python-on-every-fixture
  ;; Expected values: tests/fixtures/make_expected_stats.py (Python's pyprof.trace.stats).
  (let [files (parity/expected-files)]
    (is (<= 25 (count files)) "the generator's expected values are committed")
    (is (some #(= "small.json.stats.json" (.getName ^java.io.File %)) files))
    (is (some #(= "header_leading_comma.json.stats.json" (.getName ^java.io.File %)) files))
    (doseq [^java.io.File f files
            :let [{:strs [inputs runs]} (json/read-str (slurp f))]
            {:strs [options result]} runs]
      (let [expected (parity/normalize result)
            actual (parity/jvm-result inputs options)]
        (is (= expected actual)
            (str (.getName f) " " (pr-str options) ": " (pr-str (first-difference expected actual))))))))

(deftest reader-matches-python-report-and-events
  (testing "a quote inside a name is kept; 64-bit ids exactly; the report as Python's"
    (let [evs (reader/read-events "../tests/fixtures/traces/quote.json")]
      (is (= 20 (count evs)))
      (is (some #(= "re\"lu" (get % "name")) evs))
      (is (= 11063534467229197503N (get (nth evs 3) "tid")))))
  (testing "tiny chunks: every event of a file with the header's bare comma"
    (let [n (atom 0)
          rep (reader/read-trace "../tests/trace/fixtures/header_leading_comma.json" {:chunk-bytes 64}
                                 (fn [_] (swap! n inc)))]
      (is (= 20 @n))
      (is (= ["bare comma before the first event (second profiling session in one process)"]
             (:problems rep)))))
  (testing "errors carry Python's messages"
    (let [e (try (stats/stats "../tests/fixtures/traces/nope.json") (catch clojure.lang.ExceptionInfo e e))]
      (is (= :trace-not-found (:pyprof/error (ex-data e))))
      (is (= "cannot open trace '../tests/fixtures/traces/nope.json': No such file or directory. fix: check the path"
             (ex-message e))))
    (is (thrown-with-msg? clojure.lang.ExceptionInfo #"no trace files given" (stats/stats [])))))

(deftest trace-cut-after-a-ph-line-drops-the-cut-event-as-in-python
  ;; A last event cut right after its "ph" line is an unreadable fragment, dropped and counted
  ;; (no prefilter puts a "}" back since a2aab1f), on both sides.
  (let [dir (tu/temp-dir)
        f (io/file dir "cut.json")
        text (slurp "../tests/fixtures/traces/small.json")
        i (.indexOf ^String text "\"ph\": \"B\"" 1500)]
    (try
      (spit f (subs text 0 (+ i (count "\"ph\": \"B\",\n"))))
      (let [r (stats/stats (str f))]
        (is (= 0 (:no-timestamp r)))
        (is (= ["cut.json: missing closing ]} (process crashed or profiler not finalised)"
                "cut.json: 1 unreadable fragment(s), 70 bytes, dropped"
                "1 begin event(s) without an end were ignored (trace cut short?)"]
               (:notes r)))
        (when (parity/python)
          (is (= (parity/python-result f) (parity/jvm-result [(str f)] {})))))
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
            (testing "the damage was there and repaired"
              (is (= ["large.json: bare comma before the first event (second profiling session in one process)"
                      "large.json: missing closing ]} (process crashed or profiler not finalised)"
                      (str "large.json: 1 closing ]} in the middle of the file (a dump appended after a "
                           "finished trace), events on both sides kept")]
                     (take 3 (get jvm "notes"))))
              (is (some #(re-matches #"large.json: \d+ event\(s\) with unescaped characters in names" %)
                        (get jvm "notes")))
              (is (some #(= "large.json: 1 unreadable fragment(s), 21 bytes, dropped" %) (get jvm "notes"))))
            (is (= (strip py) (strip jvm)) (pr-str (first-difference (strip py) (strip jvm))))
            ;; Python sums this one with BLAS ddot (order depends on CPU and threads); the JVM's is
            ;; the correctly rounded value: equal within a few ulps.
            (is (= (count (get py "memory")) (count (get jvm "memory"))))
            (doseq [[p j] (map vector (get py "memory") (get jvm "memory"))]
              (is (<= (Math/abs (- (double (get p twm)) (double (get j twm))))
                      (* 1e-12 (Math/abs (double (get p twm)))))
                  (str "time-weighted mean " (get p twm) " vs " (get j twm)))))))
      (finally
        (doseq [^java.io.File f (reverse (file-seq dir))] (.delete f))))))

(deftest gzip-cut-short-gives-every-decodable-byte-as-python
  ;; Python's GunzipStream: a stream cut short gives every decodable byte, then ends with one
  ;; dropped fragment; a cut before any decodable byte is its own error.
  (let [dir (tu/temp-dir)
        text (.getBytes ^String (slurp "../tests/fixtures/traces/small.json") "UTF-8")
        bos (java.io.ByteArrayOutputStream.)
        _ (with-open [gz (java.util.zip.GZIPOutputStream. bos)] (.write gz text))
        gz (.toByteArray bos)
        cut (fn [n] (let [f (io/file dir (str "cut" n ".json.gz"))]
                      (io/copy (java.util.Arrays/copyOf gz (int n)) f)
                      f))]
    (try
      (testing "the trailer missing: every byte decoded, the cut counted"
        (let [r (parity/jvm-result [(str (cut (- (alength gz) 4)))] {})
              rep (first (get r "reports"))]
          (is (= (alength text) (get rep "bytes_read")))
          (is (= 1 (get rep "dropped_fragments")))
          (is (false? (get rep "missing_tail")) "the text itself is whole")))
      (testing "only the header: nothing decodable"
        (is (= {"error" {"type" "TraceFormatError"
                         "message" (str "{path}: gzip stream cut short before any trace event could "
                                        "be decoded (the writer crashed or the copy is incomplete). "
                                        "fix: re-run the profiling or copy the file again")}}
               (parity/jvm-result [(str (cut 10))] {}))))
      (when (parity/python)
        (doseq [n [2 10 12 40 (quot (alength gz) 2) (- (alength gz) 9) (- (alength gz) 1)]
                :let [f (cut n)]]
          (is (= (let [r (parity/python-result f)]
                   (cond-> r (get r "error") (update-in ["error" "message"] str/replace (str f) "{path}")))
                 (parity/jvm-result [(str f)] {}))
              (str "cut at " n " of " (alength gz) " bytes"))))
      (finally (doseq [^java.io.File x (reverse (file-seq dir))] (.delete x))))))
