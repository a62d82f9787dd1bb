(ns pyprof.raw-layout-test
  "The raw trace's layout (trace.json mxnet_layout): names MXNet copies unescaped (back slashes,
  quotes, unicode) are kept by the JVM's reader as Python's reader keeps them, in bytes laid out
  as MXNet 1.9.1 writes them and in a real session's window (a child JVM with real MXNet,
  events named past pyprof's name check by MXProfileCreateEvent itself); the window passes
  Python's `pyprof validate`. The byte cases are tests/fixtures/mxnet_layout_cases.json, which
  Python's tests/trace/test_mxnet_layout.py reads too."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.native :refer [mx]]
            [pyprof.native :as native]
            [pyprof.rules :as rules]
            [pyprof.session :as session]
            [pyprof.session.raw :as raw]
            [pyprof.test-util :refer [java-child python-json temp-dir]]
            [pyprof.trace.reader :as reader]
            [pyprof.trace.slices :as slices])
  (:import (com.sun.jna.ptr PointerByReference)))

(def ^:private names
  "Names MXNet writes as they are: a Windows path, a quote, a back slash, unicode."
  ["C:\\tmp\\q" "a\"b" "x\\y" "na\u00efve \u2211 \ud835\udefc" "brace}, {x" "tab\tin"])

(def ^:private python-misreads
  "Names a JSON reader would take for escapes, although MXNet never escapes: both languages
  read them by the grammar (Python's pyprof.trace.mxnet_layout, tests/trace/test_mxnet_layout.py)."
  ["x\\\\y" "C:\\tmp" "tab\\there"])

(def ^:private cases-file
  "The shared cases (raw bytes -> events) that Python's tests/trace/test_mxnet_layout.py reads
  too: found from this file (jvm/test/pyprof/)."
  (-> (io/resource "pyprof/raw_layout_test.clj") io/file .getParentFile .getParentFile
      .getParentFile .getParentFile (io/file "tests" "fixtures" "mxnet_layout_cases.json")))

(defn- big [ev] (cond-> ev (contains? ev "tid") (update "tid" biginteger)))

(deftest the-grammar-reads-mxnet-bytes-as-python-does
  (let [cases (get (with-open [r (io/reader cases-file :encoding "UTF-8")] (json/read r)) "cases")]
    (is (<= 8 (count cases)))
    (doseq [{:strs [about text events error]} cases]
      (testing about
        (if error
          (let [e (try (reader/parse-raw text) (catch clojure.lang.ExceptionInfo e e))]
            (is (= error (:pyprof/code (ex-data e))))
            (is (re-find #"pyprof repair" (str (ex-message e)))))
          (is (= (map big events) (map big (reader/parse-raw text)))))))
    (testing "the cases hold what they claim: names kept byte for byte, the cut event dropped"
      (is (= ["process_name" "x\\\\y" "x\\\\y" "C:\\tmp" "C:\\tmp"]
             (take 5 (map #(get % "name") (get (nth cases 1) "events")))))
      (is (= {"my\\ctr" 7} (get (last (get (first cases) "events")) "args"))))))

(defn child-window
  "Run in a child JVM: one window holding events named `names` (made by MXProfileCreateEvent,
  past pyprof's name check) and one named \"ok\"."
  [dir]
  (session/with-session [s {:path (str dir "/w_{window}.json")}]
    (doseq [n (concat names python-misreads ["ok"])]
      (let [p (native/out-pointer #(mx MXProfileCreateEvent ^String n ^PointerByReference %))]
        (mx MXProfileDurationStart p)
        (mx MXProfileDurationStop p)
        (mx MXProfileDestroyHandle p)))))

(deftest a-jvm-window-keeps-names-mxnet-copies-unescaped
  (let [dir (str (temp-dir))
        {:keys [exit err]} (java-child ["-e" (str "(require 'pyprof.raw-layout-test)"
                                                  "(pyprof.raw-layout-test/child-window \"" dir "\")")])
        w (str dir "/w_0.json")]
    (is (= 0 exit) err)
    (when (zero? exit)
      (let [evs (reader/read-events w)
            counts (frequencies (map #(get % "name") (filter #(= "event" (get % "cat")) evs)))]
        (is (= (zipmap (concat names python-misreads ["ok"]) (repeat 2)) counts))
        (testing "the window passes Python's pyprof validate, and Python reads the same names"
          (when-let [v (python-json (str "import json, sys\nfrom pyprof import trace\n"
                                          "p = json.load(sys.stdin)\n"
                                          "r = trace.validate(p, progress=False)\n"
                                          "names = sorted({o.name for o in trace.stats(p).operators if o.category == 'event'})\n"
                                          "print(json.dumps([r.counts, r.problems, names]))\n")
                                     w)]
            (is (= [{} []] (take 2 v)))
            (is (= (sort (concat names python-misreads ["ok"])) (sort (nth v 2))))))))))

(defn- cut-with
  "What pyprof.jvm.WindowCutter writes for `text` (a raw file's bytes) and `extra` events, in one
  pass or two: [events renumbered?]; :planned when its slices need the writers' plan, :refused
  when it does not read the bytes."
  [text extra two-passes?]
  (let [f (java.io.File/createTempFile "cut" ".json")
        out (java.io.File/createTempFile "cut-out" ".json")
        trace (pyprof.rules/read-spec "trace.json")
        c (pyprof.jvm.WindowCutter. (trace "mxnet_layout") (trace "ids") (trace "thread_names"))]
    (try
      (spit f text :encoding "UTF-8")
      (let [r (with-open [w (io/writer out)] (.cut c (str f) 0 (.length f) [] extra w (boolean two-passes?) {} true))]
        [(reader/read-events (str out)) (.renumbered r)])
      (catch pyprof.jvm.WindowCutter$NeedsPlan _ :planned)
      (catch pyprof.jvm.WindowCutter$NotLayout _ :refused)
      (finally (.delete f) (.delete out)))))

(defn- window
  "What pyprof.session.raw/cut-file! writes for `text` and `extra` events: the events."
  [text extra]
  (let [f (java.io.File/createTempFile "raw" ".json")
        out (java.io.File/createTempFile "window" ".json")]
    (try
      (spit f text :encoding "UTF-8")
      (raw/cut-file! (str f) 0 (.length f) (str out) [] extra {})
      (reader/read-events (str out))
      (finally (.delete f) (.delete out)))))

(deftest the-streaming-cut-writes-what-the-tolerant-reader-reads
  (let [cases (get (with-open [r (io/reader cases-file :encoding "UTF-8")] (json/read r)) "cases")
        mark {"name" "ProfilerStep#0" "ph" "i" "s" "g" "ts" 1 "pid" 7 "tid" 1}
        streamed (atom [])]
    (doseq [{:strs [about text error]} cases
            :let [whole (try (reader/parse-raw text) (catch Exception _ nil))
                  want (when whole (slices/rewrite (concat whole [mark])))
                  one (cut-with text [mark] false)
                  two (cut-with text [mark] true)]]
      (testing about
        (cond
          (or error (= :refused one))
          ;; bytes it does not read (a cut-short event, no layout): cut! reads them the tolerant way
          (is (= :refused one two))
          (= :planned one) ; a begin never closed: left out by the plan, as Python's windows do
          (do (is (= :planned two))
              (swap! streamed conj (first (str/split about #"[:(]")))
              (is (= (slices/rewrite (concat whole [mark])) (window text [mark]))))
          :else
          (do (swap! streamed conj (first (str/split about #"[:(]")))
              (is (= want (first two)) "two passes: the events and ids of the tolerant path")
              (is (true? (second two)))
              ;; one pass gave tid 1 to MXNet's first thread before the step mark's tid 1 came:
              ;; it says so, and the caller cuts again in two passes
              (is (or (= want (first one)) (false? (second one))))))))
    ;; every case in MXNet's layout streams (or is written by the plan): a run the C code refuses
    ;; (a raw quote, an event cut short by a crash) is read by the tolerant reader, run by run
    (is (= (for [{:strs [about error]} cases :when (not error)] (first (str/split about #"[:(]")))
           @streamed))
    (testing "an id numbered in one pass that a later safe id holds is told, never written silently"
      (let [text (str "{\n    \"traceEvents\": [\n"
                      "    {\n        \"name\": \"a\",\n        \"ph\": \"i\",\n        \"ts\": 1,\n"
                      "        \"pid\": 0,\n        \"tid\": 9007199254740993\n    }\n,\n")
            [evs renumbered?] (cut-with text [mark] false)]
        (is (= [1 1] (map #(get % "tid") evs)) "the provisional numbers collide")
        (is (false? renumbered?))
        (is (= [2 1] (map #(get % "tid") (first (cut-with text [mark] true)))))))))

(defn- cut-bytes
  "The bytes pyprof.jvm.WindowCutter writes for raw `text`, with the C code or without it
  (-Dpyprof.cutter=python: every run read the tolerant way)."
  [text native?]
  (let [f (java.io.File/createTempFile "cut" ".json")
        out (java.io.File/createTempFile "cut-out" ".json")
        trace (pyprof.rules/read-spec "trace.json")
        c (pyprof.jvm.WindowCutter. (trace "mxnet_layout") (trace "ids") (trace "thread_names"))]
    (try
      (if native? (System/clearProperty "pyprof.cutter") (System/setProperty "pyprof.cutter" "python"))
      (spit f text :encoding "UTF-8")
      (with-open [w (io/writer out)] (.cut c (str f) 0 (.length f) [] [] w false {} true))
      (slurp out)
      (finally (System/clearProperty "pyprof.cutter") (.delete f) (.delete out)))))

(def ^:private trace-spec (pyprof.rules/read-spec "trace.json"))

(deftest the-c-code-writes-what-the-tolerant-reader-reads
  ;; MXNet's own mix: operator pairs on two threads past 2**53 (one run inside another written
  ;; first), a metadata event between them and again, async API events whose id comes before
  ;; their pid, counters (one run: the C code's)
  (let [ev (fn [name ph ts tid & extra]
             (str "    {\n        \"name\": \"" name "\",\n        \"cat\": \"operator\",\n        \"ph\": \"" ph
                  "\",\n        \"ts\": " ts ",\n" (apply str (map #(str "        " % ",\n") extra))
                  "        \"pid\": 0,\n        \"tid\": " tid "\n    }\n"))
        meta (str "        {\n            \"ph\": \"M\",\n            \"args\": {\n                \"name\": \"MXNET_C_API\"\n"
                  "            },\n            \"pid\": 849786139768988538,\n            \"name\": \"process_name\"\n        }")
        events (concat
                (for [i (range 400) :let [tid (if (even? i) "17378283666853208238" "9007199254740995")]
                      e [(ev "dot" "B" (+ 100 (* 10 i)) tid) (ev "dot" "E" (+ 104 (* 10 i)) tid)]]
                  e)
                [meta (ev "outer" "B" 90 "17378283666853208238") (ev "outer" "E" 5000 "17378283666853208238")
                 (ev "MXImperativeInvoke" "b" 6000 "1" "\"id\": 13558531206942575307")
                 (ev "MXImperativeInvoke" "e" 6001 "1" "\"id\": 13558531206942575307")
                 (ev "Memory: cpu/0" "C" 6002 "1" "\"args\": { \"Memory: cpu/0\": 64 }")
                 meta])
        text (str "{\n    \"traceEvents\": [\n" (str/join ",\n" events))]
    (is (true? (.cutsInC (pyprof.jvm.WindowCutter. (trace-spec "mxnet_layout") (trace-spec "ids") (trace-spec "thread_names"))))
        "the C code builds here (a C compiler: scripts/setup.sh)")
    (let [native (cut-bytes text true)
          tolerant (cut-bytes text false)]
      (is (= tolerant native))
      (is (= 1 (count (re-seq #"MXNET_C_API" native))) "the metadata event once")
      (is (not (re-find #"\d{16}" native)) "every id past 2**53 renumbered"))))

(deftest slices-the-plan-places-are-written-as-pythons-windows-write-them
  ;; the writers' plan (pyprof.trace.slices): custom events started and stopped interleaved (A
  ;; start, B start, A stop, B stop: B moves to the thread's overlap track), an end without a
  ;; begin, a begin never closed, a negative duration; beside them operator pairs that nest (one
  ;; run inside another written first) and stay as they are. Python's window writer
  ;; (pyprof.trace.rawcut.read_range) gives the reference, with the C code and without it.
  (let [ev (fn [name ph ts tid]
             (str "    {\n        \"name\": \"" name "\",\n        \"cat\": \"event\",\n        \"ph\": \"" ph
                  "\",\n        \"ts\": " ts ",\n        \"pid\": 0,\n        \"tid\": " tid "\n    }\n"))
        main "17378283666853208238"
        text (str "{\n    \"traceEvents\": [\n"
                  (str/join ",\n" [(ev "inner" "B" 5 main) (ev "inner" "E" 6 main)
                                   (ev "outer" "B" 4 main) (ev "outer" "E" 8 main)
                                   (ev "first" "B" 10 main) (ev "first" "E" 30 main)
                                   (ev "second" "B" 20 main) (ev "second" "E" 40 main)
                                   (ev "orphan" "E" 50 "9007199254740995") (ev "open" "B" 60 "9007199254740995")
                                   (ev "late" "B" 80 "7") (ev "late" "E" 70 "7")]))
        f (java.io.File/createTempFile "raw" ".json")
        window (fn [native?]
                 (let [out (java.io.File/createTempFile "window" ".json")]
                   (try
                     (if native? (System/clearProperty "pyprof.cutter") (System/setProperty "pyprof.cutter" "python"))
                     (raw/cut-file! (str f) 0 (.length f) (str out) [] [] {})
                     (reader/read-events (str out))
                     (finally (System/clearProperty "pyprof.cutter") (.delete out)))))]
    (try
      (spit f text :encoding "UTF-8")
      (let [native (window true)
            python (python-json (str "import json, tempfile\n"
                                     "from pyprof.trace import rawcut\n"
                                     "out = tempfile.mktemp(suffix='.json')\n"
                                     "rawcut.read_range(" (pr-str (str f)) ", 0, None, {}, out)\n"
                                     "print(json.dumps(json.load(open(out))['traceEvents']))"))]
        (is (= ["inner" "inner" "outer" "outer" "first" "first" "thread_name" "second"] (map #(get % "name") native)))
        (is (= "X" (get (last native) "ph")))
        (is (= "1 (overlap 1)" (get-in native [6 "args" "name"])) "named after its thread's tid as written")
        (is (= native (window false)) "without the C code: the same")
        (when python (is (= python native) "Python's window: the same events, tracks and names"))
        (testing "past plan_max_bytes: streamed as MXNet recorded the slices, one note, pyprof repair makes it valid"
          (let [out (java.io.File/createTempFile "window" ".json")
                err (java.io.StringWriter.)]
            (try
              (System/setProperty "pyprof.planMaxBytes" (str (dec (.length f))))
              (binding [*err* err] (raw/cut-file! (str f) 0 (.length f) (str out) [] [] {}))
              (let [streamed (reader/read-events (str out))]
                (is (= ["inner" "inner" "outer" "outer" "first" "first" "second" "second" "orphan" "open" "late" "late"]
                       (map #(get % "name") streamed)) "every slice as it came, none held")
                (is (= (rules/render (get-in rules/api ["raw_trace" "plan_note"])
                                     {:path (str out) :bytes (.length f) :limit (dec (.length f))})
                       (str/trim (str err))))
                (when-let [[codes repaired] (python-json (str "import json, subprocess, sys\n"
                                                              "cli = lambda *a: subprocess.run([sys.executable, '-m', 'pyprof', *a], capture_output=True).returncode\n"
                                                              "p = " (pr-str (str out)) "\n"
                                                              "codes = [cli('validate', p), cli('repair', p), cli('validate', p)]\n"
                                                              "print(json.dumps([codes, json.load(open(p))['traceEvents']]))"))]
                  (is (= [1 0 0] codes) "invalid as cut, valid after pyprof repair")
                  (is (= [["inner" 5 1 1] ["outer" 4 4 1] ["first" 10 20 1] ["1 (overlap 1)" nil nil 3] ["second" 20 20 3]]
                         (for [e repaired]
                           [(or (get-in e ["args" "name"]) (e "name")) (e "ts") (e "dur") (e "tid")]))
                      "the slices the plan places (B/E pairs as X), the partial overlap on its overlap track (tid 2: the cut gave it to the other thread)")))
              (finally (System/clearProperty "pyprof.planMaxBytes") (.delete out))))))
      (finally (.delete f)))))
