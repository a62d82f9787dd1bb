(ns pyprof.trace.body
  "Turning a body of trace text into events, repairing what MXNet writes wrong: a port of
  `pyprof/trace/bodyparser.py` (`BodyParser`), working in place in the reader's byte buffer.

  A body (a run of whole events cut by `pyprof.trace.framing`) is first filtered as Python's
  `_prefilter` does (`:drop-async-copies` / `:exclude-categories`: a bytes test per event, same
  note counts) and framed as a JSON array in place (`frame-body!`). When it is one valid array of
  trace events (`pyprof.trace.json/events-array?`) it is parsed event by event. Otherwise it is
  split at every separator and each piece parsed alone; a piece that fails is repaired
  (unescaped quotes, back slashes and control characters inside `name`/`cat`/`args` strings are
  escaped, with Python's regular expressions), joined with up to 15 following pieces (a separator
  inside a string), cut at a finished trace's `]}` (a dump appended after it), and dropped,
  counted, only as a last resort. Repairs and drops are recorded in the read report."
  (:require [pyprof.trace.bytes :refer [b= blank? contains-any? index-of latin1-bytes latin1-str
                                        rskip-ws skip-ws utf8]]
            [pyprof.trace.framing :refer [separators]]
            [pyprof.trace.json :refer [each-event! events-array? try-load]]
            [pyprof.trace.read-report :refer [add!]])
  (:import (java.nio.charset StandardCharsets)
           (java.util Arrays)
           (java.util.regex Matcher Pattern)))

(set! *warn-on-reflection* true)

;; bodyparser.py's regular expressions, run on bytes decoded as ISO-8859-1 (one char per byte),
;; so that they see exactly what Python's bytes patterns see. Java's \s is Python's bytes \s.
(def ^:private ^Pattern seam-re
  (Pattern/compile (str "\\}\\s*\\]\\s*(?:,\\s*\"[^\"]*\"\\s*:\\s*(?:\"[^\"]*\"|-?[0-9.eE+-]+|true|false"
                        "|null|\\{[^{}]*\\})\\s*)*\\}\\s*,?\\s*(?:\\{\\s*\"traceEvents\"\\s*:\\s*\\[\\s*,?\\s*)?")))
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

;; ------------------------------------------------------------------ bodies

(defn filter-patterns
  "The bytes tests of Python's `_prefilter` for `exclude-categories` and async operator copies."
  [exclude-categories drop-async-copies]
  (let [cat-patterns (fn [c] [(utf8 (str "\"cat\": \"" c "\"")) (utf8 (str "\"cat\":\"" c "\""))])]
    {:excluded (vec (mapcat cat-patterns exclude-categories))
     :copies (when drop-async-copies (vec (mapcat cat-patterns ["operator" "Custom Operator"])))
     :async (mapv utf8 ["\"ph\": \"b\"" "\"ph\": \"e\"" "\"ph\":\"b\"" "\"ph\":\"e\""])
     :cat-prefix (utf8 "\"cat\":")
     :ph-prefix (utf8 "\"ph\":")
     :ph (utf8 "\"ph\"")}))

(def headroom
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

(defn parse-body!
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

