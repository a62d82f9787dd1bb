(ns ^:no-doc pyprof.output
  "Checks of a trace file's path before MXNet writes there and after each dump (MXNet never
  checks), as Python's `pyprof.process.output`; problems from errors.json path_problems."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [pyprof.rules :as rules])
  (:import (java.io File)
           (java.nio.file AccessDeniedException FileSystemException Files LinkOption
                          NoSuchFileException Paths)
           (java.nio.file.attribute FileAttribute)))

(set! *warn-on-reflection* true)

(defn cwd
  "The process's working directory: /proc/self/cwd (under JPype Python may change it, user.dir
  never follows), else user.dir."
  ^java.nio.file.Path []
  (try (Files/readSymbolicLink (Paths/get "/proc/self/cwd" (make-array String 0)))
       (catch Exception _ (Paths/get (System/getProperty "user.dir") (make-array String 0)))))

(defn abspath
  "`path` made absolute against `cwd`, normalised lexically (grammar.json paths)."
  ^String [^String path]
  (str (.normalize (.resolve (cwd) path))))

(defn parent-directory
  "The directory of `path` by grammar.json paths."
  ^String [^String path]
  (let [abs (Paths/get (abspath path) (make-array String 0))]
    (str (or (.getParent abs) abs))))

(defn same-file?
  "True when `a` and `b` name the same file by grammar.json paths."
  [^String a ^String b]
  (= (abspath a) (abspath b)))

(defn- min-free-bytes
  "Free bytes a trace's file system must have: $PYPROF_MIN_FREE_BYTES (0: no check), else
  api.json output_paths.min_free_bytes."
  ^long []
  (let [raw (some-> (System/getenv (rules/output-paths "min_free_env")) .trim)]
    (if (and (seq raw) (re-matches #"[0-9]+" raw))
      (Long/parseLong raw)
      (long (rules/output-paths "min_free_bytes")))))

(def ^:private ^java.nio.charset.Charset file-names ; the start-up locale's (LANG=C: US-ASCII)
  (java.nio.charset.Charset/forName (System/getProperty "sun.jnu.encoding" "UTF-8")))

(defn- name-problem
  "A file name over api.json output_paths max_name_bytes of UTF-8, as a path problem, or nil."
  [^String path]
  (let [size (alength (.getBytes (subs path (inc (.lastIndexOf path "/"))) "UTF-8"))
        most (rules/output-paths "max_name_bytes")]
    (when (> size most) (rules/path-problem "name_too_long" {:bytes size :max most}))))

(defn text-problem
  "A NUL or lone surrogate in a path, a character the JVM's file-name encoding lacks (in the
  path or the working directory), or a trailing / (a directory), as a path problem, or nil."
  [^String text]
  (let [nul (.indexOf text "\u0000")
        base (when-not (str/starts-with? text "/") (str (cwd))) ; what a relative path is under
        char-at #(String. (Character/toChars (.codePointAt text (.offsetByCodePoints text 0 (int %)))))]
    (cond
      (>= nul 0) (rules/path-problem "nul" {:index (.codePointCount text 0 nul)})
      (rules/lone-surrogate text) (let [[index point] (rules/lone-surrogate text)]
                                    (rules/path-problem "not_unicode" {:index index :point point}))
      (some-> base (str/includes? "\ufffd")) ; a name the locale could not decode
      (rules/path-problem "cwd_not_in_file_names" {:cwd base :encoding (str file-names)})
      (str/ends-with? text "/")
      (rules/path-problem "no_file_name" {:path text :example (str text "profile.json")})
      :else (when-let [i (first (remove #(.canEncode (.newEncoder file-names) ^String (char-at %))
                                        (range (.codePointCount text 0 (.length text)))))]
              (rules/path-problem "not_in_file_names" {:index i :char (char-at i)
                                                       :encoding (str file-names)})))))

(defn- reason
  "An I/O failure as the C library words it (Python's strerror)."
  [^Exception e]
  (cond (instance? AccessDeniedException e) "Permission denied"
        (instance? NoSuchFileException e) "No such file or directory"
        (and (instance? FileSystemException e) (.getReason ^FileSystemException e))
        (.getReason ^FileSystemException e)
        :else (or (.getMessage e) (.getSimpleName (class e)))))

(defn- file-in-the-way
  "The nearest existing ancestor of `directory` when it is not a directory, else nil."
  [^String directory]
  (let [exists? #(Files/exists (.toPath ^File %) (into-array LinkOption [LinkOption/NOFOLLOW_LINKS]))
        d (loop [^File d (io/file directory)]
            (if (or (exists? d) (nil? (.getParentFile d))) d (recur (.getParentFile d))))]
    (when (and (exists? d) (not (.isDirectory ^File d))) (str d))))

(defn- missing [^String directory]
  (if-let [blocker (file-in-the-way directory)]
    (rules/path-problem "file_in_the_way" {:blocker blocker :directory directory})
    (rules/path-problem "missing_directory" {:directory directory})))

(defn file-problem
  "What keeps MXNet from writing a trace at `path` as a path problem, or nil: the text, a missing
  directory, a directory or special file there, no file creatable (a probe), too little space."
  ([path] (file-problem path (min-free-bytes)))
  ([^String path min-free]
   (or (text-problem path)
       (name-problem path)
       (let [directory (parent-directory path)
             dir (io/file directory)
             f (io/file (abspath path))]
         (cond
           (not (.isDirectory dir)) (missing directory)
           (.isDirectory f) (rules/path-problem "is_directory"
                                                {:path path :example (str (io/file path "profile.json"))})
           (and (.exists f) (not (Files/isRegularFile (.toPath f) (make-array LinkOption 0))))
           (rules/path-problem "not_regular" {:path path})
           :else
           (or (try
                 (Files/delete (Files/createTempFile
                                (.toPath dir)
                                (str/replace (rules/output-paths "probe_prefix") "{pid}"
                                             (str (.pid (java.lang.ProcessHandle/current))))
                                (rules/output-paths "probe_suffix")
                                (make-array FileAttribute 0)))
                 nil
                 (catch java.io.IOException e
                   (rules/path-problem "not_writable" {:directory directory :reason (reason e)})))
               (let [free (.getUsableSpace dir)]
                 (when (< free (long min-free))
                   (rules/path-problem "low_space" {:directory directory :free free
                                                    :min min-free})))))))))

(defn size
  "The size in bytes of the regular file at `path`, or nil."
  [^String path]
  (let [f (io/file (abspath path))]
    (when (.isFile f) (.length f))))

(defn session-raw-trace?
  "True for a session raw trace of this process (api.json raw_trace)."
  [^String path]
  (let [spec (rules/api "raw_trace")
        f (io/file path)
        parent (some-> (.getParentFile f) .getName)]
    (and (= (.getName f) (spec "file"))
         (some? parent)
         (str/starts-with? parent (str (spec "dir_prefix") (.pid (java.lang.ProcessHandle/current)) "-")))))

(defn outside?
  "True when `path` is not under the directory `root` (a real path), lexically or through a
  link on the way."
  [^String root ^String path]
  (let [r (Paths/get root (make-array String 0))
        p (Paths/get (abspath path) (make-array String 0))
        ^java.nio.file.Path existing
        (loop [^java.nio.file.Path d (.getParent p)]
          (if (or (nil? d) (Files/exists d (make-array LinkOption 0))) d (recur (.getParent d))))]
    (or (not (.startsWith p r)) (nil? existing)
        (not (.startsWith (.toRealPath existing (make-array LinkOption 0)) r)))))

(defn holds-no-trace?
  "True when the file `f` exists and holds no trace by its first bytes (not empty, no gzip, no
  api.json output_paths trace_markers); a FIFO, directory or unreadable file holds none."
  [f]
  (let [p (.toPath (io/file f))
        head (cond (not (Files/exists p (make-array LinkOption 0))) (byte-array 0)
                   ;; never opened: a FIFO's open would wait for a writer for ever
                   (not (Files/isRegularFile p (make-array LinkOption 0))) (.getBytes "?")
                   :else (try (with-open [in (java.io.FileInputStream. (.toFile p))]
                                (.readNBytes in (int (rules/output-paths "trace_probe_bytes"))))
                              (catch java.io.IOException _ (.getBytes "?"))))
        text (String. ^bytes head "ISO-8859-1") ; the markers are ASCII
        magic (apply str (map char (rules/output-paths "gzip_magic")))]
    (boolean (and (seq text) (not (str/starts-with? text magic))
                  (not-any? #(str/includes? text %) (rules/output-paths "trace_markers"))))))

(defn replace-problem
  "The path problem not_a_trace when `path` holds no trace that a write would replace, or nil."
  [^String path]
  (when (holds-no-trace? (abspath path))
    (rules/path-problem "not_a_trace" {:path path :bytes (rules/output-paths "trace_probe_bytes")})))

(defn check-config-path!
  "config.missing_directory or config.bad_path for `path` of config key `key` (`given`: as
  written)."
  [key given ^String path]
  (let [directory (parent-directory path)]
    (when-not (or (.isDirectory (io/file directory)) (file-in-the-way directory))
      (throw (rules/error "config.missing_directory"
                          {:value path :key key :directory directory :given given})))
    (when-let [problem (or (file-problem path) (replace-problem path))]
      (throw (rules/error "config.bad_path" (merge {:value path :key key :given given} problem))))))

(defn- ends-finished?
  "True when the file at `path` ends with api.json output_paths mxnet_footer."
  [^String path]
  (let [f (io/file (abspath path))
        want (.getBytes ^String (rules/output-paths "mxnet_footer") "UTF-8")
        n (alength want)]
    (and (.isFile f) (>= (.length f) n)
         (with-open [r (java.io.RandomAccessFile. ^File f "r")]
           (let [buf (byte-array n)]
             (.seek r (- (.length r) n))
             (.readFully r buf)
             (java.util.Arrays/equals buf want))))))

(defn check-dumped!
  "dump.lost when the dumped file is gone, or a finished one (`final?`) lacks its closing bytes."
  [^String path final?]
  (when-let [problem (cond (nil? (size path)) (or (file-problem path) (rules/path-problem "gone" {}))
                           (and final? (not (ends-finished? path))) (rules/path-problem "cut" {}))]
    (throw (rules/error "dump.lost" (merge {:path path} problem)))))
