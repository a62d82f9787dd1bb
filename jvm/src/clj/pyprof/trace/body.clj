(ns pyprof.trace.body
  "Turning a body of trace text into events, repairing what MXNet writes wrong: a port of
  `pyprof/trace/bodyparser.py` (`BodyParser`), working in place in the reader's byte buffer.

  A body (a run of whole events cut by `pyprof.trace.framing`) is framed as a JSON array in
  place (`frame-body!`). When it is one valid array of trace events
  (`pyprof.trace.json/array-status`) it is parsed event by event. When it is valid JSON apart
  from where it ends, or holds values that are not events, its values are found from the
  structure (`pyprof.trace.jsonscan`): values that are not events are dropped one by one, an
  event cut by a `}, {` inside its `args` or a string is carried into the next body (joined again
  with the separator text the reader cut at), and the end of the events array (followed by other
  top-level keys, or by another dump appended to the file) is found. Otherwise it is split at every separator and each piece parsed
  alone; a piece that fails is repaired (unescaped quotes, back slashes and control characters
  inside `name`/`cat`/`args` strings are escaped, with Python's regular expressions), joined with
  up to 15 following pieces (a separator inside a string), cut at a finished trace's `]}` (a
  dump appended after it), and dropped, counted, only as a last resort. Repairs and drops are
  recorded in the read report. The parser's state across bodies (`new-parser`) is the carried
  part of an event and the text after the events array.

  `:exclude-categories` and `:drop-async-copies` skip events after parsing (Python's `_skip`): a
  repair of a skipped event is not counted, nor is an unreadable piece that shows a skipped
  category (`\"cat\": \"<category>\"`)."
  (:require [pyprof.trace.bytes :refer [b= blank? contains-any? growable index-of latin1-bytes
                                        latin1-str rskip-ws utf8]]
            [pyprof.trace.framing :refer [record-keys! separators skip-seam]]
            [pyprof.trace.json :refer [array-status each-event! load-value try-load valid-value?]]
            [pyprof.trace.jsonscan :refer [scan-object split-values]]
            [pyprof.trace.naming :as naming]
            [pyprof.trace.phases :refer [kept-keys]]
            [pyprof.trace.read-report :refer [add! flag!]])
  (:import (java.nio.charset StandardCharsets)
           (pyprof.trace.bytes IGrowable)
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
  "What Python's `BodyParser` skips: `exclude-categories` (a collection) and, with
  `drop-async-copies`, MXNet's async b/e copies of operators. `:skip?` tests a parsed event
  (Python's `_skip`); `:marked?` an unreadable piece b[start, stop) (Python's `_marked`: its
  bytes show a skipped category)."
  [exclude-categories drop-async-copies]
  (let [excluded (set exclude-categories)
        copies (if drop-async-copies naming/async-copy-categories #{})
        skipped (into excluded copies)
        marks (fn [cats] (vec (for [c (sort cats), m [(str "\"cat\": \"" c "\"") (str "\"cat\":\"" c "\"")]]
                                (utf8 m))))
        ex-marks (marks excluded)
        copy-marks (marks copies)
        async (mapv utf8 ["\"ph\": \"b\"" "\"ph\":\"b\"" "\"ph\": \"e\"" "\"ph\":\"e\""])
        cat-prefix (utf8 "\"cat\":")
        ph-prefix (utf8 "\"ph\":")]
    (when (seq skipped)
      {:skip? (fn [ev]
                (let [c (get ev "cat")]
                  (and (string? c) (contains? skipped c)
                       (or (contains? excluded c) (contains? #{"b" "e"} (get ev "ph"))))))
       :marked? (fn [^bytes b start stop]
                  (or (and (seq ex-marks) (contains-any? b start stop cat-prefix ex-marks))
                      (and (seq copy-marks) (contains-any? b start stop cat-prefix copy-marks)
                           (contains-any? b start stop ph-prefix async))))})))

(def headroom
  "Bytes kept free before the unparsed text in the read buffer, for the \"[\" written in front of
  a body."
  2)

(defn- frame-body!
  "Makes the body b[start, stop) parseable in place: writes \"[\" before it and \"]\" after it
  (in the headroom before `start`, and at `stop`: the separator after a body cut at one, or
  past the end of the file's last body). Returns [open close], the indices of \"[\" and \"]\"."
  [^bytes b ^long start ^long stop]
  (aset b (dec start) (byte (int \[)))
  (aset b stop (byte (int \])))
  [(dec start) stop])

(defn- load-one
  "Python's `_load_one`: the event in b[start, stop), escaping unescaped characters if needed
  (a repair counts for an event kept only, as Python's `_skip` takes it back)."
  [{:keys [rep patterns]} ^bytes b ^long start ^long stop]
  (or (try-load b start stop)
      (let [text (Arrays/copyOfRange b (int start) (int stop))
            fixed (escape-piece text)]
        (when-not (Arrays/equals text fixed)
          (when-let [ev (try-load fixed 0 (alength fixed))]
            (when-not (and patterns ((:skip? patterns) ev))
              (add! rep :escaped-names 1))
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

(defn- drop-pieces!
  "Python's `_drop`: counts pieces [from, to) of b as dropped fragments, except those that show a
  skipped category (events skipped on purpose)."
  [{:keys [rep patterns saw-event]} ^bytes b ^longs starts ^longs ends from to]
  (loop [k (long from)]
    (when (< k to)
      (if (and patterns ((:marked? patterns) b (aget starts k) (aget ends k)))
        (vreset! saw-event true)
        (do (add! rep :dropped-fragments 1)
            (add! rep :dropped-bytes (- (aget ends k) (aget starts k)))))
      (recur (inc k)))))

(defn- copy-of ^bytes [^bytes b ^long start ^long stop]
  (Arrays/copyOfRange b (int start) (int stop)))

(defn- join-bytes
  "The byte arrays `parts` joined, in a new array with `before` free bytes before them and
  `after` after them."
  ^bytes [^long before ^long after parts]
  (let [n (reduce + (map #(alength ^bytes %) parts))
        out (byte-array (+ before n after))]
    (reduce (fn [^long at ^bytes p]
              (System/arraycopy p 0 out at (alength p))
              (+ at (alength p)))
            before parts)
    out))

(defn- with-room
  "[array start stop]: the byte arrays `parts` joined, in a new array with `headroom` bytes
  before and room after (what `frame-body!` writes)."
  [& parts]
  (let [^bytes out (join-bytes headroom 4 parts)]
    [out headroom (- (alength out) 4)]))

(def ^:private comma (utf8 ","))

(defn- parse-pieces!
  "Python's `_parse_pieces` on the body b[start, stop): each piece between separators (braces
  included) parsed alone, else joined with up to 15 following pieces, else dropped and counted.
  `carry?`: a trailing run of pieces that fail is kept for the next body (an event cut at the
  read boundary) instead of dropped. Passes the events to f in order; returns their number."
  [{:keys [rep f carry] :as ctx} ^bytes b start stop carry?]
  (let [start (long start) stop (long stop)
        ^longs seps (separators b start stop)
        n (inc (aget seps 0))
        ;; piece i is [starts[i], ends[i])
        starts (long-array n)
        ends (long-array n)]
    (aset starts 0 start)
    (dotimes [k (dec n)]
      (aset ends k (inc (aget seps (+ 1 (* 2 k)))))
      (aset starts (inc k) (aget seps (+ 2 (* 2 k)))))
    (aset ends (dec n) stop)
    ;; failed: the first piece of the run of failed pieces since the last event, or -1
    (loop [i 0, events 0, failed -1]
      (if (>= i n)
        (do (cond (neg? failed) nil
                  carry? (when (< (aget starts failed) stop)
                           (vreset! carry (copy-of b (aget starts failed) stop)))
                  :else (drop-pieces! ctx b starts ends failed n))
            events)
        (let [found (loop [used 1]
                      (when (<= used (min max-join (- n i)))
                        (if-let [evs (load-piece ctx b (aget starts i) (aget ends (+ i used -1)))]
                          [evs used]
                          (recur (inc used)))))]
          (if-let [[evs used] found]
            (do (when-not (neg? failed) (drop-pieces! ctx b starts ends failed i))
                (doseq [ev evs] (f ev))
                (recur (+ i (long used)) (+ events (count evs)) -1))
            (recur (inc i) events (if (neg? failed) i failed))))))))

;; ------------------------------------------------------------------ structure: carry and tail

(declare parse-events!)

(def ^:private tail-scan-bytes
  "A longer text after the events array is scanned once, at the end (Python's
  `_TAIL_SCAN_BYTES`)."
  (bit-shift-left 4 20))

(defn- close-tail!
  "Python's `_close_tail`: scans the text after the events array's `]`, the trace object's other
  keys up to its `}`; text after that is another dump appended to the file, whose events are
  parsed. Returns the number of events passed to f."
  ^long [{:keys [rep tail tail-closed] :as ctx} final]
  (let [^IGrowable g @tail
        t (.array g)
        len (.size g)
        scan (scan-object t 0 len {:first false :keep kept-keys})
        end (long (:end scan))]
    (if (and (= :incomplete (:status scan)) (not final))
      0
      (do
        (record-keys! rep scan)
        (if (not= :closed (:status scan))                 ; cut short at the end, or not JSON
          (do (vreset! tail-closed true)
              (when-not (blank? t end len)
                (add! rep :dropped-fragments 1)
                (add! rep :dropped-bytes (- len end)))
              (flag! rep :missing-tail)
              0)
          (do (vreset! tail nil)
              (vreset! tail-closed false)
              (if (blank? t end len)
                (do (vreset! tail (growable)) (vreset! tail-closed true) 0)
                (do (add! rep :inner-tails 1)
                    (let [r (skip-seam t end len)]
                      (if (blank? t r len)
                        0
                        (let [[b s e] (with-room (copy-of t r len))]
                          (parse-events! ctx b s e final (when final (byte-array 0)) comma))))))))))))

(defn- feed-tail!
  "Python's `_feed_tail`: a body after the end of the events array, b[start, stop) followed by
  `end` (nil or bytes), appended to the tail after `before` (the separator text the reader cut
  at), in a growable buffer: no copy of what came before."
  [{:keys [rep tail tail-closed] :as ctx} ^bytes before ^bytes b start stop ^bytes end final]
  (if @tail-closed                 ; more text after the closed trace object and what followed it
    (do (add! rep :dropped-fragments 1)
        (add! rep :dropped-bytes (+ (- (long stop) (long start)) (if end (alength end) 0)))
        0)
    (let [^IGrowable t @tail]
      (.append t before 0 (alength before))
      (.append t b start stop)
      (when end (.append t end 0 (alength end)))
      (if (or final (<= (.size t) (long tail-scan-bytes)))
        (close-tail! ctx final)
        0))))

(defn- parse-structured!
  "Python's `_parse_structured`: the events of a body b[start, stop) that is valid JSON apart
  from where it ends, or holds values that are not events (dropped and counted one by one): an
  event cut by a separator inside its `args` or a string (carried into the next body), or the
  end of the events array followed by more top-level keys (and `end`, the text the reader
  stripped after the last body). Every value is checked before the first is passed on; nil
  (nothing passed on): the body is damaged otherwise."
  [{:keys [rep f tail] :as ctx} ^bytes b start stop last ^bytes end]
  (let [start (long start) stop (long stop)
        [^longs spans status at] (split-values b start stop)
        n (aget spans 0)
        span (fn [^long k] [(aget spans (+ 1 (* 2 k))) (aget spans (+ 2 (* 2 k)))])
        bad (when-not (= status :error)
              (loop [k 0] (cond (>= k n) -1
                                (let [[a e] (span k)] (valid-value? b a e)) (recur (inc k))
                                :else k)))
        raw (and last (nil? end))]
    (when (and bad (or (neg? (long bad)) (and (== (long bad) (dec n)) (= status :complete))))
      ;; a last value that does not load ends the body: an event cut inside a string at a
      ;; "}, {" the reader took for a separator; it ends where the scan lost track of the string
      (let [[n status at] (if (neg? (long bad)) [n status at] [(dec n) :incomplete (first (span bad))])
            n (long n) at (long at)
            events (loop [k 0, events 0]
                     (if (>= k n)
                       events
                       (let [[a e] (span k)
                             v (load-value b a e)]
                         (if (and (map? v) (contains? v "ph"))
                           (do (f v) (recur (inc k) (inc events)))
                           (do (add! rep :dropped-fragments 1)
                               (add! rep :dropped-bytes (- (long e) (long a)))
                               (recur (inc k) events))))))]
        (case status
          :incomplete (do (when raw (flag! rep :missing-tail))      ; a cut event, or damage
                          (+ events (parse-pieces! ctx b at stop (not last))))
          :array-end (let [g (growable)]
                       (.append g b (inc at) stop)
                       (when end (.append g end 0 (alength end)))
                       (vreset! tail g)
                       (+ events (close-tail! ctx last)))
          (do (when raw (flag! rep :missing-tail)) events))))))

(defn- parse-events!
  "Python's `BodyParser.parse`: passes the trace events of the body b[start, stop) (whole events
  separated by `,`) to f, in order; returns their number. `last`: the file's last body; `end`:
  the text the reader stripped after it (MXNet's `]` and `}`), nil for a last body that keeps
  the file's end as written (no simple end found): its end is found from the structure, or
  reported missing. `sep`: the separator text the reader cut at after this body, which joins it
  to the next one again where needed. Writes over b[start - 2, stop + 2)."
  [{:keys [rep f carry tail] :as ctx} ^bytes b start stop last ^bytes end ^bytes sep]
  (let [raw (and last (nil? end))
        ^bytes before @(:sep ctx)]
    (vreset! (:sep ctx) sep)
    (if (some? @tail)
      (feed-tail! ctx before b start stop (when last end) last)
      (let [[^bytes b start stop] (if-let [^bytes c @carry]
                                    (do (vreset! carry nil)
                                        (add! rep :carried-events 1)
                                        (with-room c before (copy-of b start stop)))
                                    [b start stop])
            start (long start)
            stop (long (if raw
                         (let [e (rskip-ws b start stop)]  ; and a crash's dangling separator
                           (if (and (> e start) (b= b (dec e) \,)) (dec e) e))
                         stop))
            [open close] (frame-body! b start stop)
            open (long open) close (long close)]
        (case (array-status b open (inc close))
          :events (do (when raw (flag! rep :missing-tail))
                      (each-event! b open (inc close) f))
          :other (do (when raw (flag! rep :missing-tail))   ; drops what is not an event
                     (or (parse-structured! ctx b (inc open) close last end)
                         (parse-pieces! ctx b (inc open) close false)))
          :invalid (or (parse-structured! ctx b (inc open) close last end)
                       (do (when raw (flag! rep :missing-tail))
                           (parse-pieces! ctx b (inc open) close (not last)))))))))

;; ------------------------------------------------------------------ API

(defn new-parser
  "Python's `BodyParser`: the state of parsing one file's bodies, recording repairs in the read
  report `rep` (a volatile, see `pyprof.trace.read-report`) and passing events to `f`, less
  those `patterns` (from `filter-patterns`) skip."
  [rep f patterns]
  (let [saw-event (volatile! false)
        kept (volatile! 0)
        sink (volatile! f)
        skip? (:skip? patterns)]
    {:rep rep :patterns patterns :saw-event saw-event :kept kept :sink sink
     :f (fn [ev]
          (vreset! saw-event true)                        ; skipped on purpose counts as seen
          (when-not (and skip? (skip? ev))
            (vswap! kept inc)
            (@sink ev)))
     :sep (volatile! comma) :carry (volatile! nil) :tail (volatile! nil)
     :tail-closed (volatile! false)}))

(defn parse-body!
  "Parses the body b[start, stop), counting the events kept in the report (see `parse-events!`:
  `last` the file's last body, `end` the bytes the reader stripped after it or nil, `sep` the
  separator text the reader cut at after it, nil for \",\"). Writes over b[start - 2, stop + 2)."
  [{:keys [rep kept] :as ctx} ^bytes b start stop last end sep]
  (let [k0 (long @kept)]
    (parse-events! ctx b start stop last end (or sep comma))
    (add! rep :events (- (long @kept) k0))))

(defn finish!
  "Python's `BodyParser.finish`, at the end of the file: a carried part that never closed is
  dropped and counted, a text after the events array that never closed is reported (missing
  tail)."
  [{:keys [rep carry tail tail-closed] :as ctx}]
  (when-let [^bytes c @carry]
    (add! rep :dropped-fragments 1)
    (add! rep :dropped-bytes (alength c))
    (vreset! carry nil)
    (flag! rep :missing-tail))
  (when (and (some? @tail) (not @tail-closed))
    (vreset! (:sink ctx) (fn [_]))                      ; Python discards what this returns
    (close-tail! ctx true)
    (when-not @tail-closed (flag! rep :missing-tail))))
