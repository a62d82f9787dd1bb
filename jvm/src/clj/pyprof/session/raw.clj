(ns ^:no-doc pyprof.session.raw
  "The raw trace sessions append to for the life of the process, and windows cut from it: the
  JVM side of Python's `pyprof.session.raw` and `pyprof.session.windows` (which document the
  design). Internal to `pyprof.session`."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [pyprof.config :as config]
            [pyprof.native :refer [mx]]
            [pyprof.profiler :as profiler]
            [pyprof.raw-file :refer [events-in metadata remember-metadata! write-atomic! write-events!]]
            [pyprof.rules :as rules]
            [pyprof.session.cap :as cap]
            [pyprof.session.rawdir :as rawdir]
            [pyprof.tracker :as tracker])
  (:import (pyprof.jvm WindowCutter WindowCutter$Result)
           (java.nio.file Files Paths StandardCopyOption)
           (java.time Instant)))

(set! *warn-on-reflection* true)

(def rotate-bytes "The rotation size (bytes) for tests when not nil." (atom nil))

(defn- rotate-limit
  "The rotation size, bytes: $PYPROF_RAW_ROTATE_BYTES, else rotate_bytes (raw.bad_rotate_bytes)."
  ^long []
  (or @rotate-bytes
      (let [env (rawdir/spec "rotate_env")
            text (not-empty (System/getenv env))
            v (when text (try (Long/parseLong (str/trim text)) (catch NumberFormatException _ 0)))]
        (cond (nil? text) (long (rawdir/spec "rotate_bytes"))
              (pos? v) v
              :else (throw (rules/error "raw.bad_rotate_bytes" {:variable env :value text}))))))

(defonce ^:private raw (atom {:path nil, :finished false, :scanned 0})) ; scanned: bytes read for metadata

(defn raw-trace-path "This process's raw trace (nil before the first session)." [] (:path @raw))

(defn pid [] (rawdir/pid))

(defn raw-dir "The raw trace's private directory, or nil." [] (some-> (:path @raw) io/file .getParent))

(defn now-us
  "Now, microseconds since the epoch (MXNet's `ts` clock)."
  ^long []
  (let [i (Instant/now)] (+ (* (.getEpochSecond i) 1000000) (quot (.getNano i) 1000))))

(defn size
  "The raw file's size, bytes (0 when it does not exist)."
  ^long []
  (let [f (io/file (:path @raw))] (if (.isFile f) (.length f) 0)))

(declare partial-path)

(defonce ^:private left-for-recovery (atom [])) ; the .partial files of windows left at exit

(defn keep-for-recovery!
  "At exit: the window of file `path` is left for `pyprof recover` (api.json raw_trace
  exit_kept_about)."
  [path]
  (swap! left-for-recovery conj (partial-path path)))

(defn- move-kept!
  "Renames the raw trace to exit_kept_file and points the left windows' .partial files there."
  []
  (when-let [path (and (seq @left-for-recovery) (:path @raw))]
    (when-let [kept (let [k (str (io/file (raw-dir) ^String (rawdir/spec "exit_kept_file")))]
                      (when-not (.exists (io/file k)) k))] ; else moved already
      (Files/move (Paths/get path (make-array String 0)) (Paths/get kept (make-array String 0))
                  (into-array [StandardCopyOption/ATOMIC_MOVE]))
      (doseq [p @left-for-recovery]
        (let [info (json/read-str (slurp p))]
          (write-atomic! p nil #(json/write (assoc info "raw" kept) %)))))))

(defn harvest!
  "Remembers the metadata events of the raw bytes not yet scanned, up to `end`, but the range
  [from to] of a window left to `cut!`."
  ([end] (harvest! end nil))
  ([end [skip-from skip-to]]
   (let [scan! (fn [from to]
                 (when (< from to)
                   (remember-metadata! (events-in (:path @raw) from to))))
         {:keys [scanned]} @raw]
     (when (and skip-to (< scanned skip-to) (<= skip-to end))
       (scan! scanned skip-from)
       (swap! raw assoc :scanned skip-to))
     (when (< (:scanned @raw) end)
       (scan! (:scanned @raw) end)
       (swap! raw update :scanned max end)))))

(defn configure!
  "As the owner: makes MXNet record with `options` (`c-opts`: as C strings) into the raw file,
  reconfiguring only when needed; session.profiler_finished, session.profiler_running."
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
  (when (not= (profiler/current-config)
              (config/effective (assoc c-opts "filename" (:path @raw) "continuous_dump" "true")))
    (harvest! (size)) ; MXNet starts the raw file afresh: keep its metadata events
    (profiler/profiler-set-config (assoc options "filename" (:path @raw) "continuous_dump" true))
    (swap! raw assoc :scanned 0)))

(defn rotation-due?
  "True once the raw file holds the rotation size, or half the cap when that is less."
  []
  (>= (size) (min (rotate-limit) (quot (cap/max-bytes) 2))))

(defn rotate!
  "Between windows: deletes the raw file (MXNet's next dump starts a new one)."
  []
  (harvest! (size)) ; keep the metadata events of the bytes deleted
  (.delete (io/file ^String (:path @raw)))
  (swap! raw assoc :scanned 0))

(defn note-windows!
  "Names the windows not saved yet in the private directory (for recovery)."
  [paths]
  (write-atomic! (io/file (raw-dir) ^String (rawdir/spec "window_note")) nil
                 #(json/write {"windows" (vec paths)} %)))

(defn release!
  "When the last session closed: deletes the private directory."
  []
  (when (and (:path @raw) (not (:running (profiler/state)))
             (not (System/getenv (rawdir/spec "keep_env"))))
    (if (seq @left-for-recovery)
      (move-kept!) ; at exit: kept for pyprof recover
      (do (harvest! (size))
          (rawdir/remove-dir! (raw-dir))
          (swap! raw assoc :scanned 0)))))

(defn quiesce!
  "As the owner: waits for queued operators, stops (`paused?`, steady mode: pauses, so IsProfiling
  stays) and dumps: the raw file's size is then an exact boundary. Returns when recording stopped
  (`now-us`)."
  [paused?]
  (let [stopped (volatile! 0)]
    (try
      (mx MXNDArrayWaitAll)
      (finally
        (if paused? (profiler/pause) (profiler/profiler-set-state :stop))
        (vreset! stopped (now-us))
        (profiler/dump-profile false)))
    @stopped))

(defn drain!
  "As the owner, stopped: makes the raw file's size a boundary before recording (as Python's
  drain)."
  []
  (mx MXNDArrayWaitAll)
  (when-not (:ever-ran (profiler/state))
    (profiler/profiler-set-state :run)
    (profiler/profiler-set-state :stop))
  (profiler/dump-profile false))

(defn reserve!
  "Leaves raw bytes [start, end) to a later `cut!` (on the saver thread): the metadata before
  them is read now, theirs by the cut, so that no later `harvest!` reads them again."
  [start end]
  (harvest! start)
  (swap! raw update :scanned max end))

(def ^:private ^WindowCutter cutter
  (let [trace (rules/read-spec "trace.json")]
    (WindowCutter. (trace "mxnet_layout") (trace "ids") (trace "thread_names"))))

(defn warm-up! "Compiles the window cut's code before the first window (`WindowCutter.cutsInC`)." []
  (.cutsInC cutter))

(defn- ->clj
  "The cutter's Java data as the reader gives it (Clojure maps and vectors, bigints)."
  [x]
  (cond (instance? java.util.Map x) (into {} (map (fn [[k v]] [k (->clj v)])) x)
        (instance? java.util.List x) (mapv ->clj x)
        (instance? java.math.BigInteger x) (bigint x)
        :else x))

(defn- with-thread-names
  "`events` with `WindowCutter.threadNameOf`'s thread_name events, lazily."
  [events names]
  (let [named (java.util.HashSet.)]
    (mapcat #(if-let [m (and (not= "M" (get % "ph")) (.threadNameOf cutter % names named))] [(->clj m) %] [%])
            events)))

(defn cut-file!
  "Writes bytes [start, end) of the raw trace `path` as a valid trace at `out` (`WindowCutter.cut`:
  `known` metadata, then `extra` events, the threads of `names` named); returns [events written,
  the metadata events found]. Bytes the cut refuses, or slices to place, are read whole and the
  writers' plan applied; past plan_max_bytes (-Dpyprof.planMaxBytes) slices go as they come, with
  plan_note."
  [path start end out known extra names]
  (let [cut #(let [r (volatile! nil)]
               (write-atomic! out "rw-r--r--"
                              (fn [w] (vreset! r (.cut cutter path start end known extra w (boolean %1) names (boolean %2)))))
               @r)
        streamed #(try (let [^WindowCutter$Result r (cut false %)] (if (.renumbered r) r (cut true %)))
                       (catch pyprof.jvm.WindowCutter$NeedsPlan _ :plan)
                       (catch pyprof.jvm.WindowCutter$NotLayout _ nil))
        [size limit] [(- (long end) (long start)) (Long/getLong "pyprof.planMaxBytes" (long (rawdir/spec "plan_max_bytes")))]
        r (streamed true)
        over? (and (= :plan r) (> (long size) (long limit)))
        ^WindowCutter$Result r (if over? (streamed false) r)] ; nil: not MXNet's layout after all
    (if (instance? WindowCutter$Result r)
      (do (when over? (binding [*out* *err*] (println (rules/render (rawdir/spec "plan_note") {:path out :bytes size :limit limit}))))
          [(.events r) (map ->clj (.metadata r))])
      (let [events (events-in path start end)]
        [(write-events! out known (concat (with-thread-names events names) extra)) events]))))

(defn cut!
  "Writes raw bytes [start, end) as a valid trace at `out` (`cut-file!`), with `extra` events (the
  step marks), the threads registered now named; returns its events."
  [start end out extra]
  (harvest! start)
  (let [known (metadata)
        _ (swap! raw update :scanned max end)
        [n found] (cut-file! (:path @raw) start end out known extra (.names cutter))]
    (remember-metadata! found)
    n))

(defn partial-path ^String [path] (str path ".partial"))

(defn write-partial!
  "Records where a window starts (and `end`, once it ended) as Python's `pyprof.recover` reads it."
  ([path start index start-us] (write-partial! path start index start-us nil))
  ([path start index start-us end]
   (write-atomic! (partial-path path) nil
                  #(json/write (cond-> {"raw" (:path @raw) "start" start "window" index "pid" (pid)
                                        "start_us" start-us "metadata" (metadata)}
                                 end (assoc "end" end))
                               %))))

(defn write-window!
  "Writes the window of the .partial of `path` (a dead process's) at `out`; returns the number of
  events. session.raw_trace_gone when the raw trace is no file."
  [path out]
  (let [info (json/read-str (slurp (partial-path path)))
        raw-path (info "raw")
        _ (when-not (.isFile (io/file ^String raw-path)) ; as Python's read_partial
            (throw (rules/error "session.raw_trace_gone" {:raw raw-path :path (str path)})))
        start (long (info "start"))
        end (long (or (info "end") (.length (io/file ^String raw-path))))]
    (write-events! out (distinct (info "metadata")) (events-in raw-path start end))))

(defn delete-partial! [path]
  (Files/deleteIfExists (Paths/get (partial-path path) (make-array String 0))))

(defn finish!
  "At exit: finishes the raw file (MXNet's destructor then writes nothing) and deletes it; only
  deletes it when someone reconfigured to their own file (MXNet never writes ours again)."
  []
  (move-kept!) ; before MXNet's finished dump, which truncates the file
  (let [{:keys [path finished]} @raw
        {:keys [running] done :finished} (profiler/state)
        ours? (= path (get (profiler/current-config) "filename"))]
    (when (and path (not finished)
               (or (not ours?)
                   (and (not done) (or (.isDirectory (io/file ^String (raw-dir)))
                                       (rawdir/recreate! (raw-dir))))))
      (when ours?
        (profiler/-as-owner "exit"
          (if (:steady (tracker/snapshot)) ; steady: no stop (IsProfiling stays),
            (profiler/pause)               ; the finished dump only ends output
            (when running (profiler/profiler-set-state :stop)))
          (tracker/put! :repair-on-finish false) ; deleted next: no rewrite
          (profiler/dump-profile true)))
      (swap! raw assoc :finished true)
      (when-not (or (System/getenv (rawdir/spec "keep_env")) (seq @left-for-recovery))
        (rawdir/remove-dir! (raw-dir))))))
