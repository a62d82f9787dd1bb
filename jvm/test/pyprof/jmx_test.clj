(ns pyprof.jmx-test
  "The MBean: a second JVM (this one) attaches to a running service (a child JVM looping over
  NDArray work) over a local JMX connection, starts a session, stops it, dumps and reads stats."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.example.ndarray :as nd]
            [pyprof.rules :as rules]
            [pyprof.test-util :refer [fast-start-jvm-args java-child temp-dir]])
  (:import (com.sun.tools.attach VirtualMachine)
           (java.util.concurrent TimeUnit)
           (javax.management ObjectName)
           (javax.management.remote JMXConnectorFactory JMXServiceURL)
           (pyprof.jvm ProfilerControl ProfilerSession PyprofException)))

(defn child-service
  "The service: registers the MBean, prints its pid, loops until `stop-file` exists (at most
  120 s)."
  [stop-file]
  (ProfilerControl/register)
  (println (.pid (java.lang.ProcessHandle/current)))
  (flush)
  (let [deadline (+ (System/currentTimeMillis) 120000)]
    (while (and (not (.exists (io/file stop-file))) (< (System/currentTimeMillis) deadline))
      (with-open [a (nd/random-uniform -1 1 [64 64])] (nd/wait-to-read a))
      (Thread/sleep 2))))

(defn- start-service [dir stop-file]
  (let [java (str (io/file (System/getProperty "java.home") "bin" "java"))
        args (cond-> (into [java "-cp" (System/getProperty "java.class.path")
                            (str "-Dpyprof.outputRoot=" dir)] fast-start-jvm-args)
               (System/getProperty "mxnet.library.path")
               (conj (str "-Dmxnet.library.path=" (System/getProperty "mxnet.library.path")))
               true (into ["clojure.main" "-e" (str "(require 'pyprof.jmx-test)"
                                                     "(pyprof.jmx-test/child-service \"" stop-file "\")")]))
        pb (doto (ProcessBuilder. ^java.util.List args)
             (.redirectError (io/file dir "service.err")))
        p (.start pb)
        pid (.readLine (io/reader (.getInputStream p)))]
    [p pid]))

(deftest a-second-jvm-profiles-a-running-service-over-local-jmx
  (let [dir (temp-dir)
        stop-file (str (io/file dir "stop"))
        [^Process p pid] (start-service dir stop-file)]
    (try
      (is (re-matches #"\d+" (str pid)) (slurp (io/file dir "service.err")))
      (let [vm (VirtualMachine/attach (str pid))
            addr (try (.startLocalManagementAgent vm) (finally (.detach vm)))
            _ (is (re-find #"127\.0\.0\.1|localhost" addr) "a local-only connector")
            conn (JMXConnectorFactory/connect (JMXServiceURL. addr))
            mbs (.getMBeanServerConnection conn)
            on (ObjectName. ProfilerControl/OBJECT_NAME)
            invoke (fn [op params sig] (.invoke mbs on op (object-array params) (into-array String sig)))
            ;; stop returns the windows written so far; the rest are written on the saver thread
            stop-all (fn [] (invoke "stop" [] [])
                       (is (= true (invoke "awaitSaved" [60000] ["long"])))
                       (json/write-str ((json/read-str (.getAttribute mbs on "Status")) "windows")))]
        (try
          (testing "start with a configuration, profile the running loop, stop, dump, stats"
            (invoke "start" [(json/write-str {"profile_imperative" true "aggregate_stats" true
                                              "path" (str dir "/jmx_{window}.json")}) 30]
                    ["java.lang.String" "long"])
            (is (= true (.getAttribute mbs on "Active")))
            (Thread/sleep 1000)
            (let [ws (json/read-str (stop-all))]
              (is (= 1 (count ws)))
              (is (= "saved" ((json/read-str (.getAttribute mbs on "LastSave")) "state")))
              (is (= "[]" (invoke "stop" [] [])) "nothing running: nothing stopped (the windows stay in Status)"))
            (is (= false (.getAttribute mbs on "Active")))
            (let [out (str dir "/dumped.json")
                  _ (invoke "dump" [out] ["java.lang.String"])
                  _ (is (= true (invoke "awaitSaved" [60000] ["long"])))
                  _ (is (= {"state" "dumped" "path" out}
                           (select-keys (json/read-str (.getAttribute mbs on "LastSave")) ["state" "path"])))
                  evs (get (json/read-str (slurp out)) "traceEvents")]
              (is (< 10 (count (filter #(= "_random_uniform" (% "name")) evs)))))
            (let [st (loop [n 0] ; read on the control thread: pending until ready
                       (let [st (json/read-str (invoke "stats" [] []))]
                         (if (and (st "pending") (< n 600)) (do (Thread/sleep 50) (recur (inc n))) st)))
                  ru (first (filter #(= "_random_uniform" (% "name")) (st "operators")))]
              (is (< 5 (ru "count")))
              (is (every? #(contains? ru %) ["total_us" "p50_us" "p99_us"]))))
          (testing "a schedule driven by step_seconds; a forgotten session ends by itself"
            (let [t0-us (* 1000 (System/currentTimeMillis))]
              (invoke "start" [(str "profile_imperative=true,step_seconds=0.3,wait=1,active=1,path=" dir "/timed_{window}.json") 2]
                      ["java.lang.String" "long"])
              (Thread/sleep 3500)
              (is (= false (.getAttribute mbs on "Active")))
              (let [status (json/read-str (.getAttribute mbs on "Status"))
                    ws (status "windows")]
                (is (= "stopped after its maximum duration" (status "note")))
                ;; how many windows 2 s hold is the load's (1 seen at a load of 8); that the timer
                ;; stepped is not: a window opened, after a wait step of 0.3 s
                (is (seq ws) "the timer ended the wait step: a window recorded")
                (is (<= (+ t0-us 300000) (get (first ws) "start_us" 0)) "the first window began after the wait step"))))
          (testing "files only under the output root: outside paths are refused with the fix"
            (let [root (str (.toRealPath (.toPath (io/file dir)) (make-array java.nio.file.LinkOption 0)))
                  err (fn [op params sig]
                        (try (invoke op params sig) nil
                             (catch javax.management.RuntimeMBeanException e (.getTargetException e))
                             (catch Exception e e)))]
              (is (= root (.getAttribute mbs on "OutputRoot")))
              (doseq [bad ["/etc/x.json" "../../etc/x.json" "sub/../../x.json"]]
                (let [e (err "start" [(json/write-str {"path" bad}) 5] ["java.lang.String" "long"])]
                  (is (instance? IllegalArgumentException e) (str bad ": " e))
                  (is (= (str "path \"" bad "\" is outside the output root \"" root "\": the service"
                              " writes only there. fix: pass a path relative to the root (such as"
                              " \"traces/run1.json\"), or start the JVM with"
                              " -Dpyprof.outputRoot=<directory> to allow another directory")
                         (.getMessage ^Exception e)))))
              (is (= false (.getAttribute mbs on "Active")) "a refused start starts nothing")
              (let [e (err "start" [(json/write-str {"path" "nodir/x.json"}) 5] ["java.lang.String" "long"])]
                (is (re-find #"directory \".*/nodir\" does not exist under the output root .* fix: create it first"
                             (str (.getMessage ^Exception e)))))
              (.mkdir (io/file dir "sub"))
              (invoke "start" [(json/write-str {"profile_imperative" true "path" "sub/rel_{window}.json"}) 30]
                      ["java.lang.String" "long"])
              (Thread/sleep 300)
              (let [[w] (json/read-str (stop-all))]
                (is (= (str root "/sub/rel_0.json") (w "path")))
                (is (seq (get (json/read-str (slurp (w "path"))) "traceEvents"))))
              (doseq [bad ["/etc/x.json" "../../etc/x.json"]]
                (let [e (err "dump" [bad] ["java.lang.String"])]
                  (is (re-find #"^dump path \".*\" is outside the output root" (str (.getMessage ^Exception e))))))
              (is (not (.exists (io/file "/etc/x.json"))))
              (invoke "dump" ["sub/all.json"] ["java.lang.String"])
              (invoke "awaitSaved" [60000] ["long"])
              (is (.isFile (io/file dir "sub" "all.json")))
              (let [before (slurp (io/file dir "sub" "all.json"))
                    e (err "dump" ["sub/all.json"] ["java.lang.String"])]
                (is (re-find #"sub/all.json\" exists: a dump of the windows never replaces a file.* fix: dump to a new path"
                             (str (.getMessage ^Exception e))) (str e))
                (is (= before (slurp (io/file dir "sub" "all.json"))) "the earlier dump is kept"))))
          (testing "a running service is never switched: steady and profile_api are refused over JMX"
            (doseq [[opts key] [["steady=true" "steady mode begins at the JVM's start-up"]
                                ["profile_api=true" "profile_api=true on a running service"]
                                ["{\"profile_all\": 1}" "profile_all=true on a running service"]]]
              (let [e (try (invoke "start" [opts 5] ["java.lang.String" "long"]) nil
                           (catch Exception e e))
                    msg (str (.getMessage (.getCause ^Exception e)))]
                (is (str/starts-with? msg key) msg)
                (is (str/includes? msg "fix: restart the JVM with -Dpyprof.steady=true") msg)))
            (let [e (try (invoke "steadyBegin" ["profile_api=true"] ["java.lang.String"]) nil
                         (catch Exception e e))
                  msg (str (.getMessage (.getCause ^Exception e)))]
              (is (str/starts-with? msg "steady mode begins at the JVM's start-up") msg)
              (is (= "" (.getAttribute mbs on "Steady")) "steady mode not begun"))
            (is (= false (.getAttribute mbs on "Active")) "nothing started"))
          (testing "the default window path names the session: a second one keeps the first's file"
            (let [paths (vec (for [_ (range 2)]
                               (do (invoke "start" ["profile_imperative=true" 30] ["java.lang.String" "long"])
                                   (Thread/sleep 200)
                                   ((first (json/read-str (stop-all))) "path"))))]
              (is (apply not= paths) (pr-str paths))
              (is (every? #(re-find (re-pattern (str "/pyprof-jmx-" pid "-\\d+-0\\.json$")) %) paths)
                  (pr-str paths))
              (is (every? #(.isFile (io/file %)) paths))))
          (testing "jconsole shows each operation's parameters by name, described (api.json jmx_operations)"
            (let [ops (into {} (for [o (.getOperations (.getMBeanInfo mbs on))] [(.getName o) o]))
                  spec (get-in rules/api ["service_session" "jmx_operations"])]
              (is (= {"start" ["options" "maxDurationSeconds"] "dump" ["path"] "awaitSaved" ["timeoutMillis"]
                      "steadyBegin" ["options"] "stop" [] "step" [] "stats" [] "steadyEnd" []}
                     (into {} (for [[n o] ops] [n (mapv #(.getName ^javax.management.MBeanParameterInfo %) (.getSignature ^javax.management.MBeanOperationInfo o))])))
                  "not p1, p2")
              (doseq [[n ^javax.management.MBeanOperationInfo o] ops]
                (is (= (first (spec n)) (.getDescription o)) n)
                (is (= (map second (rest (spec n))) (map #(.getDescription ^javax.management.MBeanParameterInfo %) (.getSignature o))) n))))
          (testing "errors reach a JMX client as JDK exceptions with pyprof's message"
            (let [e (try (invoke "start" ["{\"profile_symbolc\": true}" 5] ["java.lang.String" "long"]) nil
                         (catch Exception e e))]
              (is (re-find #"did you mean \"profile_symbolic\"" (str e))))
            (let [e (try (invoke "start" ["actve=2" 5] ["java.lang.String" "long"]) nil
                         (catch Exception e e))
                  msg (str (.getMessage (.getCause ^Exception e)))]
              (is (re-find #"did you mean \"active\"\?" msg) "the schedule's keys are JMX options")
              (is (re-find #"step_seconds" msg))
              (is (not (re-find #"on_trace_ready" msg)) msg))
            (let [e (try (invoke "start" ["{bad json" 5] ["java.lang.String" "long"]) nil
                         (catch Exception e e))
                  msg (str (.getMessage (.getCause ^Exception e)))]
              ;; a new user's find: clojure.data.json's bare "JSON error (non-string key ...)"
              (is (instance? IllegalArgumentException (.getCause ^Exception e)))
              (is (str/starts-with? msg "options are not valid JSON (JSON error") msg)
              (is (str/ends-with? msg "or key=value pairs separated by commas") msg))
            (doseq [step ["0.0005" "0" "-1" "NaN"]]
              (let [e (try (invoke "start" [(str "step_seconds=" step) 5] ["java.lang.String" "long"]) nil
                           (catch Exception e e))
                    msg (str (.getMessage (.getCause ^Exception e)))]
                (is (str/includes? msg (str "step_seconds must be at least 0.001 (1 ms) and at most the"
                                            " session's maximum duration, 5 s, got " step))
                    msg))))
          (finally (.close conn))))
      (finally
        (spit stop-file "")
        (when-not (.waitFor p 30 TimeUnit/SECONDS) (.destroyForcibly p))))
    (is (= 0 (.exitValue p)) (slurp (io/file dir "service.err")))))

(deftest the-jmx-options-name-their-problem-and-fix
  ;; what a JMX client gets for options it may well write (in this JVM: the options are checked
  ;; before anything starts, the message is the one a remote client gets, ProfilerControl/forJmx)
  (let [ctl (ProfilerControl/instance)
        refused (fn [options] (try (.start ctl options 5) nil
                                   (catch IllegalArgumentException e (.getMessage e))))]
    (is (= "[]" (.stop ctl)) "no session: stop stops nothing")
    (is (= (str "path \"one.json\" names one file for every window (it has no window placeholder, or one that"
                " a '..' after it cancels), but the schedule records several windows, which would overwrite"
                " each other. fix: path=trace_{window}.json in start's options (a path relative to the output root)")
           (refused "path=one.json,active=1,repeat=2"))
        "the fix in the options string's words, not Java's Map.of")
    (is (= "invalid schedule wait=\"abc\": expected an integer >= 0. fix: pass an integer >= 0"
           (refused "wait=abc")))
    (is (= "invalid schedule active=\"99999999999999999999\": expected an integer >= 1. fix: pass an integer >= 1"
           (refused "{\"active\": \"99999999999999999999\"}")))
    (is (= (str "the options hold a schedule map and the schedule option(s) \"active\" beside it: one of the two"
                " would be dropped. fix: give the schedule's options once: all beside the other options"
                " (wait=1,active=2) or all in the schedule map")
           (refused "{\"schedule\": {\"wait\": 1}, \"active\": 2}")))
    ;; a tester's finds: a step no timer reaches, and bad -D values that made a session die at
    ;; once, or one that could not be stopped, were taken
    (is (= (str "options must be a JSON object or key=value pairs, got [1,2]. fix: pass key=value"
                " pairs or a JSON object such as {\"step_seconds\": 1}")
           (refused "[1,2]")) "a JSON array named as a whole, not cut at its first comma")
    (doseq [step ["Infinity" "1e400" "6"]]
      (is (= (str "step_seconds must be at least 0.001 (1 ms) and at most the session's maximum"
                  " duration, 5 s, got " step ". fix: pass a step of 1 ms or more, e.g. step_seconds=1")
             (refused (str "step_seconds=" step)))))
    (doseq [[property value] [["pyprof.jmx.maxDurationSeconds" "-5"] ["pyprof.jmx.maxDurationLimitSeconds" "0"]
                              ["pyprof.maxWindows" "0"] ["pyprof.maxWindowBytes" "abc"]]]
      (try
        (System/setProperty property value)
        (is (str/starts-with? (str (refused "path=limits_{window}.json"))
                              (str "-D" property "=\"" value "\" is not a positive integer. fix: set -D"
                                   property " to a positive integer")))
        (finally (System/clearProperty property))))
    (is (= false (.isActive ctl)) "a refused start starts nothing")
    (testing "the Java facade refuses a schedule key beside its schedule map, as Python's pyprof.profile does"
      (is (= "session.unknown_option"
             (try (ProfilerSession. {"schedule" {"wait" 1} "active" 2}) nil
                  (catch PyprofException e (.code e))))))))

(defn child-timed-windows
  "Run in a child JVM: a timed session (step_seconds 0.2, every step a window) over a busy
  loop, while a slow call holds the control for 1.1 s (as stats() of a large window would), so
  the timed step runs more than five periods late. Prints the windows and the time span."
  [dir]
  (let [ctl (ProfilerControl/instance)
        held (atom nil)
        busy (atom true)
        worker (doto (Thread. ^Runnable
                              (fn [] (while @busy
                                       (with-open [a (nd/random-uniform -1 1 [64 64])] (nd/wait-to-read a))
                                       (Thread/sleep 10))))
                 (.start))
        t0 (* 1000 (System/currentTimeMillis))]
    (.start ctl (str "profile_imperative=true,step_seconds=0.2,active=1,path=" dir "/timed_{window}.json") 30)
    (Thread/sleep 500)
    (locking ctl ; no step between the two reads of the clock
      (let [h0 (* 1000 (System/currentTimeMillis))]
        (Thread/sleep 1100)
        (reset! held [h0 (* 1000 (System/currentTimeMillis))])))
    (Thread/sleep 700)
    ;; a loaded machine cuts windows slowly: wait (20 s at most) for 3 written, 4 with stop's
    (let [deadline (+ (System/currentTimeMillis) 20000)]
      (while (and (< (count (filter #(re-matches #"timed_\d+\.json" (.getName ^java.io.File %))
                                    (.listFiles (io/file dir))))
                     3)
                  (< (System/currentTimeMillis) deadline))
        (Thread/sleep 50)))
    (let [_ (.stop ctl)
          _ (.awaitSaved ctl 60000) ; the stop is taken, the windows written, after it returns
          t1 (* 1000 (System/currentTimeMillis))
          ws (json/write-str ((json/read-str (.getStatus ctl)) "windows"))]
      (reset! busy false)
      (.join worker)
      (prn [t0 t1 (json/read-str ws) @held]))))

(deftest timed-windows-never-burst-and-record-their-span
  (let [dir (str (temp-dir))
        {:keys [exit out err]} (java-child ["-e" (str "(require 'pyprof.jmx-test)"
                                                       "(pyprof.jmx-test/child-timed-windows \"" dir "\")")]
                                          :jvm-args (conj fast-start-jvm-args (str "-Dpyprof.outputRoot=" dir)))
        [t0 t1 ws [h0 h1]] (read-string (last (str/split-lines out)))
        spans (mapv (juxt #(% "start_us") #(% "end_us")) ws)
        full (butlast spans)] ; the last window ends whenever stop() comes
    (is (= 0 exit) err)
    ;; about 2.3 s of 0.2 s steps, one of them 1.1 s long; a loaded machine waits longer for
    ;; the files, so the bound is the periods that passed, not a count (11 seen under load)
    (is (<= 4 (count ws) (inc (quot (- t1 t0) 200000)))
        (str (count ws) " windows in " (quot (- t1 t0) 1000) " ms of 0.2 s steps"))
    (is (= (range (count ws)) (map #(% "index") ws)))
    ;; A window is the period less the step (the cut) before it: a step slower than the period
    ;; (196 ms seen at a load of 11) leaves the next window a few ms, and that window's own cut
    ;; is then small. A burst (fixed-rate catch-up after the 1.1 s late step) opens a run of
    ;; windows a few ms long, one after another: never two short ones in a row.
    (is (not-any? (fn [pair] (every? (fn [[s e]] (< (- e s) 20000)) pair)) (partition 2 1 full))
        (str "no burst of short windows: " (mapv (fn [[s e]] (- e s)) spans)))
    ;; no step while the control was held: no window ends inside the hold (after the first
    ;; window opened: under load the session may start during it), one spans its end (its
    ;; length is the hold's and the cuts' around it, which load moves: 0.9 s seen at a load of 20)
    (is (not-any? (fn [[_ e]] (< (max h0 (ffirst spans)) e h1)) spans) (str "the hold " [h0 h1]))
    (is (some (fn [[s e]] (<= s h1 e)) spans) (str "the late step made one long window: the hold " [h0 h1]))
    (is (<= t0 (ffirst spans)) "spans are real time")
    (is (<= (second (peek spans)) t1))
    ;; one after another, never overlapping; how long the gap between two is (cutting one window
    ;; and opening the next) is the load's: 129 ms seen at a load of 6, 256 ms at 15
    (doseq [[[_ e] [s _]] (partition 2 1 spans)]
      (is (<= e s) "the next window opens after the last one ended"))
    ;; what load cannot move: each window's operators lie in its own span, and the worker's
    ;; operators are in them (a window of 0.2 s may hold none on a machine loaded enough)
    (let [ops (for [w ws, e (get (json/read-str (slurp (w "path"))) "traceEvents")
                    :when (= "_random_uniform" (e "name"))]
                [w (e "ts")])]
      (is (seq ops) "the windows hold the worker's operators")
      (doseq [[w ts] ops]
        (is (<= (w "start_us") ts (w "end_us")) (str "window " (w "index") ": an operator at " ts))))))

(defn child-stats-pending
  "Run in a child JVM: a session's window, then stats() while the control thread is held (as a
  large window's statistics hold it). Prints [the first answer, the second, the third]."
  [dir]
  (let [ctl (ProfilerControl/instance)
        held (java.util.concurrent.CountDownLatch. 1)
        submit (doto (.getDeclaredMethod ProfilerControl "submit" (into-array Class [java.util.concurrent.Callable]))
                 (.setAccessible true))]
    (.start ctl (str "profile_imperative=true,path=" dir "/st_{window}.json") 30)
    (.awaitSaved ctl 60000) ; the start, which the control thread makes, done
    (dotimes [_ 20] (with-open [a (nd/random-uniform -1 1 [8 8])] (nd/wait-to-read a)))
    (.stop ctl)
    (.awaitSaved ctl 60000)
    (.invoke submit ctl (object-array [(fn [] (.await held))]))
    (let [first-answer (.stats ctl)] ; returns while the control thread is held
      (.countDown held)
      (let [second-answer (loop [n 0]
                            (let [a (.stats ctl)]
                              (if (and (str/includes? a "\"pending\"") (< n 600))
                                (do (Thread/sleep 50) (recur (inc n)))
                                a)))]
        (prn [first-answer second-answer (.stats ctl)])))))

(deftest stats-never-holds-the-caller-while-the-control-thread-is-busy
  (let [dir (str (temp-dir))
        {:keys [exit out err]} (java-child ["-e" (str "(require 'pyprof.jmx-test)"
                                                       "(pyprof.jmx-test/child-stats-pending \"" dir "\")")]
                                          :jvm-args (conj fast-start-jvm-args (str "-Dpyprof.outputRoot=" dir)))
        [first-answer second-answer third] (read-string (last (str/split-lines out)))
        pending (json/read-str first-answer)
        st (json/read-str second-answer)]
    (is (= 0 exit) err)
    (is (= true (pending "pending")) first-answer)
    (is (str/includes? (pending "note") "call stats() again") first-answer)
    ;; the window's 20 operators: the child waited for the control thread's start
    (is (= 20 (some-> (first (filter #(= "_random_uniform" (% "name")) (st "operators"))) (get "count")))
        second-answer)
    (is (= second-answer third) "the result is kept until the windows change")))

(deftest the-output-root-attribute-is-where-sessions-write
  ;; a blank -Dpyprof.outputRoot: sessions write under <tmpdir>/pyprof, and so the bean says
  ;; (it said "")
  (let [before (System/getProperty "pyprof.outputRoot")]
    (try
      (System/setProperty "pyprof.outputRoot" " ")
      (is (= (str (java.nio.file.Paths/get (System/getProperty "java.io.tmpdir") (into-array ["pyprof"])))
             (.getOutputRoot (ProfilerControl/instance))
             (str (.path (pyprof.jvm.OutputRoot/fromProperty)))))
      (finally (if before (System/setProperty "pyprof.outputRoot" before)
                   (System/clearProperty "pyprof.outputRoot"))))))
