(ns org.apache.clojure-mxnet.symbol
  "Compatibility: the symbol calls of MXNet's retired Clojure package that the profiler example
  uses."
  (:require [pyprof.example.symbol :as s]))

(defn variable
  "A variable (placeholder) symbol `var-name`."
  [var-name]
  (s/variable var-name))

(defn dot
  "Matrix product symbol `sym-name` of `inputs` [lhs rhs]."
  ([sym-name inputs] (s/dot sym-name inputs))
  ([sym-name inputs _kwargs] (s/dot sym-name inputs)))

(defn bind
  "An executor for `sym` on `ctx`. `bindings` maps argument names (strings or keywords) to
  NDArrays or, as the old package wrote them, one-element vectors of NDArrays
  ({\"A\" [a] \"B\" [b]}); a vector of NDArrays binds positionally."
  [sym ctx bindings]
  (let [one (fn [v] (if (sequential? v)
                      (if (= 1 (count v)) (first v)
                          (throw (ex-info (str "bind: expected one NDArray per argument, got " (count v)
                                               ". fix: bind each argument to a single NDArray")
                                          {:pyprof/error :invalid-option})))
                      v))
        args (if (map? bindings)
               (into {} (map (fn [[k v]] [(name k) (one v)])) bindings)
               (zipmap (s/list-arguments sym) bindings))]
    (s/bind sym ctx args)))

(defn list-arguments
  "The argument names of `sym`."
  [sym]
  (s/list-arguments sym))
