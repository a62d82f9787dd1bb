(ns pyprof.util
  "Turning Clojure options into the strings MXNet's C API takes, by the grammar both languages
  implement (pyprof/spec/grammar.json): numbers and booleans spelt in strings, the one float
  format."
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

;; ------------------------------------------------------------------ numbers (grammar.json)

(def grammar
  "grammar.json (pyprof/spec): how numbers and booleans are spelt in strings, paths, window-path
  templates; string keys as in the file."
  (rules/read-spec "grammar.json"))

(def ^:private number-regex (re-pattern (get-in grammar ["number" "regex"])))

(defn trim
  "`s` without grammar.json's ASCII whitespace at either end (no other character is trimmed)."
  ^String [^String s]
  (let [ws (grammar "whitespace")
        ws? #(str/index-of ws (.charAt s (int %)))
        start (loop [i 0] (if (and (< i (count s)) (ws? i)) (recur (inc i)) i))]
    (loop [j (count s)] (if (and (> j start) (ws? (dec j))) (recur (dec j)) (subs s start j)))))

(defn- ratio->double
  "The double nearest to the ratio `r` (ties to even): Clojure's own conversion rounds to 16
  digits first, which can land one ulp off."
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

(defn number
  "`v` as a finite double by grammar.json `native_numbers` and `number`, or nil: a number (Long,
  Double, BigInt, BigDecimal, Ratio, ...) as the nearest double, a string of the decimal regex
  (after `trim`) as `Double/parseDouble` reads it. Booleans, infinite results, anything else:
  nil."
  [v]
  (let [d (cond (ratio? v) (ratio->double v)
                (number? v) (.doubleValue ^Number v)
                (and (string? v) (re-matches number-regex (trim v))) (Double/parseDouble (trim v)))]
    (when (some? d)
      (let [x (double d)] (when (Double/isFinite x) x)))))

(defn boolean-value
  "`v` as a boolean by grammar.json `boolean` (api.json config_values), or nil: a boolean, an
  integer of bool_numbers, a string of bool_true / bool_false after `trim`, ASCII letters in any
  case."
  [v]
  (let [{:strs [bool_numbers bool_true bool_false c_true]} rules/config-values]
    (cond (boolean? v) v
          (integer? v) (some-> (bool_numbers (str v)) (= c_true))
          (and (string? v) (every? #(< (int %) 128) (trim v)))
          (let [word (.toLowerCase (trim v) java.util.Locale/ROOT)]
            (cond (some #{word} bool_true) true
                  (some #{word} bool_false) false)))))

(defn c-float
  "A finite double as the C string pyprof sends (grammar.json float_text): the fewest significant
  digits (1 to 17) whose decimal reads back as `d` (rounding the exact value down and up at each
  precision, the nearer of the two that read back; an even last digit breaks a tie), in plain
  notation, trailing zeros dropped (0.5 -> \"0.5\", 1.0 -> \"1\", 1e-05 -> \"0.00001\", 1e8 ->
  \"100000000\", -0.0 -> \"-0\"). Not Double/toString, which before JDK 19 is not always the
  shortest (2.82879384806159E17 -> \"2.82879384806159008E17\")."
  ^String [^double d]
  (if (zero? d)
    (if (neg? (Math/copySign 1.0 d)) "-0" "0")
    (let [mag (.abs (BigDecimal. d))
          reads-back? #(== (Math/abs d) (.doubleValue ^BigDecimal %))
          nearest (fn [cands] (first (sort-by (juxt #(.abs (.subtract ^BigDecimal % mag))
                                                    #(.testBit (.unscaledValue ^BigDecimal %) 0))
                                              cands)))
          shortest (some (fn [p]
                           (nearest (filter reads-back?
                                            (for [mode [RoundingMode/FLOOR RoundingMode/CEILING]]
                                              (.round mag (MathContext. (int p) mode))))))
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
    (number? v) (let [d (double (if (ratio? v) (ratio->double v) (.doubleValue ^Number v)))]
                  (if (Double/isFinite d) (c-float d) (str d)))
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
