(ns pyprof.example.matmul-test
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is are testing]]
            [pyprof.example.context :as context]
            [pyprof.example.matmul :as matmul]
            [pyprof.test-util :refer [java-child temp-dir]]))

(deftest options
  (is (= 5 (:end (matmul/check-options {:begin 4 :end 5 :iters 5}))) "an end at iters is the last")
  (is (= (assoc matmul/defaults :size 256 :mode "all" :ctx "cpu")
         (matmul/check-options {:size 256 :mode :all :ctx :cpu})))
  (are [opts re] (thrown-with-msg? clojure.lang.ExceptionInfo re (matmul/check-options opts))
    {:size 0} #"size must be a positive integer \(1 or more\), got 0"
    {:size -3} #"size must be a positive integer \(1 or more\), got -3"
    {:iters 0} #"iters must be a positive integer"
    {:begin -1} #"begin must be a non-negative integer"
    {:begin 1 :end 1} #"begin \(1\) must be < end \(1\)"
    {:begin 5 :end 6 :iters 5} #"nothing is profiled"
    {:begin 4 :end 9 :iters 5} #"end \(9\) is past iters \(5\): the run has no iteration 8"
    {:mode "gpu"} #"mode must be one of all, api, imperative, memory, symbolic"
    {:ctx "tpu"} #"ctx must be cpu or gpu"
    {:size 2.5} #"size must be a positive integer"))

(deftest usage-names-the-launch-command
  (are [sun-java-command launch] (= launch (matmul/launch-command sun-java-command))
    "target/uberjar/pyprof-jvm-0.1.0-SNAPSHOT-standalone.jar --help"
    "java -jar target/uberjar/pyprof-jvm-0.1.0-SNAPSHOT-standalone.jar"
    "pyprof.jar -h" "java -jar pyprof.jar"
    "/opt/my tools/pyprof.jar --help" "java -jar /opt/my tools/pyprof.jar"
    "pyprof.example.matmul --help" "java -cp <classpath> pyprof.example.matmul"
    "clojure.main -m pyprof.example.matmul -h" "java -cp <classpath> clojure.main -m pyprof.example.matmul"
    "clojure.main -i /tmp/form-init123.clj" "lein run -m pyprof.example.matmul --"
    nil "lein run -m pyprof.example.matmul --")
  (is (str/starts-with? (matmul/usage "  -h, --help") "usage: lein run -m pyprof.example.matmul -- [options]\n")))

(deftest config-per-mode
  (is (= {:filename "t.json" :aggregate-stats true :profile-all false :profile-symbolic true
          :profile-imperative false :profile-api false :profile-memory false}
         (matmul/profiler-config {:mode "symbolic" :output "t.json"})))
  (is (= [false true false false]
         ((juxt :profile-all :profile-api :profile-memory :profile-imperative)
          (matmul/profiler-config {:mode "api" :output "t.json"}))))
  (is (every? true? (vals (dissoc (matmul/profiler-config {:mode "all" :output "t"}) :filename)))))

(def ^:private events
  [{"ph" "M" "name" "process_name" "pid" 0 "args" {"name" "cpu/0"}}
   {"ph" "M" "name" "process_name" "pid" 2 "args" {"name" "cpu pinned/"}}
   {"ph" "M" "name" "process_name" "pid" 99 "args" {"name" "operator"}}
   {"ph" "B" "name" "[dot]" "pid" 0 "tid" 7 "ts" 1000}
   {"ph" "b" "name" "[dot]" "pid" 99 "tid" 7 "ts" 1000 "id" 1}
   {"ph" "E" "name" "[dot]" "pid" 0 "tid" 7 "ts" 3500}
   {"ph" "e" "name" "[dot]" "pid" 99 "tid" 7 "ts" 3500 "id" 1}
   {"ph" "B" "name" "[dot]" "pid" 99 "tid" 7 "ts" 4000}
   {"ph" "E" "name" "[dot]" "pid" 99 "tid" 7 "ts" 5000}
   {"ph" "B" "name" "[dot]" "pid" 0 "tid" 8 "ts" 6000}
   {"ph" "E" "name" "[dot]" "pid" 0 "tid" 8 "ts" 6500}
   {"ph" "B" "name" "dot_backward" "pid" 0 "tid" 7 "ts" 7000}
   {"ph" "E" "name" "dot_backward" "pid" 0 "tid" 7 "ts" 8000}])

(deftest trace-analysis
  (is (= #{0 2} (matmul/device-pids events)))
  (is (= [2500 500] (matmul/op-durations events #{0 2} "[dot]")))
  (is (= {:dot-name "[dot]" :dot-calls 2 :dot-ms 3.0} (matmul/dot-summary events)))
  (is (= {:dot-name "dot" :dot-calls 1 :dot-ms 2.5}
         (matmul/dot-summary (map #(if (= "[dot]" (% "name")) (assoc % "name" "dot") %)
                                  (take 7 events)))))
  (is (= {:dot-name nil :dot-calls 0 :dot-ms 0.0} (matmul/dot-summary (take 3 events)))))

(defn- dot-pairs
  "B/E events of dot on device pids, by phase."
  [trace]
  (let [evs (get trace "traceEvents")
        pids (matmul/device-pids evs)]
    (frequencies (for [e evs
                       :when (and (#{"dot" "[dot]"} (e "name")) (#{"B" "E"} (e "ph")) (pids (e "pid")))]
                   (e "ph")))))

(deftest example-in-a-child-jvm
  (let [out (str (temp-dir) "/sub/matmul.json")
        {:keys [exit] :as r} (java-child ["-m" "pyprof.example.matmul" "--size" "256" "--iters" "3"
                                          "--begin" "1" "--end" "2" "--output" out "--peak-budget" "0.3"])
        stdout (:out r)]
    (is (= 0 exit) (:err r))
    (testing "a valid JSON trace with exactly one dot B/E pair"
      (let [trace (with-open [rd (io/reader out)] (json/read rd))]
        (is (= "ms" (get trace "displayTimeUnit")))
        (is (= {"B" 1 "E" 1} (dot-pairs trace)))))
    (testing "the report"
      (is (str/includes? stdout (str "trace: " out)))
      (is (re-find #"Profile Statistics" stdout))
      (is (re-find #"\n\[dot\]\s+1\s" stdout) "the stats table lists one [dot] call")
      (is (re-find #"operator: \[dot\], 1 call\(s\), \d+\.\d+ ms" stdout))
      (is (re-find #"GFLOP/s: \d+\.\d \(profiler, operator time\) vs \d+\.\d \(wall clock, 1 iteration"
                   stdout)))
    (testing "the peak line: the dot's GFLOP/s as a share of MXNet's dot peak, measured in the budget"
      (let [[_ g] (re-find #"GFLOP/s: (\d+\.\d) \(profiler" stdout)
            [_ peak pct secs] (re-find #"peak: MXNet dot (\d+\.\d) GFLOP/s \(this dot at (\d+)% of it\); measured in (\d+\.\d) s after the run" stdout)
            [g peak pct secs] (map #(some-> % parse-double) [g peak pct secs])]
        (is (and peak (pos? peak)) stdout)
        (when (and g peak)
          ;; the printed figures are rounded to 0.1: the share lies in this interval
          (is (<= (- (* 100 (/ (- g 0.05) (+ peak 0.05))) 0.5) pct (+ (* 100 (/ (+ g 0.05) (- peak 0.05))) 0.5)))
          ;; the smallest size is always measured once past the budget (1024: well under 2 s)
          (is (< secs (+ 0.3 3.0))))))))

(deftest run-returns-a-map-in-a-child-jvm
  (let [out (str (temp-dir) "/run.json")
        {:keys [exit] :as r}
        (java-child ["-e" (str "(require 'pyprof.example.matmul)"
                               "(prn (dissoc (pyprof.example.matmul/run {:size 64 :iters 2 :begin 0 :end 1"
                               " :mode :all :output \"" out "\"}) :stats-table :options))"
                               "(try (pyprof.example.matmul/run {:size 64 :iters 2})"
                               " (catch clojure.lang.ExceptionInfo e (prn (ex-data e))))")])
        [result second-run] (map read-string (str/split-lines (:out r)))]
    (is (= 0 exit) (:err r))
    (is (= out (:trace result)))
    (is (= "[dot]" (:dot-name result)))
    (is (= 1 (:dot-calls result) (:profiled-iters result)))
    (is (every? #(and (number? %) (pos? %)) ((juxt :dot-ms :gflops :wall-ms :wall-gflops) result)))
    (testing "a second session in the same process is refused before MXNet writes a broken trace"
      (is (= {:pyprof/error :session-finished :trace out}
             (select-keys second-run [:pyprof/error :trace]))))))

(deftest command-line-errors
  (let [{:keys [exit out err]} (java-child ["-m" "pyprof.example.matmul" "--begin" "3" "--end" "1"])]
    (is (= 2 exit))
    (is (= "" out))
    (is (= "error: begin (3) must be < end (1). fix: pass a begin below end (see --help)" (str/trim err))))
  (when (zero? (context/gpu-count))  ; a CPU build (scripts/setup.sh --gpu installs a CUDA one)
    (let [{:keys [exit err]} (java-child ["-m" "pyprof.example.matmul" "--size" "256" "--ctx" "gpu"
                                          "--output" (str (temp-dir) "/g.json")])]
      (is (= 1 exit))
      (is (re-find #"^error: GPU context requested, but this MXNet build \(.*libmxnet\.so\) sees no GPU\. fix: install a CUDA build of MXNet matching your driver, e\.g\. pip install 'mxnet-cu112==1\.9\.1'" err))
      (is (= 1 (count (str/split-lines err))) "one line, no stack trace"))))

(deftest cpu-device-id-out-of-range
  (testing "one line, exit 1, before MXNet sees the id: the existing trace is kept"
    (let [n (.availableProcessors (Runtime/getRuntime))
          id (+ n 3)
          out (str (temp-dir) "/keep.json")
          _ (spit out "{\"traceEvents\": []}")
          {:keys [exit err] :as r} (java-child ["-m" "pyprof.example.matmul" "--size" "64" "--device-id"
                                                (str id) "--output" out])]
      (is (= 1 exit) (:out r))
      (is (= (str "error: cpu device id " id " is out of range: MXNet's profiler knows cpu/0 to cpu/"
                  (dec n) " on this machine. fix: use a device id from 0 to " (dec n) " (CPU"
                  " contexts share the same cores; the id only labels the trace)")
             (str/trim err)))
      (is (= "{\"traceEvents\": []}" (slurp out)) "configuring never ran"))))
