(ns pyprof.raw-layout-test
  "The raw trace's layout (trace.json mxnet_layout): names MXNet copies unescaped (back slashes,
  quotes, unicode) are kept by the JVM's reader as Python's reader keeps them, in bytes laid out
  as MXNet 1.9.1 writes them and in a real session's window (a child JVM with real MXNet,
  events named past pyprof's name check by MXProfileCreateEvent itself); the window passes
  Python's `pyprof validate`."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.native :refer [mx]]
            [pyprof.native :as native]
            [pyprof.session :as session]
            [pyprof.session.raw :as raw]
            [pyprof.test-util :refer [java-child python-json temp-dir]]
            [pyprof.trace.reader :as reader])
  (:import (com.sun.jna.ptr PointerByReference)))

(def ^:private names
  "Names MXNet writes as they are: a Windows path, a quote, a back slash, unicode."
  ["C:\\tmp\\q" "a\"b" "x\\y" "na\u00efve \u2211 \ud835\udefc" "brace}, {x" "tab\tin"])

(def ^:private python-misreads
  "Names Python's damaged-trace reader reads as JSON escapes, although MXNet never escapes
  (pyprof/trace/bodyparser.py tries orjson first): the JVM's reading is checked instead."
  ["x\\\\y" "C:\\tmp"])

(defn- event-text
  "One event as MXNet 1.9.1 writes it (src/profiler/profiler.h EmitSubEvent)."
  [name ph ts]
  (str "    {\n        \"name\": \"" name "\",\n        \"cat\": \"event\",\n        \"ph\": \"" ph
       "\",\n        \"ts\": " ts ",\n        \"pid\": 0,\n        \"tid\": 11063534467229197503\n    }\n"))

(def ^:private meta-text
  (str "{\n    \"traceEvents\": [\n        {\n            \"ph\": \"M\",\n            \"args\": {\n"
       "                \"name\": \"cpu/0\"\n            },\n            \"pid\": 0,\n"
       "            \"name\": \"process_name\"\n        }"))

(defn- raw-bytes
  "A first dump of `ns` (header, metadata, B/E pairs, a counter), then a second range's
  leading comma, cut inside its last event (a crash)."
  [ns]
  (str meta-text
       (str/join (map-indexed (fn [i n] (str ",\n\n" (event-text n "B" (* 10 i)) ",\n\n" (event-text n "E" (inc (* 10 i)))))
                              ns))
       ",\n    {\n        \"name\": \"my\\ctr\",\n        \"cat\": \"dom\",\n        \"ph\": \"C\",\n"
       "        \"ts\": 5,\n        \"args\": { \"my\\ctr\": 7 },\n        \"pid\": 1,\n        \"tid\": 2\n    }\n"
       ",\n    {\n        \"name\": \"cut"))

(defn- python-events
  "The events Python's reader gives for the file at `path` (nil without the .venv)."
  [path]
  (python-json (str "import json, sys\nfrom pyprof.trace import TraceReader\n"
                    "print(json.dumps(list(TraceReader(json.load(sys.stdin), progress=False))))\n")
               (str path)))

(deftest the-grammar-reads-mxnet-bytes-as-python-does
  (let [dir (temp-dir)
        f (io/file dir "raw.json")
        text (raw-bytes names)]
    (spit f text)
    (let [evs (raw/parse-range text)]
      (testing "every name kept, the counter's name too; the cut event dropped"
        (is (= (concat ["process_name"] (mapcat #(vector % %) names) ["my\\ctr"]) (map #(get % "name") evs)))
        (is (= {"my\\ctr" 7} (get (last evs) "args")))
        (is (= 11063534467229197503N (get (second evs) "tid"))))
      (testing "Python's reader gives the same events for the same bytes"
        (when-let [py (python-events f)]
          (is (= (map #(update % "tid" biginteger) (filter #(contains? % "tid") evs))
                 (map #(update % "tid" biginteger) (filter #(contains? % "tid") py))))
          (is (= (count evs) (count py))))))
    (testing "names Python misreads as JSON escapes: the JVM keeps MXNet's bytes"
      (let [evs (raw/parse-range (raw-bytes python-misreads))]
        (is (= (mapcat #(vector % %) python-misreads) (butlast (rest (map #(get % "name") evs)))))))
    (testing "ranges: header only in the first, leading and trailing commas, the footer"
      (is (= [] (raw/parse-range "")))
      (is (= [] (raw/parse-range ",\n")))
      (is (= ["C:\\tmp\\q"] (map #(get % "name") (raw/parse-range (str ",\n" (event-text "C:\\tmp\\q" "B" 1) ",\n")))))
      (is (= 2 (count (raw/parse-range (str meta-text ",\n" (event-text "a\"b" "B" 1)
                                            "\n\n    ],\n    \"displayTimeUnit\": \"ms\"\n}\n"))))))
    (testing "bytes in no such layout: one line naming pyprof repair"
      (let [e (try (raw/parse-range "{\"a\": }\n    }\n, {") (catch clojure.lang.ExceptionInfo e e))]
        (is (= "trace.not_valid" (:pyprof/code (ex-data e))))
        (is (re-find #"pyprof repair" (ex-message e)))))))

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
