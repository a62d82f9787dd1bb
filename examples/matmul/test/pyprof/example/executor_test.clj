(ns pyprof.example.executor-test
  (:require [clojure.test :refer [deftest is]]
            [pyprof.example.context :as context]
            [pyprof.example.executor :as executor]
            [pyprof.example.ndarray :as nd]
            [pyprof.example.symbol :as sym]))

(defn- matmul [a b n k m]
  (vec (for [i (range n), j (range m)]
         (reduce + (for [l (range k)] (* (double (a (+ (* i k) l))) (double (b (+ (* l m) j)))))))))

(deftest forward-computes-dot
  (with-open [a (nd/random-uniform -1 1 [3 5])
              b (nd/random-uniform -1 1 [5 2])
              va (sym/variable "A")
              vb (sym/variable "B")
              c (sym/dot "dot" [va vb])
              exec (sym/bind c (context/cpu) {:A a :B b})]
    (let [outs (executor/outputs (executor/forward exec))]
      (try
        (is (= 1 (count outs)))
        (is (= [3 2] (nd/shape (first outs))))
        (let [expected (matmul (nd/->vec a) (nd/->vec b) 3 5 2)
              actual (nd/->vec (nd/wait-to-read (first outs)))]
          (is (every? #(< (Math/abs (double %)) 1e-5) (map - expected actual))))
        (finally (executor/close-all outs))))))

(deftest close-all-closes-everything-then-rethrows
  (let [closed (atom [])
        ok (reify java.lang.AutoCloseable (close [_] (swap! closed conj :ok)))
        bad (reify java.lang.AutoCloseable (close [_] (throw (IllegalStateException. "boom"))))]
    (is (thrown-with-msg? IllegalStateException #"boom" (executor/close-all [ok bad ok])))
    (is (= [:ok :ok] @closed))))
