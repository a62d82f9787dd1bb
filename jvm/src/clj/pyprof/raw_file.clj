(ns ^:no-doc pyprof.raw-file
  "MXNet's trace files written again as valid traces, every metadata event this process has seen
  first: the JVM side of Python's `pyprof.process.rawfile`."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [pyprof.output :as output]
            [pyprof.trace.slices :as slices]
            [pyprof.trace.reader :as reader])
  (:import (java.io RandomAccessFile) (java.nio.charset StandardCharsets)
           (java.nio.file Files Paths StandardCopyOption)
           (java.nio.file.attribute FileAttribute PosixFilePermissions)
           (pyprof.jvm MetadataStore)))

(set! *warn-on-reflection* true)

(defonce ^:private seen-metadata (atom [])) ; when no MetadataStore is lent

(defn remember-metadata!
  "Adds the metadata events among `events` not yet known (to `MetadataStore/current` when Python
  lends it); returns the known metadata."
  [events]
  (let [events (filterv #(= "M" (get % "ph")) events)]
    (if-let [^MetadataStore store (MetadataStore/current)]
      (mapv #(into {} (map (fn [[k v]] [k (if (instance? java.util.Map v) (into {} v) v)])) %)
            (.remember store events))
      (swap! seen-metadata #(vec (distinct (into % events)))))))

(defn metadata "Every metadata event read so far, in order." [] (remember-metadata! []))

(defn events-in
  "The events in bytes [start, end) of the trace file at `path` (none when it does not exist)."
  [path ^long start ^long end]
  (let [f (io/file (output/abspath path))]
    (reader/parse-raw
     (if (or (not (.isFile f)) (>= start end))
       ""
       (with-open [r (RandomAccessFile. f "r")]
         (let [buf (byte-array (max 0 (int (- (min end (.length r)) start))))]
           (.seek r start)
           (.readFully r buf)
           (String. buf StandardCharsets/UTF_8)))))))

(defonce ^:private writing (atom #{})) ; temporary files being written now

(defn write-atomic!
  "Writes the file `path` by (write java.io.Writer) into a temporary file beside it named with the
  pid (a dead process's is deleted by the next start), then renamed over `path`; `mode` (e.g.
  \"rw-r--r--\") sets its permissions where the file system has them."
  [path mode write]
  (let [target (Paths/get (output/abspath (str path)) (make-array String 0))
        dir (.getParent target)
        _ (Files/createDirectories dir (make-array FileAttribute 0))
        tmp (Files/createTempFile dir (str ".pyprof-" (.pid (java.lang.ProcessHandle/current)) "-")
                                  ".tmp" (make-array FileAttribute 0))]
    (swap! writing conj tmp)
    (try
      (with-open [w (io/writer (.toFile tmp))] (write w))
      (when mode
        (try (Files/setPosixFilePermissions tmp (PosixFilePermissions/fromString mode))
             (catch UnsupportedOperationException _)))
      (Files/move tmp target (into-array [StandardCopyOption/REPLACE_EXISTING
                                          StandardCopyOption/ATOMIC_MOVE]))
      (finally (Files/deleteIfExists tmp)
               (swap! writing disj tmp)))))

(defn delete-unfinished!
  "At exit, last: deletes the temporary files of writes still going on."
  []
  (doseq [^java.nio.file.Path tmp @writing]
    (try (Files/deleteIfExists tmp) (catch Exception _))))

(defn write-trace!
  "Writes `events` as a valid trace at `path`, atomically (`pyprof.trace.slices/rewrite`)."
  [^String path events]
  (write-atomic! path "rw-r--r--"
                 (fn [^java.io.Writer w]
                   (.write w "{\"traceEvents\":[\n")
                   (loop [[e & more] (slices/rewrite events), first? true]
                     (when e
                       (when-not first? (.write w ",\n"))
                       (json/write e w)
                       (recur more false)))
                   (.write w "\n],\"displayTimeUnit\":\"ms\"}\n"))))

(defn write-events!
  "Writes `known` metadata, then `events`, each metadata event once, as a valid trace at `out`;
  returns the number of events written."
  [out known events]
  (let [seen (volatile! (set known))
        out-events (into (vec known)
                         (remove #(and (= "M" (get % "ph"))
                                       (or (contains? @seen %) (do (vswap! seen conj %) false))))
                         events)]
    (write-trace! out out-events)
    (count out-events)))

(defn rewrite-trace!
  "Rewrites the MXNet trace at `path` as a valid trace, known metadata first; returns the number of
  events."
  [^String path]
  (let [known (metadata), events (events-in path 0 Long/MAX_VALUE)]
    (remember-metadata! events)
    (write-events! path known events)))

(defn join-traces!
  "Joins the kept `parts` and the trace at `path` into one valid trace at `path`, deletes the
  parts; returns the number of events."
  [parts ^String path]
  (let [events (mapcat #(events-in % 0 Long/MAX_VALUE) (concat parts [path]))
        n (write-events! path (remember-metadata! events) events)]
    (doseq [^String p parts] (.delete (io/file p)))
    n))
