(ns pyprof.stats-test
  (:require [clojure.test :refer [deftest is testing]]
            [pyprof.stats :as stats]))

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
    (is (= 7.0 (stats/percentile (long-array [7]) 99)))))

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
    (is (= {:time "us" :memory "bytes"} (:units r)))
    (is (stats/bulk-name? "[dot]"))
    (is (= ["operator"] (map :category (:operators (stats/stats [events] {:categories #{"operator"}})))))))
