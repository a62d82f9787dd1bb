(ns pyprof.example.matmul
  "The profiler example of MXNet's retired Clojure package: profile `dot` of two uniform [-1, 1)
  NxN matrices run by a bound symbol, then read the trace back and report GFLOP/s. In
  examples/matmul (where plain `lein run` is the seed's example, profiler.core):

    lein run -m pyprof.example.matmul -- --size 512 --iters 3 --begin 1 --end 2 --output /tmp/trace.json"
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.tools.cli :as cli]
            [pyprof.example.context :as context]
            [pyprof.example.executor :as executor]
            [pyprof.example.ndarray :as nd]
            [pyprof.profiler :as profiler]
            [pyprof.rules :as rules]
            [pyprof.example.symbol :as sym])
  (:gen-class))

(set! *warn-on-reflection* true)

(def defaults
  "Options of `run`, as in the original example (profiling iteration 0 only)."
  {:size 4096, :iters 5, :begin 0, :end 1, :mode "symbolic",
   :output "./profile-matmul-20iter.json", :ctx "cpu", :device-id 0})

(def modes #{"symbolic" "imperative" "api" "memory" "all"})

(defn- usage-error [msg data]
  (ex-info msg (merge {:pyprof/error :invalid-option} data)))

(defn check-options
  "`opts` merged over `defaults`, with names normalised; throws ex-info
  `{:pyprof/error :invalid-option}` on a value `run` cannot use."
  [opts]
  (let [{:keys [size iters begin end mode ctx device-id output] :as o}
        (-> (merge defaults opts)
            (update :mode #(if (keyword? %) (name %) %))
            (update :ctx #(if (keyword? %) (name %) %)))
        int? #(and (integer? %) (>= % 0))]
    (doseq [[k v] {:size size :iters iters}] ; one message for -5 and 0 (a new user's find)
      (when-not (and (int? v) (pos? v))
        (throw (usage-error (str (name k) " must be a positive integer (1 or more), got " (pr-str v)
                                  ". fix: pass 1 or more") {k v}))))
    (doseq [[k v] {:begin begin :end end :device-id device-id}]
      (when-not (int? v)
        (throw (usage-error (str (name k) " must be a non-negative integer, got " (pr-str v)
                                  ". fix: pass 0 or more") {k v}))))
    (cond
      (not (< begin end)) (throw (usage-error (str "begin (" begin ") must be < end (" end "). fix: pass a begin below end")
                                              {:begin begin :end end}))
      (not (< begin iters)) (throw (usage-error (str "begin (" begin ") must be < iters (" iters
                                                     "), or nothing is profiled. fix: pass a begin below iters")
                                                {:begin begin :iters iters}))
      (> end iters) (throw (usage-error (str "end (" end ") is past iters (" iters "): the run has no iteration "
                                             (dec end) ". fix: pass an end of at most " iters ", or more iters")
                                        {:end end :iters iters}))
      (not (modes mode)) (throw (usage-error (str "mode must be one of " (str/join ", " (sort modes))
                                                  ", got " (pr-str mode) ". fix: pass one of those") {:mode mode}))
      (not (#{"cpu" "gpu"} ctx)) (throw (usage-error (str "ctx must be cpu or gpu, got " (pr-str ctx) ". fix: pass cpu or gpu")
                                                     {:ctx ctx}))
      (str/blank? (str output)) (throw (usage-error "output must be a file path. fix: pass the trace file to write, e.g. matmul.json" {:output output})))
    (assoc o :output (str output))))

(defn profiler-config
  "The profiler config for `mode`: symbolic is always on (the example runs a bound symbol), the
  chosen category is added and the others are switched off explicitly; all sets profile_all.
  aggregate_stats on; continuous_dump left at its default."
  [{:keys [mode output]}]
  (let [all? (= mode "all")]
    {:filename output
     :aggregate-stats true
     :profile-all all?
     :profile-symbolic true
     :profile-imperative (or all? (= mode "imperative"))
     :profile-api (or all? (= mode "api"))
     :profile-memory (or all? (= mode "memory"))}))

;; ------------------------------------------------------------------ trace analysis

(def ^:private device-process #"(cpu|gpu|cpu pinned|cpu shared)/\d*")

(defn device-pids
  "The pids that the trace's process_name metadata names as devices (cpu/0, gpu/0, ...)."
  [events]
  (into #{}
        (comp (filter #(and (= "M" (get % "ph")) (= "process_name" (get % "name"))
                            (re-matches device-process (str (get-in % ["args" "name"])))))
              (map #(get % "pid")))
        events))

(defn op-durations
  "Durations in microseconds of the B/E pairs named `op-name` on the pids in `pids`, matched per
  thread. (The async b/e copy MXNet also writes is not counted.)"
  [events pids op-name]
  (->> events
       (filter #(and (= op-name (get % "name")) (#{"B" "E"} (get % "ph")) (pids (get % "pid"))))
       (reduce (fn [{:keys [open] :as acc} e]
                 (let [k [(get e "pid") (get e "tid")]]
                   (if (= "B" (get e "ph"))
                     (update-in acc [:open k] conj (get e "ts"))
                     (if-let [t0 (peek (get open k))]
                       (-> acc
                           (update-in [:open k] pop)
                           (update :durations conj (- (get e "ts") t0)))
                       acc))))
               {:open {}, :durations []})
       :durations))

(def dot-names
  "Names the dot operator has in a trace: bulk execution (on by default) writes \"[dot]\"."
  ["[dot]" "dot"])

(defn dot-summary
  "{:dot-name :dot-calls :dot-ms} of the dot operator in the trace `events`; the name with the
  most B/E pairs wins, :dot-name nil when neither appears."
  [events]
  (let [pids (device-pids events)
        [nm ds] (apply max-key (comp count second)
                       (reverse (map (juxt identity #(op-durations events pids %)) dot-names)))]
    {:dot-name (when (seq ds) nm)
     :dot-calls (count ds)
     :dot-ms (/ (reduce + 0.0 ds) 1000.0)}))

(defn read-trace
  "The events of the Chrome trace at `path` (fails on a trace that is not valid JSON)."
  [path]
  (with-open [r (io/reader path)]
    (get (json/read r) "traceEvents")))

;; ------------------------------------------------------------------ the example

(defn- iterate-profiled
  "Runs `iters` forward passes, profiling iterations begin..end-1; returns wall-clock nanoseconds
  and the number of profiled iterations. Never leaves the profiler running."
  [exec {:keys [iters begin end]}]
  (let [running (volatile! false)]
    (try
      (loop [i 0, wall-ns 0, profiled 0]
        (if (= i iters)
          {:wall-ns wall-ns :profiled profiled}
          (do
            (cond (= i begin) (do (profiler/profiler-set-state :run) (vreset! running true))
                  (= i end) (do (profiler/profiler-set-state :stop) (vreset! running false)))
            (let [t0 (System/nanoTime)
                  outs (executor/outputs (executor/forward exec))]
              (try (nd/wait-to-read (first outs))
                   (finally (executor/close-all outs)))
              (let [dt (- (System/nanoTime) t0)]
                (if @running
                  (recur (inc i) (+ wall-ns dt) (inc profiled))
                  (recur (inc i) wall-ns profiled)))))))
      (finally
        (when @running (profiler/profiler-set-state :stop))))))

(defn- quiet-binds!
  "As the Python example: MXNet reads MXNET_SUBGRAPH_VERBOSE at each bind, and without it every
  bind prints \"Subgraph backend MKLDNN is activated\". libc's setenv (a value set stays)."
  []
  (.invoke (com.sun.jna.Function/getFunction "c" "setenv") Integer
           (object-array ["MXNET_SUBGRAPH_VERBOSE" "0" (int 0)])))

(defn- with-bound-dot
  "(f exec) with `exec` a bound dot of two uniform [-1, 1) NxN matrices on `dev`, closed after."
  [dev n f]
  (quiet-binds!)
  (with-open [a (nd/random-uniform -1.0 1.0 [n n] {:ctx dev})
              b (nd/random-uniform -1.0 1.0 [n n] {:ctx dev})
              va (sym/variable "A")
              vb (sym/variable "B")
              c (sym/dot "dot" [va vb])
              exec (sym/bind c dev {"A" a "B" b})]
    (f exec)))

(defn run
  "Runs the example and returns
    {:trace \"/abs/trace.json\" :dot-name \"[dot]\" :dot-calls 1 :dot-ms 812.3 :gflops 169.2
     :wall-ms 830.1 :wall-gflops 165.6 :profiled-iters 1 :stats-table \"...\" :options {...}}
  Options (keyword keys, see `defaults`): :size N (NxN matrices), :iters, :begin and :end (the
  iterations that set the profiler to run and to stop), :mode (symbolic imperative api memory
  all), :output (trace path; parent directories are created), :ctx (cpu or gpu), :device-id.
  :gflops is 2N^3 per dot call over the operator time in the trace; :wall-gflops the same over
  System/nanoTime around the profiled iterations (forward + wait). One run per process: MXNet
  writes only one valid trace per process."
  ([] (run {}))
  ([opts]
   (let [{:keys [size output ctx device-id] :as o} (check-options opts)
         file (-> (io/file output) .toPath .toAbsolutePath .normalize .toFile)
         o (assoc o :output (.getPath file))
         dev (context/context ctx device-id)
         n (long size)]
     (some-> (.getParentFile file) .mkdirs)
     (let [{:keys [wall-ns profiled]}
           (with-bound-dot dev n (fn [exec]
                                   (profiler/profiler-set-config (profiler-config o))
                                   (iterate-profiled exec o)))
           _ (profiler/dump-profile true)
           table (profiler/dumps)
           {:keys [dot-calls dot-ms] :as dot} (dot-summary (read-trace file))
           flop (* 2.0 n n n)
           wall-ms (/ wall-ns 1e6)]
       (merge dot
              {:trace (.getPath file)
               :gflops (when (pos? dot-ms) (/ (* flop dot-calls) (* dot-ms 1e6)))
               :wall-ms wall-ms
               :wall-gflops (when (pos? wall-ns) (/ (* flop profiled) wall-ns))
               :profiled-iters profiled
               :stats-table table
               :options o})))))

;; ------------------------------------------------------------------ the peak

(def ^:private attribution (rules/read-spec "attribution.json"))
(def peak-spec
  "attribution.json peaks: the sizes, batch and repeats of MXNet's dot peak, and the default
  budget, as pyprof.attribution.peaks measures it."
  (attribution "peaks"))
(def above
  "A dot above this many times the peak gets a note (attribution.json roofline above)."
  (get-in attribution ["roofline" "above"]))

(defn- timed-best
  "Best GFLOP/s of `run` (`flop` per call) over up to `repeats` calls, stopping once the next
  call would end past `until` (System/nanoTime); at least one call."
  [run flop repeats until]
  (loop [i 0, best 0.0]
    (if (= i repeats)
      best
      (let [t0 (System/nanoTime), _ (run), dt (max 1 (- (System/nanoTime) t0))
            best (max best (double (/ flop dt)))]
        (if (> (+ (System/nanoTime) dt) until) best (recur (inc i) best))))))

(defn dot-peak
  "MXNet's own dot peak on cpu/0 as `pyprof peaks` measures it (`peak-spec`): a bound NxN dot of
  each size, `dot_batch` forward passes queued back to back and waited on once, best of
  `repeats`; the smallest size always (after one warm-up batch), a larger one when its
  predicted time fits in `budget-s` seconds. Returns {:gflops best :by-size {N GFLOP/s}
  :seconds wall} (C: MXExecutorForward, MXNDArrayWaitToRead)."
  [budget-s]
  (let [{:strs [mxnet_dot_sizes dot_batch repeats]} peak-spec
        start (System/nanoTime)
        until (+ start (long (* budget-s 1e9)))
        dev (context/context "cpu" 0)]
    (loop [[n & more] (sort mxnet_dot_sizes), rates (sorted-map)]
      (let [flop (when n (* dot_batch 2.0 n n n))]
        (if (or (nil? n) (and (seq rates) (> (+ (System/nanoTime) (/ flop (apply max (vals rates)))) until)))
          {:gflops (when (seq rates) (apply max (vals rates))) :by-size rates
           :seconds (/ (- (System/nanoTime) start) 1e9)}
          (let [timed (fn [exec]
                        (let [run #(do (dotimes [_ (dec dot_batch)] (executor/forward exec))
                                       (let [outs (executor/outputs (executor/forward exec))]
                                         (try (nd/wait-to-read (first outs))
                                              (finally (executor/close-all outs)))))]
                          (when (empty? rates) (run))   ; warm-up: threads, pages, kernels
                          (timed-best run flop repeats until)))]
            (recur more (assoc rates n (with-bound-dot dev n timed)))))))))

;; ------------------------------------------------------------------ command line

(defn- parse-count [s] (let [v (parse-long s)] (when (and v (>= v 0)) v)))
(defn- parse-positive [s] (let [v (parse-long s)] (when (and v (pos? v)) v)))
(defn- parse-seconds [s] (let [v (parse-double s)] (when (and v (<= 0 v Double/MAX_VALUE)) v)))

(def cli-options
  [["-s" "--size N" "matrix size: N x N" :default 4096 :parse-fn parse-positive
    :validate [some? "must be a positive integer (1 or more)"]]
   ["-n" "--iters N" "forward passes" :default 5 :parse-fn parse-positive
    :validate [some? "must be a positive integer (1 or more)"]]
   ["-b" "--begin I" "iteration that starts profiling" :default 0 :parse-fn parse-count
    :validate [some? "must be a non-negative integer"]]
   ["-e" "--end I" "iteration that stops profiling" :default 1 :parse-fn parse-count
    :validate [some? "must be a non-negative integer"]]
   ["-m" "--mode MODE" "symbolic, imperative, api, memory or all" :default "symbolic"
    :validate [modes "must be symbolic, imperative, api, memory or all"]]
   ["-o" "--output PATH" "trace file" :default "./profile-matmul-20iter.json"]
   ["-c" "--ctx CTX" "cpu or gpu" :default "cpu" :validate [#{"cpu" "gpu"} "must be cpu or gpu"]]
   ["-d" "--device-id ID" "device id" :default 0 :parse-fn parse-count
    :validate [some? "must be a non-negative integer"]]
   ["-p" "--peak-budget S" "seconds for measuring MXNet's dot peak after the run (0: not measured)"
    :default (double (peak-spec "example_budget_s")) :parse-fn parse-seconds
    :validate [some? "must be a number of seconds >= 0"]]
   ["-h" "--help"]])

(defn- fmt [x] (if x (format "%.1f" (double x)) "n/a"))

(defn report
  "The text -main prints for a result of `run`, with `peak` (of `dot-peak`) when measured."
  ([result] (report result nil))
  ([{:keys [trace stats-table dot-name dot-calls dot-ms gflops wall-ms wall-gflops profiled-iters]} peak]
   (let [best (:gflops peak)]
     (str "trace: " trace "\n\n"
          stats-table (when-not (str/ends-with? stats-table "\n") "\n") "\n"
          (if dot-name
            (str "operator: " dot-name ", " dot-calls " call(s), " (format "%.3f" dot-ms) " ms\n")
            "operator: no dot B/E pair on a device in the trace\n")
          "GFLOP/s: " (fmt gflops) " (profiler, operator time) vs " (fmt wall-gflops)
          " (wall clock, " profiled-iters " iteration(s), " (format "%.3f" wall-ms) " ms)\n"
          (when peak
            (str "peak: MXNet dot " (fmt best) " GFLOP/s (this dot at "
                 (if (and gflops best) (format "%.0f%%" (/ (* 100.0 gflops) best)) "n/a")
                 " of it); measured in " (format "%.1f" (:seconds peak)) " s after the run"
                 " (numpy's GEMM peak too: pyprof peaks, in Python)\n"))
          (when (and gflops best (> gflops (* above best)))
            (str "note: this dot ran above " above "x the MXNet dot peak measured after it: the"
                 " machine was busier while measuring; measure on a quiet machine or raise"
                 " --peak-budget\n"))))))

(defn- one-line [^Throwable t]
  (let [t (if (and (instance? ExceptionInInitializerError t) (.getCause t)) (.getCause t) t)
        msg (or (.getMessage t) (str t))]
    (if (instance? pyprof.jvm.MXNetException t)
      (str/replace msg #"\s*\n\s*" " | ")
      (first (str/split-lines msg)))))

(defn- exit [code ^String msg]
  (when msg (if (zero? code) (println msg) (binding [*out* *err*] (println msg))))
  (flush)
  (System/exit code))

(defn launch-command
  "How this program was started, for its usage text, from `sun-java-command` (the JVM's
  `sun.java.command` property: the main class or jar, then the arguments): `java -jar <jar>` for
  a jar whose Main-Class it is, `java -cp <classpath> pyprof.example.matmul` for the class,
  `java -cp <classpath> clojure.main -m pyprof.example.matmul`, else
  `lein run -m pyprof.example.matmul --` (Leiningen starts clojure.main with an init file)."
  ([] (launch-command (System/getProperty "sun.java.command")))
  ([sun-java-command]
   (let [cmd (str/trim (str sun-java-command))
         ;; A jar path may hold spaces; a class name never holds a slash.
         jar (or (re-find #"^\S+\.jar(?=\s|$)" cmd)
                 (when-not (re-find #"^[\w$.]+(\s|$)" cmd) (re-find #"^.*?\.jar(?=\s|$)" cmd)))]
     (cond jar (str "java -jar " jar)
           (re-find #"^pyprof\.example\.matmul(\s|$)" cmd) "java -cp <classpath> pyprof.example.matmul"
           (re-find #"^clojure\.main\s+(-m|--main)\s+pyprof\.example\.matmul(\s|$)" cmd)
           "java -cp <classpath> clojure.main -m pyprof.example.matmul"
           :else "lein run -m pyprof.example.matmul --"))))

(defn usage
  "The usage text of -main: the launch command (`launch-command`), then the options."
  [summary]
  (str "usage: " (launch-command) " [options]\n" summary))

(defn -main
  "Command line: prints the trace path, the aggregate statistics table, the dot operator's name
  and calls, GFLOP/s from the profiler beside wall-clock GFLOP/s, and on the CPU the dot's share
  of MXNet's dot peak (`dot-peak`, in --peak-budget seconds). Exit 0 ok, 1 error, 2 usage."
  [& args]
  (let [{:keys [options errors summary]} (cli/parse-opts args cli-options)]
    (cond
      (:help options) (exit 0 (usage summary))
      errors (exit 2 (str "error: " (str/join "; " errors) " (see --help)"))
      :else
      (let [opts (try (check-options (dissoc options :help))
                      (catch clojure.lang.ExceptionInfo e
                        (exit 2 (str "error: " (ex-message e) " (see --help)"))))]
        (try
          (let [result (run opts)
                budget (:peak-budget options)]
            ;; the peaks are the CPU's: not measured for a GPU run (as pyprof matmul)
            (print (report result (when (and (pos? budget) (= "cpu" (:ctx opts))) (dot-peak budget))))
            (exit 0 nil))
          (catch Throwable t
            (exit 1 (str "error: " (one-line t)))))))))
