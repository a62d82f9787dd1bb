(ns pyprof.trace-reader
  "Streaming reader for MXNet (Chrome Trace Event) traces, valid or damaged, in bounded memory.

  A port of the Python reference `pyprof/trace/reader.py` (`TraceReader`): the same events are
  recovered from the same damaged files and the same read report is produced. Jackson's streaming
  parser (jackson-core) does all JSON parsing; the code here only finds where events start and end
  and repairs what MXNet writes that is not JSON, in front of the parser:

  1. The file (plain or gzip, by its magic bytes) is read in chunks of `:chunk-bytes` (16 MiB, as
     Python's `stats()`) into one reused buffer.
  2. The text before the first event (`{\"traceEvents\": [`, `[`, a bare `,`, or the header followed
     by a bare comma) is skipped and recorded in the report.
  3. Events are separated by `}`, whitespace, `,`, whitespace, `{`. Each chunk is cut after its
     last separator; the complete part (a body) is parsed, the rest carried into the next chunk.
     With `:drop-async-copies` / `:exclude-categories`, events are dropped by a bytes test before
     parsing, exactly as Python's `_prefilter` does (same note counts).
  4. A body that is one valid JSON array of trace events (checked by a first Jackson pass that
     builds nothing) is parsed event by event. Otherwise it is split at every separator and each
     piece parsed alone; a piece that fails is repaired (unescaped quotes, back slashes and control
     characters inside `name`/`cat`/`args` strings are escaped, with Python's regular expressions),
     joined with up to 15 following pieces (a separator inside a string), cut at a finished trace's
     `]}` (a dump appended after it), and dropped, counted, only as a last resort.
  5. At the end of the file the closing `]` and trailing keys are stripped; their absence is
     reported as a missing tail, and a last event cut mid-way is dropped and counted.

  Memory: one reused buffer of a chunk plus the text carried over (bodies are framed for the
  parser in place) and one event at a time; nothing grows with the file."
  (:require [clojure.string :as str])
  (:import (com.fasterxml.jackson.core JsonFactory JsonFactory$Feature JsonParser
                                       JsonParser$NumberType JsonProcessingException JsonToken)
           (java.io BufferedInputStream File FileInputStream InputStream)
           (java.nio.charset StandardCharsets)
           (java.util ArrayList Arrays)
           (java.util.regex Matcher Pattern)
           (java.util.zip GZIPInputStream)))

(set! *warn-on-reflection* true)

(def default-chunk-bytes
  "Read size, as `_CHUNK_BYTES` of Python's `stats()` (where a body ends can matter for damaged
  files, so both use the same)."
  (bit-shift-left 16 20))

(def ^:private ^JsonFactory factory
  (doto (JsonFactory.)
    ;; Field names are canonicalized but not String.intern()ed: counter names are arbitrary.
    (.disable JsonFactory$Feature/INTERN_FIELD_NAMES)))

;; ------------------------------------------------------------------ bytes

(defmacro ^:private b= [b i c] `(== (aget ~b ~i) (byte ~(int c))))

(defn- ws?
  "Python's bytes whitespace (`bytes.strip()`, `\\s`): space, \\t, \\n, \\r, \\v, \\f."
  [^long c]
  (or (== c 32) (and (>= c 9) (<= c 13))))

(defn- skip-ws ^long [^bytes b ^long i ^long stop]
  (loop [i i] (if (and (< i stop) (ws? (aget b i))) (recur (inc i)) i)))

(defn- rskip-ws
  "End of [start, stop) without trailing whitespace."
  ^long [^bytes b ^long start ^long stop]
  (loop [j stop] (if (and (> j start) (ws? (aget b (dec j)))) (recur (dec j)) j)))

(defn- blank? [^bytes b ^long start ^long stop] (== stop (skip-ws b start stop)))

(defn- sep-brace
  "For b[i] = `}`: the index of the `{` ending the separator `}\\s*,\\s*{` that starts at i, within
  [i, stop); -1 when there is none."
  ^long [^bytes b ^long i ^long stop]
  (let [j (skip-ws b (inc i) stop)]
    (if (and (< j stop) (b= b j \,))
      (let [k (skip-ws b (inc j) stop)]
        (if (and (< k stop) (b= b k \{)) k -1))
      -1)))

(defn- separators
  "Python's `_SEP.finditer(body)` over [start, stop): a long array [n s0 b0 s1 b1 ...] of the n
  separators, left to right, non-overlapping; s is the `}`, b the `{` (the match ends after it)."
  ^longs [^bytes b ^long start ^long stop]
  (loop [i start, ^longs out (long-array 65), n 0]
    (if (>= i stop)
      (do (aset out 0 n) out)
      (if (b= b i \})
        (let [k (sep-brace b i stop)]
          (if (neg? k)
            (recur (inc i) out n)
            (let [^longs out (if (< (+ 2 (* 2 n)) (alength out))
                               out
                               (java.util.Arrays/copyOf out (* 2 (alength out))))]
              (aset out (+ 1 (* 2 n)) i)
              (aset out (+ 2 (* 2 n)) k)
              (recur (inc k) out (inc n)))))
        (recur (inc i) out n)))))

(defn- last-separator
  "Python's `_last_separator`: [end-of-last-complete-event start-of-next] or nil."
  [^bytes b ^long start ^long stop]
  (loop [pos stop]
    (let [p (long (loop [p (dec pos)] (cond (< p start) -1 (b= b p \}) p :else (recur (dec p)))))]
      (when-not (neg? p)
        (let [k (sep-brace b p stop)]
          (if (neg? k) (recur p) [(inc p) k]))))))

(defn- matches-at?
  "True when b[i, i + |needle|) is `needle` (and lies before `stop`)."
  [^bytes b ^long i ^long stop ^bytes needle]
  (let [n (alength needle)]
    (and (<= (+ i n) stop)
         (loop [k 0]
           (cond (== k n) true
                 (== (aget b (+ i k)) (aget needle k)) (recur (inc k))
                 :else false)))))

(defn- index-of
  "Index of `needle` in b[start, stop), or -1."
  ^long [^bytes b ^long start ^long stop ^bytes needle]
  (let [first-byte (aget needle 0)
        last-start (- stop (alength needle))]
    (loop [i start]
      (cond (> i last-start) -1
            (and (== (aget b i) first-byte)
                 (or (== 1 (alength needle))
                     (and (< (inc i) stop) (== (aget b (inc i)) (aget needle 1))))
                 (matches-at? b i stop needle)) i
            :else (recur (inc i))))))

(defn- contains-any?
  "True when one of `needles` occurs in b[start, stop). All of them begin with `prefix`: only the
  places where it occurs are tried (as Python's `any(p in piece for p in needles)`)."
  [^bytes b start stop ^bytes prefix needles]
  (let [stop (long stop)]
    (loop [from (long start)]
      (let [i (index-of b from stop prefix)]
        (cond (neg? i) false
              (some (fn [nd] (matches-at? b i stop nd)) needles) true
              :else (recur (inc i)))))))

(defn- utf8 ^bytes [^String s] (.getBytes s StandardCharsets/UTF_8))
(defn- latin1-str ^String [^bytes b ^long start ^long stop]
  (String. b start (- stop start) StandardCharsets/ISO_8859_1))
(defn- latin1-bytes ^bytes [^String s] (.getBytes s StandardCharsets/ISO_8859_1))

;; The regular expressions of reader.py, run on bytes decoded as ISO-8859-1 (one char per byte),
;; so that they see exactly what Python's bytes patterns see. Java's \s is Python's bytes \s.
(def ^:private ^Pattern tail-re
  (Pattern/compile (str "\\]\\s*(?:,\\s*\"[^\"]*\"\\s*:\\s*(?:\"[^\"]*\"|-?[0-9.eE+-]+|true|false|null"
                        "|\\{[^{}]*\\})\\s*)*\\}?\\s*$")))
(def ^:private ^Pattern seam-re
  (Pattern/compile (str "\\}\\s*\\]\\s*(?:,\\s*\"[^\"]*\"\\s*:\\s*(?:\"[^\"]*\"|-?[0-9.eE+-]+|true|false"
                        "|null|\\{[^{}]*\\})\\s*)*\\}\\s*,?\\s*(?:\\{\\s*\"traceEvents\"\\s*:\\s*\\[\\s*,?\\s*)?")))
(def ^:private ^Pattern display-unit-re (Pattern/compile "\"displayTimeUnit\"\\s*:\\s*\"([^\"]*)\""))
(def ^:private event-keys "name|cat|ph|ts|dur|tdur|tts|pid|tid|id|id2|args|s|bp|scope|cname|bind_id")
(def ^:private ^Pattern string-field-re
  (Pattern/compile (str "(\"(?:name|cat)\"\\s*:\\s*\")(.*?)(\"\\s*(?:,\\s*\"(?:" event-keys ")\"\\s*:|\\}))")
                   Pattern/DOTALL))
(def ^:private ^Pattern args-counter-re
  (Pattern/compile "(\"args\"\\s*:\\s*\\{\\s*\")(.*?)(\"\\s*:\\s*-?[0-9][0-9.eE+-]*\\s*\\})" Pattern/DOTALL))
(def ^:private ^Pattern args-name-re
  (Pattern/compile "(\"args\"\\s*:\\s*\\{\\s*\"name\"\\s*:\\s*\")(.*?)(\"\\s*\\})" Pattern/DOTALL))

;; ------------------------------------------------------------------ repair of one event's text

(defn- escape-segment
  "A raw (never JSON-escaped) MXNet string made fit to sit between quotes: `\\` and `\"` escaped,
  control characters as \\u00xx (Python's `_escape_segment`)."
  ^String [^String seg]
  (let [sb (StringBuilder.)]
    (dotimes [i (.length seg)]
      (let [c (.charAt seg i)]
        (cond (= c \\) (.append sb "\\\\")
              (= c \") (.append sb "\\\"")
              (< (int c) 32) (.append sb (format "\\u%04x" (int c)))
              :else (.append sb c))))
    (.toString sb)))

(defn- sub-escaping ^String [^Pattern re ^String s]
  (let [m (.matcher re s)
        sb (StringBuffer.)]
    (while (.find m)
      (.appendReplacement m sb (Matcher/quoteReplacement
                                (str (.group m 1) (escape-segment (.group m 2)) (.group m 3)))))
    (.appendTail m sb)
    (.toString sb)))

(defn- escape-piece
  "One event's text (bytes) with unescaped characters inside its `name`/`cat` values and its
  counter/metadata `args` keys escaped: each value runs to the first quote followed by the next
  known key or the end of the object (Python's `escape_piece`)."
  ^bytes [^bytes piece]
  (->> (String. piece StandardCharsets/ISO_8859_1)
       (sub-escaping string-field-re)
       (sub-escaping args-name-re)
       (sub-escaping args-counter-re)
       latin1-bytes))

;; ------------------------------------------------------------------ Jackson

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
  `read-object`), vectors, strings, Long (BigInt beyond 64 bits), Double, booleans, nil."
  [^JsonParser p ^JsonToken t]
  (condp identical? t
    JsonToken/START_OBJECT (read-object p)
    JsonToken/VALUE_STRING (.getText p)
    JsonToken/VALUE_NUMBER_INT (if (identical? JsonParser$NumberType/BIG_INTEGER (.getNumberType p))
                                 (bigint (.getBigIntegerValue p))
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
    (throw (ex-info (str "unexpected JSON token " t) {}))))

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

(defn- events-array?
  "True when b[start, stop) is exactly one JSON array whose elements are all objects with a
  \"ph\" key: what `orjson.loads(b\"[\" + body + b\"]\")` accepts as all events. Builds nothing."
  [^bytes b ^long start ^long stop]
  (try
    (with-open [p (.createParser factory b (int start) (int (- stop start)))]
      (and (identical? JsonToken/START_ARRAY (.nextToken p))
           (loop []
             (let [t (.nextToken p)]
               (cond (identical? t JsonToken/END_ARRAY) (nil? (.nextToken p))
                     (identical? t JsonToken/START_OBJECT) (if (object-has-ph? p) (recur) false)
                     :else false)))))
    (catch JsonProcessingException _ false)))

(defn- each-event!
  "Calls (f event) for every element of the array b[start, stop) (checked by `events-array?`);
  returns their number."
  ^long [^bytes b ^long start ^long stop f]
  (with-open [p (.createParser factory b (int start) (int (- stop start)))]
    (.nextToken p)
    (loop [n 0]
      (let [t (.nextToken p)]
        (if (identical? t JsonToken/END_ARRAY)
          n
          (do (f (read-value p t)) (recur (inc n))))))))

(defn- try-load
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

;; ------------------------------------------------------------------ the read report

(defn- new-report [path]
  (volatile! {:path path :bytes-read 0 :events 0 :missing-head false :leading-comma false
              :missing-tail false :inner-tails 0 :escaped-names 0 :dropped-fragments 0
              :dropped-bytes 0 :display-time-unit nil}))

(defn problems
  "Human-readable list of what was wrong with a file (its read report), empty for a valid file;
  the same sentences as Python's `ReadReport.problems()`."
  [{:keys [leading-comma missing-head missing-tail inner-tails escaped-names dropped-fragments
           dropped-bytes]}]
  (cond-> []
    leading-comma (conj "bare comma before the first event (second profiling session in one process)")
    missing-head (conj "missing {\"traceEvents\": [ header")
    missing-tail (conj "missing closing ]} (process crashed or profiler not finalised)")
    (pos? inner-tails) (conj (str inner-tails " closing ]} in the middle of the file (a dump appended "
                                  "after a finished trace), events on both sides kept"))
    (pos? escaped-names) (conj (str escaped-names " event(s) with unescaped characters in names"))
    (pos? dropped-fragments) (conj (str dropped-fragments " unreadable fragment(s), " dropped-bytes
                                        " bytes, dropped"))))

(defn- finish-report [r]
  (let [ps (problems r)]
    (assoc r :damaged (boolean (seq ps)) :problems ps)))

(defn- add! [rep k ^long n] (vswap! rep update k + n))
(defn- flag! [rep k] (vswap! rep assoc k true))

;; ------------------------------------------------------------------ errors

(defn- py-repr
  "Python's repr() of a string, as Python error messages quote paths."
  ^String [^String s]
  (let [q (if (and (str/includes? s "'") (not (str/includes? s "\""))) \" \')
        sb (StringBuilder.)]
    (.append sb q)
    (doseq [c s]
      (cond (= c \\) (.append sb "\\\\")
            (= c q) (.append sb (str "\\" q))
            (= c \newline) (.append sb "\\n")
            (= c \return) (.append sb "\\r")
            (= c \tab) (.append sb "\\t")
            (or (< (int c) 32) (= (int c) 127)) (.append sb (format "\\x%02x" (int c)))
            :else (.append sb c)))
    (.append sb q)
    (.toString sb)))

(defn- open-input
  "The trace's bytes (gzip decompressed when the file starts with its magic bytes)."
  ^InputStream [^String path]
  (let [f (File. path)
        why (cond (not (.exists f)) "No such file or directory"
                  (.isDirectory f) "Is a directory"
                  (not (.canRead f)) "Permission denied")]
    (when why
      (throw (ex-info (str "cannot open trace " (py-repr path) ": " why "; check the path")
                      {:pyprof/error :trace-not-found :path path})))
    (let [in (BufferedInputStream. (FileInputStream. f) 65536)]
      (.mark in 2)
      (let [b0 (.read in) b1 (.read in)]
        (.reset in)
        (if (and (== b0 0x1f) (== b1 0x8b))
          (GZIPInputStream. in 65536)
          in)))))

(defn- no-events-error [path ^long bytes-read]
  (ex-info (if (zero? bytes-read)
             (str path ": empty file, no trace events (the profiled run wrote nothing: crashed or "
                  "never called profiler.dump()?); re-run the profiling or pass the right file")
             (str path ": no trace events found (not an MXNet/Chrome trace, or the profiler recorded "
                  "nothing; events are JSON objects with a \"ph\" field); pass the file named by "
                  "profiler.set_config(filename=...) of a run that profiled something"))
           {:pyprof/error :trace-format :path path}))

;; ------------------------------------------------------------------ head and tail

(defn- head-object-end
  "Python's `_HEAD_OBJECT.match(buf)` (`\\s*\\{\\s*\"traceEvents\"\\s*:\\s*\\[\\s*`): the end of
  the match at `start`, or -1."
  ^long [^bytes b ^long start ^long stop]
  (let [i (skip-ws b start stop)]
    (if (and (< i stop) (b= b i \{))
      (let [key (utf8 "\"traceEvents\"")
            i (skip-ws b (inc i) stop)]
        (if (and (<= (+ i (alength key)) stop) (== i (index-of b i (+ i (alength key)) key)))
          (let [i (skip-ws b (+ i (alength key)) stop)]
            (if (and (< i stop) (b= b i \:))
              (let [i (skip-ws b (inc i) stop)]
                (if (and (< i stop) (b= b i \[)) (skip-ws b (inc i) stop) -1))
              -1))
          -1))
      -1)))

(defn- head-any-key-end
  "Python's `_HEAD_ANY_KEY.search(buf, 0, 4096)` (`\"traceEvents\"\\s*:\\s*\\[\\s*` within the
  first 4096 bytes): the end of the leftmost match, or -1."
  ^long [^bytes b ^long start ^long stop]
  (let [stop (min stop (+ start 4096))
        key (utf8 "\"traceEvents\"")]
    (loop [from start]
      (let [i (index-of b from stop key)]
        (if (neg? i)
          -1
          (let [j (skip-ws b (+ i (alength key)) stop)
                end (if (and (< j stop) (b= b j \:))
                      (let [k (skip-ws b (inc j) stop)]
                        (if (and (< k stop) (b= b k \[)) (skip-ws b (inc k) stop) -1))
                      -1)]
            (if (neg? end) (recur (inc i)) end)))))))

(defn- looks-like-event-start?
  "Python's `_looks_like_event_start`: `\\{\\s*\"(?:name|ph|cat|ts|pid|tid|args)\"` at `start`."
  [^bytes b ^long start ^long stop]
  (and (< start stop) (b= b start \{)
       (let [i (skip-ws b (inc start) stop)]
         (and (< i stop) (b= b i \")
              (boolean (some (fn [^String k]
                               (let [kb (utf8 (str k "\""))]
                                 (and (<= (+ i 1 (alength kb)) stop)
                                      (== (inc i) (index-of b (inc i) (+ i 1 (alength kb)) kb)))))
                             ["name" "ph" "cat" "ts" "pid" "tid" "args"]))))))

(defn- skip-comma
  "After `{\"traceEvents\": [` or `[`: skips the bare comma MXNet writes before the first event of
  a second session."
  ^long [^bytes b ^long i ^long stop rep]
  (if (and (< i stop) (b= b i \,))
    (do (flag! rep :leading-comma) (skip-ws b (inc i) stop))
    i))

(defn- drop-to-brace ^long [^bytes b ^long i ^long stop rep]
  (let [j (long (loop [j i] (cond (== j stop) stop (b= b j \{) j :else (recur (inc j)))))]
    (when (> j i)
      (add! rep :dropped-fragments 1)
      (add! rep :dropped-bytes (- j i)))
    (flag! rep :missing-head)
    j))

(defn- skip-head
  "Python's `_skip_head`: where the first event starts in b[start, stop)."
  ^long [^bytes b ^long start ^long stop rep]
  (let [s (skip-ws b start stop)
        m (head-object-end b start stop)]
    (cond
      (>= m 0) (skip-comma b m stop rep)
      (and (< s stop) (b= b s \{))
      (let [k (head-any-key-end b start stop)]
        (if (and (>= k 0) (not (looks-like-event-start? b s stop)))
          (skip-comma b k stop rep)
          (do (flag! rep :missing-head) s)))
      (and (< s stop) (b= b s \[)) (skip-comma b (skip-ws b (inc s) stop) stop rep)
      (and (< s stop) (b= b s \,))
      (let [r (skip-ws b (inc s) stop)]
        (flag! rep :leading-comma)
        (if (and (< r stop) (b= b r \{))
          (do (flag! rep :missing-head) r)
          (drop-to-brace b r stop rep)))
      (== s stop) s
      :else (drop-to-brace b s stop rep))))

(defn- strip-tail
  "Python's `_strip_tail`: the end of the last body in b[start, stop) without the closing `]` and
  trailing keys (recording the display unit), or, when they are missing, without a dangling comma."
  ^long [^bytes b ^long start ^long stop rep]
  (let [end (rskip-ws b start stop)
        j (long (loop [j (dec end)] (cond (< j start) -1 (b= b j \]) j :else (recur (dec j)))))]
    (if (and (>= j 0) (.matches (.matcher tail-re (latin1-str b j end))))
      (let [m (.matcher display-unit-re (latin1-str b j end))]
        (when (.find m)
          (vswap! rep assoc :display-time-unit
                  (String. (latin1-bytes (.group m 1)) StandardCharsets/UTF_8)))
        (rskip-ws b start j))
      (do (flag! rep :missing-tail)
          (if (and (> end start) (b= b (dec end) \,)) (dec end) end)))))

;; ------------------------------------------------------------------ bodies

(defn- filter-patterns
  "The bytes tests of Python's `_prefilter` for `exclude-categories` and async operator copies."
  [exclude-categories drop-async-copies]
  (let [cat-patterns (fn [c] [(utf8 (str "\"cat\": \"" c "\"")) (utf8 (str "\"cat\":\"" c "\""))])]
    {:excluded (vec (mapcat cat-patterns exclude-categories))
     :copies (when drop-async-copies (vec (mapcat cat-patterns ["operator" "Custom Operator"])))
     :async (mapv utf8 ["\"ph\": \"b\"" "\"ph\": \"e\"" "\"ph\":\"b\"" "\"ph\":\"e\""])
     :cat-prefix (utf8 "\"cat\":")
     :ph-prefix (utf8 "\"ph\":")
     :ph (utf8 "\"ph\"")}))

(defn- ensure-capacity
  "`b`, or a larger array holding its bytes [0, keep), with room for `n` bytes."
  ^bytes [^bytes b ^long n ^long keep]
  (if (<= n (alength b))
    b
    (let [nb (byte-array (max n (+ (alength b) (quot (alength b) 2))))]
      (System/arraycopy b 0 nb 0 keep)
      nb)))

(def ^:private headroom
  "Bytes kept free before the unparsed text in the read buffer, for the \"[\" and a restored \"{\"
  written in front of a body."
  2)

(defn- frame-body!
  "Makes the body b[start, stop) parseable in place: writes \"[\" before it and \"]\" after it,
  dropping the pieces Python's `_prefilter` drops (the kept pieces joined by \"},{\", the outer
  braces restored: the text Python parses). Returns [open close], the indices of \"[\" and \"]\";
  nil when no piece is left.

  In place is safe: 2 bytes of headroom precede `start`; the kept text is never longer than the
  body (each \"},{\" replaces a separator of at least 3 bytes), so pieces only move left; a \"]\"
  lands at most at `stop` (the separator after a body cut at one), or, with a restored \"}\", in
  the space a dropped piece freed or past the end of the file's last body."
  [{:keys [saw-event patterns]} ^bytes b ^long start ^long stop]
  (let [{:keys [excluded copies async cat-prefix ph-prefix ^bytes ph]} patterns]
    (if (and (empty? excluded) (empty? copies))
      (do (aset b (dec start) (byte (int \[)))
          (aset b stop (byte (int \])))
          [(dec start) stop])
      (let [^longs seps (separators b start stop)
            n (inc (aget seps 0))
            piece-start (fn ^long [^long k] (if (zero? k) start (inc (aget seps (* 2 k)))))
            piece-end (fn ^long [^long k] (if (== k (dec n)) stop (aget seps (+ 1 (* 2 k)))))
            kept (boolean-array n)
            nkept (loop [k 0, nkept 0]
                    (if (== k n)
                      nkept
                      (let [ps (long (piece-start k)) pe (long (piece-end k))
                            drop? (or (and (seq excluded) (contains-any? b ps pe cat-prefix excluded)
                                           (do (when-not (neg? (index-of b ps pe ph))
                                                 (vreset! saw-event true))
                                               true))
                                      (and (seq copies) (contains-any? b ps pe cat-prefix copies)
                                           (contains-any? b ps pe ph-prefix async)
                                           (do (vreset! saw-event true) true)))]
                        (aset kept k (not drop?))
                        (recur (inc k) (if drop? nkept (inc nkept))))))]
        (when (pos? nkept)
          (let [first-kept (long (loop [k 0] (if (aget kept k) k (recur (inc k)))))
                last-kept (long (loop [k (dec n)] (if (aget kept k) k (recur (dec k)))))
                ;; the joined text's first and last non-blank bytes decide the outer braces
                fi (skip-ws b (piece-start first-kept) (piece-end first-kept))
                front? (not (and (< fi (piece-end first-kept)) (b= b fi \{)))
                le (rskip-ws b (piece-start last-kept) (piece-end last-kept))
                back? (not (and (> le (piece-start last-kept)) (b= b (dec le) \})))
                open (if front? (- start 2) (dec start))
                w (loop [k first-kept, w start, first? true]
                    (if (> k last-kept)
                      w
                      (if (aget kept k)
                        (let [ps (long (piece-start k))
                              len (- (long (piece-end k)) ps)
                              w (long (if first?
                                        w
                                        (do (aset b w (byte (int \})))
                                            (aset b (+ w 1) (byte (int \,)))
                                            (aset b (+ w 2) (byte (int \{)))
                                            (+ w 3))))]
                          (System/arraycopy b ps b w len)
                          (recur (inc k) (+ w len) false))
                        (recur (inc k) w first?))))
                w (long w)]
            (aset b open (byte (int \[)))
            (when front? (aset b (dec start) (byte (int \{))))
            (if back?
              (do (aset b w (byte (int \}))) (aset b (inc w) (byte (int \]))) [open (inc w)])
              (do (aset b w (byte (int \]))) [open w]))))))))

(defn- load-one
  "Python's `_load_one`: the event in b[start, stop), escaping unescaped characters if needed."
  [{:keys [rep]} ^bytes b ^long start ^long stop]
  (or (try-load b start stop)
      (let [text (Arrays/copyOfRange b (int start) (int stop))
            fixed (escape-piece text)]
        (when-not (Arrays/equals text fixed)
          (when-let [ev (try-load fixed 0 (alength fixed))]
            (add! rep :escaped-names 1)
            ev)))))

(def ^:private close-bracket (utf8 "]"))

(defn- load-piece
  "Python's `_load_piece`: the event(s) in b[start, stop): one, or those on both sides of a
  finished trace's `]}` in the middle of the text (a dump appended after it); else nil."
  [{:keys [rep] :as ctx} ^bytes b ^long start ^long stop]
  (if-let [ev (load-one ctx b start stop)]
    [ev]
    (when-not (neg? (index-of b start stop close-bracket))
      (let [m (.matcher seam-re (latin1-str b start stop))
            [parts ^long from] (loop [from 0, parts []]
                                 (if (.find m)
                                   (recur (.end m) (conj parts [(+ start from) (+ start (.start m) 1)]))
                                   [parts from]))
            seams (count parts)]
        (when (pos? seams)
          (let [parts (cond-> parts
                        (not (blank? b (+ start from) stop)) (conj [(+ start from) stop]))
                escaped (:escaped-names @rep)
                evs (reduce (fn [acc [s e]]
                              (if-let [ev (load-one ctx b s e)] (conj acc ev) (reduced nil)))
                            [] parts)]
            (if evs
              (do (add! rep :inner-tails seams) evs)
              (do (vswap! rep assoc :escaped-names escaped) nil))))))))

(def ^:private max-join 16)

(defn- parse-pieces!
  "Python's `_parse_pieces` on the body b[start, stop): each piece between separators (braces
  included) parsed alone, else joined with up to 15 following pieces, else dropped and counted.
  Passes the events to f in order; returns their number."
  ^long [{:keys [rep f] :as ctx} ^bytes b ^long start ^long stop]
  (let [^longs seps (separators b start stop)
        n (inc (aget seps 0))
        ;; piece i is [starts[i], ends[i])
        starts (long-array n)
        ends (long-array n)]
    (aset starts 0 start)
    (dotimes [k (dec n)]
      (aset ends k (inc (aget seps (+ 1 (* 2 k)))))
      (aset starts (inc k) (aget seps (+ 2 (* 2 k)))))
    (aset ends (dec n) stop)
    (loop [i 0, events 0]
      (if (>= i n)
        events
        (let [found (loop [used 1]
                      (when (<= used (min max-join (- n i)))
                        (if-let [evs (load-piece ctx b (aget starts i) (aget ends (+ i used -1)))]
                          [evs used]
                          (recur (inc used)))))]
          (if-let [[evs used] found]
            (do (doseq [ev evs] (f ev))
                (recur (+ i (long used)) (+ events (count evs))))
            (do (add! rep :dropped-fragments 1)
                (add! rep :dropped-bytes (- (aget ends i) (aget starts i)))
                (recur (inc i) events))))))))

(defn- parse-body!
  "Python's `_parse_body` for the body b[start, stop): its events passed to f, in order. Writes
  over b[start - 2, stop + 2)."
  [{:keys [rep saw-event f] :as ctx} ^bytes b ^long start ^long stop]
  (when-let [[open close] (frame-body! ctx b start stop)]
    (let [open (long open) close (long close)
          n (if (events-array? b open (inc close))
              (each-event! b open (inc close) f)
              (parse-pieces! ctx b (inc open) close))]
      (when (pos? n)
        (vreset! saw-event true)
        (add! rep :events n)))))

(defn read-trace
  "Streams the events of the trace file at `path` (plain or gzip, valid or damaged), calling
  `(f event)` for each, in file order; an event is a map with string keys, as in the file (64-bit
  pids/tids as Long, larger ones as BigInt). Returns the read report (Python's `ReadReport`;
  `:problems` are the sentences of its `problems()`):

    {:path :bytes-read :events :missing-head :leading-comma :missing-tail :inner-tails
     :escaped-names :dropped-fragments :dropped-bytes :display-time-unit :damaged :problems}

  Options: `:drop-async-copies` skips MXNet's async b/e copies of operators (categories
  \"operator\", \"Custom Operator\") and `:exclude-categories` (a collection) skips those
  categories, both by a bytes test before parsing (`\"cat\": \"<category>\"`), as Python does;
  `:chunk-bytes` is the read size (default `default-chunk-bytes`).

  Throws ex-info with `:pyprof/error` `:trace-not-found` (the file cannot be opened) or
  `:trace-format` (not a single trace event in it), with Python's messages."
  ([path f] (read-trace path {} f))
  ([path {:keys [drop-async-copies exclude-categories chunk-bytes]
          :or {chunk-bytes default-chunk-bytes}} f]
   (let [path (str path)
         _ (when-not (and (integer? chunk-bytes) (pos? chunk-bytes) (< chunk-bytes (bit-shift-left 1 30)))
             (throw (ex-info (str "chunk-bytes must be a positive integer below 2^30, got "
                                  (pr-str chunk-bytes))
                             {:pyprof/error :invalid-option})))
         chunk (long chunk-bytes)
         rep (new-report path)
         ctx {:rep rep :saw-event (volatile! false) :f f
              :patterns (filter-patterns exclude-categories drop-async-copies)}]
     (with-open [in (open-input path)]
       ;; buf[h, n): text not yet parsed (h = headroom); [s, n) once the head is skipped. Room
       ;; for 2 bytes after n: a "}" and "]" written after the file's last body.
       (loop [^bytes buf (byte-array (+ headroom chunk 4096)), n headroom, s headroom, started false]
         (let [^bytes buf (ensure-capacity buf (+ n chunk 2) n)
               got (.readNBytes in buf (int n) (int chunk))
               eof (zero? got)
               n (+ n got)]
           (add! rep :bytes-read got)
           (if (and (not started) (not eof) (< (- n headroom) 4096))
             (recur buf n s false)
             (let [s (if started s (skip-head buf headroom n rep))]
               (if eof
                 (let [e (strip-tail buf s n rep)]
                   (when-not (blank? buf s e) (parse-body! ctx buf s e)))
                 (if-let [[cut next-start] (last-separator buf s n)]
                   (let [cut (long cut) next-start (long next-start)]
                     (when-not (blank? buf s cut) (parse-body! ctx buf s cut))
                     (System/arraycopy buf next-start buf headroom (- n next-start))
                     (recur buf (+ headroom (- n next-start)) headroom true))
                   (recur buf n s true))))))))
     (when-not @(:saw-event ctx)
       (throw (no-events-error path (:bytes-read @rep))))
     (finish-report @rep))))

(defn read-events
  "All events of the trace file at `path`, in a vector (see `read-trace`; all in memory)."
  ([path] (read-events path {}))
  ([path opts]
   (let [out (ArrayList.)]
     (read-trace path opts #(.add out %))
     (vec out))))
