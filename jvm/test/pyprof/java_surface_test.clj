(ns pyprof.java-surface-test
  "The JVM surface as Java callers see it, in a child JVM (one profiler per process): the Java
  facades return plain Java data with string keys (never keywords or persistent structures),
  their errors and the MBean's texts speak Java (no `:keyword`, no Clojure call, no Python
  name), every error of the profiler objects is an ex-info with its catalogue code, and
  `with-profiling` takes one options form, a leading map literal whose values are any
  expressions: other forms are refused when they compile."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.example.ndarray :as nd]
            [pyprof.profiler :as p]
            [pyprof.test-util :refer [java-child temp-dir]])
  (:import (clojure.lang ExceptionInfo IPersistentCollection Keyword)
           (pyprof.jvm Profiler ProfilerControl ProfilerSession PyprofException)))

(defn- work []
  (dotimes [_ 3] (with-open [a (nd/random-uniform -1 1 [8 8])] (nd/wait-to-read a)))
  (nd/wait-all))

(defn- error-text
  "[class code message] of what `f` throws; [:no-error] when it returns."
  [f]
  (try (f) [:no-error]
       (catch Exception e [(.getSimpleName (class e)) (:pyprof/code (ex-data e)) (.getMessage e)])))

(defn- compile-error-text
  "[class code message] of the catalogue error compiling `form` in this namespace throws (the
  cause the compiler wraps); [:no-error] when it compiles (and then it has run)."
  [form]
  (try (binding [*ns* (the-ns 'pyprof.java-surface-test)] (eval form)) [:no-error]
       (catch Exception e
         (let [c (or (first (filter #(:pyprof/code (ex-data %)) (take-while some? (iterate ex-cause e))))
                     e)]
           [(.getSimpleName (class c)) (:pyprof/code (ex-data c)) (.getMessage c)]))))

(defn- clojure-leaks
  "Every Clojure type inside `x` (a keyword, a persistent collection, a BigInt, a Ratio), as
  class names with the path to it; walks java.util maps and lists."
  ([x] (clojure-leaks x []))
  ([x path]
   (cond (or (instance? Keyword x) (instance? IPersistentCollection x)
             (instance? clojure.lang.BigInt x) (instance? clojure.lang.Ratio x))
         [[path (.getName (class x))]]
         (instance? java.util.Map x)
         (concat (for [k (keys x) :when (not (string? k))] [(conj path k) "non-string key"])
                 (mapcat (fn [[k v]] (clojure-leaks v (conj path k))) x))
         (instance? java.util.List x) (mapcat #(clojure-leaks %1 (conj path %2)) x (range))
         :else [])))

(defn- in-session
  "Calls `f` while a Java session is open, then stops the session."
  [dir f]
  (let [s (.start (ProfilerSession. {"path" (str dir "/own_{window}.json")}))]
    (try (f) (finally (.stop s)))))

(defn- bad-java-calls
  "Java-facade and MBean calls with bad input, each with what it should raise."
  [dir]
  (let [d (Profiler/domain "surface")
        ctl (ProfilerControl/instance)]
    [#(Profiler/setConfig {"profile_symbolc" true})
     #(Profiler/setConfig {"profile_api" "maybe"})
     #(Profiler/setConfig {"aggregate_stats" [1 2]})
     #(Profiler/setConfig {"profile_process" "xml"})
     #(Profiler/setConfig {"profile_process" "server"})
     #(Profiler/setConfig {"filename" (str dir "/no/such/dir/t.json")})
     #(Profiler/setConfig nil)
     #(Profiler/setState "go")
     #(Profiler/dump true)
     #(Profiler/dumps false "xml" "total" false)
     #(Profiler/dumps false "json" nil false)
     #(Profiler/domain "a\"b")
     #(Profiler/event "")
     #(Profiler/task nil "x")
     #(Profiler/mark d "m" "galaxy")
     #(.increment (Profiler/counter d "c") -1)
     #(.setValue (Profiler/task d "t") 1)
     #(.stop (Profiler/task d "t"))
     #(doto (Profiler/event "e") .start .start)
     #(.start (doto (Profiler/event "e") .close))
     #(ProfilerSession. {"schedule" 5})
     #(ProfilerSession. {"schedule" {"wait" -1}})
     #(ProfilerSession. {"filename" "x"})
     #(ProfilerSession. {"schedule" {"repeat" 2} "path" "one.json"})
     #(.step (ProfilerSession. {}))
     #(.dump (ProfilerSession. {}) "x.json")
     #(.start ctl "{\"profile_symbolc\": true}" 5)
     #(.start ctl "profile_imperative=maybe" 5)
     #(.step ctl)
     ;; a new user's trial: the schedule's choices in Clojure spelling, Clojure calls named
     #(ProfilerSession. {"schedule" {"activ" 2}})
     #(ProfilerSession. {"schedule" {"skip-first" 1 "active" 1}})
     #(in-session dir (fn [] (Profiler/setConfig {"profile_api" true})))
     #(in-session dir (fn [] (Profiler/setState "run")))
     #(in-session dir (fn [] (Profiler/dump false)))
     #(in-session dir (fn [] (Profiler/steadyBegin {})))]))

(def bad-options "Not options of with-profiling." [:config])
(def profiling-options "with-profiling's options, set by the child." nil)

(defn child-java-surface
  "Run in a child JVM: prints one EDN form per line, [tag data]."
  [dir]
  (doseq [f (bad-java-calls dir)]
    (prn [:bad (error-text f)]))
  (prn [:status-before (.getStatus (ProfilerControl/instance))])
  ;; a session through ProfilerSession: what state/stop/stats return
  (let [s (.start (ProfilerSession. {"path" (str dir "/w_{window}.json") "profile_imperative" true
                                     "schedule" {"wait" 1 "active" 1}}))]
    (work) (.step s) (work) (.step s)
    (let [state (.state s)
          windows (.stop s)
          stats (.stats s)
          path (first (.dump s))]
      (prn [:types {:state (clojure-leaks state) :stop (clojure-leaks windows)
                    :stats (clojure-leaks stats)
                    :profiler-stats (clojure-leaks (Profiler/stats (into-array String [path])))}])
      (prn [:shapes (into (sorted-map) state) (vec (sort (keys (first windows))))
            (vec (sort (keys (first (get stats "operators")))))
            (every? #(instance? String %) (.dump s))])
      (prn [:dump-over-window (error-text #(.dump s path)) (= stats (.stats s))])))
  ;; the MBean's texts
  (let [ctl (ProfilerControl/instance)]
    ;; the calls return at once: awaitSaved waits for the start, then for the window's file
    (prn [:jmx (.start ctl (str "profile_imperative=true,path=" dir "/jmx_{window}.json") 30)
          (do (.awaitSaved ctl 60000) (.getStatus ctl))])
    (work)
    (.stop ctl)
    (prn [:jmx-stop (do (.awaitSaved ctl 60000) (.stop ctl)) (.getStatus ctl) (.stats ctl)]))
  ;; with-profiling: the retired options forms (a symbol, :options and an expression) and a
  ;; config given directly are refused when they compile, before the profiler starts
  (prn [:with-profiling-bad (compile-error-text '(p/with-profiling bad-options (work)))
        (compile-error-text `(p/with-profiling {:filename ~(str dir "/x.json")} (work)))
        (compile-error-text '(p/with-profiling :options (vector :config) (work)))
        (:running (p/state))])
  (alter-var-root #'profiling-options
                  (constantly {:config {:filename (str dir "/plain.json") :profile-imperative true
                                        :aggregate-stats true}}))
  ;; the one options form: a map literal, its values any expressions (here from a var)
  (p/with-profiling {:config (:config profiling-options)} (work))
  (prn [:with-profiling-ran (p/state) (.exists (io/file dir "plain.json"))])
  (p/with-profiling {:config (assoc (:config profiling-options) :filename (str dir "/expr.json"))
                     :dump false}
    (work))
  (prn [:with-profiling-expr (.exists (io/file dir "expr.json"))])
  (let [json (Profiler/dumps false "json" "total" false)]
    (prn [:dumps (clojure-leaks json) (instance? java.util.Map json)
          (clojure-leaks (Profiler/setConfig {"profile_imperative" true
                                              "filename" (str dir "/plain.json")
                                              "aggregate_stats" true}))]))
  (shutdown-agents))

(defn- keyword-like [s] (re-find #"(^|[\s(\[{,])(:[a-z][a-z0-9-]*)" (str s)))

(def ^:private python-or-clojure-names
  "Spellings of Python and Clojure that a Java caller must not read."
  [#"set_value\(" #"set_config\(" #"set_state\(" #"dump\(finished" #"pyprof\.profile\("
   #"\bTrue\b" #"\bFalse\b" #"\bNone\b" #"\(profiler[-/]" #"\(dump-profile" #"\(session/"
   #"#object" #"\d+N\b" #"'[a-z_]+'" #"\(pyprof\."])

(defn- foreign [s]
  (concat (when-let [[_ _ k] (keyword-like s)] [k])
          (keep #(re-find % (str s)) python-or-clojure-names)))

(deftest the-java-surface-speaks-java
  (let [dir (str (temp-dir))
        {:keys [exit out err]} (java-child ["-e" (str "(require 'pyprof.java-surface-test)"
                                                       "(pyprof.java-surface-test/child-java-surface \""
                                                       dir "\")")])
        lines (mapv read-string (str/split-lines out))
        tagged (fn [tag] (filter #(= tag (first %)) lines))
        one (fn [tag] (first (tagged tag)))]
    (is (= 0 exit) err)
    (testing "errors through the Java facades and the MBean: Java literals and Java calls"
      (let [bad (map second (tagged :bad))]
        (is (= 35 (count bad)))
        (doseq [[cls code msg] bad]
          (is (not= :no-error cls) (str code))
          (is (#{"PyprofException" "IllegalArgumentException" "IllegalStateException"} cls) msg)
          (is (empty? (foreign msg)) msg))
        (is (some #(= ["PyprofException" "config.bad_value"
                       (str "invalid value List.of(1, 2) for profiler config key \"aggregate_stats\":"
                            " expected true/false, 1/0, or the strings \"true\"/\"false\"/\"1\"/\"0\""
                            " (any case). fix: pass a value of that form (docs/configuration.md lists"
                            " every key and what it takes)")] %)
                  bad))
        (is (some #(= ["PyprofException" "dumps.sort_by"
                       (str "invalid sort_by null: expected one of \"total\", \"avg\", \"min\","
                            " \"max\", \"count\". fix: pass one of \"total\", \"avg\", \"min\","
                            " \"max\", \"count\"")] %)
                  bad))
        (is (some #(= ["PyprofException" "schedule.unknown_option"
                       (str "unknown schedule option(s) \"activ\": expected one of \"wait\", \"warmup\","
                            " \"active\", \"repeat\", \"skip_first\". fix: use only those options")] %)
                  bad))
        (is (= #{"Profiler.setConfig(...)" "Profiler.setState(\"run\")" "Profiler.dump(false)"}
               (set (keep #(second (re-find #"^state.session_owns: (.*) while the session <pyprof.session"
                                            (str (second %) ": " (nth % 2))))
                          bad)))
            "a call in a session's way is named as Java writes it")
        (is (some #(str/starts-with? (str (nth % 2)) "Profiler.steadyBegin(...) while the session <pyprof.session")
                  bad))
        (is (some #(= "Counter \"c\" would go below zero (0 -1); MXNet stores it as uint64 and would wrap to 18446744073709551615. fix: decrement by at most the current value, or setValue() first"
                      (nth % 2))
                  bad))))
    (testing "Java data from the session and the statistics: string keys, no Clojure types"
      (let [[_ types] (one :types)
            [_ state window-keys op-keys paths?] (one :shapes)]
        (is (= {:state [] :stop [] :stats [] :profiler-stats []} types))
        (is (= {"action" "none" "state" "open" "step" 2} (dissoc state "windows")))
        (is (= [0] (map #(get % "index") (get state "windows"))))
        (is (= ["end_us" "events" "first_step" "index" "last_step" "path" "start_us" "truncated"]
               window-keys))
        (is (every? (set op-keys) ["category" "count" "name" "p99_us" "total_us"]))
        (is (true? paths?))
        (let [[_ [cls code msg] same-stats?] (one :dump-over-window)]
          (is (= ["PyprofException" "session.dump_over_window"] [cls code]) msg)
          (is (str/includes? msg "is one of this session's windows") msg)
          (is (true? same-stats?) "the window is not replaced: the statistics stay as they were"))))
    (testing "the MBean's texts are plain text and JSON with Java's keys"
      (let [[_ started status] (one :jmx)
            [_ stopped after stats] (one :jmx-stop)]
        (is (= "{\"state\":\"none\"}" (second (one :status-before))))
        (is (re-matches #"session (open|starting \(see Status\)), stops by itself after 30 s; profile_api off: another MXNet binding in this process \(DJL\) may be inside a C call when recording switches; -Dpyprof.steady=true at start-up records API calls safely" started)
            started)
        (doseq [s [status stopped after stats]]
          (is (empty? (foreign s)) s))
        (is (str/includes? status "\"state\":\"open\""))
        (is (= "[]" stopped) "a stop with no session running stops nothing (its windows: Status)")
        (is (str/includes? after "\"first_step\":0"))
        (is (str/includes? stats "\"total_us\":"))))
    (testing "with-profiling: other options forms are the catalogue's error when they compile"
      (let [[_ from-var direct keyword-form running] (one :with-profiling-bad)]
        (is (= ["PyprofException" "profiling.options_not_map"
                (str "with-profiling takes one options form, a leading map literal of :config and"
                     " :dump, got bad-options before the body. fix: write the options as that"
                     " map, its values any expressions: (with-profiling {:config (:config opts)"
                     " :dump true} body...), or start the body without bad-options")]
               from-var))
        (is (= "profiling.unknown_option" (second direct)) "a map, with a key it does not take")
        (is (str/includes? (nth direct 2) "unknown with-profiling option :filename: did you mean")
            (nth direct 2))
        (is (= "profiling.options_not_map" (second keyword-form)) "the retired :options form")
        (is (str/includes? (nth keyword-form 2) "got :options before the body")
            (nth keyword-form 2))
        (is (false? running))))
    (testing "with-profiling's map takes its values from any expression (a var here)"
      (let [[_ state wrote?] (one :with-profiling-ran)]
        (is (= {:running false :ever-ran true :finished false}
               (select-keys state [:running :ever-ran :finished]))
            "no :dump: the trace is not finished")
        (is (true? wrote?)))
      (let [[_ wrote?] (one :with-profiling-expr)]
        (is (true? wrote?) "a config computed in the map"))
      (let [[_ leaks map? config-leaks] (one :dumps)]
        (is (true? map?) "aggregate statistics were on: the config came from the local")
        (is (= [] leaks))
        (is (= [] config-leaks))))))

(deftest every-error-of-the-profiler-objects-is-an-ex-info-with-its-code
  ;; No C call happens before these checks fail, so they run in this JVM.
  (let [d (p/domain "surface-objects")
        codes (for [f [#(p/start nil) #(p/stop "task") #(p/set-counter nil 1) #(p/increment 5)
                       #(p/decrement :c 1) #(p/counter-value nil) #(p/task "d" "t") #(p/task d "")
                       #(p/counter d "a\"b") #(p/mark d "m" :galaxy) #(p/mark nil "m")]]
                (try (f) :no-error
                     (catch Throwable t
                       [(instance? ExceptionInfo t) (instance? PyprofException t)
                        (:pyprof/code (ex-data t)) (str/includes? (.getMessage t) "fix: ")])))]
    (is (= [[true true "object.not_an_object" true] [true true "object.not_an_object" true]
            [true true "object.not_an_object" true] [true true "object.not_an_object" true]
            [true true "object.not_an_object" true] [true true "object.not_an_object" true]
            [true true "object.needs_domain" true] [true true "object.bad_name" true]
            [true true "object.name_bad_char" true] [true true "marker.scope" true]
            [true true "object.needs_domain" true]]
           codes))
    (is (= (str "start needs a Task, Frame or Event, got nil. fix: pass the object that"
                " (profiler/task domain \"name\") (or frame, event, counter) returned")
           (ex-message (try (p/start nil) (catch ExceptionInfo e e)))))))
