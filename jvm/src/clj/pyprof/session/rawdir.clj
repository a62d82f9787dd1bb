(ns pyprof.session.rawdir
  "The private directory of this process's raw trace, and the leftovers of dead processes: the
  JVM side of Python's `pyprof.session.rawdir`, by the same rule (api.json `raw_trace`):
  `<base>/pyprof-raw-<pid>-<start>-<random>`, base = $PYPROF_RAW_DIR or java.io.tmpdir, <start>
  = field 22 of /proc/<pid>/stat (0 without /proc). A directory whose pid no longer runs, or
  runs with another start time (a reused pid), is a leftover: its unsaved windows are recovered
  beside their paths, never over a file (`recovered-path!`: a rerun of the same program writes
  the window's path again), then it is deleted, with the `.pyprof-<pid>-*` temporary files the process left
  beside its windows and older versions' `.pyprof-raw-<pid>.json`; the parts it kept of a trace
  file (api.json `keep_filename`) are joined into that file first, not lost."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
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
  "Where raw-trace directories are made: $PYPROF_RAW_DIR, else java.io.tmpdir."
  ^String []
  (str (.toAbsolutePath (path (or (not-empty (System/getenv (spec "dir_env")))
                                  (System/getProperty "java.io.tmpdir"))))))

(defn start-ticks
  "Field 22 of /proc/<pid>/stat (start time, clock ticks since boot); 0 if unknown, -1 for a
  zombie (it has ended)."
  ^long [^long p]
  (try
    (let [s (slurp (str "/proc/" p "/stat"))
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

(defn make-dir!
  "A new private directory (rwx------) for this process's raw trace; returns its path."
  ^String []
  (let [base (path (base-dir))]
    (Files/createDirectories base (make-array FileAttribute 0))
    (str (Files/createTempDirectory
          base (str (spec "dir_prefix") (pid) "-" (start-ticks (pid)) "-")
          (into-array FileAttribute [(PosixFilePermissions/asFileAttribute
                                      (PosixFilePermissions/fromString "rwx------"))])))))

(defn recreate!
  "Makes `dir` again (deleted between sessions); false if someone else made it."
  [^String dir]
  (try
    (Files/createDirectory (path dir) (into-array FileAttribute
                                                  [(PosixFilePermissions/asFileAttribute
                                                    (PosixFilePermissions/fromString "rwx------"))]))
    true
    (catch java.nio.file.FileAlreadyExistsException _ false)))

(defn remove-dir!
  "Deletes `dir` and its files. MXNet's dump timer may make the raw file again (it opens it in
  append mode every dump_period), so removal is retried."
  [^String dir]
  (let [d (io/file dir)]
    (loop [n 50]
      (doseq [^File f (.listFiles d)] (.delete f))
      (when (and (.exists d) (not (.delete d)) (pos? n))
        (recur (dec n))))))

(defn- own? [^File f]
  (let [p (.toPath f)]
    (and (not (Files/isSymbolicLink p))
         (try (= (.getName (Files/getOwner p (into-array LinkOption [LinkOption/NOFOLLOW_LINKS])))
                 (System/getProperty "user.name"))
              (catch Exception _ false)))))

(def ^:private dir-re (re-pattern (str "\\Q" (spec "dir_prefix") "\\E(\\d+)-(\\d+)-[A-Za-z0-9_]+")))
(def ^:private legacy-re (re-pattern (str "\\Q" (spec "legacy_file_prefix") "\\E(\\d+)\\.json")))
(def ^:private temp-re (re-pattern (str "\\Q" (spec "temp_prefix") "\\E(\\d+)-.*\\.(tmp|json)")))

(defn- join-kept-parts!
  "Joins the kept parts of dead processes (`gone?`) among `files` of `dir` into the files they
  were kept of; returns the names of the parts that could not be joined (kept for a later start;
  one line on stderr each file)."
  [dir files gone?]
  (let [groups (group-by :key (for [^File f files
                                    :let [[p i target] (keep-file/parse-part (.getName f))]
                                    :when (and p (gone? p) (own? f))]
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
  "Deletes the `.pyprof-<pid>-*` temporary files and older versions' `.pyprof-raw-<pid>.json`
  in `dir` whose process no longer exists (only `only-pid`'s when given); returns them. The
  parts such a process kept of a trace file are joined into that file first."
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
                :when (and (gone? p) (own? f) (.delete f))]
            (str f))))))

(defn- splitext
  "[stem suffix] of a file name, as Python's os.path.splitext splits it: the suffix from the
  last dot, none when the name's only dots lead it."
  [^String name]
  (let [i (str/last-index-of name ".")]
    (if (and i (re-find #"[^.]" (subs name 0 i)))
      [(subs name 0 i) (subs name i)]
      [name ""])))

(defn recovered-path!
  "Makes (empty, failing if it exists) and returns the file beside `window` that the sweep
  writes the window of dead process `p` to: <stem>.recovered-<pid><suffix> (api.json raw_trace
  recovered_name), else <stem>.recovered-<pid>-<n><suffix> for the first n = 1, 2, ... not
  taken. Never an existing file, as `pyprof.session.rawdir.recovered_path`."
  ^String [^String window ^long p]
  (let [f (io/file window)
        [stem suffix] (splitext (.getName f))]
    (loop [n 0]
      (let [target (io/file (.getParentFile f)
                            (rules/render (spec (if (zero? n) "recovered_name" "recovered_name_taken"))
                                          {:stem stem :pid p :suffix suffix :n n}))
            made? (try (Files/createFile (.toPath target) (make-array FileAttribute 0)) true
                       (catch java.nio.file.FileAlreadyExistsException _ false))]
        (if made? (str target) (recur (inc n)))))))

(defn- recover-one!
  "Rebuilds window `w` of dead process `p` with `recover!` at a `recovered-path!`; one line on
  stderr names the file (or the failure)."
  [recover! w p]
  (let [out (atom nil)]
    (try (when (.exists (io/file (str w ".partial")))
           (reset! out (recovered-path! (str w) p))
           (recover! w @out)
           (binding [*out* *err*]
             (println (rules/render (spec "recovered_note") {:window w :pid p :path @out}))))
         (catch Exception e
           (when (and @out (zero? (.length (io/file ^String @out))))
             (.delete (io/file ^String @out))) ; made above, nothing written: nothing of the user's
           (binding [*out* *err*]
             (println (str "pyprof: could not recover " (pr-str w)
                           " of dead process " p ": " (.getMessage e))))))))

(defn clean-leftovers!
  "Deletes the raw-trace directories of processes that no longer exist, after `recover!`
  (called with a window path whose .partial exists and the path to write it at, a
  `recovered-path!`) rebuilt each unsaved window they name, and the temporary files such
  processes left in `window-dir`. Returns the paths removed; never throws (a failure is one
  line on stderr)."
  [window-dir recover!]
  (let [base (base-dir)
        dirs (for [^File d (.listFiles (io/file base))
                   :let [[_ p t] (re-matches dir-re (.getName d))]
                   :when (and p (.isDirectory d) (own? d)
                              (not (alive? (Long/parseLong p) (Long/parseLong t))))]
               [d (Long/parseLong p)])]
    (into (vec (for [[^File d p] dirs]
                 (do (doseq [w (try (get (json/read-str (slurp (io/file d (spec "window_note"))))
                                         "windows")
                                    (catch Exception _ []))]
                       (recover-one! recover! w p)
                       (clean-dir-of! (str (.getParent (io/file (str w)))) p))
                     (remove-dir! (str d))
                     (str d))))
          (mapcat clean-dir-of! (distinct (remove nil? [base window-dir]))))))
