(ns pyprof.util
  "Turning Clojure options into the strings MXNet's C API takes."
  (:require [clojure.string :as str]))

(set! *warn-on-reflection* true)

(defn key->c
  "A config key as C spells it: a keyword or symbol loses its namespace and turns kebab-case into
  snake_case (`:profile-symbolic` -> \"profile_symbolic\"); a string is left untouched."
  ^String [k]
  (cond
    (string? k) k
    (or (keyword? k) (symbol? k)) (str/replace (name k) \- \_)
    :else (throw (ex-info (str "profiler config key must be a keyword or string, got " (pr-str k))
                          {:pyprof/error :invalid-config :key k}))))

(defn value->c
  "A config value as the string C parses: booleans \"true\"/\"false\", numbers via `str` (ratios
  as doubles), strings as they are, keywords and symbols by name (`:server` -> \"server\", not
  \":server\")."
  ^String [v]
  (cond
    (string? v) v
    (boolean? v) (if v "true" "false")
    (ratio? v) (str (double v))
    (number? v) (str v)
    (or (keyword? v) (symbol? v)) (name v)
    :else (throw (ex-info (str "profiler config value must be a boolean, number, string or keyword, got "
                               (pr-str v))
                          {:pyprof/error :invalid-config :value v}))))

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
  message, so each language reads calls it can make."
  ([head fix data] (fix-error head fix nil data))
  ([head fix java-fix data] (fix-error head fix java-fix data nil))
  ([head fix java-fix data cause]
   (ex-info (str head " fix: " fix)
            (cond-> (assoc data :fix fix)
              java-fix (assoc :java-fix java-fix))
            cause)))
