(ns ^:no-doc pyprof.session.rawdir
  "The private directory of this process's raw trace, and the leftovers of dead processes: the JVM
  side of Python's `pyprof.session.rawdir` (api.json raw_trace), which documents it."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [pyprof.keep-file :as keep-file]
            [pyprof.rules :as rules])
  (:import (java.io File)
           (java.nio.file Files LinkOption Path Paths)
           (java.nio.file.attribute FileAttribute PosixFilePermissions)))

(set! *warn-on-reflection* true)

(def spec "api.json raw_trace." (rules/api "raw_trace"))

(defn- path ^Path [^String s & more] (Paths/get s (into-array String more)))

(defn pid ^long [] (.pid (java.lang.ProcessHandle/current)))

(defn base-dir
  "$PYPROF_RAW_DIR, else java.io.tmpdir."
  ^String []
  (str (.toAbsolutePath (path (or (not-empty (System/getenv (spec "dir_env")))
                                  (System/getProperty "java.io.tmpdir"))))))

(defn start-ticks
  "Field 22 of /proc/<pid>/stat (clock ticks since boot); 0 if unknown, -1 for a zombie."
  ^long [^long p]
  (try
    ;; not slurp: /proc files fail FileInputStream.available ("Invalid argument")
    (let [s (String. (Files/readAllBytes (path (str "/proc/" p "/stat"))) "ISO-8859-1")
          fields (str/split (str/trim (subs s (+ 2 (str/last-index-of s ")")))) #"\s+")]
      (if (= "Z" (first fields)) -1 (Long/parseLong (nth fields 19))))
    (catch Exception _ 0)))

(defn alive?
  "True while the process that recorded (pid, ticks) may still run."
  [^long p ^long ticks]
  (or (= p (pid))
      (and (.isPresent (java.lang.ProcessHandle/of p))
           (let [now (start-ticks p)]
             (and (not= now -1) (or (zero? ticks) (zero? now) (= now ticks)))))))

(defn- owner-only []
  (into-array FileAttribute [(PosixFilePermissions/asFileAttribute
                              (PosixFilePermissions/fromString "rwx------"))]))

(defn make-dir!
  "A new private directory (rwx------) for this process's raw trace; returns its path."
  ^String []
  (let [base (path (base-dir))]
    (Files/createDirectories base (make-array FileAttribute 0))
    (str (Files/createTempDirectory
          base (str (spec "dir_prefix") (pid) "-" (start-ticks (pid)) "-")
          (owner-only)))))

(defn recreate!
  "Makes `dir` again (deleted between sessions); false if someone else made it."
  [^String dir]
  (try
    (Files/createDirectory (path dir) (owner-only))
    true
    (catch java.nio.file.FileAlreadyExistsException _ false)))

(defn remove-dir!
  "Deletes `dir` and its files, retried (MXNet's dump timer may make the raw file again)."
  [^String dir]
  (let [d (io/file dir)]
    (loop [n 50]
      (doseq [^File f (.listFiles d)] (.delete f))
      (when (and (.exists d) (not (.delete d)) (pos? n))
        (recur (dec n))))))

(defn owned?
  "True for a file or directory of this user that is no symbolic link."
  [^File f]
  (let [p (.toPath f)]
    (and (not (Files/isSymbolicLink p))
         (try (= (.getName (Files/getOwner p (into-array LinkOption [LinkOption/NOFOLLOW_LINKS])))
                 (System/getProperty "user.name"))
              (catch Exception _ false)))))

(def dir-re "A raw-trace directory's name: groups pid and start ticks."
  (re-pattern (str "\\Q" (spec "dir_prefix") "\\E(\\d+)-(\\d+)-[A-Za-z0-9_]+")))
(def ^:private legacy-re (re-pattern (str "\\Q" (spec "legacy_file_prefix") "\\E(\\d+)\\.json")))
(def ^:private temp-re (re-pattern (str "\\Q" (spec "temp_prefix") "\\E(\\d+)-.*\\.(tmp|json)")))

(defn- join-kept-parts!
  "Joins the kept parts of dead processes (`gone?`) among `files` of `dir` into their files;
  returns the names of the parts that could not be joined (one line on stderr each)."
  [dir files gone?]
  (let [groups (group-by :key (for [^File f files
                                    :let [[p i target] (keep-file/parse-part (.getName f))]
                                    :when (and p (gone? p) (owned? f))]
                                {:key [p target] :index i :file f}))]
    (set (mapcat (fn [[[p target] parts]]
                   (let [parts (sort-by :index parts)]
                     (try (keep-file/join-leftover! (mapv #(str (:file %)) parts)
                                                    (str (io/file dir target)))
                          nil
                          (catch java.io.IOException e
                            (binding [*out* *err*]
                              (println (str "pyprof: could not join the parts of " (pr-str target)
                                            " kept by dead process " p ": " (.getMessage e))))
                            (map #(.getName ^File (:file %)) parts)))))
                 (sort-by key groups)))))

(defn clean-dir-of!
  "Deletes the temporary files and older versions' raw files in `dir` of processes that no longer
  exist (only `only-pid`'s when given), their kept parts joined first; returns them."
  ([dir] (clean-dir-of! dir nil))
  ([dir only-pid]
   (let [files (.listFiles (io/file dir))
         gone? (fn [^long p] (if only-pid (= p only-pid) (not (alive? p 0))))
         unjoined (join-kept-parts! dir files gone?)]
     (vec (for [^File f files
                :let [[_ p] (or (re-matches temp-re (.getName f))
                                (re-matches legacy-re (.getName f)))]
                :when (and p (not (unjoined (.getName f))))
                :let [p (Long/parseLong p)]
                :when (and (gone? p) (owned? f) (.delete f))]
            (str f))))))
