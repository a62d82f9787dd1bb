(ns pyprof.conformance-batch
  "Batch mode of the JVM conformance runner, for the differential test (tests/differential):
  many sequences in one JVM (a JVM start costs seconds), in order, as runner.py --batch runs
  them, and the runner calls that serve it (raw_event, all_files, traces), which
  pyprof.conformance's steps call here."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [pyprof.conformance :as c])
  (:import (com.sun.jna.ptr PointerByReference)
           (pyprof.jvm.capi LibMXNet)))

(def ^:dynamic *batch-root*
  "The batch's directory (the child's working directory) in batch mode, else nil: `all_files`
  and `traces` look at it and at the sequence's own directory."
  nil)

(defn raw-event
  "An event made through MXNet's own C API (no pyprof name check: MXNet accepts names pyprof
  refuses, e.g. with a backslash), started and stopped once, as runner.py's raw_event does
  through mxnet.profiler."
  [^String name]
  (let [out (PointerByReference.)]
    (LibMXNet/MXProfileCreateEvent name out)
    (let [h (.getValue out)]
      (LibMXNet/MXProfileDurationStart h)
      (LibMXNet/MXProfileDurationStop h)
      (LibMXNet/MXProfileDestroyHandle h))
    nil))

(defn- pid-free
  "A file name with this process's id replaced by PID (pyprof's hidden parts carry it)."
  [^String n]
  (str/replace n (str "-" (.pid (java.lang.ProcessHandle/current)) "-") "-PID-"))

(defn listed
  "As runner.py's _listed: the files of the sequence's directory (as \"<seq>/name\") and the
  plain files of the batch root, pid-free, sorted."
  [workdir]
  (let [root (io/file (or *batch-root* workdir)) d (io/file workdir)
        own (for [^java.io.File f (file-seq d) :when (.isFile f)]
              (str (.getName d) "/" (str/replace (subs (.getPath f) (inc (count (.getPath d)))) "\\" "/")))
        top (for [^java.io.File f (.listFiles root) :when (.isFile f)] (.getName f))]
    (vec (sort (map pid-free (if (= (.getCanonicalPath root) (.getCanonicalPath d)) top (concat own top)))))))

(defn- summary
  "As runner.py's trace_summary: a written trace's events (not metadata, C API calls or memory
  counters) as name, cat, ph (and args for counters), with their counts; {\"unreadable\" true}
  for a file that is no complete JSON document."
  [^java.io.File f]
  (try
    (let [events (get (with-open [r (io/reader f :encoding "UTF-8")] (json/read r)) "traceEvents")]
      (->> events
           (remove #(or (= "M" (% "ph")) (= "MXNET_C_API" (% "cat"))
                        (str/starts-with? (str (% "name")) "Memory:")))
           (map #(select-keys % (if (= "C" (% "ph")) ["name" "cat" "ph" "args"] ["name" "cat" "ph"])))
           frequencies
           (mapv (fn [[e n]] {"event" e "count" n}))))
    (catch Exception _ {"unreadable" true})))

(defn traces [workdir]
  (let [root (io/file (or *batch-root* workdir))]
    (into {}
          (for [n (listed workdir) :when (str/ends-with? n ".json")
                ;; the listed name has PID for the pid (as runner.py's): the file has the pid
                :let [real (str/replace n "-PID-" (str "-" (.pid (java.lang.ProcessHandle/current)) "-"))
                      f (if (str/includes? n "/") (io/file (.getParentFile (io/file workdir)) real) (io/file root real))]
                :when (.isFile f)]
            [n (summary f)]))))

(defn -main-batch
  "Child JVM entry: runs every sequence of the batch file at `path` (`{\"sequences\": [...]}`) in
  order through `language`, sequence i in `workdir`/s<i>, with `workdir` the working directory,
  and prints one JSON line: a list of outcomes per sequence."
  [path language workdir]
  (let [sequences (get (c/load-json path) "sequences")]
    (binding [*batch-root* workdir]
      (println (json/write-str
                (vec (map-indexed (fn [i scenario]
                                    (let [d (io/file workdir (str "s" i))]
                                      (.mkdirs d)
                                      (c/execute scenario language (str d))))
                                  sequences)))))
    (shutdown-agents)))
