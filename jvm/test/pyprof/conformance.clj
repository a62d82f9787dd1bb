(ns pyprof.conformance
  "The JVM runner of the conformance suite (tests/conformance: scenarios are data, the Python
  runner is tests/conformance/runner.py). `run-scenario` executes one scenario file in a child
  JVM, through the Clojure bindings or through the Java facade (bindings.json says which
  function each call name is in each language), and returns one outcome per step, the same
  records the Python runner makes:
    {\"ok\" <result as JSON>}  {\"error\" <catalogue code> \"kind\" <kind>}  {\"skipped\" true}
  `differences` compares outcomes with the scenario's expectations."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.java.shell :as sh]
            [clojure.string :as str]
            [pyprof.example.ndarray :as nd]
            [pyprof.profiler :as profiler]
            [pyprof.rules :as rules]
            [pyprof.session :as session]
            [pyprof.stats :as stats]
            [pyprof.test-util :refer [compiled-classpath fast-start-jvm-args java-child temp-dir]])
  (:import (java.lang.reflect Method Modifier)
           (pyprof.jvm ProfileDomain ProfileObject)))

(def suite-dir
  "tests/conformance of this checkout: found from this file (jvm/test/pyprof/), so that child
  JVMs running in a temporary directory find it too."
  (-> (io/resource "pyprof/conformance.clj") io/file .getParentFile .getParentFile
      .getParentFile .getParentFile (io/file "tests" "conformance") .getCanonicalFile))

(defn scenario-files []
  (sort (filter #(str/ends-with? (.getName ^java.io.File %) ".json")
                (.listFiles (io/file suite-dir "scenarios")))))

(defn load-json [f] (with-open [r (io/reader f)] (json/read r)))

(def bindings (delay (get (load-json (io/file suite-dir "bindings.json")) "calls")))

;; ------------------------------------------------------------------ adapters
;; Calls whose shape differs between the languages (Python objects vs. Clojure functions).

(defn marker
  "Python's Marker(domain, name): the JVM has no marker object; keep what mark needs."
  [domain name]
  (ProfileObject/checkName "Marker" name)
  {:marker name :domain domain})

(defn mark
  "Python's Marker.mark(scope): pyprof.profiler/mark with the domain and name."
  ([m] (profiler/mark (:domain m) (:marker m)))
  ([m scope] (profiler/mark (:domain m) (:marker m) scope)))

(defn mark-java
  "Marker.mark through the Java facade: Profiler.mark(domain, name, scope)."
  ([m] (mark-java m rules/default-marker-scope))
  ([m scope] (pyprof.jvm.Profiler/mark (:domain m) (:marker m) scope)))

(defn set-value-java
  "Counter.set_value through the Java facade: setValue(long) for a value a long holds, else
  setValue(BigInteger) (2^63 ... 2^64-1 set; 2^64 and beyond refused)."
  [^ProfileObject o value]
  (if (<= Long/MIN_VALUE value Long/MAX_VALUE)
    (.setValue o (long value))
    (.setValue o ^java.math.BigInteger (biginteger value))))

(defn counter-java
  "Counter(domain, name, value) through the Java facade: Profiler.counter, then setValue."
  ([domain name] (pyprof.jvm.Profiler/counter domain name))
  ([domain name value] (doto (pyprof.jvm.Profiler/counter domain name) (set-value-java value))))

(defn stats-java
  "pyprof.stats(path or paths) through the Java facade: Profiler.stats(String...); a null stays
  null."
  [path]
  (pyprof.jvm.Profiler/stats (into-array String (map #(some-> % str)
                                                     (if (sequential? path) path [path])))))

(defn stats-with
  "pyprof.stats(trace_or_paths, categories=, exclude_categories=): pyprof.stats/stats with the
  options given (nil: left out, Python's None)."
  ([paths] (stats/stats paths))
  ([paths categories exclude]
   (stats/stats paths (cond-> {} (some? categories) (assoc :categories categories)
                              (some? exclude) (assoc :exclude-categories exclude)))))

(defn find-ops-java
  "TraceStats.find as Java callers write it: the \"operators\" of Profiler.stats's map whose
  \"name\" (and \"category\", when given) match."
  ([^java.util.Map stats name] (find-ops-java stats name nil))
  ([^java.util.Map stats name category]
   (vec (filter #(and (= name (.get ^java.util.Map % "name"))
                      (or (nil? category) (= category (.get ^java.util.Map % "category"))))
                (.get stats "operators")))))

(defn percentile
  "numpy.percentile(a, q) as pyprof.stats/percentile computes it (a sorted long array)."
  [a q]
  (stats/percentile (long-array (sort a)) q))

(defn close [^ProfileObject o] (.close o))

(defn- workload* [times]
  (dotimes [_ (or times 1)]
    (let [a (nd/random-uniform -1 1 [4 4])]
      (nd/wait-to-read a)
      (nd/close a)))
  (nd/wait-all))

(defn with-duration [d times] (profiler/with-duration d (workload* times)))
(defn with-task [domain name times] (profiler/with-task domain name (workload* times)))
(defn with-frame [domain name times] (profiler/with-frame domain name (workload* times)))
(defn with-event [name times] (profiler/with-event name (workload* times)))

(defn with-profiling
  "Python's forms.with_profiling: configure, run the body, stop, finish the trace."
  [config times]
  (profiler/with-profiling {:config config :dump true} (workload* times)))

(defn- session-options
  "Python's profile(**options) as pyprof.session's options map (kebab-case keys)."
  [options]
  (into {} (map (fn [[k v]] [(keyword (str/replace (name k) "_" "-")) v])) options))

(defn profile [options] (session/profile (session-options options)))

(defn profile-with
  "Python's forms.profile_with: a session around `steps` steps (with-session)."
  ([options steps] (profile-with options steps 1))
  ([options steps times]
   (session/with-session [s (session-options options)]
     (dotimes [_ steps] (workload* times) (session/step! s))
     (session/windows s))))

(defn current-action [s] (:action (session/session-state s)))

;; Through the Java facade: options as Java callers give them (C names, a schedule map).

(defn- java-map
  "Options as Java callers write them: a java.util.Map with the C names (snake_case)."
  [m]
  (java.util.HashMap. ^java.util.Map (into {} (map (fn [[k v]] [(str/replace (name k) "-" "_") v])) m)))

(defn schedule-java
  "Java has no schedule object: a ProfilerSession takes the schedule as a map."
  [opts]
  (java-map opts))

(defn profile-java
  "A Java facade session for Python's `profile(**options)`. The facade's defaults differ by
  api.json service_session defaults (profile_api off beside another binding); the keys Python's
  call left out are passed at Python's default (profiler_config.json), so the rest is compared."
  [options]
  (let [opts (java-map options)
        defaults (into {} (for [k ((pyprof.rules/api "service_session") "defaults")
                                :let [spec (first (filter #(= (key k) (% "name"))
                                                          ((pyprof.rules/read-spec "profiler_config.json") "keys")))]]
                            [(key k) (spec "default")]))
        given (set (map str (keys opts)))
        python (if (or (given "profile_all") (given "steady") (pyprof.jvm.Profiler/steadyActive))
                 {} (apply dissoc defaults given))]
    (pyprof.jvm.ProfilerSession. (merge python opts))))

(defn profile-with-java
  "try-with-resources: ProfilerSession is AutoCloseable."
  ([options steps] (profile-with-java options steps 1))
  ([options steps times]
   (let [^pyprof.jvm.ProfilerSession s (.start ^pyprof.jvm.ProfilerSession (profile-java options))]
     (try (dotimes [_ steps] (workload* times) (.step s))
          (finally (.close s)))
     (get (.state s) "windows"))))

(defn windows-java
  "The saved windows: ProfilerSession.dump() (stops, returns their paths), then state()."
  [^pyprof.jvm.ProfilerSession s]
  (.dump s)
  (get (.state s) "windows"))

(defn current-action-java [^pyprof.jvm.ProfilerSession s] (get (.state s) "action"))

(defn write-windows-java
  "ProfilerSession.dump(path) writes a session's windows as one trace; here the windows named."
  [paths out]
  (session/write-windows! paths out))

(defn closed? [^ProfileObject o] (.isClosed o))

;; ------------------------------------------------------------------ executing (in the child)

(defn- resolve-value [v names workdir]
  (cond (and (string? v) (str/starts-with? v "$"))   ; "$name", or "$name.2": an item of it
        (let [[n i] (str/split (subs v 1) #"\." 2)] (cond-> (get names n) i (nth (parse-long i))))
        (string? v) (-> v (str/replace "{dir}" workdir)
                        (str/replace "{root}" (str (.getParentFile (.getParentFile ^java.io.File suite-dir)))))
        (sequential? v) (mapv #(resolve-value % names workdir) v)
        (and (map? v) (= 1 (count v)) (#{"$tuple" "$set"} (key (first v))))   ; as runner.py's
        (let [[k items] (first v) items (resolve-value items names workdir)]
          (if (= "$set" k) (set items) (apply list items)))
        (map? v) (into {} (map (fn [[k x]] [k (resolve-value x names workdir)])) v)
        :else v))

(defn- stats-result?
  "A result of pyprof.stats (Clojure keys) or Profiler.stats (Java: the same map)."
  [v]
  (and (map? v) (contains? v :operators) (contains? v :units)))

(defn- op-record? [v] (and (map? v) (contains? v :total-us) (contains? v :count)))

(defn- from-java
  "A map the Java facade returned (java.util.Map, Python's snake_case string keys) with the keys
  the Clojure API uses (kebab-case keywords), so both compare alike; other keys (operator
  names, \"Time\", ...) stay strings."
  [x]
  (cond (and (instance? java.util.Map x) (not (map? x)))
        (into {} (map (fn [[k v]] [(if (and (string? k) (re-matches #"[a-z][a-z0-9_]*" k))
                                     (keyword (str/replace k "_" "-"))
                                     k)
                                   (from-java v)]))
              x)
        (and (instance? java.util.List x) (not (sequential? x))) (mapv from-java x)
        :else x))

(defn- as-json [v]
  (cond (and (map? v) (contains? v :pyprof.session/name)) {"object" "session"}
        (stats-result? v) {"operators" (reduce (fn [m op] (update m (:name op) (fnil + 0) (:count op)))
                                               {} (:operators v))}
        (op-record? v) {"category" (:category v) "name" (:name v) "count" (:count v)}
        (and (map? v) (contains? v :first-step) (contains? v :path))     ; a saved window
        {"index" (:index v) "first_step" (:first-step v) "last_step" (:last-step v)}
        (instance? ProfileObject v) {"object" (.display (.kind ^ProfileObject v))
                                     "name" (.name ^ProfileObject v)}
        (instance? ProfileDomain v) {"object" "Domain" "name" (.name ^ProfileDomain v)}
        (and (map? v) (:marker v)) {"object" "Marker" "name" (:marker v)}
        (keyword? v) (str/replace (name v) "-" "_")   ; the spec's names: :record-and-save
        (map? v) (into {} (map (fn [[k x]] [(if (keyword? k) (str/replace (name k) "-" "_") (str k))
                                            (as-json x)])) v)
        (instance? java.util.Map v) (as-json (from-java v))
        (or (sequential? v) (instance? java.util.List v)) (mapv as-json v)
        (instance? clojure.lang.BigInt v) (biginteger v)
        (or (nil? v) (string? v) (number? v) (boolean? v)) v
        :else {"object" (.getSimpleName (class v))}))

(defn normalise-events
  "As runner.py's normalise_events: the events of `cats`/`names` (when given; never C API calls,
  memory counters or metadata) reduced to the fields `keep`, with their counts."
  [events cats names keep]
  (->> events
       (remove #(or (= "M" (% "ph")) (= "MXNET_C_API" (% "cat"))
                    (str/starts-with? (str (% "name")) "Memory:")))
       (filter #(and (or (nil? cats) (some #{(% "cat")} cats))
                     (or (nil? names) (some #{(% "name")} names))))
       (map #(select-keys % keep))
       frequencies
       (mapv (fn [[e n]] {"event" e "count" n}))))

(defn table-order
  "As runner.py's table_order: the row names of `category`'s block in MXNet's table, in order."
  [text category]
  (let [lines (str/split-lines text)
        start (+ 4 (.indexOf ^java.util.List lines category))]
    (->> (drop start lines) (take-while (complement str/blank?))
         (mapv #(first (str/split (str/trim %) #"\s+"))))))

(defn- python-reads
  "What Python's `code` (reading sys.argv[1], printing JSON) says of the file at `path` (the
  readers and the validator are the reference's only: the JVM writes traces, Python checks
  them and derives from them); nil without the checkout's .venv."
  [code path]
  (let [root (.getParentFile (.getParentFile ^java.io.File suite-dir))
        python (io/file root ".venv" "bin" "python")]
    (when (.canExecute python)
      (let [{:keys [exit out err]}
            (sh/sh (str python) "-c" (str "import json, sys\n" code)
                   (str path) :dir (str root)
                   :env (assoc (into {} (System/getenv)) "PYTHONPATH"
                               (str root java.io.File/pathSeparator (io/file root "tests" "conformance"))))]
        (when-not (zero? exit) (throw (ex-info (str "Python's reading failed: " err) {:path path})))
        (json/read-str out)))))

(defn- validate-problems
  "The problem lines of Python's `pyprof.trace.validate` for the file at `path`."
  [path]
  (python-reads (str "from pyprof import trace\n"
                     "print(json.dumps(trace.validate(sys.argv[1], progress=False).problems))\n")
                path))

(defn- flops-of
  "runner.py's flops: the FLOPs Python's readers derive from the trace at `path`."
  [path]
  (python-reads "import runner\nprint(json.dumps(runner.flops_of(sys.argv[1])))\n" path))

(defn- workload [{:strs [times shape] :or {times 1 shape [4 4]}}]
  (dotimes [_ times]
    (let [a (nd/random-uniform -1 1 shape)]
      (nd/wait-to-read a)
      (nd/close a)))
  (nd/wait-all)
  nil)

(defn- kebab-map [args]
  (into {} (map (fn [[k v]] [(keyword (str/replace k "_" "-")) v])) args))

(defn- binding-for [call language]
  (let [b (get @bindings call)
        b (if-let [same (get b "same_as")] (get @bindings same) b)]
    (or (get b language) (when (= language "java") (get b "clojure")))))

(defn- positional [params args defaults]
  (->> params
       (map #(if (contains? args %) (get args %) (get defaults % ::absent)))
       (take-while #(not= ::absent %))))

(defn- invoke [{:strs [var method args defaults]} target step-args]
  (let [style args
        values (cond (= "map" style) [(kebab-map step-args)]
                     :else (positional style step-args defaults))
        values (if target (cons target values) values)]
    (cond
      var (apply (requiring-resolve (symbol var)) values)
      (str/starts-with? method "#") (clojure.lang.Reflector/invokeInstanceMethod
                                     target (subs method 1) (to-array (rest values)))
      (str/includes? method "/") (apply (requiring-resolve (symbol method)) values)
      :else (let [[_ cls m] (re-matches #"(.*)\.([^.]+)" method)]
              (clojure.lang.Reflector/invokeStaticMethod
               ^String cls ^String m
               (to-array (if (= "map" style) [(java.util.HashMap. ^java.util.Map step-args)]
                             values)))))))

(def runner-calls
  "Calls the runners carry out themselves (no binding): a workload, a file, a trace read back."
  #{"workload" "trace" "dumps_json" "dumps_has" "dumps_order" "write_file" "truncate_file"
    "make_dir" "remove_path" "make_fifo" "files" "validate" "flops" "raw_event" "all_files" "traces"})

(defn- marked-elsewhere? [language {:strs [languages not_in]}]
  (boolean (or (and languages (not (some #{language "jvm"} languages)))
               (some #{language} not_in))))

(defn skipped-step?
  "Whether `step` is skipped through `language`: marked for other languages only, or a call
  this language has no binding for (bindings.json says why)."
  [language step]
  (or (marked-elsewhere? language step)
      (and (not (runner-calls (get step "call"))) (nil? (binding-for (get step "call") language)))))

(defn skip-reason
  "Why `step` is skipped through `language`: the step's own `why`, or its binding's."
  [language step]
  (or (get step "why")
      (let [b (get @bindings (get step "call"))]
        (get (if-let [same (get b "same_as")] (get @bindings same) b) "why"))
      "no binding"))

(defn- call-step [language {:strs [call target] :as step} names workdir]
  (let [args (resolve-value (get step "args" {}) names workdir)
        target (some-> target (resolve-value names workdir))
        skip? (marked-elsewhere? language step)]
    (case (if skip? ::not-here call)
      ::not-here {"skipped" true}
      "workload" {"ok" (workload args)}
      ;; the differential test's calls (pyprof.conformance-batch)
      "raw_event" {"ok" ((requiring-resolve 'pyprof.conformance-batch/raw-event) (args "name"))}
      "all_files" {"ok" ((requiring-resolve 'pyprof.conformance-batch/listed) workdir)}
      "traces" {"ok" ((requiring-resolve 'pyprof.conformance-batch/traces) workdir)}
      ;; the names in the working directory (the child's), sorted
      "files" {"ok" (vec (sort (.list (io/file workdir))))}
      "trace" {"ok" (normalise-events (get (load-json (io/file workdir (args "path"))) "traceEvents")
                                      (args "cats") (args "names")
                                      (get args "keep" ["name" "cat" "ph"]))}
      "validate" (if-let [problems (validate-problems (io/file workdir (args "path")))]
                   {"ok" problems}
                   {"skipped" true})
      "flops" (if-let [got (flops-of (io/file workdir (args "path")))] {"ok" got} {"skipped" true})
      "write_file" (do (spit (io/file workdir (args "path")) (args "text") :encoding "UTF-8")
                       {"ok" nil})
      "make_dir" (if (.mkdirs (io/file workdir (args "path")))
                   {"ok" nil}
                   (throw (ex-info (str "make_dir: cannot make " (args "path")) {})))
      "remove_path" (do (doseq [^java.io.File f (reverse (file-seq (io/file workdir (args "path"))))]
                          (io/delete-file f))
                        {"ok" nil})
      "make_fifo" (let [p (.start (ProcessBuilder. ["mkfifo" (str (io/file workdir (args "path")))]))]
                    (when-not (zero? (.waitFor p))
                      (throw (ex-info (str "make_fifo: mkfifo " (args "path") " failed") {})))
                    {"ok" nil})
      "truncate_file" (let [f (io/file workdir (args "path"))]   ; keep the first fraction
                        (with-open [raf (java.io.RandomAccessFile. f "rw")]
                          (.setLength raf (long (* (.length f) (double (args "keep"))))))
                        {"ok" nil})
      "dumps_json" {"ok" (as-json (profiler/dumps (assoc (kebab-map args) :format :json)))}
      "dumps_has" {"ok" (str/includes? (profiler/dumps) (args "text"))}
      "dumps_order" {"ok" (table-order (profiler/dumps {:sort-by (args "sort_by")
                                                        :ascending (args "ascending")})
                                       (args "category"))}
      (if-let [b (binding-for call language)]
        (let [v (invoke b target args)
              v (if (= "count" (get (get @bindings call) "result")) (count v) v)]
          (if (= ::skip v) {"skipped" true} {"ok" v ::raw true}))
        {"skipped" true}))))

(defn- error-outcome [^Throwable t]
  (let [data (ex-data t)]
    (cond (:pyprof/code data) {"error" (:pyprof/code data) "kind" (name (:pyprof/error data))
                               "message" (.getMessage t)}
          (= :mxnet (:pyprof/error data)) {"error" "mxnet" "kind" "mxnet"}
          :else {"error" "uncoded" "kind" (str (class t)) "message" (str (.getMessage t))})))

(defn execute
  "Runs the steps of `scenario` in this JVM through `language` (\"clojure\" or \"java\")."
  [scenario language workdir]
  (loop [[step & more] (get scenario "steps"), names {}, out []]
    (if-not step
      out
      (let [outcome (try (call-step language step names workdir)
                         (catch Throwable t
                           (let [c (or (when (instance? clojure.lang.Compiler$CompilerException t)
                                         (.getCause t))
                                       t)]
                             (error-outcome c))))
            names (if (and (get step "as") (contains? outcome "ok"))
                    (assoc names (get step "as") (get outcome "ok"))
                    names)]
        (recur more names (conj out (cond-> (dissoc outcome ::raw)
                                      (contains? outcome "ok") (update "ok" as-json))))))))

(defn -main
  "Child JVM entry: prints the outcomes of one scenario as one JSON line."
  [path language workdir]
  (println (json/write-str (execute (load-json path) language workdir)))
  (shutdown-agents))

;; ------------------------------------------------------------------ driving and comparing

(defn run-scenario
  "Executes scenario file `f` through `language` in a fresh child JVM; its outcomes. Options:
  :timeout-s (default 300; past it java-child throws), :jvm-args and :classpath for the child."
  [f language & {:keys [timeout-s jvm-args classpath] :or {timeout-s 300}}]
  (let [workdir (str (temp-dir))
        {:keys [exit out err]} (java-child ["-e" (str "(require 'pyprof.conformance)"
                                                      "(pyprof.conformance/-main "
                                                      (pr-str (str f)) " " (pr-str language) " "
                                                      (pr-str workdir) ")")]
                                          :dir workdir :timeout-s timeout-s
                                          :jvm-args (or jvm-args fast-start-jvm-args)
                                          :classpath (or classpath
                                                         (compiled-classpath '[pyprof.conformance])))]
    (when-not (zero? exit)
      (throw (ex-info (str (.getName ^java.io.File f) " (" language "): the child exited " exit
                           "\n" (subs err (max 0 (- (count err) 3000))))
                      {:exit exit})))
    (json/read-str (last (str/split-lines out)))))

(defn- kind-matches? [code kind]
  (= kind (get-in rules/catalogue ["errors" code "kind"])))

(defn- expected-error
  "A step's expected error code through `language`: \"error\" is a code, or a map of codes per
  language where the languages' APIs differ (\"python\", \"jvm\"; \"clojure\" or \"java\"
  where those two differ too, e.g. the Java session's output root)."
  [expect language]
  (let [e (get expect "error")] (if (map? e) (get e language (get e "jvm")) e)))

(defn- subset?
  "As runner.py's _subset: maps by the keys given, lists item by item, floats within 1e-9."
  [expected actual]
  (cond (and (map? expected) (map? actual))
        (every? (fn [[k v]] (and (contains? actual k) (subset? v (get actual k)))) expected)
        (and (sequential? expected) (sequential? actual))
        (and (= (count expected) (count actual)) (every? true? (map subset? expected actual)))
        (and (float? expected) (number? actual))
        (<= (Math/abs (- (double expected) (double actual))) (* 1e-9 (max 1.0 (Math/abs (double expected)))))
        :else (= expected actual)))

(defn differences
  "Where `outcomes` (through `language`, default \"clojure\") differ from the expectations of
  `scenario`, one string each."
  ([scenario outcomes] (differences scenario outcomes "clojure"))
  ([scenario outcomes language]
   (let [steps (get scenario "steps")]
     (concat
      (when (not= (count steps) (count outcomes))
        [(str (count outcomes) " outcomes for " (count steps) " steps")])
      (for [[i step got] (map vector (range) steps outcomes)
            :when (not (get got "skipped"))
            :let [expect (get step "expect" {})
                  where (str "step " i " (" (get step "call") ")")
                  problem
                  (cond
                    (contains? expect "error")
                    (cond (not= (get got "error") (expected-error expect language))
                          (str where ": expected error " (expected-error expect language) ", got " (json/write-str got))
                          (not (kind-matches? (get got "error") (get got "kind")))
                          (str where ": error " (get got "error") " has kind " (get got "kind"))
                          :else
                          (when-let [missing (seq (remove #(str/includes? (str (get got "message")) %)
                                                          (get expect "message_has")))]
                            (str where ": the message lacks " (pr-str (vec missing)) ": "
                                 (pr-str (get got "message")))))
                    (contains? got "error")
                    (str where ": expected success, got " (json/write-str got))
                    (contains? expect "ok")
                    (when-not (subset? (get expect "ok") (get got "ok"))
                      (str where ": expected " (json/write-str (get expect "ok"))
                           "\n   got " (json/write-str (get got "ok"))))
                    (contains? expect "events")
                    (let [as-map #(into {} (map (fn [e] [(e "event") (e "count")])) %)
                          exp (as-map (get expect "events")) act (as-map (get got "ok"))
                          diff (for [k (distinct (concat (keys exp) (keys act)))
                                     :when (not= (get exp k 0) (get act k 0))]
                                 (str (json/write-str k) ": expected " (get exp k 0) ", got "
                                      (get act k 0)))]
                      (when (seq diff)
                        (str where ": trace events differ:\n   " (str/join "\n   " (sort diff))))))]
            :when problem]
        problem)))))

;; ------------------------------------------------------------------ coverage

(def api-namespaces
  "The Clojure namespaces whose public functions are the counterparts of the Python API."
  '[pyprof.profiler pyprof.session pyprof.stats org.apache.clojure-mxnet.profiler])

(def java-api
  "The Java classes whose public methods are counterparts of the Python API, each with the
  methods that count (nil: all public methods but Object's). Left out, having no Python
  counterpart: ProfileObject's accessors and helpers for the Clojure layer (kind, name,
  isStarted, checkName, nameMaxBytes) and ProfilerSession.init (loads namespaces)."
  {pyprof.jvm.Profiler nil
   pyprof.jvm.ProfilerSession #{"start" "step" "stop" "dump" "stats" "state" "close"}
   pyprof.jvm.ProfileObject #{"start" "stop" "value" "setValue" "setUnsignedValue" "increment"
                              "decrement" "close" "isClosed"}})

(defn used-calls []
  (set (for [f (scenario-files), step (get (load-json f) "steps")] (get step "call"))))

(defn- covered [language]
  (set (for [call (used-calls)
             :let [b (binding-for call language)]
             :when b
             x [(get b "var") (get b "method") (get b "covers") (get b "also_covers")]
             :when x]
         (if (str/starts-with? x "#") (str (get b "class") x) x))))

(def jvm-only
  "Public calls of the JVM with no Python counterpart, so no scenario: naming the calling Java
  thread in the windows (trace.json thread_names; Python's windows name no threads yet), tested
  by jvm/test/pyprof/thread_names_test.clj."
  #{"pyprof.profiler/name-thread!" "pyprof.jvm.Profiler.nameThread"})

(defn uncovered-clojure
  "Public functions and macros of `api-namespaces` that no scenario calls."
  []
  (let [done (into (covered "clojure") jvm-only)]
    (sort (for [ns-sym api-namespaces
                :let [_ (require ns-sym)]
                [sym v] (ns-publics ns-sym)
                :let [m (meta v) full (str ns-sym "/" sym)]
                :when (and (fn? @v) (not (:no-doc m)) (not (done full)))]
            full))))

(defn uncovered-java
  "Public methods of `java-api` (not Object's) that no scenario calls."
  []
  (let [done (into (covered "java") jvm-only)]
    (sort (distinct
           (for [[^Class c only] java-api
                 ^Method m (.getMethods c)
                 :let [static? (Modifier/isStatic (.getModifiers m))
                       full (str (.getName c) (if static? "." "#") (.getName m))]
                 :when (and (= c (.getDeclaringClass m))
                            (or (nil? only) (only (.getName m)))
                            (not (#{"toString" "hashCode" "equals"} (.getName m)))
                            (not (done full)))]
             full)))))
