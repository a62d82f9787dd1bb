(ns pyprof.config
  "Profiler configuration keys, checked against the one spec, `profiler_config.json` (shared with
  the Python package and read from the classpath), before anything reaches C. Values convert by
  the grammar of `grammar.json`, as `pyprof.config` (Python) does: the same C strings, the same
  accept/reject decisions.

  Errors come from the catalogue (`pyprof.rules/error`), with Python's fields: config.unknown_key
  (`:key` as C spells it, `:nearest`, `:valid`), config.bad_value (`:value` as given, `:key`,
  `:accepted`), config.missing_directory (`:value`, `:key`, `:directory`), and the JVM's own
  config.not_a_map, config.bad_key_type and config.duplicate_key. `:given` holds the key as the
  caller wrote it (`:profile-symbolc`)."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [pyprof.output :as output]
            [pyprof.rules :as rules]
            [pyprof.util :as util])
  (:import (java.nio.file Paths)))

(set! *warn-on-reflection* true)

(def ^:const spec-resource "profiler_config.json")

(def ^:private spec* (delay (:keys (rules/read-spec spec-resource :key-fn keyword))))

(defn spec
  "The spec's keys, in file order: maps with :name, :type (\"bool\" \"string\" \"float\" \"enum\"),
  :default, :doc and, as they apply, :choices, :min_exclusive, :unit and :file."
  []
  @spec*)

(defn key-names
  "Every valid key, as C spells it."
  []
  (mapv :name (spec)))

(defn- spec-by-name [] (into {} (map (juxt :name identity)) (spec)))

(defn edit-distance
  "Levenshtein distance between strings `a` and `b`, counted in code points (as Python counts
  the characters of a str)."
  ^long [^String a ^String b]
  (let [a (.toArray (.codePoints a))
        b (.toArray (.codePoints b))
        n (alength b)]
    (loop [i 0, prev (vec (range (inc n)))]
      (if (= i (alength a))
        (peek prev)
        (recur (inc i)
               (reduce (fn [row j]
                         (conj row (min (inc (peek row))
                                        (inc (nth prev (inc j)))
                                        (+ (nth prev j) (if (= (aget a i) (aget b j)) 0 1)))))
                       [(inc i)]
                       (range n)))))))

(defn nearest-key
  "The valid key closest to `c-key` by edit distance (ties go to the earlier key in the spec), as
  pyprof.config.nearest_key."
  [c-key]
  ;; min-key returns the last of equal minima: the keys reversed make it the earliest.
  (apply min-key #(edit-distance c-key %) (rseq (key-names))))

(defn unknown-option-error
  "session.unknown_option for the key `k` (C spelling `c`), none of `valid` (C spellings): names
  the nearest (ties: the earlier), as pyprof.config.unknown_option_error."
  [k c valid]
  (let [nearest (apply min-key #(edit-distance c %) (reverse valid))]
    (rules/error "session.unknown_option"
                 {:option c :nearest nearest :valid (str/join ", " valid) :given k
                  :nearest_as_written (if (keyword? k) (keyword (str/replace nearest "_" "-"))
                                          (pr-str nearest))})))

(defn accepted
  "What a key of this spec accepts, in words (errors.json \"accepted\"), as pyprof.config.accepted."
  [{:keys [type choices min_exclusive unit]}]
  (let [unit (or unit "units")]
    (if (and (= type "float") (some? min_exclusive))
      (rules/accepted "float_min" {:min (util/c-float (double min_exclusive)) :unit unit})
      (rules/accepted type {:unit unit :choices (vec choices)}))))

(defn- bool->c [v]
  (let [b (util/boolean-value v)]
    (cond (true? b) rules/c-true
          (false? b) rules/c-false)))

(defn- value->c
  "The C string for `v` under key spec `ks`, or nil when `v` is not acceptable: the decisions of
  pyprof.config.ConfigKey._convert. A keyword or symbol counts as the string of its name."
  [{:keys [type choices min_exclusive name]} v]
  (let [v (if (or (keyword? v) (symbol? v)) (clojure.core/name v) v)]
    (case type
      "bool" (bool->c v)
      "string" (let [s (cond (string? v) v
                             (instance? java.io.File v) (str v)
                             (instance? java.nio.file.Path v) (str v))]
                 (when (seq s)
                   (when-let [problem (output/text-problem s)] ; C takes UTF-8 text without NUL
                     (throw (rules/error "config.bad_path" (merge {:value s :key name} problem))))
                   s))
      "float" (when-let [x (util/number v)]
                (when (or (nil? min_exclusive) (> (double x) (double min_exclusive)))
                  (util/c-float x)))
      "enum" (when (and (string? v) (some #{v} choices)) v)
      (throw (ex-info (str "profiler_config.json: unknown type " (pr-str type) " for " name
                           ". fix: use a type the spec defines")
                      {:pyprof/error :invalid-spec})))))

;; ------------------------------------------------------------------ paths (grammar.json paths)

(defn abspath
  "`path` made absolute against the working directory (user.dir) and normalised lexically, by the
  rule of grammar.json `paths`: `Path.toAbsolutePath().normalize()`. Check the text first
  (`pyprof.output/text-problem`): Paths/get refuses a NUL."
  ^String [^String path]
  (str (.normalize (.toAbsolutePath (Paths/get path (make-array String 0))))))

(defn parent-directory
  "The directory of `path` by grammar.json `paths`: its `abspath` without the last segment (the
  root for a file directly under it). The directory a file key (filename) is checked in."
  ^String [^String path]
  (let [abs (Paths/get (abspath path) (make-array String 0))]
    (str (or (.getParent abs) abs))))

(defn same-file?
  "True when the paths `a` and `b` name the same file by grammar.json `paths`: their `abspath`
  forms are equal (\"a.json\", \"./a.json\", \"<user.dir>/a.json\")."
  [^String a ^String b]
  (= (abspath a) (abspath b)))

(defn- check-file!
  "For a key marked `\"file\": true` in the spec: MXNet must be able to write the path, since it
  silently writes no trace otherwise (as pyprof.process.output.check_config_path in Python):
  config.missing_directory, else config.bad_path (`pyprof.output/file-problem`)."
  [{:keys [file name]} k ^String c-val]
  (when file
    (let [parent (parent-directory c-val)]
      (when-not (or (.isDirectory (io/file parent)) (output/file-in-the-way parent))
        (throw (rules/error "config.missing_directory"
                            {:value c-val :key name :directory parent :given k})))
      (when-let [problem (output/file-problem c-val parent)]
        (throw (rules/error "config.bad_path" (merge {:value c-val :key name :given k} problem)))))))

(defn validate
  "Checks `options` (keyword keys such as :profile-symbolic, or C's string keys) against the spec
  and returns a map of C key -> C value string, ready for MXSetProcessProfilerConfig, as
  pyprof.config.validate. Throws the catalogue's config errors (kind :invalid-config) naming the
  key and what it accepts, also for a file key (`\"file\": true` in the spec: filename) whose
  directory does not exist."
  [options]
  (when-not (map? options)
    (throw (rules/error "config.not_a_map" {:value options})))
  (let [by-name (spec-by-name)]
    (reduce
     (fn [out [k v]]
       (let [c-key (util/key->c k)
             ks (or (by-name c-key)
                    (let [nearest (nearest-key c-key)]
                      (throw (rules/error "config.unknown_key"
                                          {:key c-key :nearest nearest
                                           ;; the fix spells it as the caller wrote the key
                                           :nearest_as_written (if (keyword? k)
                                                                 (keyword (str/replace nearest "_" "-"))
                                                                 (pr-str nearest))
                                           :valid (str/join ", " (key-names)) :given k}))))
             c-val (or (value->c ks v)
                       (throw (rules/error "config.bad_value"
                                           {:value v :key c-key :accepted (accepted ks) :given k})))]
         (check-file! ks k c-val)
         (when (contains? out c-key)
           (throw (rules/error "config.duplicate_key" {:key c-key :value v :given k})))
         (assoc out c-key c-val)))
     {}
     options)))

(defn effective
  "The whole configuration in force after a config call with the C strings `c-opts` (from
  `validate`): MXNet resets every omitted key to its C default."
  [c-opts]
  (merge (into {} (map (fn [ks] [(:name ks) (value->c ks (:default ks))])) (spec)) c-opts))
