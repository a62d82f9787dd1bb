(ns pyprof.trace.framing
  "Where the events are in a trace file's text: opening, head, separators, tail. A port of
  `pyprof/trace/framing.py`, on a region [start, stop) of the reader's byte buffer:

  - `open-input`: the file's bytes, plain or gzip (by its magic bytes), Python's `open_binary`;
    a gzip stream cut short gives every decodable byte, then ends (`cut-short?`).
  - `skip-head`: the text before the first event (`{\"traceEvents\": [`, other top-level keys
    before it, `[`, a bare `,`, or the header followed by a bare comma) skipped and recorded in
    the read report (`record-keys!`).
  - `separators` / `last-separator`: events are separated by `}`, whitespace, `,`, whitespace,
    `{` (Python's `EVENT_SEPARATOR`); a chunk is cut after its last separator.
  - `strip-tail`: at the end of the file MXNet's closing `]` and `}` are stripped (the display
    unit recorded); any other end (more top-level keys, or none: a missing tail) is left to the
    body parser, which finds the end of the events array from the JSON structure
    (`pyprof.trace.jsonscan`); `skip-seam` skips the head of a dump appended after it."
  (:require [pyprof.trace.bytes :refer [b= blank? index-of latin1-bytes latin1-str rskip-ws
                                        skip-ws utf8]]
            [pyprof.trace.jsonscan :refer [scan-object]]
            [pyprof.trace.phases :refer [kept-keys not-other-keys top-level]]
            [pyprof.trace.pycompat :refer [py-repr]]
            [pyprof.trace.read-report :refer [add! flag!]]
            [pyprof.rules :as rules])
  (:import (java.io BufferedInputStream File FileInputStream InputStream)
           (java.nio.charset StandardCharsets)
           (java.util.regex Pattern)
           (pyprof.jvm GunzipStream)))

(set! *warn-on-reflection* true)

(defn- sep-brace
  "For b[i] = `}`: the index of the `{` ending the separator `}\\s*,\\s*{` that starts at i, within
  [i, stop); -1 when there is none."
  ^long [^bytes b ^long i ^long stop]
  (let [j (skip-ws b (inc i) stop)]
    (if (and (< j stop) (b= b j \,))
      (let [k (skip-ws b (inc j) stop)]
        (if (and (< k stop) (b= b k \{)) k -1))
      -1)))

(defn separators
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

(defn last-separator
  "Python's `_last_separator`: [end-of-last-complete-event start-of-next] or nil."
  [^bytes b ^long start ^long stop]
  (loop [pos stop]
    (let [p (long (loop [p (dec pos)] (cond (< p start) -1 (b= b p \}) p :else (recur (dec p)))))]
      (when-not (neg? p)
        (let [k (sep-brace b p stop)]
          (if (neg? k) (recur p) [(inc p) k]))))))

;; framing.py's regular expressions, run on bytes decoded as ISO-8859-1 (one char per byte), so
;; that they see exactly what Python's bytes patterns see. Java's \s is Python's bytes \s.
(def ^:private ^Pattern tail-re
  (Pattern/compile (str "\\]\\s*(?:,\\s*\"[^\"]*\"\\s*:\\s*(?:\"[^\"]*\"|-?[0-9.eE+-]+|true|false|null"
                        "|\\{[^{}]*\\})\\s*)*\\}?\\s*$")))
(def ^:private ^Pattern display-unit-re (Pattern/compile "\"displayTimeUnit\"\\s*:\\s*\"([^\"]*)\""))

;; ------------------------------------------------------------------ opening

(defn cut-short?
  "True once the stream of `open-input` has ended because its gzip stream was cut short (or
  undecodable from some point): the rest of the file is lost (`pyprof.jvm.GunzipStream`, a port
  of Python's `GunzipStream`)."
  [^InputStream in]
  (and (instance? GunzipStream in) (.truncated ^GunzipStream in)))

(defn open-input
  "The trace's bytes (gzip decompressed when the file starts with its magic bytes, see
  `cut-short?`)."
  ^InputStream [^String path]
  (let [f (File. path)
        why (cond (not (.exists f)) "No such file or directory"
                  (.isDirectory f) "Is a directory"
                  (not (.canRead f)) "Permission denied")]
    (when why
      (throw (rules/error "trace.cannot_open" {:path path :shown (py-repr path) :why why})))
    (let [in (BufferedInputStream. (FileInputStream. f) 65536)]
      (.mark in 2)
      (let [b0 (.read in) b1 (.read in)]
        (.reset in)
        (if (and (== b0 0x1f) (== b1 0x8b))
          (GunzipStream. in)
          in)))))

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

(defn record-keys!
  "Python's `_record_keys`: notes the top-level keys of `scan` (a `pyprof.trace.jsonscan/scan-object`
  result) other than traceEvents and displayTimeUnit in the report's `:other-keys` (once each,
  in order), keeps the small values writers keep in `:top-level`, and the display unit."
  [rep {:keys [keys values]}]
  (vswap! rep (fn [r]
                (let [others (reduce (fn [ks k] (if (or (not-other-keys k) (some #{k} ks)) ks (conj ks k)))
                                     (:other-keys r) keys)
                      unit (get values (top-level "display_time_unit"))]
                  (cond-> (assoc r :other-keys others :top-level (merge (:top-level r) values))
                    (string? unit) (assoc :display-time-unit unit))))))

(defn skip-head
  "Python's `skip_head`: where the first event starts in b[start, stop) (the file's first bytes,
  at least 4 KiB unless the file is shorter); what was found (header, other top-level keys, bare
  comma, junk) is recorded in the report. -1: the top-level keys before traceEvents run past
  `stop` and `eof` is false (read more and call again)."
  [^bytes b start stop rep eof]
  (let [start (long start) stop (long stop)
        s (skip-ws b start stop)
        m (head-object-end b start stop)]
    (cond
      (>= m 0) (skip-comma b m stop rep)
      (and (< s stop) (b= b s \{))
      (if (looks-like-event-start? b s stop)
        (do (flag! rep :missing-head) s)               ; a bare event: the header is missing
        (let [scan (scan-object b (inc s) stop {:first true :keep kept-keys})]
          (if (and (= :incomplete (:status scan)) (not eof))
            -1
            (do (record-keys! rep scan)
                (cond
                  (= :events (:status scan)) (skip-comma b (skip-ws b (:end scan) stop) stop rep)
                  (and (= :closed (:status scan)) (blank? b (:end scan) stop)) stop ; not a trace
                  :else (drop-to-brace b s stop rep))))))
      (and (< s stop) (b= b s \[)) (skip-comma b (skip-ws b (inc s) stop) stop rep)
      (and (< s stop) (b= b s \,))
      (let [r (skip-ws b (inc s) stop)]
        (flag! rep :leading-comma)
        (if (and (< r stop) (b= b r \{))
          (do (flag! rep :missing-head) r)
          (drop-to-brace b r stop rep)))
      (== s stop) s
      :else (drop-to-brace b s stop rep))))

(defn skip-seam
  "Python's `skip_seam`: where the events after a finished trace object inside the file start in
  b[start, stop) (MXNet appends each further dump()): after the `,` and the new
  `{\"traceEvents\": [` (and its bare `,`)."
  ^long [^bytes b ^long start ^long stop]
  (let [r (skip-ws b start stop)
        r (if (and (< r stop) (b= b r \,)) (skip-ws b (inc r) stop) r)
        m (head-object-end b r stop)]
    (if (neg? m)
      r
      (if (and (< m stop) (b= b m \,)) (skip-ws b (inc m) stop) m))))

(defn strip-tail
  "Python's `strip_tail`: the end of the last body in b[start, stop) without MXNet's closing `]`,
  `\"displayTimeUnit\"` and `}` (the keys after the `]` recorded, or for a bare array's `]` only
  the display unit), or nil when the end is not that simple (other top-level keys, no closing at
  all): the body parser then finds the end of the events from the structure."
  [^bytes b ^long start ^long stop rep]
  (let [end (rskip-ws b start stop)
        j (long (loop [j (dec end)] (cond (< j start) -1 (b= b j \]) j :else (recur (dec j)))))]
    (when (and (>= j 0) (.matches (.matcher tail-re (latin1-str b j end))))
      (let [scan (scan-object b (inc j) end {:first false :keep kept-keys})]
        (if (= :closed (:status scan))
          (record-keys! rep scan)
          (let [m (.matcher display-unit-re (latin1-str b j end))]
            (when (.find m)
              (vswap! rep assoc :display-time-unit
                      (String. (latin1-bytes (.group m 1)) StandardCharsets/UTF_8))))))
      (rskip-ws b start j))))
