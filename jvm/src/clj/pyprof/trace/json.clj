(ns pyprof.trace.json
  "Trace events from JSON text with Jackson's streaming parser (jackson-core), in place of the
  `orjson.loads` calls of `pyprof/trace/bodyparser.py`: `array-status` is the check of its fast
  path (one body, parsed as `[` + body + `]`, is all events), `each-event!` that fast path,
  `try-load` its `_try_load` (one piece, one event), `valid-value?` / `load-value` any one JSON
  value (the spans of `pyprof.trace.jsonscan`). Events are maps with string keys, as Python's
  dicts (see `read-value`)."
  (:import (com.fasterxml.jackson.core JsonFactory JsonFactory$Feature JsonParser
                                       JsonParser$NumberType JsonProcessingException JsonToken)
           (java.util Arrays)))

(set! *warn-on-reflection* true)

(def ^:private ^JsonFactory factory
  (doto (JsonFactory.)
    ;; Field names are canonicalized but not String.intern()ed: counter names are arbitrary.
    (.disable JsonFactory$Feature/INTERN_FIELD_NAMES)))

(declare read-value)

(defn- read-object
  "The JSON object whose START_OBJECT was just read, as a map with string keys: an array map in
  the file's key order when it has at most 8 distinct keys, the last of duplicate keys winning
  (as Python's dict); built directly, without assoc."
  [^JsonParser p]
  (loop [^objects kvs (object-array 16), n 0]
    (if (identical? JsonToken/END_OBJECT (.nextToken p))
      (let [dup? (loop [i 0]
                   (cond (>= i n) false
                         (loop [j (+ i 2)]
                           (cond (>= j n) false
                                 (let [a (aget kvs i) b (aget kvs j)]
                                   (or (identical? a b) (.equals ^Object a b))) true
                                 :else (recur (+ j 2))))
                         true
                         :else (recur (+ i 2))))]
        (if (or dup? (> n 16))
          (loop [m (transient {}), i 0]
            (if (< i n) (recur (assoc! m (aget kvs i) (aget kvs (inc i))) (+ i 2)) (persistent! m)))
          (clojure.lang.PersistentArrayMap. (Arrays/copyOf kvs (int n)))))
      (let [^objects kvs (if (< (+ n 2) (alength kvs)) kvs (Arrays/copyOf kvs (* 2 (alength kvs))))]
        (aset kvs n (.getCurrentName p))
        (aset kvs (inc n) (read-value p (.nextToken p)))
        (recur kvs (+ n 2))))))

(defn- read-value
  "The JSON value starting at token `t`, as Clojure data: maps with string keys (see
  `read-object`), vectors, strings, Long (BigInt up to 2^64 - 1, Double beyond, as orjson),
  Double, booleans, nil."
  [^JsonParser p ^JsonToken t]
  (condp identical? t
    JsonToken/START_OBJECT (read-object p)
    JsonToken/VALUE_STRING (.getText p)
    JsonToken/VALUE_NUMBER_INT (if (identical? JsonParser$NumberType/BIG_INTEGER (.getNumberType p))
                                 (let [v (.getBigIntegerValue p)]
                                   ;; orjson: integers beyond [-2^63, 2^64) are floats
                                   (if (and (pos? (.signum v)) (<= (.bitLength v) 64))
                                     (bigint v)
                                     (Double/valueOf (.doubleValue v))))
                                 (Long/valueOf (.getLongValue p)))
    JsonToken/START_ARRAY
    (loop [v (transient [])]
      (let [t (.nextToken p)]
        (if (identical? JsonToken/END_ARRAY t)
          (persistent! v)
          (recur (conj! v (read-value p t))))))
    JsonToken/VALUE_NUMBER_FLOAT (Double/valueOf (.getDoubleValue p))
    JsonToken/VALUE_TRUE true
    JsonToken/VALUE_FALSE false
    JsonToken/VALUE_NULL nil
    (throw (ex-info (str "unexpected JSON token " t ". fix: pass valid JSON") {}))))

(defn- object-has-ph?
  "Consumes the object whose START_OBJECT was just read, building nothing; true when it has a
  top-level \"ph\" key."
  [^JsonParser p]
  (loop [found false]
    (let [t (.nextToken p)]
      (if (identical? t JsonToken/END_OBJECT)
        found
        (let [ph? (.equals "ph" (.getCurrentName p))
              v (.nextToken p)]
          (when (or (identical? v JsonToken/START_OBJECT) (identical? v JsonToken/START_ARRAY))
            (.skipChildren p))
          (recur (or found ph?)))))))

(defn- skip-value!
  "Consumes the value starting at token `t`, building nothing; true when it is an object with a
  top-level \"ph\" key (a trace event)."
  [^JsonParser p ^JsonToken t]
  (cond (identical? t JsonToken/START_OBJECT) (object-has-ph? p)
        (identical? t JsonToken/START_ARRAY) (do (.skipChildren p) false)
        (nil? t) (throw (ex-info "end of text before the JSON value ended. fix: pass the whole JSON text" {}))
        :else false))

(defn array-status
  "What `orjson.loads` makes of b[start, stop), one JSON array: :events (all its elements are
  objects with a \"ph\" key), :other (valid JSON, not all events) or :invalid. Builds nothing."
  [^bytes b ^long start ^long stop]
  (try
    (with-open [p (.createParser factory b (int start) (int (- stop start)))]
      (if (identical? JsonToken/START_ARRAY (.nextToken p))
        (loop [all true]
          (let [t (.nextToken p)]
            (if (identical? t JsonToken/END_ARRAY)
              (cond (some? (.nextToken p)) :invalid all :events :else :other)
              (recur (and (skip-value! p t) all)))))
        :invalid))
    (catch JsonProcessingException _ :invalid)
    (catch clojure.lang.ExceptionInfo _ :invalid)))

(defn valid-value?
  "True when b[start, stop) is exactly one JSON value (`orjson.loads` accepts it). Builds
  nothing."
  [^bytes b ^long start ^long stop]
  (try
    (with-open [p (.createParser factory b (int start) (int (- stop start)))]
      (let [t (.nextToken p)]
        (and (some? t)
             (do (skip-value! p t) (nil? (.nextToken p))))))
    (catch JsonProcessingException _ false)
    (catch clojure.lang.ExceptionInfo _ false)))

(def invalid
  "`load-value`'s result for text that is not one JSON value."
  (Object.))

(defn load-value
  "The JSON value in b[start, stop) (see `read-value`), or `invalid`."
  [^bytes b ^long start ^long stop]
  (try
    (with-open [p (.createParser factory b (int start) (int (- stop start)))]
      (let [t (.nextToken p)]
        (if (nil? t)
          invalid
          (let [v (read-value p t)]
            (if (nil? (.nextToken p)) v invalid)))))
    (catch JsonProcessingException _ invalid)))

(defn each-event!
  "Calls (f event) for every element of the array b[start, stop) (checked by `array-status`);
  returns their number."
  ^long [^bytes b ^long start ^long stop f]
  (with-open [p (.createParser factory b (int start) (int (- stop start)))]
    (.nextToken p)
    (loop [n 0]
      (let [t (.nextToken p)]
        (if (identical? t JsonToken/END_ARRAY)
          n
          (do (f (read-value p t)) (recur (inc n))))))))

(defn try-load
  "The trace event in b[start, stop): a JSON object with a \"ph\" key and nothing after it, else
  nil (Python's `_try_load`)."
  [^bytes b ^long start ^long stop]
  (try
    (with-open [p (.createParser factory b (int start) (int (- stop start)))]
      (let [t (.nextToken p)]
        (when (identical? t JsonToken/START_OBJECT)
          (let [m (read-value p t)]
            (when (and (nil? (.nextToken p)) (contains? m "ph")) m)))))
    (catch JsonProcessingException _ nil)))
