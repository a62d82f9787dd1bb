(ns ^:no-doc pyprof.claim
  "One trace file, one process: the JVM side of Python's `pyprof.process.claim` (api.json
  trace_claims), which documents the rule. The POSIX lock is taken by the process's one holder of
  claims, the tracker (`pyprof.jvm.Tracker/claim`). Internal to the profiler layer."
  (:require [pyprof.config :as config]
            [pyprof.output :as output]
            [pyprof.rules :as rules])
  (:import (com.sun.security.auth.module UnixSystem)
           (java.io File IOException)
           (java.nio.file Files LinkOption Path Paths)
           (java.nio.file.attribute FileAttribute PosixFilePermission PosixFilePermissions)
           (java.security MessageDigest)
           (pyprof.jvm Tracker)))

(set! *warn-on-reflection* true)

(def spec "api.json trace_claims." (rules/api "trace_claims"))

(defn base-dir
  "$PYPROF_CLAIM_DIR, else $TMPDIR, else /tmp (api.json trace_claims)."
  ^String []
  (if-let [v (some #(not-empty (System/getenv ^String %)) (spec "base_env"))]
    (output/abspath v)
    (spec "base_default")))

(defn claim-dir
  "This user's claim directory, <base>/pyprof-claims-<uid>."
  ^String []
  (str (File. (base-dir) ^String (rules/render (spec "dir") {:uid (.getUid (UnixSystem.))}))))

(defn claim-file
  "The claim file of trace path `path` (a prefix of the sha256 of its absolute path)."
  ^String [^String path]
  (let [digest (.digest (MessageDigest/getInstance "SHA-256")
                        (.getBytes (output/abspath path) "UTF-8"))
        hex (apply str (map #(format "%02x" (bit-and (int %) 0xff)) digest))]
    (str (File. (claim-dir) ^String (rules/render (spec "file")
                                                  {:hash (subs hex 0 (spec "hash_chars"))})))))

(defn- private-dir!
  "Makes `dir` (rwx------) or checks it as Python's; nil, or why it is not private."
  [^String dir]
  (let [p (Paths/get dir (make-array String 0))
        no-follow (into-array LinkOption [LinkOption/NOFOLLOW_LINKS])]
    (Files/createDirectories (.getParent p) (make-array FileAttribute 0))
    (try (Files/createDirectory p (into-array FileAttribute [(PosixFilePermissions/asFileAttribute
                                                              (PosixFilePermissions/fromString "rwx------"))]))
         (catch java.nio.file.FileAlreadyExistsException _ nil))
    (let [perms (Files/getPosixFilePermissions p no-follow)]
      (when-not (and (Files/isDirectory p no-follow)
                     (= (long (.getUid (UnixSystem.))) (long (Files/getAttribute p "unix:uid" no-follow)))
                     (= perms #{PosixFilePermission/OWNER_READ PosixFilePermission/OWNER_WRITE
                                PosixFilePermission/OWNER_EXECUTE}))
        "not a private directory of this user (mode 0700)"))))

(defn- sibling
  "The file beside `path` that template `k` of trace_claims names, with {stem} {suffix} `fields`."
  ^String [^String path k fields]
  (let [f (File. path)
        [stem suffix] (config/splitext (.getName f))
        name (rules/render (spec k) (assoc fields :stem stem :suffix suffix))]
    (if-let [parent (.getParent f)] (str (File. parent ^String name)) name)))

(defn- with-pid
  "`path` with `pid` in its file name (api.json trace_claims pid_example)."
  ^String [^String path pid]
  (sibling path "pid_example" {:pid pid}))

(defn- owner-waiting
  "The claim of `path` as pyprof.process.claim._owner_waiting: 0 when this process holds it now,
  else the holder's pid (-1 not known yet). Throws config.claim_failed."
  [^String path]
  (let [full (output/abspath path)
        file (claim-file full)
        deadline (+ (System/nanoTime) (long (* 1e9 (double (spec "pid_wait_s")))))
        failed #(rules/error "config.claim_failed" {:path path :claim file :reason %1
                                                    :env (first (spec "base_env"))} %2)]
    (try (when-let [why (private-dir! (claim-dir))] (throw (failed why nil)))
         ;; -1: the owner has locked but not yet written its pid (or is giving it back)
         (loop [] (let [p (.claim (Tracker/current) full file)]
                    (if (and (== p -1) (< (System/nanoTime) deadline))
                      (do (Thread/sleep 10) (recur))
                      p)))
         (catch IOException e
           (throw (failed (or (.getMessage e) (.getName (class e))) e))))))

(defn- shown-pid [pid] (if (pos? pid) pid "(not known yet)"))

(defn claim!
  "Claims trace file `path` (config key `key`) for this process, as pyprof.process.claim.claim;
  true when the claim is new. Throws config.filename_claimed (or `code`) or config.claim_failed."
  ([key path] (claim! key path "config.filename_claimed" nil))
  ([key ^String path code example]
   (let [new? (not (.holds (Tracker/current) (output/abspath path)))
         pid (owner-waiting path)]
     (when-not (zero? pid)
       (throw (rules/error code {:path path :key key :pid (shown-pid pid)
                                 :example (or example (with-pid path (.pid (java.lang.ProcessHandle/current))))})))
     new?)))

(defonce ^:private windows (atom #{})) ; session windows' files claimed anew

(defn window-written!
  "Records that a session of this process wrote window file `path` (absolute): a later window
  never replaces it (api.json trace_claims written_about). The tracker keeps the record: Python's
  when JPype hosts this JVM, so neither language's window replaces the other's."
  [^String path]
  (.windowWritten (Tracker/current) path))

(defn- written? [^String path] (.wasWritten (Tracker/current) path))

(defn- exists? [^String path] (Files/exists (.toPath (File. path)) (make-array LinkOption 0)))

(defn- beside-written
  "`full`, or where window `index` goes instead when an earlier session of this process wrote
  `full` and it is still there (written_example, said by window_written_note)."
  ^String [index ^String full]
  (if-not (and (written? full) (exists? full))
    full
    (let [instead (->> (iterate inc 1)
                       (map #(sibling full "written_example" {:n %}))
                       (remove #(or (written? %) (exists? %)))
                       first)]
      (binding [*out* *err*]
        (println (rules/render (spec "window_written_note") {:index index :path full :instead instead})))
      instead)))

(declare release!)

(defn claim-window!
  "The file session window `index` is written to, as pyprof.process.claim.claim_window: `path`
  (absolute), or with this process's pid in its name when another process holds it or it holds
  no trace (api.json trace_claims window_claimed_note, window_not_a_trace_note, on stderr);
  `release-window!` gives it back."
  ^String [index ^String path]
  (let [full (beside-written index (output/abspath path))
        new? (not (.holds (Tracker/current) full))
        pid (owner-waiting full)
        no-trace (and (zero? pid) (output/replace-problem full))
        _ (when (and no-trace new?) (release! full))
        [file new?] (if (and (zero? pid) (not no-trace))
                      [full new?]
                      (let [instead (with-pid full (.pid (java.lang.ProcessHandle/current)))]
                        (binding [*out* *err*]
                          (println (rules/render (spec (if no-trace "window_not_a_trace_note"
                                                           "window_claimed_note"))
                                                 {:index index :path full :pid (shown-pid pid)
                                                  :instead instead})))
                        [instead (claim! "path" instead "session.path_claimed" instead)]))]
    (when new? (swap! windows conj file)) ; else the session's template claim (no fields)
    file))

(defn claim-window-path!
  "A session's claim of its window path, as pyprof.process.claim.claiming_window_path (none with
  {pid}): `canonical`, the template's canonical text, made absolute (`text` as written names it
  in the error); the path claimed anew, or nil. session.path_claimed, config.claim_failed."
  [^String text ^String canonical parts]
  (when-not (some #(and (map? %) (= "pid" (:name %))) parts)
    (let [path (output/abspath canonical)]
      (when (claim! "path" path "session.path_claimed" (with-pid text "{pid}"))
        path))))

(defn release!
  "Gives the claim of `path` back (nil: every claim of this process)."
  [path]
  (.release (Tracker/current) (some-> path output/abspath)))

(defn release-window!
  "Gives back the claim `claim-window!` took anew for `path` (no argument: for every window of
  this process; one session at a time)."
  ([] (run! release-window! @windows))
  ([path] (let [[old] (swap-vals! windows disj path)]
            (when (old path) (release! path)))))
