(ns pyprof.trace.framing
  "Where the events are in a trace file's text: opening, head, separators, tail. A port of
  `pyprof/trace/framing.py`, on a region [start, stop) of the reader's byte buffer:

  - `open-input`: the file's bytes, plain or gzip (by its magic bytes), Python's `open_binary`.
  - `skip-head`: the text before the first event (`{\"traceEvents\": [`, `[`, a bare `,`, or the
    header followed by a bare comma) skipped and recorded in the read report.
  - `separators` / `last-separator`: events are separated by `}`, whitespace, `,`, whitespace,
    `{` (Python's `EVENT_SEPARATOR`); a chunk is cut after its last separator.
  - `strip-tail`: at the end of the file the closing `]` and trailing keys are stripped (the
    display unit recorded); their absence is reported as a missing tail."
  (:require [clojure.string :as str]
            [pyprof.trace.bytes :refer [b= index-of latin1-bytes latin1-str rskip-ws skip-ws
                                        utf8]]
            [pyprof.trace.read-report :refer [add! flag!]])
  (:import (java.io BufferedInputStream File FileInputStream InputStream)
           (java.nio.charset StandardCharsets)
           (java.util.regex Pattern)
           (java.util.zip GZIPInputStream)))

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

(defn open-input
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

(defn skip-head
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

(defn strip-tail
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

