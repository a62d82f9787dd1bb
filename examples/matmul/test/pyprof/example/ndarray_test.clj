(ns pyprof.example.ndarray-test
  (:require [clojure.test :refer [deftest is]]
            [pyprof.example.ndarray :as nd])
  (:import (pyprof.jvm.example NDArray)))

(deftest random-uniform-values-and-shape
  (with-open [a (nd/random-uniform -1 1 [3 4])]
    (is (= [3 4] (nd/shape a)))
    (is (= 12 (nd/size a)))
    (let [v (nd/->vec (nd/wait-to-read a))]
      (is (= 12 (count v)))
      (is (every? #(and (<= -1.0 %) (< % 1.0)) v))
      (is (< 1 (count (distinct v))))))
  (with-open [b (nd/random-uniform 5 5.5 [2] {})]
    (is (every? #(<= 5.0 % 5.5) (nd/->vec b)))))

(deftest close-is-idempotent
  (let [^NDArray a (nd/random-uniform 0 1 [2 2])]
    (nd/close a)
    (nd/close a)
    (is (.isClosed a))
    (is (thrown-with-msg? pyprof.jvm.PyprofException #"NDArray is closed" (nd/shape a)))))

(deftest bad-shape
  (is (thrown-with-msg? clojure.lang.ExceptionInfo #"positive integers" (nd/random-uniform 0 1 [0 2])))
  (is (thrown-with-msg? clojure.lang.ExceptionInfo #"positive integers" (nd/random-uniform 0 1 []))))

(deftest wait-all
  (is (nil? (nd/wait-all))))
