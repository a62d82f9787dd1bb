(ns ^:no-doc pyprof.rules
  "The pyprof/spec files on the classpath, as Python's `pyprof.rules`; `error` renders an
  errors.json entry as a `pyprof.jvm.PyprofException`."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str])
  (:import (pyprof.jvm PyprofException)))

(set! *warn-on-reflection* true)

(def read-spec
  "The spec file `name`, parsed once (`opts` to `clojure.data.json/read`); :missing-spec when it
  is not on the classpath."
  (memoize
   (fn [name & opts]
     (let [url (or (io/resource name)
                   (throw (ex-info (str name " is not on the classpath. fix: add ../pyprof/spec to"
                                        " :resource-paths (or the classpath of the hosting JVM)")
                                   {:pyprof/error :missing-spec :resource name})))]
       (with-open [r (io/reader url)]
         (apply json/read r opts))))))

(def api "api.json." (read-spec "api.json"))

(def catalogue "errors.json." (read-spec "errors.json"))

(defn- codes
  "A name -> C code table of api.json, in code order."
  [table]
  (into (array-map) (sort-by val (api table))))

(def states "{\"stop\" 0, \"run\" 1}" (codes "states"))
(def processes "{\"worker\" 0, \"server\" 1}" (codes "processes"))
(def dumps-formats "{\"table\" 0, \"json\" 1}" (codes "dumps_formats"))
(def dumps-sort-keys "{\"total\" 0, \"avg\" 1, ...}" (codes "dumps_sort_keys"))
(def dumps-defaults
  "{\"reset\" false, \"format\" \"table\", \"sort_by\" \"total\", \"ascending\" false}"
  (api "dumps_defaults"))
(def marker-scopes "[\"global\" \"process\" ...]" (vec (api "marker_scopes")))
(def default-marker-scope "\"process\"" (api "default_marker_scope"))

(defn choices
  "The names of a code table in code order: the `choices` of an error."
  [table]
  (mapv key (sort-by val table)))

;; api.json names: a profiler object's name
(def ^:private names (api "names"))
(def name-max-bytes "UTF-8 bytes MXNet keeps." (long (names "max_bytes")))
(def name-forbidden-chars "Characters refused." (vec (names "forbidden_chars")))
(def name-forbidden-below "Code points refused below this." (long (names "forbidden_below")))
(def name-shown-chars "Characters a too-long name's error shows." (long (names "shown_chars")))

(defn lone-surrogate
  "[index \"U+DCFF\"] of the first lone surrogate in `s` (index in code points), or nil."
  [^String s]
  (let [[lo hi] (names "surrogates")
        n (.length s)]
    (loop [i 0, index 0]
      (when (< i n)
        (let [c (.codePointAt s (int i))]
          (if (<= lo c hi)
            [index (format "U+%04X" c)]
            (recur (+ i (Character/charCount c)) (inc index))))))))

(def output-paths "api.json output_paths." (api "output_paths"))

(def config-values "api.json config_values: booleans, C strings." (api "config_values"))
(def c-true "The C string of true." (config-values "c_true"))
(def c-false "The C string of false." (config-values "c_false"))

(def ^:private java-escapes
  {\" "\\\"", \\ "\\\\", \newline "\\n", \tab "\\t", \return "\\r", \backspace "\\b", \formfeed "\\f"})

(defn- java-string
  "`s` as a Java string literal."
  [^String s]
  (str "\"" (str/join (map (fn [c] (or (java-escapes c)
                                       (if (or (< (int c) 0x20) (<= 0x7f (int c) 0x9f) (Character/isSurrogate c))
                                         (format "\\u%04x" (int c))
                                         c)))
                            s))
       "\""))

(defn- java-literal
  "A value as Java source writes it (a keyword or symbol as the string of its name)."
  [v]
  (cond (nil? v) "null"
        (or (keyword? v) (symbol? v)) (java-string (name v))
        (string? v) (java-string v)
        (char? v) (let [q (java-string (str v))] (str "'" (subs q 1 (dec (count q))) "'"))
        (instance? clojure.lang.Ratio v) (str (double v))
        (instance? Double v) (let [d (double v)]
                               (cond (Double/isNaN d) "Double.NaN"
                                     (Double/isInfinite d) (if (pos? d) "Double.POSITIVE_INFINITY"
                                                               "Double.NEGATIVE_INFINITY")
                                     :else (str d)))
        (instance? Float v) (str v "f")
        (instance? BigDecimal v) (.toPlainString ^BigDecimal v)
        (integer? v) (str (biginteger v))
        (map? v) (str "Map.of(" (str/join ", " (mapcat (fn [[k x]] [(java-literal k) (java-literal x)]) v))
                      ")")
        (set? v) (str "Set.of(" (str/join ", " (map java-literal v)) ")")
        (or (sequential? v) (instance? java.util.List v))
        (str "List.of(" (str/join ", " (map java-literal v)) ")")
        (instance? java.util.Map v) (java-literal (into {} v))
        :else (str v)))

(defn- literal
  "A value as a literal of `language` (\"clojure\": `pr-str`, control characters escaped as
  Java's, which Clojure reads too)."
  [v language]
  (cond (#{"java" "jmx"} language) (java-literal v)
        (and (string? v) (or (some #(or (< (int %) 0x20) (<= 0x7f (int %) 0x9f)) v)
                             (lone-surrogate v)))
        (java-string v) ; pr-str left a NUL raw (and a lone surrogate, which no UTF-8 carries)
        :else (pr-str (if (or (keyword? v) (symbol? v)) (name v) v))))

(defn- text
  "A value as text in `language`: a keyword as its name in Java."
  [v language]
  (if (and (#{"java" "jmx"} language) (or (keyword? v) (symbol? v))) (name v) (str v)))

(defn render
  "Fills a catalogue template: `{f}` as text (a sequence as its items' literals, comma-joined;
  :api/x as `{api.x}`), `{f!r}` as a literal, `{api.x}` as the API name in `language`
  (\"clojure\", \"java\", \"jmx\": else Java's)."
  ([template fields] (render template fields "clojure"))
  ([template fields language]
   (str/replace template #"\{(api\.)?([a-z_]+)(!r)?\}"
                (fn [[_ api? field literal?]]
                  (if api?
                    (or (get-in catalogue ["api" field language]) (get-in catalogue ["api" field ({"jmx" "java"} language)])
                        (throw (IllegalArgumentException.
                                (str "no API name " field " for " language " in errors.json. fix: add it to its \"api\" table"))))
                    (let [k (keyword field)
                          v (if (contains? fields k)
                              (get fields k)
                              (throw (IllegalArgumentException.
                                      (str "template " (pr-str template) " needs field " k ". fix: pass it to rules/error"))))]
                      (cond (and (keyword? v) (= "api" (namespace v))) ; a call named by its api entry
                            (render (str "{api." (name v) "}") {} language)
                            literal? (literal v language)
                            (sequential? v) (str/join ", " (map #(literal % language) v))
                            :else (text v language))))))))

(defn- entry [code]
  (or (get-in catalogue ["errors" code])
      (throw (IllegalArgumentException.
              (str "no error " code " in errors.json. fix: add it to pyprof/spec/errors.json")))))

(defn message
  "\"<message> fix: <fix>\" of entry `code` with `fields` in `language`."
  [code fields language]
  (let [{:strs [message fix]} (entry code)]
    (str (render message fields language) " fix: " (render fix fields language))))

(defn error
  "The PyprofException (not thrown) for entry `code` with `fields`: ex-data :pyprof/error (its
  kind), :pyprof/code, :fix, :java-fix and the fields."
  ([code] (error code {} nil))
  ([code fields] (error code fields nil))
  ([code fields cause]
   (PyprofException. (message code fields "clojure")
                     (merge fields {:pyprof/error (keyword ((entry code) "kind")) :pyprof/code code
                                    :fix (render ((entry code) "fix") fields "clojure")
                                    :java-fix (render ((entry code) "fix") fields "java")})
                     cause)))

(defn accepted
  "What a config value type accepts, in words (errors.json accepted `form`)."
  [form fields]
  (render (get-in catalogue ["accepted" form]) fields "clojure"))

(defn path-problem
  "The fields :problem and :path_fix of errors.json path_problems `code`."
  [code fields]
  (let [entry (get-in catalogue ["path_problems" code])]
    {:problem (render (entry "problem") fields "clojure")
     :path_fix (render (entry "fix") fields "clojure")}))
