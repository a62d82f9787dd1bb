(ns pyprof.trace.records
  "Result records of the statistics: a port of `pyprof/trace/records.py`. `op-record` is
  `OpStats.from_durations` (one operator, API call, task or frame on one device, exact
  percentiles), `memory-record` `MemoryStats.from_samples` (the `Memory: <device>` counter of one
  device), `notes` `TraceStats.notes` (warnings for the user, worded by trace.json). Records are
  maps with the units in their keys: times in microseconds, memory in bytes."
  (:require [clojure.string :as str]
            [pyprof.trace.naming :refer [bulk-name? bulk-note one-operator-note one-operator-segment?]]
            [pyprof.trace.phases :refer [note]]
            [pyprof.trace.pycompat :refer [compare-py dot-exact numpy-mean numpy-sum-doubles percentile
                                           percentile-doubles py-repr true-div]])
  (:import (java.util Arrays Comparator)))

(set! *warn-on-reflection* true)

(defn- op-record-doubles
  [[cat name device] ^doubles arr]
  (let [n (alength arr)
        total (numpy-sum-doubles arr)]                   ; in file order, as numpy's sum
    (Arrays/sort arr)
    {:category cat :name name :device device :count n
     :total-us total :min-us (aget arr 0) :max-us (aget arr (dec n))
     :mean-us (/ total (double n))
     :p50-us (percentile-doubles arr 50) :p90-us (percentile-doubles arr 90)
     :p99-us (percentile-doubles arr 99)
     :bulk (bulk-name? name)}))

(defn op-record
  "Python's `OpStats.from_durations`: the record of [category name device] from its per-call
  durations in microseconds, `arr` (at least one; sorted in place): a long array (times are
  exact integers), or a double array when a duration in the trace is not a whole number of
  microseconds or beyond 64 bits (times are floats then, as numpy's float64)."
  [[cat name device] arr]
  (if (instance? (Class/forName "[D") arr)
    (op-record-doubles [cat name device] arr)
    (let [^longs arr arr
          n (alength arr)
          total (areduce arr i acc 0 (unchecked-add acc (aget arr i)))] ; int64, as numpy's sum
      (Arrays/sort arr)
      {:category cat :name name :device device :count n
       :total-us total :min-us (aget arr 0) :max-us (aget arr (dec n))
       :mean-us (true-div total n)
       :p50-us (percentile arr 50) :p90-us (percentile arr 90) :p99-us (percentile arr 99)
       :bulk (bulk-name? name)})))

(defn memory-record
  "Python's `MemoryStats.from_samples`: the record of `device` from its samples, timestamps `ts0`
  and values `vs0` in file order (at least one)."
  [device ^longs ts0 ^longs vs0]
  (let [n (alength ts0)
        sorted? (loop [i 1] (cond (>= i n) true
                                  (> (aget ts0 (dec i)) (aget ts0 i)) false
                                  :else (recur (inc i))))
        [^longs ts ^longs vs]
        (if sorted?
          [ts0 vs0]
          ;; stable sort by ts, like numpy's argsort(kind="stable") (TimSort is stable)
          (let [^"[Ljava.lang.Integer;" order (make-array Integer n)
                ts (long-array n)
                vs (long-array n)]
            (dotimes [i n] (aset order i (Integer/valueOf i)))
            (Arrays/sort order (reify Comparator
                                 (compare [_ i j]
                                   (Long/compare (aget ts0 (.intValue ^Integer i))
                                                 (aget ts0 (.intValue ^Integer j))))))
            (dotimes [i n]
              (let [j (.intValue ^Integer (aget order i))]
                (aset ts i (aget ts0 j))
                (aset vs i (aget vs0 j))))
            [ts vs]))
        span (- (aget ts (dec n)) (aget ts 0))
        mean (numpy-mean vs)]
    {:device device :samples n
     :min-bytes (areduce vs i m Long/MAX_VALUE (min m (aget vs i)))
     :max-bytes (areduce vs i m Long/MIN_VALUE (max m (aget vs i)))
     :mean-bytes mean
     :time-weighted-mean-bytes (if (pos? span) (/ (dot-exact vs ts) (double span)) mean)
     :last-bytes (aget vs (dec n)) :first-ts-us (aget ts 0) :last-ts-us (aget ts (dec n))}))

(defn notes
  "Warnings worth showing the user, Python's `TraceStats.notes`: damage repaired per file,
  events left out (unmatched, negative durations, no timestamp, counter values that are not
  numbers, unknown phases: the wording of trace.json), bulk-merged names."
  [{:keys [reports unmatched-begin unmatched-end negative-durations no-timestamp
           bad-counter-values unknown-phases operators]}]
  (let [bulk (->> operators (filter :bulk) (map :name) distinct (sort compare-py) vec)
        merged (vec (remove one-operator-segment? bulk))
        ones (vec (filter one-operator-segment? bulk))
        counts [["unmatched_begin" unmatched-begin] ["unmatched_end" unmatched-end]
                ["negative_duration" negative-durations] ["no_timestamp" no-timestamp]
                ["non_numeric_counter" bad-counter-values]]]
    (cond-> (-> (vec (for [r reports
                           :let [path (str (:path r))
                                 base (subs path (inc (.lastIndexOf path "/")))]
                           p (:problems r)]
                       (str base ": " p)))
                (into (for [[kind n] counts :when (and n (pos? (long n)))] (note kind {:n n}))))
      (seq unknown-phases)
      (conj (note "unknown_phase" {:n (reduce + (vals unknown-phases))
                                   :phases (str/join ", " (map py-repr (sort compare-py (keys unknown-phases))))}))
      (seq merged) (conj (str (count merged) " bulk-merged name(s) (" (str/join ", " (take 3 merged))
                              (when (> (count merged) 3) ", ...") "): " bulk-note))
      (seq ones) (conj (one-operator-note ones)))))
