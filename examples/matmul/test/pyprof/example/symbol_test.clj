(ns pyprof.example.symbol-test
  (:require [clojure.test :refer [deftest is]]
            [pyprof.example.context :as context]
            [pyprof.example.ndarray :as nd]
            [pyprof.example.symbol :as sym]))

(deftest dot-arguments
  (with-open [a (sym/variable "A")
              b (sym/variable "B")
              c (sym/dot "dot" [a b])]
    (is (= ["A"] (sym/list-arguments a)))
    (is (= ["A" "B"] (sym/list-arguments c)))))

(deftest bind-checks-argument-names
  (with-open [a (sym/variable "A")
              b (sym/variable "B")
              c (sym/dot "dot" [a b])
              x (nd/random-uniform 0 1 [2 2])]
    (let [e (is (thrown? clojure.lang.ExceptionInfo (sym/bind c (context/cpu) {"A" x "C" x})))]
      (is (= ["B"] (:missing (ex-data e))))
      (is (= ["C"] (:unknown (ex-data e)))))))
