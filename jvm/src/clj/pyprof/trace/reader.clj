(ns ^:no-doc pyprof.trace.reader
  "The JVM's one trace reader: valid traces (an object with a \"traceEvents\" array, or an array
  of events) streamed with Jackson, and MXNet's raw layout (trace.json mxnet_layout). A damaged or
  foreign file is refused with trace.not_valid, whose fix names `pyprof repair`. Events are maps
  with string keys; 64-bit integers exact (Long or BigInt), larger ones doubles, as in Python."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [pyprof.output :as output]
            [pyprof.rules :as rules])
  (:import (com.fasterxml.jackson.core JsonFactory JsonParser JsonProcessingException JsonToken)
           (java.io File)
           (java.util.regex Matcher Pattern)))

(set! *warn-on-reflection* true)

(def ^:private ^JsonFactory factory (JsonFactory.))

(declare not-valid)

(defn- value
  "The JSON value whose first token `p` is on, read to its end."
  [^JsonParser p]
  (let [t (.currentToken p)]
    (cond
      (= t JsonToken/START_OBJECT)
      (loop [m (transient {})]
        (if (= (.nextToken p) JsonToken/END_OBJECT)
          (persistent! m)
          (let [k (.getCurrentName p)] (.nextToken p) (recur (assoc! m k (value p))))))
      (= t JsonToken/START_ARRAY)
      (loop [v (transient [])]
        (if (= (.nextToken p) JsonToken/END_ARRAY) (persistent! v) (recur (conj! v (value p)))))
      (= t JsonToken/VALUE_STRING) (.getText p)
      (= t JsonToken/VALUE_NUMBER_INT) (let [n (.getNumberValue p)]
                                         (cond (not (instance? java.math.BigInteger n)) (long n)
                                               (< (.bitLength ^java.math.BigInteger n) 65) (bigint n)
                                               :else (.doubleValue ^java.math.BigInteger n)))
      (= t JsonToken/VALUE_NUMBER_FLOAT) (.getDoubleValue p)
      (= t JsonToken/VALUE_TRUE) true
      (= t JsonToken/VALUE_FALSE) false
      (= t JsonToken/VALUE_NULL) nil
      :else (throw (not-valid "JSON" :token)))))

(def ^:private reasons
  "Why a file is not a valid trace, as trace.not_valid says it."
  {:token "a JSON value of no known kind" :no-ph "an event that is not a JSON object with a \"ph\""
   :not-array "\"traceEvents\" is not an array" :no-array "no \"traceEvents\" array"
   :empty "an empty file" :not-trace "neither a JSON object nor an array of events"
   :after "text after the trace" :layout "not MXNet's trace layout"})

(defn- not-valid
  "The trace.not_valid error for `path`; `why` a key of `reasons` or a parser's message."
  [path why]
  (rules/error "trace.not_valid" {:path (str path) :why (reasons why why)}))

(defn- each-event!
  "Calls `f` on every element of the array `p` is at the start of; each must be an object."
  [^JsonParser p path f]
  (loop []
    (when-not (= (.nextToken p) JsonToken/END_ARRAY)
      (let [ev (value p)]
        (when-not (and (map? ev) (contains? ev "ph"))
          (throw (not-valid path :no-ph)))
        (f ev))
      (recur))))

(declare parse-raw)

(defn- stream!
  "Calls `f` on each event of the valid trace `file`, one held at a time."
  [^File file path f]
  (try
    (with-open [^JsonParser p (.createParser factory file)]
      (let [t (.nextToken p)]
        (cond
          (= t JsonToken/START_ARRAY) (each-event! p path f)
          (= t JsonToken/START_OBJECT)
          (let [found (volatile! false)]
            (while (= (.nextToken p) JsonToken/FIELD_NAME)
              (let [k (.getCurrentName p)]
                (if (and (= k "traceEvents") (= (.nextToken p) JsonToken/START_ARRAY))
                  (do (vreset! found true) (each-event! p path f))
                  (do (when (= k "traceEvents") (throw (not-valid path :not-array)))
                      (.nextToken p) (.skipChildren p)))))
            (when-not @found (throw (not-valid path :no-array))))
          (nil? t) (throw (not-valid path :empty))
          :else (throw (not-valid path :not-trace))))
      (when (.nextToken p) (throw (not-valid path :after))))
    (catch JsonProcessingException e
      (throw (not-valid path (first (str/split-lines (.getOriginalMessage e))))))))

(defn read-trace!
  "Calls `f` on each event of the trace file at `path`, in order: a valid trace streamed, else a
  file in MXNet's layout (`parse-raw`); returns the number of events. trace.cannot_open,
  trace.not_valid, trace.no_events."
  [path f]
  (let [file (io/file (output/abspath (str path)))
        n (volatile! 0)]
    (when-not (and (.isFile file) (.canRead file))
      (throw (rules/error "trace.cannot_open"
                          {:shown (str "'" path "'")
                           :why (cond (.isDirectory file) "Is a directory" ; as Python's strerror
                                      (.exists file) "Permission denied"
                                      :else "No such file or directory")})))
    (try
      (stream! file path (fn [ev] (vswap! n inc) (f ev)))
      (catch clojure.lang.ExceptionInfo e
        (let [raw (try (parse-raw (slurp file :encoding "UTF-8") path)
                       (catch Exception _
                         (throw (if (output/holds-no-trace? file) ; no trace at all: as Python says
                                  (rules/error "trace.no_events" {:path (str path)})
                                  e))))]
          (when (or (empty? raw) (< (count raw) @n) (not-every? #(and (map? %) (contains? % "ph")) raw))
            (throw e))
          (run! f (drop @n raw))
          (vreset! n (count raw)))))
    (when (zero? @n) (throw (rules/error "trace.no_events" {:path (str path)})))
    @n))

(defn read-events
  "The events of the valid trace file at `path`, in a vector (see `read-trace!`)."
  [path]
  (let [out (volatile! (transient []))]
    (read-trace! path #(vswap! out conj! %))
    (persistent! @out)))

(def ^:private layout ((rules/read-spec "trace.json") "mxnet_layout"))
(def ^:private ^Pattern header (re-pattern (layout "header")))
(def ^:private ^Pattern footer (re-pattern (layout "footer")))
;; only lines whose value holds what JSON escapes (mxnet_layout "escaped");
;; UNIX_LINES: only a line feed ends MXNet's lines (Java's . and $ also stop at U+2028, U+0085, CR)
(def ^:private lines (mapv #(Pattern/compile (str/replace-first % "(.*)" (str "(.*?" (layout "escaped") ".*)"))
                                             (bit-or Pattern/MULTILINE Pattern/UNIX_LINES))
                           (layout "raw_string_lines")))

(defn- escape-lines
  "`text` with the raw value (group 2) of every raw_string_lines line JSON-escaped."
  ^String [^String text]
  (reduce (fn [^String t ^Pattern re]
            (let [m (.matcher re t) sb (StringBuffer.)]
              (while (.find m)
                (.appendReplacement m sb (Matcher/quoteReplacement
                                          (let [q (json/write-str (.group m 2) :escape-unicode false)]
                                            (str (.group m 1) (subs q 1 (dec (count q))) (.group m 3))))))
              (str (.appendTail m sb))))
          text lines))

(defn- parse-array [^String body]
  (with-open [^JsonParser p (.createParser factory (str "[" body "]"))]
    (.nextToken p)
    (let [v (value p)] (when (.nextToken p) (throw (not-valid "[events]" :after))) v)))

(defn parse-raw
  "The events in `text`, bytes of a trace in MXNet's layout (trace.json mxnet_layout); a last event
  cut short (a crash) dropped. trace.not_valid for text in no such layout (`where` names it)."
  ([text] (parse-raw text "the raw trace"))
  ([^String text where]
   (let [^String body (.replaceFirst (.matcher header text) "")
         body (escape-lines (str/replace (.replaceFirst (.matcher footer body) "") #"^[\s,]+" ""))
         body (subs body 0 (loop [i (.length body)]         ; trailing separators
                             (if (and (pos? i) (let [c (.charAt body (int (dec i)))]
                                                 (or (= c \,) (Character/isWhitespace c))))
                               (recur (dec i)) i)))
         ;; where the text may end: all of it, else after a '}' followed by one event cut short
         ;; (no line that is a lone '}', the end of a whole event)
         ends (->> (iterate #(.lastIndexOf body "}" (int (dec (long %)))) (.lastIndexOf body "}"))
                   (take-while #(>= (long %) 0)) (map #(inc (long %)))
                   (take-while #(not (re-find #"(?md)^\s*\}\s*$" (subs body %)))))]
     (if (str/blank? body)
       []
       (or (some #(try (parse-array (subs body 0 %)) (catch Exception _ nil))
                 (cons (.length body) ends))
           (when (and (str/starts-with? body "{") (not (str/includes? body "\n    }\n")))
             [])                                    ; one event, cut short
           (throw (not-valid where :layout)))))))
