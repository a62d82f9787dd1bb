(ns pyprof.util
  "Turning Clojure options into the strings MXNet's C API takes, by the rules of the Python
  reference (`pyprof.config`): one float format, Python's `float()` for numbers and numeric
  strings, Python's whitespace for trimming."
  (:require [clojure.string :as str]
            [pyprof.rules :as rules])
  (:import (java.math BigDecimal MathContext RoundingMode)))

(set! *warn-on-reflection* true)

(defn key->c
  "A config key as C spells it: a keyword or symbol loses its namespace and turns kebab-case into
  snake_case (`:profile-symbolic` -> \"profile_symbolic\"); a string is left untouched. Anything
  else throws config.bad_key_type."
  ^String [k]
  (cond
    (string? k) k
    (or (keyword? k) (symbol? k)) (str/replace (name k) \- \_)
    :else (throw (rules/error "config.bad_key_type" {:key k}))))

;; ------------------------------------------------------------------ numbers as Python has them

(defn- ratio->double
  "A ratio as the nearest double (ties to even), as Python's int / int: Clojure's own conversion
  rounds to 16 digits first, which can land one ulp off."
  ^double [^clojure.lang.Ratio r]
  (let [n (BigDecimal. (.numerator r))
        d (BigDecimal. (.denominator r))
        approx (.doubleValue (.divide n d MathContext/DECIMAL128))]
    (if (Double/isInfinite approx)
      approx
      ;; approx is within one ulp: the nearest of it and its neighbours to n/d is the answer.
      (let [off (fn [^double c] (.abs (.subtract n (.multiply (BigDecimal. c) d))))]
        (->> [(Math/nextDown approx) approx (Math/nextUp approx)]
             (filter #(Double/isFinite %))
             (sort-by (juxt off #(bit-and (Double/doubleToRawLongBits %) 1)))
             first)))))

(defn py-space?
  "Python's `str.isspace` for one code point: what `str.strip()` and `float()` trim (wider than
  Java's `Character/isWhitespace`: also no-break spaces and U+0085)."
  [^long cp]
  (or (Character/isWhitespace (int cp)) (Character/isSpaceChar (int cp)) (== cp 0x85)))

(defn py-strip
  "`s` without leading and trailing whitespace, as Python's `s.strip()`."
  ^String [^String s]
  (let [cps (.codePoints s)
        arr (.toArray cps)
        n (alength arr)
        start (loop [i 0] (if (and (< i n) (py-space? (aget arr i))) (recur (inc i)) i))
        end (loop [j n] (if (and (> j start) (py-space? (aget arr (dec j)))) (recur (dec j)) j))]
    (String. arr (int start) (int (- end start)))))

(def ^:private float-literal
  ;; Python's float() syntax for finite numbers (PEP 515 underscores between digits) and inf/nan.
  #"(?i)[+-]?(?:(?:\d(?:_?\d)*)?\.\d(?:_?\d)*(?:e[+-]?\d(?:_?\d)*)?|\d(?:_?\d)*\.?(?:e[+-]?\d(?:_?\d)*)?|inf|infinity|nan)")

(defn- ascii-digits
  "`s` with every Unicode decimal digit replaced by its ASCII digit, as Python's float() reads it."
  ^String [^String s]
  (let [sb (StringBuilder.)]
    (doseq [cp (.toArray (.codePoints s))]
      (let [cp (int cp)]
        (if (and (> cp 127) (Character/isDigit cp))
          (.append sb (char (+ 48 (Character/digit cp 10))))
          (.appendCodePoint sb cp))))
    (.toString sb)))

(defn parse-py-float
  "The double Python's `float(s)` gives for the string `s`, or nil where it raises ValueError:
  surrounding whitespace, underscores between digits, any Unicode decimal digits, inf and nan."
  [^String s]
  (let [t (ascii-digits (py-strip s))]
    (when (re-matches float-literal t)
      (let [u (str/lower-case (str/replace t "_" ""))
            sign (if (str/starts-with? u "-") -1.0 1.0)]
        (case (str/replace u #"^[+-]" "")
          ("inf" "infinity") (* sign Double/POSITIVE_INFINITY)
          "nan" Double/NaN
          (Double/parseDouble u))))))

(defn py-float
  "The double Python's `float(v)` gives, or nil where it raises: numbers (ratios and big numbers
  correctly rounded; too large ones are infinite, where Python raises OverflowError), numeric
  strings as `parse-py-float`. Booleans, nil and anything else: nil."
  [v]
  (cond (boolean? v) nil
        (ratio? v) (ratio->double v)
        (number? v) (.doubleValue ^Number v)
        (string? v) (parse-py-float v)
        :else nil))

(defn c-float
  "A double as the C string pyprof sends (pyprof.config.c_float): the shortest decimal that
  reads back as `d`, in plain notation, trailing zeros dropped (0.5 -> \"0.5\", 1.0 -> \"1\",
  1e-05 -> \"0.00001\", 1e8 -> \"100000000\", -0.0 -> \"-0\"). Not Double/toString, which before
  JDK 19 is not always the shortest (2.82879384806159E17 -> \"2.82879384806159008E17\")."
  ^String [^double d]
  (cond
    (Double/isNaN d) "NaN" ; as Python's Decimal: c_float(nan) is "NaN", c_float(inf) "Infinity"
    (Double/isInfinite d) (if (pos? d) "Infinity" "-Infinity")
    (zero? d) (if (neg? (Math/copySign 1.0 d)) "-0" "0")
    :else
    (let [exact (BigDecimal. d)
          mag (.abs exact)
          ;; Python's repr: the fewest significant digits that read back as d; of two such
          ;; decimals the nearer, of two as near the one ending in an even digit.
          shortest (some (fn [p]
                           (let [mc #(MathContext. (int p) %)
                                 cands (->> [(.round mag (mc RoundingMode/FLOOR))
                                             (.round mag (mc RoundingMode/CEILING))]
                                            (filter #(== (Math/abs d) (.doubleValue ^BigDecimal %))))]
                             (first (sort-by (juxt #(.abs (.subtract ^BigDecimal % mag))
                                                   #(.testBit (.unscaledValue ^BigDecimal %) 0))
                                             cands))))
                         (range 1 18))]
      (str (when (neg? d) "-") (.toPlainString (.stripTrailingZeros ^BigDecimal shortest))))))

;; ------------------------------------------------------------------ values

(defn value->c
  "A config value as the string C parses, unchecked against any key: booleans as api.json's C
  strings (\"true\"/\"false\"), integers as they are, other numbers in the one float format
  (`c-float`), strings as they are, keywords and symbols by name (`:server` -> \"server\", not
  \":server\"). Anything else throws config.bad_value_type."
  ^String [v]
  (cond
    (string? v) v
    (boolean? v) (if v rules/c-true rules/c-false)
    (integer? v) (str v)
    (number? v) (c-float (py-float v))
    (or (keyword? v) (symbol? v)) (name v)
    :else (throw (rules/error "config.bad_value_type" {:value v}))))

(defn convert-config
  "A map of config options -> a map of C key strings to C value strings (see `key->c`,
  `value->c`). Mirrors the retired `org.apache.clojure-mxnet.util/convert-io-map`, fixed for
  booleans and keyword values."
  [m]
  (into {} (map (fn [[k v]] [(key->c k) (value->c v)])) m))

(defn fix-error
  "An ex-info whose message is `head` followed by \" fix: \" and the Clojure-phrased `fix`; the
  data carries `:fix` and, when given, `:java-fix`, the same advice phrased for Java callers.
  `pyprof.jvm.PyprofException/wrap` (the Java facade) puts :java-fix in place of :fix in the
  message, so each language reads calls it can make. For errors outside the catalogue
  (errors.json); catalogue errors come from `pyprof.rules/error`."
  ([head fix data] (fix-error head fix nil data))
  ([head fix java-fix data] (fix-error head fix java-fix data nil))
  ([head fix java-fix data cause]
   (ex-info (str head " fix: " fix)
            (cond-> (assoc data :fix fix)
              java-fix (assoc :java-fix java-fix))
            cause)))
