(ns ^:no-doc pyprof.config
  "Profiler configuration checked against `profiler_config.json` and converted to C strings by
  grammar.json, as Python's `pyprof.config`. An error's `:given` is the key as written."
  (:require [clojure.string :as str]
            [pyprof.output :as output]
            [pyprof.rules :as rules]
            [pyprof.util :as util]))

(set! *warn-on-reflection* true)

(defn spec
  "The spec's keys in file order (:name :type :default :doc, and :choices :min_exclusive
  :max_inclusive :unit :file as they apply)."
  []
  (:keys (rules/read-spec "profiler_config.json" :key-fn keyword)))

(defn key-names
  "Every valid key, as C spells it."
  []
  (mapv :name (spec)))

(defn edit-distance
  "Levenshtein distance between `a` and `b`, in code points."
  ^long [^String a ^String b]
  (let [b (vec (.toArray (.codePoints b)))]
    (peek (reduce (fn [prev ca]
                    (reduce (fn [row j]
                              (conj row (min (inc (peek row)) (inc (prev (inc j)))
                                             (+ (prev j) (if (= ca (b j)) 0 1)))))
                            [(inc (first prev))] (range (count b))))
                  (vec (range (inc (count b)))) (.toArray (.codePoints a))))))

(defn nearest
  "The item of `valid` closest to `k` by edit distance of their texts (ties: the earlier)."
  [k valid]
  ;; min-key returns the last of equal minima
  (apply min-key #(edit-distance (str k) (str %)) (reverse valid)))

(defn unknown-variables
  "A note (api.json environment unknown_note) for each PYPROF_* variable of `env` (name ->
  value) that pyprof does not read."
  [env]
  (let [{:strs [prefix variables unknown_note]} (rules/api "environment")]
    (for [n (sort (keys env)) :when (and (str/starts-with? n prefix) (not (variables n)))]
      (rules/render unknown_note {:name n :nearest (nearest n (sort (keys variables)))}))))

(defn- nearest-of
  "The error fields naming the item of `valid` closest to `c`: :nearest, :valid, :given (`k`)
  and :nearest_as_written."
  [k c valid]
  (let [nearest (nearest c valid)]
    {:nearest nearest :valid (str/join ", " valid) :given k
     :nearest_as_written (if (keyword? k) (keyword (str/replace nearest "_" "-")) (pr-str nearest))}))

(defn nearest-key
  "The valid key closest to `c-key` (ties: the earlier)."
  [c-key]
  (:nearest (nearest-of c-key c-key (key-names))))

(defn unknown-option-error
  "session.unknown_option for key `k` (C spelling `c`), naming the nearest of `valid`."
  [k c valid]
  (rules/error "session.unknown_option" (assoc (nearest-of k c valid) :option c)))

(defn check-session-key!
  "`k` as C spells it; session.reserved_option for api.json reserved_session_keys."
  ^String [k]
  (let [c (util/key->c k)]
    (when-let [why ((rules/api "reserved_session_keys") c)]
      (throw (rules/error "session.reserved_option" {:option c :why why})))
    c))

(defn accepted
  "What a key accepts, in words."
  [{:keys [type choices min_exclusive max_inclusive unit]}]
  (let [unit (or unit "units")]
    (if (and (= type "float") (some? min_exclusive))
      (rules/accepted (if max_inclusive "float_range" "float_min")
                      {:min (util/c-float (double min_exclusive)) :unit unit
                       :max (util/c-float (double (or max_inclusive 0)))})
      (rules/accepted type {:unit unit :choices (vec choices)}))))

(defn flag!
  "A session's boolean option `option` (C name) by grammar.json `boolean`; else
  session.not_boolean."
  [option v]
  (let [b (util/boolean-value v)]
    (if (nil? b) (throw (rules/error "session.not_boolean" {:option option :value v})) b)))

(defn- value->c
  "The C string for `v` under key spec `ks`, or nil when not acceptable."
  [{:keys [type choices min_exclusive max_inclusive name]} v]
  (let [v (if (or (keyword? v) (symbol? v)) (clojure.core/name v) v)]
    (case type
      "bool" (case (util/boolean-value v) true rules/c-true false rules/c-false nil)
      "string" (let [s (cond (string? v) v
                             (instance? java.io.File v) (str v)
                             (instance? java.nio.file.Path v) (str v))]
                 (when (seq s)
                   (when-let [problem (output/text-problem s)] ; C takes UTF-8 text without NUL
                     (throw (rules/error "config.bad_path" (merge {:value s :key name} problem))))
                   s))
      "float" (when-let [x (util/number v)]
                (when (and (or (nil? min_exclusive) (> (double x) (double min_exclusive)))
                           (or (nil? max_inclusive) (<= (double x) (double max_inclusive))))
                  (util/c-float x)))
      "enum" (when (and (string? v) (some #{v} choices)) v))))

(defn splitext
  "[stem suffix] of a file name, as Python's os.path.splitext."
  [^String name]
  (let [i (str/last-index-of name ".")]
    (if (and i (re-find #"[^.]" (subs name 0 i))) [(subs name 0 i) (subs name i)] [name ""])))

(defn validate
  "`options` (keyword or C string keys) checked, as C key -> C string (a worker's filename made
  absolute). Throws config.not_a_map, config.bad_key_type, config.unknown_key, config.bad_value,
  config.duplicate_key, config.missing_directory, config.bad_path."
  [options]
  (when-not (map? options)
    (throw (rules/error "config.not_a_map" {:value options})))
  (let [by-name (into {} (map (juxt :name identity)) (spec))
        check (fn [out [k v]]
                (let [c-key (util/key->c k)
                      ks (or (by-name c-key)
                             (throw (rules/error "config.unknown_key"
                                                 (assoc (nearest-of k c-key (key-names)) :key c-key))))
                      c-val (or (value->c ks v)
                                (throw (rules/error "config.bad_value"
                                                    {:value v :key c-key :accepted (accepted ks)
                                                     :given k})))]
                  (when (:file ks) (output/check-config-path! c-key k c-val))
                  (when (contains? out c-key)
                    (throw (rules/error "config.duplicate_key" {:key c-key :value v :given k})))
                  (assoc out c-key c-val)))
        out (reduce check {} options)]
    ;; MXNet opens it at each dump, maybe in another working directory (servers prefix a rank)
    (cond-> out (and (out "filename") (not= "server" (out "profile_process")))
      (update "filename" output/abspath))))

(defn effective
  "The whole configuration after a config call with `c-opts` (omitted keys: their C default)."
  [c-opts]
  (merge (into {} (map (fn [ks] [(:name ks) (value->c ks (:default ks))])) (spec)) c-opts))
