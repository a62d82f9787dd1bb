(ns pyprof.trace.reader
  "Streaming reader for MXNet (Chrome Trace Event) traces, valid or damaged, in bounded memory.

  A port of the Python reference `pyprof/trace/reader.py` (`TraceReader`): the same events are
  recovered from the same damaged files and the same read report is produced. Jackson's streaming
  parser (jackson-core) does all JSON parsing; the code here only finds where events start and end
  and repairs what MXNet writes that is not JSON, in front of the parser:

  1. The file (plain or gzip, by its magic bytes) is read in chunks of `:chunk-bytes` (16 MiB, as
     Python's `stats()`) into one reused buffer.
  2. The text before the first event (`{\"traceEvents\": [`, other top-level keys before it, `[`,
     a bare `,`, or the header followed by a bare comma) is skipped and recorded in the report
     (`pyprof.trace.framing`).
  3. Events are separated by `}`, whitespace, `,`, whitespace, `{`. Each chunk is cut after its
     last separator; the complete part (a body) is parsed, the rest carried into the next chunk.
     With `:drop-async-copies` / `:exclude-categories`, events are skipped after parsing, as
     Python's `BodyParser` does (same note counts; `pyprof.trace.body`).
  4. A body that is one valid JSON array of trace events (checked by a first Jackson pass that
     builds nothing, `pyprof.trace.json`) is parsed event by event. A body that is valid JSON
     apart from where it ends is split into values from its structure: an event cut by a `}, {`
     inside its `args` is carried into the next body, the end of the events array and the
     top-level keys after it are found (`pyprof.trace.jsonscan`). Otherwise it is split at every
     separator and each piece parsed alone; a piece that fails is repaired (unescaped quotes, back
     slashes and control characters inside `name`/`cat`/`args` strings are escaped, with Python's
     regular expressions), joined with up to 15 following pieces (a separator inside a string),
     cut at a finished trace's `]}` (a dump appended after it), and dropped, counted, only as a
     last resort (`pyprof.trace.body`).
  5. At the end of the file MXNet's closing `]` and `}` are stripped (`pyprof.trace.framing`);
     any other end is left to the body parser: other top-level keys are recorded, a missing end
     is reported as a missing tail, and a last event cut mid-way is dropped and counted.

  What was found and fixed is the read report (`pyprof.trace.read-report`).

  Memory: one reused buffer of a chunk plus the text carried over (bodies are framed for the
  parser in place) and one event at a time; nothing grows with the file, except, as in Python,
  top-level keys before traceEvents (read whole to find it) and the text after the events
  array."
  (:require [pyprof.trace.body :as body :refer [headroom]]
            [pyprof.trace.bytes :refer [blank?]]
            [pyprof.trace.framing :as framing]
            [pyprof.trace.read-report :as report :refer [add!]]
            [pyprof.rules :as rules])
  (:import (java.util ArrayList Arrays)))

(set! *warn-on-reflection* true)

(def default-chunk-bytes
  "Read size, as `_CHUNK_BYTES` of Python's `stats()` (where a body ends can matter for damaged
  files, so both use the same)."
  (bit-shift-left 16 20))

(defn- no-events-error [path ^long bytes-read gzip-cut]
  (rules/error (cond (and (zero? bytes-read) gzip-cut) "trace.gzip_cut"
                      (zero? bytes-read) "trace.empty"
                      :else "trace.no_events")
               {:path path}))

(defn- ensure-capacity
  "`b`, or a larger array holding its bytes [0, keep), with room for `n` bytes."
  ^bytes [^bytes b ^long n ^long keep]
  (if (<= n (alength b))
    b
    (let [nb (byte-array (max n (+ (alength b) (quot (alength b) 2))))]
      (System/arraycopy b 0 nb 0 keep)
      nb)))

(defn read-trace
  "Streams the events of the trace file at `path` (plain or gzip, valid or damaged), calling
  `(f event)` for each, in file order; an event is a map with string keys, as in the file (64-bit
  pids/tids as Long, up to 2^64 - 1 as BigInt). Returns the read report (Python's `ReadReport`;
  `:problems` are the sentences of its `problems()`):

    {:path :bytes-read :events :missing-head :leading-comma :missing-tail :inner-tails
     :escaped-names :dropped-fragments :dropped-bytes :display-time-unit :other-keys :top-level
     :carried-events :damaged :problems}

  Options: `:drop-async-copies` skips MXNet's async b/e copies of operators (categories
  \"operator\", \"Custom Operator\") and `:exclude-categories` (a collection) skips those
  categories, both after parsing, as Python's reader does;
  `:chunk-bytes` is the read size in bytes (default `default-chunk-bytes`).

  Throws ex-info with `:pyprof/error` `:trace-not-found` (the file cannot be opened) or
  `:trace-format` (not a single trace event in it), with Python's messages."
  ([path f] (read-trace path {} f))
  ([path {:keys [drop-async-copies exclude-categories chunk-bytes]
          :or {chunk-bytes default-chunk-bytes}} f]
   (let [path (str path)
         _ (when-not (and (integer? chunk-bytes) (pos? chunk-bytes) (< chunk-bytes (bit-shift-left 1 30)))
             (throw (ex-info (str "chunk-bytes must be a positive integer below 2^30, got "
                                  (pr-str chunk-bytes) ". fix: pass 1 to 2^30-1, or leave it out")
                             {:pyprof/error :invalid-option})))
         chunk (long chunk-bytes)
         rep (report/new-report path)
         parser (body/new-parser rep f (body/filter-patterns exclude-categories drop-async-copies))
         gzip-cut (volatile! false)]
     (with-open [in (framing/open-input path)]
       ;; buf[h, n): text not yet parsed (h = headroom); [s, n) once the head is skipped. Room
       ;; for 2 bytes after n: a "}" and "]" written after the file's last body.
       (loop [^bytes buf (byte-array (+ headroom chunk 4096)), n headroom, s headroom, started false]
         (let [^bytes buf (ensure-capacity buf (+ n chunk 2) n)
               got (.readNBytes in buf (int n) (int chunk))
               eof (zero? got)
               _ (when (and eof (framing/cut-short? in))
                   (vreset! gzip-cut true)
                   (add! rep :dropped-fragments 1))        ; the undecodable rest of the stream
               n (+ n got)]
           (add! rep :bytes-read got)
           (if (and (not started) (not eof) (< (- n headroom) 4096))
             (recur buf n s false)
             (let [s (if started s (framing/skip-head buf headroom n rep eof))]
               (cond
                 (neg? s) (recur buf n headroom false)  ; top-level keys before traceEvents: read more
                 eof (if-let [e (framing/strip-tail buf s n rep)]
                       (let [e (long e)]
                         (when-not (blank? buf s e)
                           (body/parse-body! parser buf s e true (Arrays/copyOfRange buf (int e) (int n)) nil)))
                       (body/parse-body! parser buf s n true nil nil))  ; the parser finds the end
                 :else
                 (if-let [[cut next-start] (framing/last-separator buf s n)]
                   (let [cut (long cut) next-start (long next-start)]
                     (when-not (blank? buf s cut)  ; with the separator text cut at
                       (body/parse-body! parser buf s cut false nil
                                         (Arrays/copyOfRange buf (int cut) (int next-start))))
                     (System/arraycopy buf next-start buf headroom (- n next-start))
                     (recur buf (+ headroom (- n next-start)) headroom true))
                   (recur buf n s true))))))))
     (body/finish! parser)
     (when-not @(:saw-event parser)
       (throw (no-events-error path (:bytes-read @rep) @gzip-cut)))
     (report/finish-report @rep))))

(defn read-events
  "All events of the trace file at `path`, in a vector (see `read-trace`; all in memory)."
  ([path] (read-events path {}))
  ([path opts]
   (let [out (ArrayList.)]
     (read-trace path opts #(.add out %))
     (vec out))))
