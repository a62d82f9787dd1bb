(ns pyprof.config
  "Profiler configuration keys, checked against the one spec, `profiler_config.json` (shared with
  the Python package and read from the classpath), before anything reaches C.

  Errors are `ex-info` with `:pyprof/error :invalid-config` and, as they apply, `:key` (as given),
  `:c-key` (as C spells it), `:value`, `:nearest`, `:accepted` and `:valid` (every key name)."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [pyprof.util :as util]))

(set! *warn-on-reflection* true)

(def ^:const spec-resource "profiler_config.json")

(defn- read-spec []
  (let [url (or (io/resource spec-resource)
                (throw (ex-info (str spec-resource " is not on the classpath; add ../pyprof/spec to"
                                     " :resource-paths (or the classpath of the hosting JVM)")
                                {:pyprof/error :missing-spec :resource spec-resource})))]
    (with-open [r (io/reader url)]
      (:keys (json/read r :key-fn keyword)))))

(def ^:private spec* (delay (read-spec)))

(defn spec
  "The spec's keys, in file order: maps with :name, :type (\"bool\" \"string\" \"float\" \"enum\"),
  :default, :doc and, as they apply, :choices, :min_exclusive and :unit."
  []
  @spec*)

(defn key-names
  "Every valid key, as C spells it."
  []
  (mapv :name (spec)))

(defn- spec-by-name [] (into {} (map (juxt :name identity)) (spec)))

(defn edit-distance
  "Levenshtein distance between strings `a` and `b`."
  ^long [^String a ^String b]
  (let [n (count b)]
    (loop [i 0, prev (vec (range (inc n)))]
      (if (= i (count a))
        (peek prev)
        (recur (inc i)
               (reduce (fn [row j]
                         (conj row (min (inc (peek row))
                                        (inc (nth prev (inc j)))
                                        (+ (nth prev j) (if (= (.charAt a i) (.charAt b j)) 0 1)))))
                       [(inc i)]
                       (range n)))))))

(defn nearest-key
  "The valid key closest to `c-key` by edit distance (ties go to the earlier key in the spec)."
  [c-key]
  (apply min-key #(edit-distance c-key %) (rseq (key-names))))

(defn- describe-key [k c-key]
  (if (= k c-key) (pr-str c-key) (str (pr-str k) " (" c-key ")")))

(defn- unknown-key [k c-key v]
  (let [near (nearest-key c-key)
        valid (key-names)]
    (ex-info (str "unknown profiler config key " (describe-key k c-key)
                  ": did you mean " (pr-str near) "? valid keys are " (str/join ", " valid))
             {:pyprof/error :invalid-config :key k :c-key c-key :value v
              :nearest near :valid valid})))

(def ^:private bool-strings {"true" true "1" true "false" false "0" false})

(defn- accepted
  "What a key of this spec accepts, in words."
  [{:keys [type choices min_exclusive unit]}]
  (case type
    "bool" "true/false, 1/0, or the strings \"true\"/\"false\"/\"1\"/\"0\" (any case)"
    "string" "a non-empty string (a file path)"
    "float" (str "a number" (when min_exclusive (str " > " min_exclusive)) (when unit (str " (" unit ")")))
    "enum" (str "one of " (str/join ", " (map pr-str choices)))))

(defn- value->c
  "The C string for `v` under key spec `ks`, or nil when `v` is not acceptable."
  [{:keys [type choices min_exclusive]} v]
  (case type
    "bool" (cond (boolean? v) (util/value->c v)
                 (and (integer? v) (or (== v 0) (== v 1))) (util/value->c (== v 1))
                 (string? v) (some-> (get bool-strings (str/lower-case (str/trim v))) util/value->c))
    "string" (let [s (cond (string? v) v
                           (instance? java.io.File v) (str v)
                           (instance? java.nio.file.Path v) (str v))]
               (when-not (str/blank? s) s))
    "float" (when (and (number? v)
                       (Double/isFinite (double v))
                       (or (nil? min_exclusive) (> (double v) (double min_exclusive))))
              (str (double v)))
    "enum" (let [s (cond (string? v) v (keyword? v) (name v))]
             (when (some #{s} choices) s))
    (throw (ex-info (str "profiler_config.json: unknown type " (pr-str type)) {:pyprof/error :invalid-spec}))))

(defn- check-file!
  "For a key marked `\"file\": true` in the spec: the parent directory of the absolute path must
  exist, since MXNet silently writes no trace otherwise (as pyprof.config checks in Python)."
  [{:keys [file name]} k ^String c-val]
  (when file
    (let [parent (some-> (java.nio.file.Paths/get c-val (make-array String 0))
                         .toAbsolutePath .normalize .getParent str)]
      (when-not (and parent (.isDirectory (io/file parent)))
        (throw (ex-info (str "invalid value " (pr-str c-val) " for profiler config key '" name
                             "': directory '" parent "' does not exist. fix: create it first"
                             " (MXNet would silently write no trace)")
                        {:pyprof/error :invalid-config :key k :c-key name :value c-val
                         :directory parent
                         :fix "create it first (MXNet would silently write no trace)"}))))))

(defn validate
  "Checks `options` (keyword keys such as :profile-symbolic, or C's string keys) against the spec
  and returns a map of C key -> C value string, ready for MXSetProcessProfilerConfig. Throws
  ex-info `{:pyprof/error :invalid-config ...}` naming the key and what it accepts, also for a
  file key (`\"file\": true` in the spec: filename) whose directory does not exist."
  [options]
  (when-not (map? options)
    (throw (ex-info (str "profiler config must be a map, got " (pr-str options))
                    {:pyprof/error :invalid-config :value options})))
  (let [by-name (spec-by-name)]
    (reduce
     (fn [out [k v]]
       (let [c-key (util/key->c k)
             ks (or (by-name c-key) (throw (unknown-key k c-key v)))
             c-val (or (value->c ks v)
                       (throw (ex-info (str "invalid value " (pr-str v) " for profiler config key "
                                            (describe-key k c-key) ": expected " (accepted ks))
                                       {:pyprof/error :invalid-config :key k :c-key c-key :value v
                                        :accepted (accepted ks)})))]
         (check-file! ks k c-val)
         (when (contains? out c-key)
           (throw (ex-info (str "profiler config key " c-key " given twice")
                           {:pyprof/error :invalid-config :key k :c-key c-key :value v})))
         (assoc out c-key c-val)))
     {}
     options)))

(defn effective
  "The whole configuration in force after a config call with the C strings `c-opts` (from
  `validate`): MXNet resets every omitted key to its C default."
  [c-opts]
  (merge (into {} (map (fn [ks] [(:name ks) (value->c ks (:default ks))])) (spec)) c-opts))
