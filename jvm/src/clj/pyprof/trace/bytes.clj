(ns pyprof.trace.bytes
  "Byte-level scanning of trace text, for `pyprof.trace.framing` and `pyprof.trace.body`.

  No Python module of its own: these are the `bytes` operations the Python reference
  (`pyprof/trace/framing.py`, `pyprof/trace/bodyparser.py`) gets from `bytes.strip()`,
  `bytes.find()`, `in` and the `\\s` of its bytes regular expressions, on a region [start, stop)
  of a reused byte array instead of on slices. `latin1-str` / `latin1-bytes` decode one char per
  byte, so that Java regular expressions see exactly what Python's bytes patterns see."
  (:import (java.nio.charset StandardCharsets)
           (java.util Arrays)))

(set! *warn-on-reflection* true)

(defmacro b=
  "True when b[i] is the ASCII character `c` (a literal)."
  [b i c] `(== (aget ~b ~i) (byte ~(int c))))

(defn- ws?
  "Python's bytes whitespace (`bytes.strip()`, `\\s`): space, \\t, \\n, \\r, \\v, \\f."
  [^long c]
  (or (== c 32) (and (>= c 9) (<= c 13))))

(defn skip-ws
  "The first index in [i, stop) that is not whitespace, or `stop`."
  ^long [^bytes b ^long i ^long stop]
  (loop [i i] (if (and (< i stop) (ws? (aget b i))) (recur (inc i)) i)))

(defn rskip-ws
  "End of [start, stop) without trailing whitespace."
  ^long [^bytes b ^long start ^long stop]
  (loop [j stop] (if (and (> j start) (ws? (aget b (dec j)))) (recur (dec j)) j)))

(defn blank?
  "True when b[start, stop) is all whitespace."
  [^bytes b ^long start ^long stop] (== stop (skip-ws b start stop)))

(defn- matches-at?
  "True when b[i, i + |needle|) is `needle` (and lies before `stop`)."
  [^bytes b ^long i ^long stop ^bytes needle]
  (let [n (alength needle)]
    (and (<= (+ i n) stop)
         (loop [k 0]
           (cond (== k n) true
                 (== (aget b (+ i k)) (aget needle k)) (recur (inc k))
                 :else false)))))

(defn index-of
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

(defn contains-any?
  "True when one of `needles` occurs in b[start, stop). All of them begin with `prefix`: only the
  places where it occurs are tried (as Python's `any(p in piece for p in needles)`)."
  [^bytes b start stop ^bytes prefix needles]
  (let [stop (long stop)]
    (loop [from (long start)]
      (let [i (index-of b from stop prefix)]
        (cond (neg? i) false
              (some (fn [nd] (matches-at? b i stop nd)) needles) true
              :else (recur (inc i)))))))

(defn utf8
  "The UTF-8 bytes of `s`."
  ^bytes [^String s] (.getBytes s StandardCharsets/UTF_8))
(defn latin1-str
  "b[start, stop) as a string of one char per byte (ISO-8859-1)."
  ^String [^bytes b ^long start ^long stop]
  (String. b start (- stop start) StandardCharsets/ISO_8859_1))
(defn latin1-bytes
  "The bytes of a string of one char per byte (the inverse of `latin1-str`)."
  ^bytes [^String s] (.getBytes s StandardCharsets/ISO_8859_1))

(definterface IGrowable
  (^bytes array [] "The bytes, valid in [0, size).")
  (^long size [])
  (^void append [^bytes src ^long start ^long stop] "Appends src[start, stop)."))

(deftype ^:private Growable [^:unsynchronized-mutable ^bytes a ^:unsynchronized-mutable ^long n]
  IGrowable
  (array [_] a)
  (size [_] n)
  (append [_ src start stop]
    (let [len (- stop start)
          need (+ n len)]
      (when (> need (alength a))              ; doubling: each byte is copied O(1) times
        (set! a (Arrays/copyOf a (int (min 0x7ffffff7 (max need (* 2 (alength a))))))))
      (System/arraycopy src start a n len)
      (set! n need))))

(alter-meta! #'->Growable assoc :private true)

(defn growable
  "An empty growable byte buffer (`IGrowable`), Python's `bytearray`: appending copies only what
  is appended (amortized), never what came before."
  ^IGrowable []
  (Growable. (byte-array 64) 0))
