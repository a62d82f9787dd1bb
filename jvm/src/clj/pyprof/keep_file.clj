(ns pyprof.keep-file
  "The trace file a config names again while MXNet writes it: its events are kept in parts, as
  Python's pyprof.process.keep_file (the rule is api.json keep_filename). MXNet's config unlinks its
  target file, so before a config that names the file the profiler has been writing, the file's
  bytes are kept in a hidden part beside it: a hard link (a continuous-dump write that lands
  before the config goes to the same inode); where the file system has none, a rename after the
  dump timer was stopped. The finished dump joins the parts and the file
  (pyprof.session.raw/join-traces!). Internal: pyprof.profiler calls it under its lock."
  (:require [clojure.string :as str]
            [pyprof.rules :as rules])
  (:import (pyprof.jvm MXNetException)
           (java.nio.file FileSystemException Files NoSuchFileException OpenOption Path Paths
                          StandardCopyOption)))

(set! *warn-on-reflection* true)

(def spec "api.json keep_filename." (rules/api "keep_filename"))

(defn- beside
  "The file named by `pattern` ({pid}, {index}, {name}) in the directory of `path`."
  ^Path [^String path ^String pattern index]
  (let [full (.toAbsolutePath (Paths/get path (make-array String 0)))
        name (-> pattern
                 (str/replace "{pid}" (str (.pid (java.lang.ProcessHandle/current))))
                 (str/replace "{index}" (str index))
                 (str/replace "{name}" (str (.getFileName full))))]
    (.resolveSibling full name)))

(defn part-path
  "The `index`-th part kept of `path`: .pyprof-<pid>-kept-<index>-<name>.json beside it (the
  leftover cleanup joins a dead process's into `path`: join-leftover!)."
  ^String [path index]
  (str (beside path (spec "part_name") index)))

(defn keep!
  "Keeps the bytes of `path` in its `index`-th part, just before a config to `path`; returns
  the part, or nil when there is no file (MXNet still holds every event). Without hard links,
  `(stop-timer! scratch)` must configure MXNet to the scratch path with continuous_dump off
  first; then the file is renamed."
  [^String path index stop-timer!]
  (let [part (beside path (spec "part_name") index)
        file (.toAbsolutePath (Paths/get path (make-array String 0)))
        linked (try (Files/createLink part file) :linked
                    (catch NoSuchFileException _ :none)
                    ;; no hard links on this file system
                    (catch UnsupportedOperationException _ :no-links)
                    (catch FileSystemException _ :no-links))]
    (case linked
      :linked (str part)
      :none nil
      :no-links
      (let [scratch (beside path (spec "scratch_name") 0)]
        (try
          (stop-timer! (str scratch))
          (try (Files/move file part (into-array [StandardCopyOption/REPLACE_EXISTING]))
               (str part)
               (catch NoSuchFileException _ nil))
          (finally (Files/deleteIfExists scratch)))))))

(defn retry-while-timer-exits!
  "Calls `config!` (a config call to MXNet), retried for up to `wait-s` seconds while it fails
  with \"auto_remove_ == false\": a dump timer stopped by `keep!`'s fallback exits at its next
  wake-up (up to dump_period later), and until then MXNet starts no new one."
  [config! wait-s]
  (let [deadline (+ (System/nanoTime) (long (* 1e9 (double wait-s))))]
    (loop []
      (when-not (try (config!) true
                     (catch MXNetException e
                       (if (and (str/includes? (str (.mxnetMessage e)) "auto_remove_")
                                (< (System/nanoTime) deadline))
                         false
                         (throw e))))
        (Thread/sleep 10)
        (recur)))))

(def ^:private part-re
  (re-pattern (-> (str "\\Q" (spec "part_name") "\\E")
                  (str/replace "{pid}" "\\E(?<pid>\\d+)\\Q")
                  (str/replace "{index}" "\\E(?<index>\\d+)\\Q")
                  (str/replace "{name}" "\\E(?<name>.+)\\Q"))))

(defn parse-part
  "[pid index name-of-the-kept-file] of a part's file name, or nil when it is not a part."
  [^String file-name]
  (let [m (re-matcher part-re file-name)]
    (when (.matches m)
      [(Long/parseLong (.group m "pid")) (Long/parseLong (.group m "index")) (.group m "name")])))

(defn join-leftover!
  "Joins the kept `parts` of a dead process (in order) and the bytes `path` holds now (MXNet's
  headless, unfinished continuation; maybe absent) into `path`, byte for byte, then deletes the
  parts: an unfinished trace that `pyprof repair` makes valid. Written to a temporary file
  beside `path` and moved in place, so a failure (IOException, thrown) leaves the parts and
  `path` as they were."
  [parts ^String path]
  (let [full (.toAbsolutePath (Paths/get path (make-array String 0)))
        temp (beside (str full) (str (get (rules/api "raw_trace") "temp_prefix")
                                     "{pid}-kept-join-{name}.tmp") 0)]
    (try
      (with-open [out (Files/newOutputStream temp (make-array OpenOption 0))]
        (doseq [^String source (concat parts [(str full)])]
          (try (Files/copy (Paths/get source (make-array String 0)) out)
               (catch NoSuchFileException _ nil))))
      (Files/move temp full (into-array [StandardCopyOption/REPLACE_EXISTING]))
      (catch Throwable e
        (Files/deleteIfExists temp)
        (throw e)))
    (doseq [^String part parts]
      (Files/deleteIfExists (Paths/get part (make-array String 0))))))
