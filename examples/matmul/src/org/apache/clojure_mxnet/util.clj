(ns org.apache.clojure-mxnet.util
  "Compatibility: the parts of MXNet's retired Clojure `util` namespace that profiler code used.
  `convert-io-map` keeps the old conversion exactly (booleans as \"True\"/\"False\", a keyword
  value keeps its colon), so code that inspected its output sees the same strings; the profiler
  itself validates the original map instead (see `pyprof.config/validate`)."
  (:require [clojure.string :as str]))

(defn keyword->snake-case
  "`:profile-symbolic` -> \"profile_symbolic\" (the namespace is dropped); a string is returned
  untouched."
  [vals]
  (if (keyword? vals) (str/replace (name vals) "-" "_") vals))

(defn- ->option-str [v]
  (cond (true? v) "True"
        (false? v) "False"
        :else (str v)))

(defn convert-map
  "Keys through `keyword->snake-case`, values untouched."
  [param]
  (into {} (map (fn [[k v]] [(keyword->snake-case k) v])) param))

(defn convert-io-map
  "Keys through `keyword->snake-case`, every value a string as the old package made it."
  [param]
  (into {} (map (fn [[k v]] [(keyword->snake-case k) (->option-str v)])) param))
