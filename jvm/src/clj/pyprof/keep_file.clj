(ns ^:no-doc pyprof.keep-file
  "The trace file a config names again while MXNet writes it: its events kept in parts beside
  it (a hard link, else a rename), as Python's pyprof.process.keep_file (api.json
  keep_filename); the finished dump joins them."
  (:require [clojure.string :as str]
            [pyprof.output :as output]
            [pyprof.rules :as rules])
  (:import (pyprof.jvm MXNetException)
           (java.nio.file FileSystemException Files NoSuchFileException OpenOption Path Paths
                          StandardCopyOption)))

(set! *warn-on-reflection* true)

(def ^:private spec (rules/api "keep_filename"))

(defn- beside
  "The file named by `pattern` ({pid}, {index}, {name}) in the directory of `path`."
  ^Path [^String path ^String pattern index]
  (let [full (Paths/get (output/abspath path) (make-array String 0))]
    (.resolveSibling full ^String (rules/render pattern {:pid (.pid (java.lang.ProcessHandle/current))
                                                         :index index :name (.getFileName full)}))))

(defn keep!
  "Keeps the bytes of `path` in its `index`-th part; returns the part, or nil when there is no
  file. Without hard links, `(stop-timer! scratch)` points MXNet elsewhere first."
  [^String path index stop-timer!]
  (let [part (beside path (spec "part_name") index)
        file (Paths/get (output/abspath path) (make-array String 0))
        linked (try (Files/createLink part file) :linked
                    (catch NoSuchFileException _ :none)
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
  "Calls `config!`, retried for up to `wait-s` seconds while MXNet fails with \"auto_remove_ ==
  false\" (a stopped dump timer not exited yet)."
  [config! wait-s]
  ;; doubles: the nanoseconds of a 1e10 s dump_period overflow a long
  (let [now #(/ (System/nanoTime) 1e9)
        deadline (+ (double (now)) (double wait-s))]
    (loop []
      (when-not (try (config!) true
                     (catch MXNetException e
                       (if (and (str/includes? (str (.mxnetMessage e)) "auto_remove_")
                                (< (double (now)) deadline))
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
  "Joins a dead process's kept `parts` and `path` into `path` byte for byte, then deletes the
  parts; an IOException leaves them as they were."
  [parts ^String path]
  (let [full (Paths/get (output/abspath path) (make-array String 0))
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
