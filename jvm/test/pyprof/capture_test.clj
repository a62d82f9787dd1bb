(ns pyprof.capture-test
  "Issue 22 in the JVM's sessions (pyprof.capture): the seed's dot example (MXNet's Clojure
  profiler example, on the compat namespaces) forwarded in a session with :record-shapes,
  :with-stack and :with-flops, in a child JVM; the Java facade's ProfilerSession takes the
  same options. :with-flops records the shapes and attributes FLOPs need, not FLOPs: Python
  derives them when it reads the window (tests/attribution/test_derived_flops.py)."
  (:require [clojure.data.json :as json]
            [clojure.string :as str]
            [clojure.test :refer [deftest is]]
            [org.apache.clojure-mxnet.context :as context]
            [org.apache.clojure-mxnet.executor :as executor]
            [org.apache.clojure-mxnet.ndarray :as nd]
            [org.apache.clojure-mxnet.random :as random]
            [org.apache.clojure-mxnet.symbol :as sym]
            [pyprof.session :as session]
            [pyprof.test-util :refer [java-child temp-dir]])
  (:import (pyprof.jvm ProfilerSession)))

(def n 64)

(def ^:private args-names
  (dissoc ((json/read-str (slurp (clojure.java.io/resource "attribution.json"))) "trace_args") "about"))

(defn child-scenario
  "Run in a child JVM: the seed's example's dot, bound before the session (as the seed binds it
  before configuring the profiler), forwarded 3 times in a session, then once more in a Java
  ProfilerSession; prints each session's attribution report."
  [dir]
  (let [ctx (context/cpu)
        c (sym/dot "dot" [(sym/variable "A") (sym/variable "B")])
        a (random/uniform -1.0 1.0 [n n] {:ctx ctx})
        b (random/uniform -1.0 1.0 [n n] {:ctx ctx})
        exec (sym/bind c ctx {"A" [a] "B" [b]})
        run (fn [] (-> exec (executor/forward) (executor/outputs) (first) (nd/wait-to-read)))]
    (run)
    (let [s (session/start! (session/profile {:path (str dir "/w_{window}.json") :record-shapes true
                                              :with-stack true :with-flops true}))]
      (dotimes [_ 3] (run))
      (prn (:attribution (first (session/stop! s)))))
    ;; a warm-up step's forwards run while no window is open: the window holds the active step's
    (let [s (session/start! (session/profile {:path (str dir "/u_{window}.json") :record-shapes true
                                              :schedule (session/schedule {:warmup 1 :active 1})}))]
      (dotimes [_ 2] (run))
      (session/step! s)
      (dotimes [_ 3] (run))
      (session/step! s)
      (prn (:attribution (first (session/stop! s)))))
    (let [j (ProfilerSession. {"path" (str dir "/j_{window}.json") "record_shapes" true})]
      (.start j)
      (run)
      (.stop j))))

(def ^:private forward-line
  "The line of this file where child-scenario's run calls executor/forward."
  (let [lines (str/split-lines (slurp "test/pyprof/capture_test.clj"))]
    (inc (count (take-while #(not (str/includes? % "(-> exec (executor/forward)")) lines)))))

(defn- operator-events [path]
  (->> ((json/read-str (slurp path)) "traceEvents")
       (filter #(and (= "operator" (% "cat")) (#{"B" "X"} (% "ph"))))))

(deftest the-seed-dot-gets-shapes-attributes-and-a-clojure-call-site
  (let [dir (str (temp-dir))
        {:keys [exit out err]} (java-child ["-e" (str "(require 'pyprof.capture-test)"
                                                       "(pyprof.capture-test/child-scenario \"" dir "\")")])
        _ (is (= 0 exit) err)
        [report warmed] (map read-string (take 2 (str/split-lines out)))
        dots (filter #(= "[dot]" (% "name")) (operator-events (str dir "/w_0.json")))
        arg (fn [e k] (get-in e ["args" (args-names k)]))]
    (is (= {:calls 3 :matched 3 :unmatched-calls 0 :unmatched-events 0} report))
    (is (= {:calls 3 :matched 3 :unmatched-calls 0 :unmatched-events 0} warmed))
    (is (= 3 (count dots)))
    (doseq [e dots]
      (is (= [[n n] [n n]] (arg e "input_dims")))
      (is (= ["float32" "float32"] (arg e "input_type")))
      (is (= [[n n]] (arg e "output_dims")))
      (is (= ["float32"] (arg e "output_type")))
      (is (= {} (arg e "attrs")) "one operator node: its attributes (dot: none)")
      (is (nil? (arg e "flops")) "FLOPs are derived when reading, not written by the JVM")
      (is (nil? (arg e "bytes")))
      (is (= "exact" (arg e "match")))
      (is (= "bound symbol" (arg e "source")))
      ;; the call site: the test's own Clojure frame (the compat and example layers skipped),
      ;; demunged; the stack ends there
      (is (re-matches (re-pattern (str "capture_test\\.clj:" forward-line
                                       " pyprof\\.capture-test/child-scenario/run--\\d+"))
                      (arg e "call_site"))
          (arg e "call_site"))
      (is (= (arg e "call_site") (peek (arg e "stack")))))
    (let [[j] (filter #(= "[dot]" (% "name")) (operator-events (str dir "/j_0.json")))]
      (is (= [[n n] [n n]] (get-in j ["args" (args-names "input_dims")])))
      (is (nil? (get-in j ["args" (args-names "call_site")])) "no :with-stack: no call site"))))

(deftest the-options-are-sessions-own
  (is (map? (session/profile {:record-shapes true :with-stack false :with-flops true}))))

(deftest an-event-is-a-symbols-segment-by-the-rule-python-uses
  (let [fits? #'pyprof.capture/fits?]
    (is (= [true true false true true true false]
           (mapv boolean [(fits? ["dot"] ["dot"])
                          (fits? ["dot" "relu"] ["dot" "relu"])
                          (fits? ["dot"] ["dot" "relu"]) ; a symbol of two segments: not one event
                          ;; oneDNN fuses a FullyConnected's Activation, not a relu operator
                          (fits? ["_sg_mkldnn_fully_connected"] ["FullyConnected" "Activation"])
                          (fits? ["_sg_mkldnn_fully_connected" "relu"] ["FullyConnected" "relu"])
                          (fits? ["_sg_mkldnn_conv" "Activation"] ["Convolution" "BatchNorm" "Activation"])
                          (fits? ["_sg_mkldnn_conv"] ["Convolution" "BatchNorm" "Activation" "Pooling"])])))
    (is (= ["dot" "relu"] (pyprof.capture/segment-ops "[dot,relu]")))
    (is (nil? (pyprof.capture/segment-ops "[dot,re")))))
