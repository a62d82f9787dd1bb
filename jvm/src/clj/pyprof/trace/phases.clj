(ns pyprof.trace.phases
  "The Trace Event Format's phases as the statistics use them, read from `trace.json`
  (pyprof/spec, on the classpath, through `pyprof.rules/read-spec`): a port of
  `pyprof/trace/phases.py`. Nothing here restates a rule; docs/trace-format.md explains them.

  - `phases`: ph -> role (\"slice_begin\", \"counter\", \"flow\", ...); a ph not in it is an
    unknown phase, counted and named in the notes.
  - `pairs`: begin phase -> [end phase, kind]; kind \"thread\" pairs within [pid tid], \"async\"
    within [pid cat id].
  - `end-phases`: end phase -> its begin phase.
  - `top-level`: what the top-level keys of a trace object mean; `kept-keys` those the writers
    keep (their values are recorded in the read report).
  - `note`: the wording of a note of the statistics.
  - `hashable`, `async-id`: JSON values as parts of pairing keys (Python's `hashable`,
    `async_id`)."
  (:require [clojure.string :as str]
            [pyprof.rules :as rules]
            [pyprof.trace.pycompat :refer [compare-py float-digits]]))

(set! *warn-on-reflection* true)

(def spec
  "trace.json, read from the classpath (string keys)."
  (rules/read-spec "trace.json"))

(def phases
  "ph -> role, as in trace.json (\"B\" \"slice_begin\", \"C\" \"counter\", ...)."
  (spec "phases"))

(def pairs
  "Begin phase -> [end phase, kind]: kind \"thread\" (pairs within pid and tid) or \"async\"
  (within pid, cat and id)."
  (into {} (for [[_ p] (spec "pairs")]
             [(p "begin") [(p "end") (if (some #{"tid"} (p "scope")) "thread" "async")]])))

(def end-phases
  "End phase -> its begin phase (\"E\" \"B\", \")\" \"(\", \"e\" \"b\", \"F\" \"S\")."
  (into {} (for [[b [e _]] pairs] [e b])))

(def top-level
  "trace.json's \"top_level_keys\": \"events\", \"display_time_unit\", \"kept_by_writers\",
  \"known\"."
  (spec "top_level_keys"))

(def kept-keys
  "Top-level keys whose values the writers keep (and the read report records)."
  (set (top-level "kept_by_writers")))

(def not-other-keys
  "Top-level keys the read report does not list among the other keys (the events array and the
  display unit)."
  (set (conj (top-level "events") (top-level "display_time_unit"))))

(def ^:private notes (spec "notes"))

(defn note
  "The note `kind` of trace.json (\"unmatched_begin\", \"unknown_phase\", ...) with the fields
  of `fields` (keyword -> value, e.g. {:n 3}) filled in, as Python's `str.format`."
  ^String [kind fields]
  (let [^String text (or (notes kind) (throw (ex-info (str "no note " kind " in trace.json. fix: add it to pyprof/spec/trace.json") {})))]
    (-> text
        (str/replace #"\{\{|\}\}|\{([A-Za-z_][A-Za-z_0-9]*)\}"
                     (fn [[m k]]
                       (cond (= m "{{") "{"
                             (= m "}}") "}"
                             :else (str (get fields (keyword k)))))))))

;; ------------------------------------------------------------------ JSON text (orjson.dumps)

(defn- json-string ^String [^String s]
  (let [sb (StringBuilder. "\"")]
    (dotimes [i (.length s)]
      (let [c (.charAt s i)]
        (case c
          \" (.append sb "\\\"")
          \\ (.append sb "\\\\")
          \newline (.append sb "\\n")
          \return (.append sb "\\r")
          \tab (.append sb "\\t")
          \backspace (.append sb "\\b")
          \formfeed (.append sb "\\f")
          (if (< (int c) 32)
            (.append sb (format "\\u%04x" (int c)))
            (.append sb c)))))
    (.toString (.append sb "\""))))

(defn- json-float
  "A double as orjson writes it: shortest digits, an exponent from 1e16 up and below 1e-5
  (plain decimals in between, \".0\" for whole numbers)."
  ^String [^double d]
  (if (zero? d)
    (if (neg? (Math/copySign 1.0 d)) "-0.0" "0.0")
    (let [[neg ^String digits exp10] (float-digits d)
          exp10 (long exp10)
          nd (count digits)
          sign (if neg "-" "")]
      (cond
        (or (>= exp10 16) (< exp10 -5))
        (str sign (subs digits 0 1) (when (> nd 1) (str "." (subs digits 1)))
             "e" (if (neg? exp10) "-" "+") (Math/abs exp10))
        (neg? exp10) (str sign "0." (apply str (repeat (dec (- exp10)) "0")) digits)
        (>= exp10 (dec nd)) (str sign digits (apply str (repeat (- exp10 (dec nd)) "0")) ".0")
        :else (str sign (subs digits 0 (inc exp10)) "." (subs digits (inc exp10)))))))

(defn json-text
  "`orjson.dumps(value, option=OPT_SORT_KEYS)` of a JSON value: compact, keys sorted by code
  point (in the map's own order with `sort?` false: plain `orjson.dumps`)."
  (^String [x] (json-text x true))
  (^String [x sort?]
   (cond (nil? x) "null"
         (true? x) "true"
         (false? x) "false"
         (string? x) (json-string x)
         (instance? Double x) (json-float x)
         (number? x) (str x)
         (map? x) (str "{" (str/join "," (for [[k v] (if sort? (sort-by key compare-py x) x)]
                                           (str (json-string (str k)) ":" (json-text v sort?))))
                       "}")
         (sequential? x) (str "[" (str/join "," (map #(json-text % sort?) x)) "]")
         :else (str x))))

(defn hashable
  "Python's `hashable`: `value` itself, or for a JSON list or object its JSON text (keys
  sorted), so that it can be part of a pairing key without meeting a tuple."
  [value]
  (if (or (map? value) (vector? value) (instance? java.util.List value))
    (json-text value)
    value))

(defn async-id
  "Python's `async_id`: the id that pairs an async event: \"id\", else \"id2\"
  ({\"local\": v} or {\"global\": v}, as [\"local\" v] / [\"global\" v], kept apart from a plain
  id of the same value), else nil; as [scope id] when the event names a \"scope\"."
  [ev]
  (let [ident (if (contains? ev "id")
                (hashable (get ev "id"))
                (let [i (get ev "id2")]
                  (if (and (map? i) (or (contains? i "local") (contains? i "global")))
                    (let [scope (if (contains? i "local") "local" "global")]
                      [scope (hashable (get i scope))])
                    (hashable i))))
        scope (get ev "scope")]
    (if (nil? scope) ident [(hashable scope) ident])))
