(ns pyprof.trace.naming
  "What MXNet's event categories and names mean to the statistics: a port of
  `pyprof/trace/naming.py` (C API category, async operator copies, bulk segments and the note
  about them, the prefix of memory counters). All of it is data: trace.json's \"categories\"
  and \"bulk\" sections."
  (:require [clojure.string :as str]
            [pyprof.trace.phases :as phases]))

(set! *warn-on-reflection* true)

(def ^:private categories (phases/spec "categories"))

(def async-copy-categories
  "Async (b/e) categories that duplicate a B/E pair; never counted (trace.json
  categories.async_copies)."
  (set (categories "async_copies")))

(def api-category
  "Category of MXNet's C API call events (included unless `:exclude-categories` names it;
  trace.json categories.api)."
  (categories "api"))

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
  "Prefix of memory counter names: \"Memory: <device>\" (values in bytes; trace.json
  categories.memory_prefix)."
  (categories "memory_prefix"))

(def ^:private ^java.util.regex.Pattern bulk-re
  ;; Python's "|".join(f"(?:{p})"); (?d): only \n ends a line for $, as in Python's re
  (re-pattern (str "(?d)" (str/join "|" (map #(str "(?:" % ")") bulk-patterns)))))

(defn bulk-name?
  "True for names of MXNet bulk segments: \"ImperativeBulk\", \"[dot]\", \"[Convolution,relu]\"
  or \"Activation,Pooling\"."
  [^String name]
  (.find (.matcher bulk-re name)))

(def ^:private one-operator (bulk "one_operator"))

(def ^:private ^java.util.regex.Pattern one-operator-re
  (re-pattern (str "(?d)" (one-operator "pattern"))))

(defn one-operator-segment?
  "Python's `is_one_operator_segment`: a bulk segment of one operator, e.g. \"[dot]\", whose time
  is that operator's time (trace.json bulk.one_operator)."
  [^String name]
  (.find (.matcher one-operator-re name)))

(defn one-operator-note
  "Python's `one_operator_note`: the note naming one-operator segments `names` (non-empty), each
  in single quotes, the first 3 then \", ...\"; no advice, since nothing is merged."
  [names]
  (let [listed (str (str/join ", " (map #(str "'" % "'") (take 3 names)))
                    (when (> (count names) 3) ", ..."))]
    (str/replace (one-operator (if (= 1 (count names)) "note" "note_many")) "{names}" listed)))
