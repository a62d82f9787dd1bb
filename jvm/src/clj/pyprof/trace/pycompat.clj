(ns pyprof.trace.pycompat
  "Python's and numpy's arithmetic, reproduced step for step so that the JVM's statistics equal
  the Python reference's to the last bit: the numerics `pyprof/trace/records.py` and
  `pyprof/trace/accumulate.py` get from numpy 1.23 (`np.percentile`'s linear method, `mean`'s
  pairwise summation, the time-weighted `dot`) and from Python itself (`int / int` correctly
  rounded, `str()` of JSON values, the ordering of sort keys, truthiness)."
  (:require [clojure.string :as str])
  (:import (java.math BigInteger)))

(set! *warn-on-reflection* true)

(defmacro ^:private with-linear-index
  "Binds `lo`, `hi` (indices) and `gamma` (the weight of `hi`) of numpy 1.23's linear method
  (`_quantile`) for the `p`th percentile of `n` sorted values: virtual index (n-1)*p/100."
  [[lo hi gamma] n p & body]
  `(let [n# (long ~n)
         virtual# (* (double (dec n#)) (/ (double ~p) 100.0))
         above# (>= virtual# (double (dec n#)))
         prev# (if above# -1 (long (Math/floor virtual#)))
         ~lo (if above# (dec n#) prev#)
         ~hi (if above# (dec n#) (inc prev#))
         ~gamma (- virtual# (double prev#))]
     ~@body))

(defn- lerp
  "numpy's `_lerp`: from `a` to `b` (difference `diff`) by `gamma`, from the nearer end."
  ^double [^double a ^double b ^double diff ^double gamma]
  (if (>= gamma 0.5)
    (- b (* diff (- 1.0 gamma)))
    (+ a (* diff gamma))))

(defn percentile
  "The `p`th percentile (0..100) of the sorted long array `sorted`, with numpy's default
  (linear) method, computed in the same floating-point steps as numpy 1.23 (`_quantile`,
  `_lerp`): virtual index (n-1)*p/100, int64 difference, interpolation from the nearer end."
  ^double [^longs sorted p]
  (with-linear-index [lo hi gamma] (alength sorted) p
    (let [a (aget sorted lo)
          b (aget sorted hi)]
      (lerp (double a) (double b) (double (unchecked-subtract b a)) gamma))))

(defn true-div
  "Python's `num / d` for a positive count `d`: float division for a float `num`; for an integer
  the correctly rounded quotient (as Python's int / int, exact even beyond 2^53)."
  ^double [num ^long d]
  (if (instance? Double num)
    (/ (double num) (double d))
    (let [a (biginteger num)
          b (BigInteger/valueOf d)]
      (if (<= (.bitLength a) 53)
        (/ (.doubleValue a) (double d))
        ;; quotient with >= 55 bits and a sticky bit: one correct rounding in doubleValue
        (let [neg (neg? (.signum a))
              a (.abs a)
              shift (max 0 (+ 56 (- (.bitLength b) (.bitLength a))))
              qr (.divideAndRemainder (.shiftLeft a shift) b)
              q (cond-> ^BigInteger (aget qr 0) (pos? (.signum ^BigInteger (aget qr 1))) (.setBit 0))
              r (Math/scalb (.doubleValue q) (int (- shift)))]
          (if neg (- r) r))))))

(defn- pairwise-sum
  "numpy's pairwise summation (`pairwise_sum` in loops_utils.h) of v[off, off+n) as doubles."
  ^double [^longs v ^long off ^long n]
  (cond
    (< n 8) (loop [i 0, res 0.0]
              (if (< i n) (recur (inc i) (+ res (double (aget v (+ off i))))) res))
    (<= n 128) (let [r (double-array 8)
                     whole (- n (rem n 8))]
                 (dotimes [j 8] (aset r j (double (aget v (+ off j)))))
                 (loop [i 8]
                   (when (< i whole)
                     (dotimes [j 8] (aset r j (+ (aget r j) (double (aget v (+ off i j))))))
                     (recur (+ i 8))))
                 (loop [i whole
                        res (+ (+ (+ (aget r 0) (aget r 1)) (+ (aget r 2) (aget r 3)))
                               (+ (+ (aget r 4) (aget r 5)) (+ (aget r 6) (aget r 7))))]
                   (if (< i n) (recur (inc i) (+ res (double (aget v (+ off i))))) res)))
    :else (let [n2 (quot n 2)
                n2 (- n2 (rem n2 8))]
            (+ (pairwise-sum v off n2) (pairwise-sum v (+ off n2) (- n n2))))))

(defn numpy-mean
  "`float(v.mean())` of an int64 array: the values cast to float64 in buffers of 8192, each
  buffer summed pairwise into the running total, divided by n."
  ^double [^longs v]
  (let [n (alength v)]
    (/ (loop [off 0, acc 0.0]
         (if (< off n)
           (recur (+ off 8192) (+ acc (pairwise-sum v off (min 8192 (- n off)))))
           acc))
       (double n))))

(defn dot-exact
  "sum v[i] * (t[i+1] - t[i]), i < n-1, exactly, rounded once to a double. numpy computes it with
  BLAS ddot, whose summation order depends on the CPU and thread count: equal whenever the sum
  is exact in doubles (every product and partial sum an integer below 2^53), else within ulps."
  ^double [^longs v ^longs t]
  (let [n (alength v)]
    (loop [i 0, acc 0, ^BigInteger big nil]
      (if (>= i (dec n))
        (if big (.doubleValue (.add big (BigInteger/valueOf acc))) (double acc))
        (let [x (aget v i)
              dt (unchecked-subtract (aget t (inc i)) (aget t i))
              hi (Math/multiplyHigh x dt)
              lo (unchecked-multiply x dt)]
          (if (== hi (bit-shift-right lo 63))
            (let [s (unchecked-add acc lo)]
              (if (neg? (bit-and (bit-xor acc s) (bit-xor lo s))) ; overflow of acc + lo
                (recur (inc i) 0 (.add (or big BigInteger/ZERO)
                                       (.add (BigInteger/valueOf acc) (BigInteger/valueOf lo))))
                (recur (inc i) s big)))
            (recur (inc i) acc (.add (or big BigInteger/ZERO)
                                     (.multiply (BigInteger/valueOf x) (BigInteger/valueOf dt))))))))))

(defn float-digits
  "The shortest decimal digits of a finite, non-zero double: [negative? digits exp10], with
  |d| = 0.d1d2... * 10^(exp10 + 1), i.e. exp10 the exponent of the first digit (as Python's
  repr finds them; Java's Double.toString gives the same digits for all but rare doubles)."
  [^double d]
  (let [bd (.stripTrailingZeros (java.math.BigDecimal. (Double/toString (Math/abs d))))
        digits (.toString (.unscaledValue bd))]
    [(neg? d) digits (- (dec (count digits)) (.scale bd))]))

(defn- py-float-str
  "Python's repr() of a float: fixed notation for exponents -4..15, else d.ddde+XX."
  ^String [^double d]
  (cond (Double/isNaN d) "nan"
        (Double/isInfinite d) (if (pos? d) "inf" "-inf")
        (zero? d) (if (neg? (Math/copySign 1.0 d)) "-0.0" "0.0")
        :else
        (let [[neg ^String digits exp10] (float-digits d)
              exp10 (long exp10)
              nd (count digits)
              sign (if neg "-" "")]
          (cond
            (or (< exp10 -4) (>= exp10 16))
            (str sign (subs digits 0 1) (when (> nd 1) (str "." (subs digits 1)))
                 "e" (if (neg? exp10) "-" "+") (format "%02d" (Math/abs exp10)))
            (neg? exp10) (str sign "0." (apply str (repeat (dec (- exp10)) "0")) digits)
            (>= exp10 (dec nd)) (str sign digits (apply str (repeat (- exp10 (dec nd)) "0")) ".0")
            :else (str sign (subs digits 0 (inc exp10)) "." (subs digits (inc exp10)))))))

(defn py-str
  "Python's str() of a JSON value, as Python names devices and operators."
  ^String [x]
  (cond (string? x) x
        (nil? x) "None"
        (true? x) "True"
        (false? x) "False"
        (instance? Double x) (py-float-str x)
        (map? x) (str "{" (str/join ", " (map (fn [[k v]] (str (pr-str k) ": " (py-str v))) x)) "}")
        (sequential? x) (str "[" (str/join ", " (map #(if (string? %) (pr-str %) (py-str %)) x)) "]")
        :else (str x)))

(defn compare-py
  "Python's ordering of the sort keys used here: strings by code point (not UTF-16 unit), None
  (nil) first, numbers by value."
  ^long [a b]
  (cond (and (string? a) (string? b))
        (let [^String a a ^String b b
              na (.length a) nb (.length b)]
          (loop [i 0 j 0]
            (cond (and (>= i na) (>= j nb)) 0
                  (>= i na) -1
                  (>= j nb) 1
                  :else (let [ca (.codePointAt a i) cb (.codePointAt b j)]
                          (if (== ca cb)
                            (recur (+ i (Character/charCount ca)) (+ j (Character/charCount cb)))
                            (compare ca cb))))))
        (nil? a) (if (nil? b) 0 -1)
        (nil? b) 1
        :else (compare a b)))

(defn compare-keys
  "Python's ordering of tuples of sort keys (see `compare-py`)."
  ^long [ka kb]
  (loop [[a & as] ka, [b & bs] kb]
    (let [c (compare-py a b)]
      (if (and (zero? c) (or as bs)) (recur as bs) c))))

(defn py-truthy
  "Python's truth value of a JSON value (`bool(x)`)."
  [x]
  (not (or (nil? x) (false? x) (and (number? x) (zero? x)) (and (string? x) (empty? x))
           (and (coll? x) (empty? x)))))

;; ------------------------------------------------------------------ float64 arrays

(defn- pairwise-sum-d
  "numpy's pairwise summation (`pairwise_sum` in loops_utils.h) of v[off, off+n)."
  ^double [^doubles v ^long off ^long n]
  (cond
    (< n 8) (loop [i 0, res 0.0]
              (if (< i n) (recur (inc i) (+ res (aget v (+ off i)))) res))
    (<= n 128) (let [r (double-array 8)
                     whole (- n (rem n 8))]
                 (dotimes [j 8] (aset r j (aget v (+ off j))))
                 (loop [i 8]
                   (when (< i whole)
                     (dotimes [j 8] (aset r j (+ (aget r j) (aget v (+ off i j)))))
                     (recur (+ i 8))))
                 (loop [i whole
                        res (+ (+ (+ (aget r 0) (aget r 1)) (+ (aget r 2) (aget r 3)))
                               (+ (+ (aget r 4) (aget r 5)) (+ (aget r 6) (aget r 7))))]
                   (if (< i n) (recur (inc i) (+ res (aget v (+ off i)))) res)))
    :else (let [n2 (quot n 2)
                n2 (- n2 (rem n2 8))]
            (+ (pairwise-sum-d v off n2) (pairwise-sum-d v (+ off n2) (- n n2))))))

(defn numpy-sum-doubles
  "`float(v.sum())` of a float64 array: pairwise sums of blocks of 8192, added in order (what
  numpy 1.23 does, checked against it)."
  ^double [^doubles v]
  (let [n (alength v)]
    (loop [off 0, acc 0.0]
      (if (< off n)
        (recur (+ off 8192) (+ acc (pairwise-sum-d v off (min 8192 (- n off)))))
        acc))))

(defn percentile-doubles
  "`percentile` for a sorted float64 array (numpy's linear method; the difference of the two
  order statistics is a float64)."
  ^double [^doubles sorted p]
  (with-linear-index [lo hi gamma] (alength sorted) p
    (let [a (aget sorted lo)
          b (aget sorted hi)]
      (lerp a b (- b a) gamma))))

;; ------------------------------------------------------------------ Python's == and <

(defn num-compare
  "Python's ordering of two JSON numbers (integers of any size, floats), exact between an
  integer and a float (Python does not round the integer); NaN compares as equal."
  ^long [a b]
  (let [fa (instance? Double a) fb (instance? Double b)]
    (cond
      (and fa fb) (let [x (double a) y (double b)] (cond (< x y) -1 (> x y) 1 :else 0))
      (not (or fa fb)) (compare a b)
      :else (let [d (double (if fa a b))
                  c (cond (Double/isNaN d) 0
                          (Double/isInfinite d) (if (pos? d) 1 -1)
                          :else (.compareTo (java.math.BigDecimal. d)
                                            (java.math.BigDecimal. (biginteger (if fa b a)))))]
              (long (if fa c (- c)))))))

(defn py-key
  "A JSON value (or a vector of them, a tuple) in a form whose Clojure equality and hash are
  Python's: 1, 1.0 and true are one dict key in Python, so they become the Long 1 here; strings,
  nil and other floats stay as they are."
  [x]
  (cond (or (string? x) (instance? Long x) (nil? x)) x
        (instance? Boolean x) (if x 1 0)
        (instance? Double x) (let [d (double x)]
                               (if (and (== d (Math/rint d)) (not (Double/isInfinite d)))
                                 (let [b (bigint d)] (if (<= Long/MIN_VALUE b Long/MAX_VALUE) (long b) b))
                                 x))
        (instance? clojure.lang.BigInt x) (if (<= Long/MIN_VALUE x Long/MAX_VALUE) (long x) x)
        (integer? x) (let [b (bigint x)] (if (<= Long/MIN_VALUE b Long/MAX_VALUE) (long b) b))
        (vector? x) (if (every? #(or (string? %) (instance? Long %) (nil? %)) x) x (mapv py-key x))
        :else x))

(defn py-repr
  "Python's repr() of a string: single quotes unless it holds ' and no \", back slashes, quotes
  and control characters escaped."
  ^String [^String s]
  (let [q (if (and (str/includes? s "'") (not (str/includes? s "\""))) \" \')
        sb (StringBuilder.)]
    (.append sb q)
    (doseq [c s]
      (cond (= c \\) (.append sb "\\\\")
            (= c q) (.append sb (str "\\" q))
            (= c \newline) (.append sb "\\n")
            (= c \return) (.append sb "\\r")
            (= c \tab) (.append sb "\\t")
            (or (< (int c) 32) (<= 127 (int c) 160)) (.append sb (format "\\x%02x" (int c)))
            :else (.append sb c)))
    (.append sb q)
    (.toString sb)))
