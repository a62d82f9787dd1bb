(ns pyprof.trace.naming
  "What MXNet's event categories and names mean to the statistics: a port of
  `pyprof/trace/naming.py` (C API category, async operator copies, bulk segments and the note
  about them, the prefix of memory counters). The bulk patterns and note are data: trace.json's
  \"bulk\" section, which Python's naming.py reads too."
  (:require [clojure.string :as str]
            [pyprof.trace.phases :as phases]))

(set! *warn-on-reflection* true)

(def async-copy-categories
  "Async (b/e) categories that duplicate a B/E pair; never counted."
  #{"operator" "Custom Operator"})

(def api-category
  "Category of MXNet's C API call events (included unless `:exclude-categories` names it)."
  "MXNET_C_API")

(def ^:private bulk (phases/spec "bulk"))

(def bulk-patterns
  "Python's `BULK_PATTERNS`: regular expressions, searched anywhere in a name, of every bulk
  segment name MXNet 1.9.1 writes (trace.json bulk.names)."
  (mapv #(% "pattern") (bulk "names")))

(def bulk-note
  "Python's `BULK_NOTE` (trace.json bulk.note): what bulk segment names mean, and how to get
  per-operator numbers instead."
  (bulk "note"))

(def memory-prefix
  "Prefix of memory counter names: \"Memory: <device>\" (values in bytes)."
  "Memory: ")

(def ^:private ^java.util.regex.Pattern bulk-re
  ;; Python's "|".join(f"(?:{p})"); (?d): only \n ends a line for $, as in Python's re
  (re-pattern (str "(?d)" (str/join "|" (map #(str "(?:" % ")") bulk-patterns)))))

(defn bulk-name?
  "True for names of MXNet bulk segments: \"ImperativeBulk\", \"[dot]\", \"[Convolution,relu]\"
  or \"Activation,Pooling\"."
  [^String name]
  (.find (.matcher bulk-re name)))
