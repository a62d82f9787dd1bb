(ns pyprof.flops-test
  "FLOPs and bytes by the JVM's evaluator of pyprof/spec/flops.json: the same golden integers
  as Python (tests/attribution/flops_cases.json, read by tests/attribution/test_flops.py too),
  the same errors, and the grammar check naming a planted malformed entry."
  (:require [clojure.data.json :as json]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.flops :as flops])
  (:import (pyprof.jvm Flops)))

(def cases (json/read-str (slurp "../tests/attribution/flops_cases.json")))

(deftest golden-flops-and-bytes-as-python
  (doseq [{:strs [op inputs attrs dtypes outputs output_dtypes family] :as c} (cases "cases")]
    (testing (pr-str op inputs attrs)
      (is (= (c "flops") (flops/flops op inputs attrs)) (c "why"))
      (is (= (c "bytes") (flops/bytes-moved op inputs attrs {:dtypes dtypes :output-shapes outputs
                                                             :output-dtypes output_dtypes})))
      (is (= family (get flops/operators op "none")))))
  (is (= (* 2 4096 4096 4096) (flops/flops "dot" [[4096 4096] [4096 4096]] {}) 137438953472)))

(deftest segments-are-the-sum-of-their-nodes
  (doseq [{:strs [name nodes] :as s} (cases "segments")]
    (let [ns (for [{:strs [op inputs attrs]} nodes] [op inputs attrs])]
      (is (= (s "flops") (flops/segment-flops ns)) name)
      (is (= (s "bytes") (flops/segment-bytes ns)) name))))

(deftest bad-input-names-the-problem-as-python
  (doseq [{:strs [op inputs attrs code says]} (cases "errors")]
    (let [e (try (flops/flops op inputs attrs) nil (catch clojure.lang.ExceptionInfo e e))]
      (is (some? e) says)
      (is (= code (:pyprof/code (ex-data e))))
      (is (str/includes? (ex-message e) says) (ex-message e))
      (is (str/includes? (ex-message e) " fix: ")))))

(deftest keyword-keys-and-jvm-values-work-as-strings
  (is (= (flops/flops "Convolution" [[1 3 8 8] [4 3 3 3]] {:kernel [3 3] :no_bias true})
         (flops/flops "Convolution" [[1 3 8 8] [4 3 3 3]] {"kernel" "(3, 3)" "no_bias" "True"})
         (* 2 4 36 3 9)))
  (is (nil? (flops/flops "_random_uniform" [] {})))
  (is (= 24576 (flops/bytes-moved "dot" [[64 64] [64 64]] {} {:dtypes "float16"})) "docs/attribution.md")
  (is (= 36 (flops/bytes-moved "_random_uniform" [] {} {:output-shapes [[3 3]]}))))

(deftest planted-malformed-entries-are-catalogue-errors
  (is (true? (flops/check-spec)))
  (doseq [[plant where] [[#(assoc-in % ["families" "dot" "flops"] ["pow" 2 3]) "families.dot.flops"]
                         [#(assoc-in % ["families" "dot" "flops"] ["-" 2]) "families.dot.flops"]
                         [#(assoc-in % ["operators" "dot"] "matmul") "operators.dot"]
                         [#(assoc-in % ["families" "_backward_dot" "flops"] ["call" "nodot" []])
                          "families._backward_dot.flops"]
                         [#(update-in % ["families" "softmax" "let"] conj ["x"]) "families.softmax.let"]]]
    (let [e (try (flops/check-spec (plant flops/spec)) nil (catch clojure.lang.ExceptionInfo e e))]
      (is (= "flops.bad_spec" (:pyprof/code (ex-data e))) where)
      (is (str/includes? (str (ex-message e)) where)))))

(deftest the-java-method-gives-the-same-numbers
  (is (= 137438953472 (Flops/flops "dot" [[4096 4096] [4096 4096]] {})))
  (is (= 1802240 (Flops/flops "Convolution" [[2 3 32 32] [16 3 3 3] [16]]
                              {"kernel" "(3, 3)" "pad" "(1, 1)" "num_filter" "16"})))
  (is (= 157440 (Flops/bytesMoved "Convolution" [[2 3 32 32] [16 3 3 3] [16]]
                                  {"kernel" "(3, 3)" "pad" "(1, 1)" "num_filter" "16"})))
  (is (nil? (Flops/flops "_random_uniform" [] {}))))
