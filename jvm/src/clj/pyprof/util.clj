(ns ^:no-doc pyprof.util
  "Options as the strings MXNet's C API takes, by pyprof/spec/grammar.json."
  (:require [clojure.string :as str]
            [pyprof.rules :as rules])
  (:import (java.math BigDecimal MathContext RoundingMode)))

(set! *warn-on-reflection* true)

(defn key->c
  "A config key as C spells it (a keyword or symbol's name in snake_case, a string as is); else
  config.bad_key_type."
  ^String [k]
  (cond
    (string? k) k
    (or (keyword? k) (symbol? k)) (str/replace (name k) \- \_)
    :else (throw (rules/error "config.bad_key_type" {:key k}))))

(def grammar "grammar.json." (rules/read-spec "grammar.json"))

(def ^:private number-regex (re-pattern (get-in grammar ["number" "regex"])))

(defn trim
  "`s` without grammar.json's ASCII whitespace at either end."
  ^String [^String s]
  (let [ws (grammar "whitespace")
        ws? #(str/index-of ws (.charAt s (int %)))
        start (loop [i 0] (if (and (< i (count s)) (ws? i)) (recur (inc i)) i))]
    (loop [j (count s)] (if (and (> j start) (ws? (dec j))) (recur (dec j)) (subs s start j)))))

(defn- ratio->double
  "The ratio `r` as a double through a 34-digit quotient (Clojure's rounds to 16 digits first)."
  ^double [^clojure.lang.Ratio r]
  (.doubleValue (.divide (BigDecimal. (.numerator r)) (BigDecimal. (.denominator r))
                         MathContext/DECIMAL128)))

(defn number
  "`v` as a finite double by grammar.json `native_numbers` and `number`, or nil."
  [v]
  (let [d (cond (ratio? v) (ratio->double v)
                (number? v) (.doubleValue ^Number v)
                (and (string? v) (re-matches number-regex (trim v))) (Double/parseDouble (trim v)))]
    (when (some? d)
      (let [x (double d)] (when (Double/isFinite x) x)))))

(defn boolean-value
  "`v` as a boolean by grammar.json `boolean` (api.json config_values), or nil."
  [v]
  (let [{:strs [bool_numbers bool_true bool_false c_true]} rules/config-values]
    (cond (boolean? v) v
          (integer? v) (some-> (bool_numbers (str v)) (= c_true))
          (and (string? v) (every? #(< (int %) 128) (trim v)))
          (let [word (.toLowerCase (trim v) java.util.Locale/ROOT)]
            (cond (some #{word} bool_true) true
                  (some #{word} bool_false) false)))))

(defn c-float
  "A finite double as the C string sent (grammar.json float_text): the fewest digits that read
  back as `d`, plain (1e-05 -> \"0.00001\"); Double/toString before JDK 19 is not the shortest."
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
