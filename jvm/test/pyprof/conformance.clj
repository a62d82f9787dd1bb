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
            [clojure.string :as str]
            [pyprof.ndarray :as nd]
            [pyprof.profiler :as profiler]
            [pyprof.rules :as rules]
            [pyprof.stats :as stats]
            [pyprof.test-util :refer [java-child temp-dir]])
  (:import (java.lang.reflect Method Modifier)
           (pyprof.jvm ProfileDomain ProfileObject)))

(def suite-dir
  "tests/conformance of this checkout (lein test runs in jvm/)."
  (.getCanonicalFile (io/file (System/getProperty "user.dir") ".." "tests" "conformance")))

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

(defn close [^ProfileObject o] (.close o))

(defn closed? [^ProfileObject o] (.isClosed o))

;; ------------------------------------------------------------------ executing (in the child)

(defn- resolve-value [v names workdir]
  (cond (and (string? v) (str/starts-with? v "$")) (get names (subs v 1))
        (string? v) (str/replace v "{dir}" workdir)
        (sequential? v) (mapv #(resolve-value % names workdir) v)
        (map? v) (into {} (map (fn [[k x]] [k (resolve-value x names workdir)])) v)
        :else v))

(defn- as-json [v]
  (cond (instance? ProfileObject v) {"object" (.display (.kind ^ProfileObject v))
                                     "name" (.name ^ProfileObject v)}
        (instance? ProfileDomain v) {"object" "Domain" "name" (.name ^ProfileDomain v)}
        (and (map? v) (:marker v)) {"object" "Marker" "name" (:marker v)}
        (keyword? v) (name v)
        (map? v) (into {} (map (fn [[k x]] [(if (keyword? k) (str/replace (name k) "-" "_") (str k))
                                            (as-json x)])) v)
        (instance? java.util.Map v) (as-json (into {} v))
        (or (sequential? v) (instance? java.util.List v)) (mapv as-json v)
        (instance? clojure.lang.BigInt v) (biginteger v)
        :else v))

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

(defn- call-step [language {:strs [call target] :as step} names workdir]
  (let [args (resolve-value (get step "args" {}) names workdir)
        target (some-> target (resolve-value names workdir))]
    (case call
      "workload" {"ok" (workload args)}
      "trace" {"ok" (normalise-events (get (load-json (io/file workdir (args "path"))) "traceEvents")
                                      (args "cats") (args "names")
                                      (get args "keep" ["name" "cat" "ph"]))}
      "stats" (let [f (if (= language "java")
                        #(pyprof.jvm.Profiler/stats (into-array String [%]))
                        #(stats/stats %))
                    r (f (str (io/file workdir (args "path"))))]
                {"ok" {"operators" (reduce (fn [m op] (update m (str (get op :name (get op "name")))
                                                              (fnil + 0) (get op :count (get op "count"))))
                                           {} (get r :operators (get r "operators")))}})
      "dumps_json" {"ok" (as-json (profiler/dumps (assoc (kebab-map args) :format :json)))}
      "dumps_has" {"ok" (str/includes? (profiler/dumps) (args "text"))}
      (if-let [b (binding-for call language)]
        {"ok" (invoke b target args) ::raw true}
        {"skipped" true}))))

(defn- error-outcome [^Throwable t]
  (let [data (ex-data t)]
    (cond (:pyprof/code data) {"error" (:pyprof/code data) "kind" (name (:pyprof/error data))}
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
  "Executes scenario file `f` through `language` in a fresh child JVM; its outcomes."
  [f language]
  (let [workdir (str (temp-dir))
        {:keys [exit out err]} (java-child ["-e" (str "(require 'pyprof.conformance)"
                                                      "(pyprof.conformance/-main "
                                                      (pr-str (str f)) " " (pr-str language) " "
                                                      (pr-str workdir) ")")]
                                          :dir workdir :timeout-s 300)]
    (when-not (zero? exit)
      (throw (ex-info (str (.getName ^java.io.File f) " (" language "): the child exited " exit
                           "\n" (subs err (max 0 (- (count err) 3000))))
                      {:exit exit})))
    (json/read-str (last (str/split-lines out)))))

(defn- kind-matches? [code kind]
  (= kind (get-in rules/catalogue ["errors" code "kind"])))

(defn- subset? [expected actual]
  (if (and (map? expected) (map? actual))
    (every? (fn [[k v]] (and (contains? actual k) (subset? v (get actual k)))) expected)
    (= expected actual)))

(defn differences
  "Where `outcomes` differ from the expectations of `scenario`, one string each."
  [scenario outcomes]
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
                   (cond (not= (get got "error") (get expect "error"))
                         (str where ": expected error " (get expect "error") ", got " (json/write-str got))
                         (not (kind-matches? (get got "error") (get got "kind")))
                         (str where ": error " (get got "error") " has kind " (get got "kind")))
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
       problem))))

;; ------------------------------------------------------------------ coverage

(def api-namespaces
  "The Clojure namespaces whose public functions are the counterparts of the Python API."
  '[pyprof.profiler pyprof.session pyprof.stats org.apache.clojure-mxnet.profiler])

(def java-facades
  "The Java classes whose public methods are the counterparts of the Python API."
  [pyprof.jvm.Profiler pyprof.jvm.ProfilerSession pyprof.jvm.ProfileObject])

(defn used-calls []
  (set (for [f (scenario-files), step (get (load-json f) "steps")] (get step "call"))))

(defn- covered [language]
  (set (for [call (used-calls)
             :let [b (binding-for call language)]
             :when b
             x [(get b "var") (get b "method") (get b "covers")]
             :when x]
         x)))

(defn uncovered-clojure
  "Public functions and macros of `api-namespaces` that no scenario calls."
  []
  (let [done (covered "clojure")]
    (sort (for [ns-sym api-namespaces
                :let [_ (require ns-sym)]
                [sym v] (ns-publics ns-sym)
                :let [m (meta v) full (str ns-sym "/" sym)]
                :when (and (fn? @v) (not (:no-doc m)) (not (done full)))]
            full))))

(defn uncovered-java
  "Public methods of `java-facades` (not Object's) that no scenario calls."
  []
  (let [done (covered "java")]
    (sort (distinct
           (for [^Class c java-facades
                 ^Method m (.getDeclaredMethods c)
                 :let [static? (Modifier/isStatic (.getModifiers m))
                       full (if static? (str (.getName c) "." (.getName m)) (str "#" (.getName m)))]
                 :when (and (Modifier/isPublic (.getModifiers m))
                            (not (#{"toString" "hashCode" "equals"} (.getName m)))
                            (not (done full)))]
             (str full (when-not static? (str " (" (.getSimpleName c) ")"))))))))
