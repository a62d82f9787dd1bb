(ns pyprof.misuse-test
  "The misuse matrix, JVM side (issue 12; Python side: tests/test_misuse.py). Every case of
  tests/misuse/cases.json runs in its own child JVM through the Clojure API and, again in its
  own child JVM, through the Java facade (the conformance runner, pyprof.conformance; a step a
  language cannot express is skipped with its recorded why). Per case and language: the child
  exits 0 within the time limit (no abort, no hang), each step ends as the case says (the
  catalogue error, or the documented result; a trace step reads back the data collected before
  the misuse), and every error message ends in a fix. A case with \"known_bug\" must still fail
  (as Python's strict xfail), so that fixing the bug means updating the case.

  Cases share a child when they leave the profiler as it was (cases.json shared_child: each step
  refused, since a refusal changes nothing, or a call that only makes objects or files): those
  run in a few child JVMs per language, one after another, as the differential test runs its sequences
  (pyprof.conformance-batch), each batch ending in a case that collects, dumps and reads back
  data. A case that left anything behind breaks that probe or the cases after it; the
  other cases keep a child JVM each (a JVM cannot fork; about 2.5 s of CPU a start)."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.conformance :as c]
            [pyprof.test-util :refer [compiled-classpath java-child temp-dir]])
  (:import (java.util.concurrent Callable Executors TimeUnit)))

(def ^:private doc (c/load-json (io/file (.getParentFile ^java.io.File c/suite-dir) "misuse" "cases.json")))
(def cases (get doc "cases"))
(def ^:private shared (get doc "shared_child"))

(def fix-pattern
  "As tests/test_misuse.py: the message ends in a fix after a sentence's end."
  #"(?s)[.;)] fix: \S.*$")

(def ^:private timeout-s 120)

(defn- child-result
  "Runs `form` in a child JVM in a fresh directory: its last stdout line read as JSON, or
  {:abort exit-and-stderr} / {:hang message}."
  [form classpath what]
  (let [workdir (str (temp-dir))]
    (try (let [{:keys [exit out err]} (java-child ["-e" form] :dir workdir :timeout-s timeout-s
                                                  :classpath classpath)]
           (if (zero? exit)
             {:json (json/read-str (last (str/split-lines out)))}
             {:abort (str what ": the child exited " exit "\n" (subs err (max 0 (- (count err) 3000))))}))
         (catch clojure.lang.ExceptionInfo e {:hang (str what ": " (ex-message e))}))))

(defn- run-case
  "One case through `language` in its own child JVM: {:outcomes ...}, {:abort exit-and-stderr},
  {:hang message} or {:skipped whys} when the language can express none of its steps."
  [{:strs [name steps]} language classpath]
  (if (every? #(c/skipped-step? language %) steps)
    {:skipped (vec (distinct (map #(c/skip-reason language %) steps)))}
    (let [f (io/file (temp-dir) "case.json")
          t0 (System/nanoTime)]
      (spit f (json/write-str {"steps" steps}) :encoding "UTF-8")
      (try (assoc {:outcomes (c/run-scenario f language :timeout-s timeout-s
                                                         :classpath classpath)}
                  :seconds (/ (- (System/nanoTime) t0) 1e9))
           (catch clojure.lang.ExceptionInfo e
             (if (:exit (ex-data e))
               {:abort (ex-message e)}
               {:hang (str name ": " (ex-message e))}))))))

(defn- expects-error? [step] (contains? (get step "expect" {}) "error"))

(defn refusal?
  "Whether `case` shares a child (cases.json shared_child): each step refused, or a call that
  never configures, runs or dumps the profiler."
  [{:strs [steps known_bug]}]
  (let [calls (set (shared "calls"))]
    (and (nil? known_bug) (every? #(or (expects-error? %) (calls (get % "call"))) steps))))

(def probe
  "The case that ends each batch: it configures, runs, records, dumps and reads the trace back,
  so it fails when a case before it changed the profiler."
  (first (filter #(= (shared "probe") (get % "name")) cases)))

(defn- run-batch
  "The refusal cases `batch` through `language` in one child JVM, in order, then `probe`: a
  result per case as run-case's (an abort or hang of the child is every case's), and the
  probe's result."
  [batch language classpath]
  (let [f (io/file (temp-dir) "batch.json")
        runs (conj (vec batch) probe)
        _ (spit f (json/write-str {"sequences" (mapv #(select-keys % ["steps"]) runs)}) :encoding "UTF-8")
        {:keys [json] :as failed}
        (child-result (str "(require 'pyprof.conformance-batch) (pyprof.conformance-batch/-main-batch "
                           (pr-str (str f)) " " (pr-str language) " (System/getProperty \"user.dir\"))")
                      classpath (str (count batch) " cases in one child (" language ")"))
        results (if json
                  (mapv (fn [outcomes] {:outcomes outcomes :batch (count batch)}) json)
                  (vec (repeat (count runs) (dissoc failed :json))))]
    [(pop results) (peek results)]))

(def ^:private other-language
  "What a message in each language must not name: the other language's calls."
  {"java" #"\((?:profiler-set|dump-profile|pyprof\.|session/|profiler/)"
   "clojure" #"Profiler\.[a-z]|ProfilerSession\(|Map\.of\("})

(defn problems
  "What is wrong with `result`, the run of `case` through `language`, one string each."
  [{:strs [steps] :as case} language {:keys [outcomes abort hang skipped]}]
  (cond
    skipped []
    abort [(str "the child did not exit normally: " abort)]
    hang [(str "the child hung (no exit within " timeout-s " s): " hang)]
    :else
    (let [errors (filter #(contains? % "error") outcomes)
          expected (count (filter #(and (expects-error? %) (not (c/skipped-step? language %))) steps))]
      (concat
       (c/differences case outcomes language)
       (when (not= expected (count errors))
         [(str (count errors) " errors where the case expects " expected ": " (json/write-str outcomes))])
       (for [o errors
             :when (not (re-find fix-pattern (str (get o "message"))))]
         (str "the message of " (get o "error") " does not end in a fix: " (pr-str (get o "message"))))
       (for [o errors
             :let [foreign (re-find (other-language language) (str (get o "message")))]
             :when foreign]
         (str "the message of " (get o "error") " names " (pr-str foreign) ", a call of another"
              " language: " (pr-str (get o "message"))))))))

(defn- batches
  "The refusal cases split into `n` batches of about equal length, in order."
  [n]
  (let [rs (filter refusal? cases)]
    (partition-all (max 1 (long (Math/ceil (/ (count rs) n)))) rs)))

(defn run-matrix
  "Every case through each of `languages`, two child JVMs at a time (2 cores), the shared cases in
  two batches per language: {:runs [{:case :language :result :problems} in the cases' order]
  :probes [{:language :result :problems}] :seconds <wall time, compiling included>}."
  [languages]
  (let [pool (Executors/newFixedThreadPool 2)
        t0 (System/nanoTime)
        submit (fn [f] (.submit pool ^Callable f))]
    (try
      (let [classpath (compiled-classpath '[pyprof.conformance])
            batch-jobs (vec (for [language languages, batch (batches 2)]
                              [language batch (submit #(run-batch batch language classpath))]))
            own (into {} (for [case (remove refusal? cases), language languages]
                           [[(get case "name") language]
                            (submit #(run-case case language classpath))]))
            batched (into {} (for [[language batch fut] batch-jobs
                                   [case result] (map vector batch (first (.get ^java.util.concurrent.Future fut)))]
                               [[(get case "name") language] result]))
            result-of (fn [case language]
                        (let [k [(get case "name") language]]
                          (if-let [fut (own k)]
                            (.get ^java.util.concurrent.Future fut)
                            (let [r (batched k)]
                              (if (every? #(c/skipped-step? language %) (get case "steps"))
                                {:skipped (vec (distinct (map #(c/skip-reason language %) (get case "steps"))))}
                                r)))))
            runs (vec (for [case cases, language languages
                            :let [result (result-of case language)]]
                        {:case case :language language :result result
                         :problems (vec (problems case language result))}))
            probes (vec (for [[language _ fut] batch-jobs
                              :let [result (second (.get ^java.util.concurrent.Future fut))]]
                          {:language language :result result
                           :problems (vec (problems probe language result))}))]
        {:runs runs :probes probes :seconds (/ (- (System/nanoTime) t0) 1e9)})
      (finally (.shutdownNow pool) (.awaitTermination pool 10 TimeUnit/SECONDS)))))

(defn summary
  "The counts docs/performance.md reports, per language."
  [runs probes]
  (into (sorted-map)
        (for [[language rs] (group-by :language runs)
              :let [ran (remove #(:skipped (:result %)) rs)
                    outs (mapcat #(get-in % [:result :outcomes]) ran)
                    errs (filter #(contains? % "error") outs)]]
          [language
           {:cases (count rs)
            :ran (count ran)
            :child-processes (+ (count (remove :batch (map :result ran)))
                                (count (filter #(= language (:language %)) probes)))
            :skipped (count (filter #(:skipped (:result %)) rs))
            :errors-with-fix (count (filter #(re-find fix-pattern (str (get % "message"))) errs))
            ;; cases whose steps here expect no error and check a result (a trace read back)
            :right-results (count (filter #(let [steps (remove (partial c/skipped-step? language)
                                                               (get-in % [:case "steps"]))]
                                             (and (empty? (:problems %))
                                                  (not-any? expects-error? steps)
                                                  (some (fn [step] (some (get step "expect" {}) ["ok" "events"]))
                                                        steps)))
                                          ran))
            :steps-skipped (count (filter #(get % "skipped") outs))
            :aborts (count (filter #(:abort (:result %)) rs))
            :hangs (count (filter #(:hang (:result %)) rs))
            :known-bugs (count (filter #(get-in % [:case "known_bug"]) ran))}])))

(deftest every-misuse-case-ends-in-an-error-with-a-fix-or-its-right-result
  (let [{:keys [runs probes seconds]} (run-matrix ["clojure" "java"])]
    (doseq [{:keys [case language problems result]} runs
            :let [where (str (get case "name") " (" language ")")]]
      (testing where
        (if-let [bug (get case "known_bug")]
          (is (and (seq problems) (not (:abort result)) (not (:hang result)))
              (str where ": the known bug is fixed; remove known_bug from the case "
                                  "(tests/misuse/make_cases.py): " bug))
          (is (empty? problems) (str where ":\n" (str/join "\n" problems))))))
    (doseq [{:keys [language problems]} probes]
      (is (empty? problems)
          (str "after " language " cases in one child, " (get probe "name") ":\n"
               (str/join "\n" problems))))
    (let [counts (summary runs probes)]
      (println (format "misuse matrix (JVM): %d cases, %.0f s, two child JVMs at a time: %s"
                       (count cases) seconds (pr-str counts)))
      (is (<= 70 (count (filter refusal? cases))) "the cases batched are at least 70")
      (is (<= 50 (get-in counts ["clojure" :ran])) "at least 50 cases run through Clojure")
      (is (<= 50 (get-in counts ["java" :ran])) "at least 50 cases run through the Java facade"))))
