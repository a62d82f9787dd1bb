(ns core-test
  (:require [profiler.core :as profiler]
            [org.apache.clojure-mxnet.profiler :as mx-profiler]
            [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.test :refer :all]))

(defn count-lines [file]
  (count (line-seq (io/reader (io/as-file file)))))

;; The example's own test, unchanged.
(deftest run-profiler
  (profiler/run)
  (let [new-file (clojure.java.io/as-file profiler/profiler-name)]
    (is (.exists new-file))))

(defn- dot-events
  "[name ph] of the dot operator's B/E events on cpu/0 in the trace at `path`."
  [path]
  (let [events (get (with-open [r (io/reader path)] (json/read r)) "traceEvents")
        cpu0 (set (for [e events :when (and (= "M" (e "ph")) (= "cpu/0" (get-in e ["args" "name"])))]
                    (e "pid")))]
    (for [e events :when (and (#{"dot" "[dot]"} (e "name")) (#{"B" "E"} (e "ph")) (cpu0 (e "pid")))]
      (e "ph"))))

;; The example ran; finishing the trace (what MXNet does at exit) makes it valid JSON that holds
;; the one profiled forward pass: one dot B/E pair.
(deftest trace-holds-the-dot-events
  (when-not (.exists (io/file profiler/profiler-name)) (profiler/run))
  (mx-profiler/dump-profile)
  (is (pos? (count-lines profiler/profiler-name)))
  (is (= {"B" 1 "E" 1} (frequencies (dot-events profiler/profiler-name)))))
