(ns pyprof.test-util
  "Running Clojure in a child JVM, for tests that need a fresh process (one profiler session per
  process, library loading once per JVM)."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.java.shell :as sh]
            [clojure.string :as str])
  (:import (java.util.concurrent TimeUnit)))

(defn- child-classpath
  "This JVM's classpath, after target/aot when it is there: the namespaces compiled ahead of
  time by pyprof.jvm.classpath (scripts/setup.sh), so a child does not compile pyprof's sources
  again (Clojure loads a class only when it is newer than its source)."
  []
  (let [cp (System/getProperty "java.class.path")
        aot (.getAbsoluteFile (io/file "target" "aot"))]
    (if (.isDirectory aot) (str aot java.io.File/pathSeparator cp) cp)))

(def fast-start-jvm-args
  "The flags of a short-lived child JVM unless a test gives its own: C1 only and the serial
  collector start it in about 1.3 s instead of 2.1 s (1.4 s of CPU instead of 3.8 s) on 2 cores."
  ["-XX:TieredStopAtLevel=1" "-XX:+UseSerialGC"])

(defn java-child
  "Runs `java -cp <this classpath> <jvm-args> clojure.main <args>` and returns {:exit :out :err}.
  Options: :jvm-args (e.g. [\"-Dmxnet.library.path=...\"]; default `fast-start-jvm-args`), :env (a map merged into the
  environment; a nil value removes a variable), :timeout-s (default 300), :dir (working
  directory), :classpath (default this JVM's, after target/aot), :inherit-library (default true: pass on this JVM's
  -Dmxnet.library.path). This JVM's -Dpyprof.outputRoot is passed on (a later one in
  :jvm-args wins)."
  [args & {:keys [jvm-args env timeout-s dir classpath inherit-library]
           :or {timeout-s 300 inherit-library true jvm-args fast-start-jvm-args}}]
  (let [java (str (io/file (System/getProperty "java.home") "bin" "java"))
        inherited (when-let [p (and inherit-library (System/getProperty "mxnet.library.path"))]
                    (when-not (some #(str/starts-with? % "-Dmxnet.library.path=") jvm-args)
                      [(str "-Dmxnet.library.path=" p)]))
        root (when-let [r (System/getProperty "pyprof.outputRoot")] [(str "-Dpyprof.outputRoot=" r)])
        ;; An -e child ends with shutdown-agents: the idle threads of its futures would keep
        ;; it alive 60 s more (the stress child took 75 s for 14 s of work)
        args (if (= "-e" (first args)) (concat args ["-e" "(shutdown-agents)"]) args)
        cmd (concat [java "-cp" (or classpath (child-classpath))]
                    inherited root jvm-args ["clojure.main"] args)
        pb (ProcessBuilder. ^java.util.List (vec cmd))
        penv (.environment pb)
        out (java.io.File/createTempFile "child" ".out")
        err (java.io.File/createTempFile "child" ".err")]
    (doseq [[k v] env]
      (if (nil? v) (.remove penv k) (.put penv k v)))
    (when dir (.directory pb (io/file dir)))
    (.redirectOutput pb out)
    (.redirectError pb err)
    (let [p (.start pb)]
      (when-not (.waitFor p timeout-s TimeUnit/SECONDS)
        (.destroyForcibly p)
        (throw (ex-info (str "child JVM timed out: " (str/join " " args)) {:args args})))
      (try
        {:exit (.exitValue p) :out (slurp out) :err (slurp err)}
        (finally (.delete out) (.delete err))))))

(defn temp-dir
  "A fresh temporary directory."
  ^java.io.File []
  (.toFile (java.nio.file.Files/createTempDirectory
            "pyprof-test" (make-array java.nio.file.attribute.FileAttribute 0))))

;; not the canonical file: .venv/bin/python is a link to the base interpreter, which does not
;; see the virtual environment's packages when started by its real path
;; (the repository's: above jvm/, or above examples/matmul/)
(def ^:private python
  (or (first (filter #(.canExecute ^java.io.File %)
                     (for [up [[".."] [".." ".."]]]
                       (.toFile (.normalize (.toPath (.getAbsoluteFile (apply io/file (concat up [".venv" "bin" "python"])))))))))
      (io/file ".." ".venv" "bin" "python")))

(defn python-json
  "What the Python reference prints (as JSON, read back) for the script `code`, run with the
  repository's .venv in this JVM's working directory (jvm/), `input` (when given) written to its
  stdin as JSON; nil when there is no .venv (the cross-checks with Python are then left out).
  Throws when the script fails."
  ([code] (python-json code ::none))
  ([code input]
   (when (.canExecute ^java.io.File python)
     (let [root (str (-> ^java.io.File python .getParentFile .getParentFile .getParentFile))
           env (assoc (into {} (System/getenv)) "PYTHONPATH" root)
           {:keys [exit out err]} (apply sh/sh (str python) "-c" code
                                         (concat (when-not (= input ::none) [:in (json/write-str input)])
                                                 [:dir (System/getProperty "user.dir") :env env]))]
       (when-not (zero? exit)
         (throw (ex-info (str "python failed: " err) {:code code})))
       (json/read-str out)))))

(def compiled-classpath
  "This JVM's classpath (after target/aot) behind a directory holding the test namespaces
  `names` compiled ahead of time, in a child JVM so that this one reloads nothing: a child then
  loads classes instead of compiling pyprof.conformance and its helpers. Made once per JVM
  and set of names (memoised), so it never holds a class older than this run."
  (memoize
   (fn [names]
     (let [dir (str (temp-dir))
           cp (str dir java.io.File/pathSeparator (child-classpath))
           {:keys [exit err]} (java-child ["-e" (str "(binding [*compile-path* " (pr-str dir) "]"
                                                     " (doseq [n '" (pr-str (vec names)) "] (compile n)))")]
                                          :classpath cp :timeout-s 300)]
       (when-not (zero? exit)
         (throw (ex-info (str "compiling " names " failed:\n" err) {:exit exit})))
       cp))))

(defn side-by-side
  "(mapv f coll), at most `n` (default 3) at a time, for calls that mostly wait on a child
  process; results in coll's order. Assert on them in the test's thread."
  ([f coll] (side-by-side 3 f coll))
  ([n f coll]
   (let [pool (java.util.concurrent.Executors/newFixedThreadPool n)]
     (try
       (mapv #(.get ^java.util.concurrent.Future %)
             (mapv (fn [x] (.submit pool ^Callable (fn [] (f x)))) coll))
       (finally (.shutdown pool))))))
