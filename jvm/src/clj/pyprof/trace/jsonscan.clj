(ns pyprof.trace.jsonscan
  "Finding where JSON values end without parsing them: the structure of a trace around its
  events. A port of `pyprof/trace/jsonscan.py`, on a region [start, stop) of a byte array.

  The reader cuts bodies at `}`, `{` separators, which is right for MXNet's events but not for
  every trace the format allows: `args` may hold lists of objects (a separator inside an event),
  and top-level keys may come before or after `traceEvents`. These scans find the extent of
  values exactly for valid JSON; every value found is still parsed (`pyprof.trace.json`), which
  decides. On invalid JSON they give what Python's regular expressions give (strings are
  followed as `\"(?:[^\"\\\\]|\\\\.)*\"`, a quote that never closes is skipped)."
  (:require [pyprof.trace.json :as json])
  (:import (java.nio.charset StandardCharsets)))

(set! *warn-on-reflection* true)

(def ^:const incomplete
  "`value-end`'s result when the value runs past the end of the text."
  -1)

(defn- ws
  "Python's `_WS` (`[ \\t\\r\\n]*`): the first index at or after i that is not one of those."
  ^long [^bytes b ^long i ^long stop]
  (loop [i i]
    (if (and (< i stop) (let [c (aget b i)] (or (== c 32) (== c 9) (== c 13) (== c 10))))
      (recur (inc i))
      i)))

(defn string-end
  "End (exclusive) of the JSON string whose quote is at b[i] (`\"(?:[^\"\\\\]|\\\\.)*\"`), or -1
  when it does not close before `stop`."
  ^long [^bytes b ^long i ^long stop]
  (loop [j (inc i)]
    (if (>= j stop)
      -1
      (let [c (aget b j)]
        (cond (== c 34) (inc j)
              (== c 92) (if (< (inc j) stop) (recur (+ j 2)) -1)
              :else (recur (inc j)))))))

(defn- scalar-end
  "End of Python's `_SCALAR` (`[^\\s,:\\[\\]{}\"]+`) at i, or i when it does not match."
  ^long [^bytes b ^long i ^long stop]
  (loop [j i]
    (if (< j stop)
      (let [c (aget b j)]
        (if (or (== c 32) (and (>= c 9) (<= c 13)) (== c 44) (== c 58) (== c 91) (== c 93)
                (== c 123) (== c 125) (== c 34))
          j
          (recur (inc j))))
      j)))

(defn value-end
  "End (exclusive) of the JSON value starting at b[pos], or `incomplete`. Strings and brackets
  are followed exactly; scalars run to the next delimiter (Python's `value_end`)."
  ^long [^bytes b ^long pos ^long stop]
  (let [c (aget b pos)]
    (cond
      (or (== c 123) (== c 91))
      (loop [i pos, depth 0]
        (if (>= i stop)
          incomplete
          (let [c (aget b i)]
            (cond (== c 34) (let [e (string-end b i stop)]
                              (if (neg? e) (recur (inc i) depth) (recur e depth)))
                  (or (== c 123) (== c 91)) (recur (inc i) (inc depth))
                  (or (== c 125) (== c 93)) (if (== depth 1) (inc i) (recur (inc i) (dec depth)))
                  :else (recur (inc i) depth)))))
      (== c 34) (let [e (string-end b pos stop)] (if (neg? e) incomplete e))
      :else (let [e (scalar-end b pos stop)]
              (cond (== e pos) (inc pos)                ; a stray delimiter: orjson refuses it
                    (== e stop) incomplete
                    :else e)))))

(defn split-values
  "Python's `split_values`: the comma-separated values of an array's contents in b[pos, stop).
  Returns [spans status at]: spans a long array [n a0 e0 a1 e1 ...] of the whole values, status
  how the scan stopped at `at`: :complete (end of text after a value or a comma), :array-end (a
  `]` that closes the array), :incomplete (a value runs past the end) or :error."
  [^bytes b ^long pos ^long stop]
  (let [spans (volatile! (long-array 65))
        add! (fn [^long n ^long a ^long e]
               (let [^longs s @spans
                     ^longs s (if (< (+ 2 (* 2 n)) (alength s)) s
                                  (vreset! spans (java.util.Arrays/copyOf s (* 2 (alength s)))))]
                 (aset s (+ 1 (* 2 n)) a)
                 (aset s (+ 2 (* 2 n)) e)))
        done (fn [^long n status ^long at] (aset ^longs @spans 0 n) [@spans status at])]
    (loop [pos (ws b pos stop), n 0]
      (if (>= pos stop)
        (done n :complete pos)
        (if (== (aget b pos) 93)
          (done n :array-end pos)
          (let [e (value-end b pos stop)]
            (if (== e incomplete)
              (done n :incomplete pos)
              (let [_ (add! n pos e)
                    n (inc n)
                    p (ws b e stop)]
                (cond (== p stop) (done n :complete p)
                      (== (aget b p) 93) (done n :array-end p)
                      (not (== (aget b p) 44)) (done n :error p)
                      :else (recur (ws b (inc p) stop) n))))))))))

(defn scan-object
  "Python's `scan_object`: an object's members in b[pos, stop) up to its `}` or its
  `traceEvents` array. `first`: pos is just after the `{` (else just after a value, where `,` or
  `}` comes next). Returns {:keys [every key, in order] :values {key value} (the keys in `keep`
  whose text is at most `keep-bytes` long) :status :end}: status :closed (end just after the
  `}`), :events (end just after the `[` of traceEvents), :incomplete or :error."
  [^bytes b ^long pos ^long stop {:keys [first keep keep-bytes] :or {keep #{} keep-bytes 1048576}}]
  (let [out (fn [keys values status end] {:keys keys :values values :status status :end end})
        pos (ws b pos stop)]
    (cond
      (and (not first) (>= pos stop)) (out [] {} :incomplete pos)
      (and (< pos stop) (== (aget b pos) 125)) (out [] {} :closed (inc pos))
      (and (not first) (not (== (aget b pos) 44))) (out [] {} :error pos)
      :else
      (loop [pos (if first pos (ws b (inc pos) stop)), keys [], values {}]
        (if (>= pos stop)
          (out keys values :incomplete pos)
          (let [ke (if (== (aget b pos) 34) (string-end b pos stop) -1)]
            (if (neg? ke)
              (out keys values (if (== (aget b pos) 34) :incomplete :error) pos)
              (let [key (json/load-value b pos ke)]
                (if (identical? key json/invalid)
                  (out keys values :error pos)
                  (let [p (ws b ke stop)]
                    (cond
                      (>= p stop) (out keys values :incomplete p)
                      (not (== (aget b p) 58)) (out keys values :error p)
                      :else
                      (let [p (ws b (inc p) stop)]
                        (if (>= p stop)
                          (out keys values :incomplete p)
                          (if (and (= key "traceEvents") (== (aget b p) 91))
                            (out (conj keys key) values :events (inc p))
                            (let [e (value-end b p stop)]
                              (if (== e incomplete)
                                (out keys values :incomplete p)
                                (let [v (if (and (contains? keep key) (<= (- e p) (long keep-bytes)))
                                          (json/load-value b p e)
                                          ::skipped)]
                                  (if (identical? v json/invalid)
                                    (out (conj keys key) values :error p)
                                    (let [values (if (= v ::skipped) values (assoc values key v))
                                          keys (conj keys key)
                                          q (ws b e stop)]
                                      (cond (>= q stop) (out keys values :incomplete q)
                                            (== (aget b q) 125) (out keys values :closed (inc q))
                                            (not (== (aget b q) 44)) (out keys values :error q)
                                            :else (recur (ws b (inc q) stop) keys values)))))))))))))))))))))

(defn utf8-string
  "b[start, stop) decoded as UTF-8 (invalid bytes replaced)."
  ^String [^bytes b ^long start ^long stop]
  (String. b start (- stop start) StandardCharsets/UTF_8))
