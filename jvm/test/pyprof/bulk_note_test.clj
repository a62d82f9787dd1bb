(ns pyprof.bulk-note-test
  "A bulk segment of one operator ([dot], what MXNet 1.9.1 names a bound symbol's single dot) is
  named as such in the JVM's statistics notes, with no advice to set the bulk variables; merged
  segments keep the note with the advice (trace.json bulk.one_operator, as in Python)."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.stats :as stats]))

(def ^:private one-dot
  "'[dot]' is a bulk segment of one operator: its time is that operator's time")

(defn- trace [ops]
  (into [{"ph" "M" "name" "process_name" "pid" 0 "args" {"name" "cpu/0"}}]
        (mapcat (fn [[i [n dur]]]
                  [{"ph" "B" "name" n "cat" "operator" "pid" 0 "tid" 1 "ts" (* 1000 i)}
                   {"ph" "E" "name" n "cat" "operator" "pid" 0 "tid" 1 "ts" (+ (* 1000 i) dur)}])
                (map-indexed vector ops))))

(deftest a-one-operator-segment-gets-no-advice
  (testing "the matmul example's trace: only [dot]"
    (let [r (stats/stats [(trace [["[dot]" 50] ["[dot]" 60]])])]
      (is (= [one-dot] (:notes r)))
      (is (not-any? #(str/includes? % "MXNET_EXEC") (:notes r)))
      (is (:bulk (first (:operators r))) "still a bulk name")))
  (testing "the committed fixture small.json, as Python's expected statistics say"
    (is (= [one-dot] (:notes (stats/stats ["../tests/fixtures/traces/small.json"])))))
  (testing "merged segments keep the advice; the one-operator one is named apart"
    (is (= [(str "2 bulk-merged name(s) (ImperativeBulk, [dot,relu]): " stats/bulk-note)
            "'[a]', '[dot]' are bulk segments of one operator each: each one's time is that operator's time"]
           (:notes (stats/stats [(trace [["ImperativeBulk" 10] ["[dot]" 5] ["[dot,relu]" 7]
                                         ["[a]" 1] ["relu" 3]])]))))))

(defn- one-operator-notes [names]
  (filterv #(str/includes? % "of one operator")
           (:notes (stats/stats [(trace (map vector names (repeat 5)))]))))

(deftest one-operator-names-and-notes-as-python
  (doseq [n ["[dot]" "[relu]" "[_backward_FullyConnected]"]]
    (is (= [(str "'" n "' is a bulk segment of one operator: its time is that operator's time")]
           (one-operator-notes [n]))))
  (doseq [n ["ImperativeBulk" "[dot,relu]" "[Convolution,relu,Pooling" "Activation,Pooling" "dot"
             "[a]b]" "x[dot]"]]
    (is (= [] (one-operator-notes [n])) n))
  (is (= ["'[a]', '[b]', '[c]', ... are bulk segments of one operator each: each one's time is that operator's time"]
         (one-operator-notes ["[a]" "[b]" "[c]" "[d]"]))))
