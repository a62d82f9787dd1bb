(ns pyprof.session.raw
  "The raw trace: the one MXNet trace file sessions append to for the life of the process (the
  design is in `pyprof.session`), and windows cut from it. The JVM side of Python's
  `pyprof.session.raw` and `pyprof.session.windows`: the profiler calls that keep the raw
  file's size an exact boundary between events (`quiesce!`, `drain!`), configuration and
  rotation of the file, reading byte ranges of it (`parse-range`), writing them as valid traces
  with every metadata event seen first (`cut!`), and the `.partial` files recovery reads.
  Internal to `pyprof.session`; call these as the session's owner where noted."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [pyprof.config :as config]
            [pyprof.native :refer [mx]]
            [pyprof.profiler :as profiler]
            [pyprof.rules :as rules]
            [pyprof.session.cap :as cap]
            [pyprof.session.rawdir :as rawdir]
            [pyprof.trace.ids :as ids]
            [pyprof.trace.reader :as reader])
  (:import (java.io RandomAccessFile)
           (pyprof.jvm MetadataStore)
           (java.nio.charset StandardCharsets)
           (java.nio.file Files Paths StandardCopyOption)
           (java.nio.file.attribute FileAttribute PosixFilePermissions)
           (java.time Instant)))

(set! *warn-on-reflection* true)

(def rotate-bytes
  "Size above which the raw trace is started afresh between windows, when not nil (for tests);
  else $PYPROF_RAW_ROTATE_BYTES, else api.json raw_trace rotate_bytes (as Python's)."
  (atom nil))

(defn- rotate-limit
  "The rotation size in force; throws :invalid-config for a bad $PYPROF_RAW_ROTATE_BYTES."
  ^long []
  (or @rotate-bytes
      (let [env (rawdir/spec "rotate_env")
            text (not-empty (System/getenv env))
            v (when text (try (Long/parseLong (str/trim text)) (catch NumberFormatException _ 0)))]
        (cond (nil? text) (long (rawdir/spec "rotate_bytes"))
              (pos? v) v
              :else (throw (rules/error "raw.bad_rotate_bytes" {:variable env :value text}))))))

(defonce ^:private raw (atom {:path nil, :metadata [], :metadata-keys #{}, :finished false,
                              :scanned 0})) ; bytes before this offset were read for metadata

(defn raw-trace-path
  "Path of this process's raw MXNet trace (nil before the first session)."
  []
  (:path @raw))

(declare remember-metadata!)

(defn metadata
  "Every metadata event (`ph` M) read from the raw trace so far, in order (the process's one
  store: Python's when JPype hosts this JVM, pyprof.jvm.MetadataStore)."
  []
  (remember-metadata! []))

(defn pid [] (rawdir/pid))

(defn raw-dir
  "The raw trace's private directory (nil before the first session; deleted while no session
  is open)."
  []
  (some-> (:path @raw) io/file .getParent))

(defn now-us
  "Now, in microseconds since the epoch (MXNet's `ts` clock)."
  ^long []
  (let [i (Instant/now)] (+ (* (.getEpochSecond i) 1000000) (quot (.getNano i) 1000))))

(defn size
  "The raw file's size in bytes (0 when it does not exist)."
  ^long []
  (let [f (io/file (:path @raw))] (if (.isFile f) (.length f) 0)))

(defn- read-range
  "Bytes [start, end) of the raw file as a string (\"\" when it does not exist)."
  ^String [path ^long start ^long end]
  (let [f (io/file path)]
    (if (or (not (.isFile f)) (>= start end))
      ""
      (with-open [r (RandomAccessFile. f "r")]
        (let [n (int (- (min end (.length r)) start))
              buf (byte-array (max n 0))]
          (.seek r start)
          (.readFully r buf)
          (String. buf StandardCharsets/UTF_8))))))

(defn parse-range
  "The events in a byte range of the raw trace MXNet appends to (or of a trace MXNet wrote
  whole), read by MXNet's layout (`pyprof.trace.reader/parse-raw`, trace.json mxnet_layout):
  optional header and footer, commas between events, names copied unescaped; a last event cut
  short (a crash) is dropped."
  [^String text]
  (reader/parse-raw text))

(defn- remember-metadata!
  "Adds the metadata events among `events` not yet known; returns the known metadata. Kept
  here in a JVM on its own, else by the installed pyprof.jvm.MetadataStore (Python's)."
  [events]
  (let [events (filterv #(= "M" (get % "ph")) events)]
    (if-let [^MetadataStore store (MetadataStore/current)]
      (mapv #(into {} (map (fn [[k v]] [k (if (instance? java.util.Map v) (into {} v) v)])) %)
            (.remember store events))
      (:metadata (swap! raw (fn [r]
                              (reduce (fn [r e]
                                        (if ((:metadata-keys r) e)
                                          r
                                          (-> r (update :metadata conj e)
                                              (update :metadata-keys conj e))))
                                      r events)))))))

(defn harvest!
  "Remembers the metadata events of the bytes not yet scanned, up to `end`. They matter when
  they fall outside every window: MXNet writes its process_name events in its first dump.
  `skip` [from to] is a range left to `cut!` (a window that ended and is not cut yet), read
  only once."
  ([end] (harvest! end nil))
  ([end [skip-from skip-to]]
   (let [scan! (fn [from to]
                 (when (< from to)
                   (remember-metadata! (filter #(= "M" (get % "ph"))
                                               (parse-range (read-range (:path @raw) from to))))))
         {:keys [scanned]} @raw]
     (when (and skip-to (< scanned skip-to) (<= skip-to end))
       (scan! scanned skip-from)
       (swap! raw assoc :scanned skip-to))
     (when (< (:scanned @raw) end)
       (scan! (:scanned @raw) end)
       (swap! raw update :scanned max end)))))

;; ------------------------------------------------------------------ configuration

(defn- reconfigure!
  "Configures MXNet with the recording `options` (as given to a session: keyword or C keys,
  Clojure values) into the raw file: MXNet deletes it and starts a new one."
  [options]
  (harvest! (size)) ; MXNet deletes the old raw file: keep its metadata events
  (profiler/profiler-set-config (assoc options "filename" (:path @raw) "continuous_dump" true))
  (swap! raw assoc :scanned 0 :options options)) ; offsets restart at 0 in the new file

(defn configure!
  "Makes MXNet record with the recording `options` (as given to a session; `c-opts` are the
  same, validated to C strings) into the raw file, reconfiguring only when needed. Called as the
  owner, under the profiler lock (dead processes' leftovers are swept by
  `pyprof.session.leftovers`)."
  [options c-opts]
  (let [{:keys [finished running]} (profiler/state)]
    (when (or finished (:finished @raw))
      (throw (rules/error "session.profiler_finished")))
    (when running
      (throw (rules/error "session.profiler_running"))))
  (rotate-limit) ; a bad $PYPROF_RAW_ROTATE_BYTES fails here, before anything runs
  (when-not (and (:path @raw) (or (.isDirectory (io/file ^String (raw-dir)))
                                  (rawdir/recreate! (raw-dir))))
    ;; first use, or someone else made our old name: a new directory (MXNet reconfigures)
    (swap! raw assoc :scanned 0
           :path (str (io/file (rawdir/make-dir!) ^String (rawdir/spec "file")))))
  (let [wanted (assoc c-opts "filename" (:path @raw) "continuous_dump" "true")]
    (if (not= (profiler/current-config) (config/effective wanted))
      (reconfigure! options)
      (swap! raw assoc :options options))))

(defn rotation-due?
  "True once the raw file holds the rotation size (`rotate-limit`) or more, or half the cap
  (`pyprof.session.cap/max-bytes`) when that is less: a window has at least half the cap."
  []
  (>= (size) (min (rotate-limit) (quot (cap/max-bytes) 2))))

(defn rotate!
  "Between windows (stopped, drained, every window cut): starts the raw file afresh. MXNet
  opens it by name in append mode at every dump, so deleting it makes the next dump start a new
  one (offsets restart at 0); the configuration, and MXNet's aggregate statistics, stay."
  []
  (harvest! (size)) ; keep the metadata events of the bytes deleted
  (.delete (io/file ^String (:path @raw)))
  (swap! raw assoc :scanned 0))

(defn note-windows!
  "Names the windows not saved yet (recording, or ended and not cut) in the private directory,
  for recovery after this process died (see `pyprof.session.rawdir`)."
  [paths]
  (let [note (io/file (raw-dir) ^String (rawdir/spec "window_note"))
        tmp (io/file (str note ".tmp"))]
    (spit tmp (json/write-str {"windows" (vec paths)}))
    (Files/move (.toPath tmp) (.toPath note) (into-array [StandardCopyOption/REPLACE_EXISTING
                                                          StandardCopyOption/ATOMIC_MOVE]))))

(defn release!
  "When the last session closed (stopped, every window cut): deletes the private directory.
  The next session makes it again; MXNet's next dump then starts a new file."
  []
  (when (and (:path @raw) (not (:running (profiler/state)))
             (not (System/getenv (rawdir/spec "keep_env"))))
    (harvest! (size))
    (rawdir/remove-dir! (raw-dir))
    (swap! raw assoc :scanned 0)))

;; ------------------------------------------------------------------ boundaries (as the owner)

(defn quiesce!
  "Waits for queued operators, stops, and appends everything to the raw file; returns when
  recording stopped (`now-us`). Afterwards nothing more is appended until the profiler runs
  again: the raw file's size is an exact boundary between events."
  []
  (let [stopped (volatile! 0)]
    (try
      (mx MXNDArrayWaitAll)
      (finally
        (profiler/profiler-set-state :stop)
        (vreset! stopped (now-us))
        (profiler/dump-profile false)))
    @stopped))

(defn quiesce-paused!
  "Steady mode's `quiesce!`: waits for queued operators, *pauses* (the profiler stays running,
  so MXNet's IsProfiling does not change), appends everything to the raw file; returns when
  recording paused. Paused, MXNet adds no event: the raw file's size is an exact boundary too."
  []
  (let [paused (volatile! 0)]
    (try
      (mx MXNDArrayWaitAll)
      (finally
        (profiler/pause)
        (vreset! paused (now-us))
        (profiler/dump-profile false)))
    @paused))

(defn drain!
  "With the profiler stopped: makes the raw file's size a boundary before recording. Operators
  queued before now run to their end unrecorded. MXNet keeps custom-object events (tasks,
  counters, ...) whenever it is not paused, and before its first run it is neither running nor
  paused: a first start and stop pauses it (stopping pauses, running un-pauses). Whatever MXNet
  queued meanwhile is appended now, before the boundary, never into the next window."
  []
  (mx MXNDArrayWaitAll)
  (when-not (:ever-ran (profiler/state))
    (profiler/profiler-set-state :run)
    (profiler/profiler-set-state :stop))
  (profiler/dump-profile false))

;; ------------------------------------------------------------------ windows

(defn write-trace!
  "Writes `events` as a valid trace at `path`, atomically (temporary file, then rename). Ids
  JavaScript cannot hold (MXNet's 64-bit pids, tids and async ids) are renumbered as every
  trace pyprof writes (`pyprof.trace.ids/renumber`, trace.json `ids`)."
  [^String path events]
  (let [events (ids/renumber events)
        target (.toAbsolutePath (Paths/get path (make-array String 0)))
        dir (or (.getParent target) (Paths/get "." (make-array String 0)))
        _ (Files/createDirectories dir (make-array FileAttribute 0))
        ;; named with the pid: a dead process's file is recognised and deleted
        tmp (Files/createTempFile dir (str ".pyprof-" (pid) "-") ".tmp" (make-array FileAttribute 0))]
    (try
      (with-open [w (io/writer (.toFile tmp))]
        (.write w "{\"traceEvents\":[\n")
        (loop [[e & more] events, first? true]
          (when e
            (when-not first? (.write w ",\n"))
            (json/write e w)
            (recur more false)))
        (.write w "\n],\"displayTimeUnit\":\"ms\"}\n"))
      (try (Files/setPosixFilePermissions tmp (PosixFilePermissions/fromString "rw-r--r--"))
           (catch UnsupportedOperationException _))
      (Files/move tmp target (into-array [StandardCopyOption/REPLACE_EXISTING
                                          StandardCopyOption/ATOMIC_MOVE]))
      (finally (Files/deleteIfExists tmp)))))

(defn- with-metadata
  "The events of a window as Python's read_range orders them: the `known` metadata events
  first, then `events` in order, each metadata event once (so that both languages number the
  renumbered ids alike)."
  [known events]
  (let [seen (volatile! (set known))]
    (concat known
            (remove (fn [e]
                      (when (= "M" (get e "ph"))
                        (or (contains? @seen e) (do (vswap! seen conj e) false))))
                    events))))

(defn cut!
  "Writes raw bytes [start, end) as a valid trace at `out`, known metadata first; returns the
  number of events written."
  [start end out]
  (harvest! start)
  (let [known (metadata)
        events (parse-range (read-range (:path @raw) start end))
        _ (swap! raw update :scanned max end)
        _ (remember-metadata! events)
        out-events (vec (with-metadata known events))]
    (write-trace! out out-events)
    (count out-events)))

(defn rewrite-trace!
  "Rewrites the MXNet trace at `path` (with or without MXNet's header and closing bytes: a file
  MXNet was configured away from, or one written after the profiler had run) as a valid trace,
  every metadata event seen so far first; its metadata events are remembered for later files.
  Returns the number of events written. `pyprof.profiler` calls this (as Python's
  complete_headless_trace)."
  [^String path]
  (let [known (metadata)
        events (parse-range (read-range path 0 Long/MAX_VALUE))
        _ (remember-metadata! events)
        out-events (vec (with-metadata known events))]
    (write-trace! path out-events)
    (count out-events)))

(defn join-traces!
  "Joins the kept `parts` (in order; MXNet traces with or without header and closing bytes) and
  the trace at `path` into one valid trace at `path`, every metadata event seen so far first,
  then deletes the parts; returns the number of events written. `pyprof.profiler` calls this
  at the finished dump when configs kept parts of the file (as Python's pyprof.process.keep_file.join)."
  [parts ^String path]
  (let [events (mapcat #(parse-range (read-range % 0 Long/MAX_VALUE)) (concat parts [path]))
        metadata (remember-metadata! events)
        body (remove #(= "M" (get % "ph")) events)]
    (write-trace! path (concat metadata body))
    (doseq [^String p parts] (.delete (io/file p)))
    (+ (count metadata) (count body))))

(defn partial-path ^String [path] (str path ".partial"))

(defn write-partial!
  "Records where a window starts (and `end`, once it ended, not cut yet), in the format
  Python's `pyprof.recover` reads; atomically (temporary file named with the pid, renamed)."
  ([path start index start-us] (write-partial! path start index start-us nil))
  ([path start index start-us end]
   (let [target (.toAbsolutePath (Paths/get (partial-path path) (make-array String 0)))
         tmp (Files/createTempFile (.getParent target) (str ".pyprof-" (pid) "-") ".tmp"
                                   (make-array FileAttribute 0))]
     (spit (.toFile tmp)
           (json/write-str (cond-> {"raw" (:path @raw) "start" start "window" index "pid" (pid)
                                    "start_us" start-us "metadata" (metadata)}
                             end (assoc "end" end))))
     (Files/move tmp target (into-array [StandardCopyOption/REPLACE_EXISTING
                                         StandardCopyOption/ATOMIC_MOVE])))))

(defn write-window!
  "Writes the window whose path is `path` from its .partial and the raw trace it names (a dead
  process's) at `out` (the sweep of leftovers gives a temporary file beside the window, linked
  to its recovered name afterwards): events from its start to its end (or to the raw trace's
  end), metadata first. Leaves the .partial and the raw trace; returns the number of events
  written. Throws session.raw_trace_gone when the raw trace is no file."
  [path out]
  (let [info (json/read-str (slurp (partial-path path)))
        raw-path (info "raw")
        _ (when-not (.isFile (io/file ^String raw-path)) ; as Python's read_partial
            (throw (rules/error "session.raw_trace_gone" {:raw raw-path :path (str path)})))
        start (long (info "start"))
        end (long (or (info "end") (.length (io/file ^String raw-path))))
        events (parse-range (read-range raw-path start end))
        out-events (vec (with-metadata (distinct (info "metadata")) events))]
    (write-trace! out out-events)
    (count out-events)))

(defn delete-partial! [path]
  (Files/deleteIfExists (Paths/get (partial-path path) (make-array String 0))))

;; ------------------------------------------------------------------ exit

(defn finish!
  "At exit: finishes the raw file (MXNet's destructor then writes nothing) and deletes it."
  []
  (let [{:keys [path]} @raw
        {:keys [finished running]} (profiler/state)
        steady (:steady (profiler/-update-tracker! identity))]
    (when (and path (not finished) (not (:finished @raw))
               (= path (get (profiler/current-config) "filename"))
               (or (.isDirectory (io/file ^String (raw-dir))) (rawdir/recreate! (raw-dir))))
      (profiler/-as-owner "exit"
        (if steady ; steady mode: no stop (IsProfiling stays); the finished dump only ends output
          (profiler/pause)
          (when running (profiler/profiler-set-state :stop)))
        (profiler/-update-tracker! assoc :repair-on-finish false) ; deleted next: no rewrite
        (profiler/dump-profile true))
      (swap! raw assoc :finished true)
      (when-not (System/getenv (rawdir/spec "keep_env"))
        (rawdir/remove-dir! (raw-dir))))
    (when (and path (not (:finished @raw)) (not= path (get (profiler/current-config) "filename")))
      ;; someone reconfigured to their own file: MXNet never writes ours again
      (swap! raw assoc :finished true)
      (when-not (System/getenv (rawdir/spec "keep_env"))
        (rawdir/remove-dir! (raw-dir))))))
