(ns org.apache.clojure-mxnet.profiler
  "Compatibility: the profiler namespace of MXNet's retired Clojure package, on pyprof. Code
  written for it runs unchanged; keys and values are checked against the spec first (a bad one
  throws ex-info :invalid-config naming the nearest key), and errors carry MXNet's message.
  A trace that ran but was never dumped is finished at JVM exit, as MXNet did for the example."
  (:require [pyprof.profiler :as p]))

(defn profiler-set-config
  "Set up the configure of profiler. `kwargs` is a map such as
  {:filename \"profile.json\" :profile-symbolic 1}: keyword keys in kebab-case (or C's string
  keys); values booleans, 1/0, numbers or strings."
  [kwargs]
  (p/profiler-set-config kwargs)
  nil)

(defn profiler-set-state
  "Set up the profiler state to record operator: \"run\" or \"stop\" (the default)."
  ([state] (p/profiler-set-state state))
  ([] (profiler-set-state "stop")))

(defn dump-profile
  "Dump profile and stop profiler. Use this to save profile in advance in case your program
  cannot exit normally. `finished` 1 (default) ends the trace: the file is valid JSON; 0 is an
  intermediate dump (the retired package's ints; pyprof.profiler/dump-profile takes booleans)."
  ([finished] (p/dump-profile (case finished 1 true 0 false finished)))
  ([] (dump-profile 1)))
