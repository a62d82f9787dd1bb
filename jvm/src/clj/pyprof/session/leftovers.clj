(ns ^:no-doc pyprof.session.leftovers
  "The sweep of dead processes' leftovers (crash recovery), by the rules of Python's
  `pyprof.session.leftovers`, which documents them (api.json raw_trace about_leftovers)."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [pyprof.config :as config]
            [pyprof.rules :as rules]
            [pyprof.session.cap :as cap]
            [pyprof.session.raw :as raw]
            [pyprof.session.rawdir :as rawdir])
  (:import (java.io File)
           (java.nio.file FileAlreadyExistsException Files LinkOption Path)
           (java.nio.file.attribute FileAttribute)))

(set! *warn-on-reflection* true)

(def ^:private spec rawdir/spec)

(defn- path ^Path [^String s] (.toPath (io/file s)))

(defn link-beside!
  "Links the finished file `tmp` to the first free recovered name of `window` for dead process `p`
  (api.json raw_trace recovered_name, recovered_name_taken), never replacing a file, as Python's
  link_beside; returns it."
  ^String [^String tmp ^String window ^long p]
  (let [f (.getAbsoluteFile (io/file window))
        [stem suffix] (config/splitext (.getName f))]
    (loop [n 0]
      (let [target (str (io/file (.getParentFile f)
                                 (rules/render (spec (if (zero? n) "recovered_name"
                                                         "recovered_name_taken"))
                                               {:stem stem :pid p :suffix suffix :n n})))
            linked (try (Files/createLink (path target) (path tmp)) true
                        (catch FileAlreadyExistsException _ false)
                        (catch UnsupportedOperationException _ nil)
                        (catch java.io.IOException _ nil))
            ;; no hard links here: an empty file claims the name, then the rename fills it
            made (if (some? linked)
                   linked
                   (try (Files/createFile (path target) (make-array FileAttribute 0))
                        (Files/move (path tmp) (path target)
                                    (into-array [java.nio.file.StandardCopyOption/REPLACE_EXISTING]))
                        true
                        (catch FileAlreadyExistsException _ false)))]
        (if made target (recur (inc n)))))))

(defn- partial-bytes
  "Bytes of raw trace the .partial of window `w` spans."
  ^long [w]
  (let [info (json/read-str (slurp (raw/partial-path w)))]
    (max 0 (- (long (or (info "end") (.length (io/file ^String (info "raw")))))
              (long (info "start"))))))

(defn place-beside!
  "Writes window `w` of dead process `p` beside its path (`link-beside!`), deletes the .partial;
  returns the path written."
  ^String [^String w ^long p]
  (let [dir (.getParentFile (.getAbsoluteFile (io/file w)))
        tmp (str (Files/createTempFile (.toPath dir) (str (spec "temp_prefix") (rawdir/pid)
                                                          "-recover-")
                                       ".tmp" (make-array FileAttribute 0)))]
    (try
      (raw/write-window! w tmp) ; rw-r--r--, as every trace pyprof writes (raw/write-trace!)
      (let [dest (link-beside! tmp w p)]
        (.delete (io/file (raw/partial-path w)))
        dest)
      (finally (Files/deleteIfExists (path tmp))))))

(defn- windows
  "The windows the dead process's note in `dir` names whose .partial still exists."
  [^File dir]
  (filterv #(.exists (io/file (raw/partial-path %)))
           (try (mapv str (get (json/read-str (slurp (io/file dir (spec "window_note")))) "windows"))
                (catch Exception _ []))))

(defn- report!
  "Prints `reports` ([window why fields] each), one line each, when this process makes the file
  `reported` in `dir`."
  [^File dir p reports]
  (when (and (seq reports)
             (try (Files/createFile (.toPath (io/file dir (spec "reported_name")))
                                    (make-array FileAttribute 0))
                  true
                  (catch java.io.IOException _ false)))
    (let [rawf (io/file dir (spec "file"))]
      (binding [*out* *err*]
        (doseq [[w why fields] reports]
          (println (rules/render (spec "reported_note")
                                 {:window w :pid p :raw (str rawf) :bytes (.length rawf)
                                  :dir (str dir)
                                  :why (rules/render (get (spec "reported_why") why) fields)})))))))

(defn- me []
  (rules/render (spec "claim_target") {:pid (rawdir/pid) :start (rawdir/start-ticks (rawdir/pid))}))

(defn- outside? [within w]
  (and within (not (.startsWith (.toPath (.getAbsoluteFile (io/file w))) (path within)))))

(defn- recover!
  "Writes window `w` of dead process `p` beside its path (`place-beside!`) and deletes the dead
  process's temporary files there; nil, or what to report: [w why fields]."
  [^String w ^long p]
  (try
    (let [n (partial-bytes w)
          limit (cap/recover-max-bytes)]
      (if (> n limit)
        [w "too_large" {:bytes n :limit limit :env (spec "recover_max_env")}]
        (let [dest (place-beside! w p)]
          (binding [*out* *err*]
            (println (rules/render (spec "recovered_note") {:window w :pid p :path dest})))
          nil)))
    (catch Exception e
      [w "failed" {:error (str (.getMessage e))}])
    (finally
      (rawdir/clean-dir-of! (str (.getParent (io/file w))) p))))

(defn sweep-dir!
  "Recovers or reports the windows of dead process `p` in raw-trace directory `dir`; true when the
  directory may be deleted. A process with a window outside `within` (nil: anywhere) is left as
  it is, for a sweep allowed to write there (a JVM service writes only under its output root)."
  [^File dir ^long p within]
  (let [claim (.toPath (io/file dir (spec "claim_name")))]
    (cond
      ;; read again once claimed below: a recoverer may have taken some windows meanwhile
      (some #(outside? within %) (windows dir)) false
      (Files/exists (.toPath (io/file dir (spec "reported_name")))
                    (into-array LinkOption [LinkOption/NOFOLLOW_LINKS]))
      false ; reported before: left for `pyprof recover` or the user
      (not (try (Files/createSymbolicLink claim (path (me)) (make-array FileAttribute 0)) true
                (catch FileAlreadyExistsException _ false)))
      (let [[cpid cstart] (try (mapv #(Long/parseLong %)
                                     (str/split (str (Files/readSymbolicLink claim)) #"-"))
                               (catch Exception _ nil))]
        (if (or (nil? cpid) (rawdir/alive? cpid cstart))
          false ; being recovered by that process (or not a claim pyprof made)
          (let [ws (windows dir)]
            (report! dir p (for [w ws] [w "interrupted" {:claimant cpid}]))
            (doseq [w ws, who [cpid p]] ; the temporary files of the recoverer and the dead
              (rawdir/clean-dir-of! (str (.getParent (io/file w))) who))
            (empty? ws))))
      :else
      (let [reports (vec (keep #(recover! % p) (windows dir)))]
        (report! dir p reports)
        (empty? reports)))))

(defn sweep!
  "Recovers or reports every dead process's leftovers (`sweep-dir!`), then deletes their
  temporary files in `window-dir` and the base directory; returns the directories removed; never
  throws."
  [window-dir within]
  (try
    (let [base (rawdir/base-dir)
          removed (vec (for [^File d (sort (.listFiles (io/file base)))
                             :let [[_ p t] (re-matches rawdir/dir-re (.getName d))]
                             :when (and p (.isDirectory d) (rawdir/owned? d)
                                        (not (rawdir/alive? (Long/parseLong p) (Long/parseLong t)))
                                        (sweep-dir! d (Long/parseLong p) within))]
                         (do (rawdir/remove-dir! (str d)) (str d))))]
      (doseq [d (distinct (remove nil? [base window-dir]))]
        (rawdir/clean-dir-of! d))
      removed)
    (catch Throwable e
      (binding [*out* *err*]
        (println "pyprof: the sweep of dead processes' leftovers stopped:" (.getMessage e)))
      [])))

(defonce ^:private sweeper (atom nil))

(defn start-sweep!
  "Starts `sweep!` once per JVM on a daemon thread, waiting for it the first time at most
  `pyprof.session.cap/start-wait-seconds`; returns the thread."
  ^Thread [window-dir within]
  (let [wait (cap/start-wait-seconds)
        t (Thread. ^Runnable (fn [] (sweep! window-dir within)) "pyprof-leftovers")
        [old] (swap-vals! sweeper #(or % t))]
    (if old
      old
      (do (.setDaemon t true)
          (.start t)
          (.join t (max 1 (long (min 9.2e18 (* 1000 wait)))))
          t))))
