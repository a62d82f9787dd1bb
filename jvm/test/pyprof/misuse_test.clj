(ns pyprof.misuse-test
  "The misuse matrix, JVM side (issue 12; Python side: tests/test_misuse.py). Every case of
  tests/misuse/cases.json runs in its own child JVM through the Clojure API and, again in its
  own child JVM, through the Java facade (the conformance runner, pyprof.conformance; a step a
  language cannot express is skipped with its recorded why). Per case and language: the child
  exits 0 within the time limit (no abort, no hang), each step ends as the case says (the
  catalogue error, or the documented result; a trace step reads back the data collected before
  the misuse), and every error message ends in a fix. A case with \"known_bug\" must still fail
  (as Python's strict xfail), so that fixing the bug means updating the case."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.conformance :as c]
            [pyprof.test-util :refer [compiled-classpath temp-dir]])
  (:import (java.util.concurrent Callable Executors TimeUnit)))

(def cases (get (c/load-json (io/file (.getParentFile ^java.io.File c/suite-dir) "misuse" "cases.json"))
                "cases"))

(def fix-pattern
  "As tests/test_misuse.py: the message ends in a fix after a sentence's end."
  #"(?s)[.;)] fix: \S.*$")

(def ^:private timeout-s 120)

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
         (str "the message of " (get o "error") " does not end in a fix: " (pr-str (get o "message"))))))))

(defn run-matrix
  "Every case through each of `languages`, two child JVMs at a time (2 cores): {:runs [{:case
  :language :result :problems} in the cases' order] :seconds <wall time, compiling included>}."
  [languages]
  (let [pool (Executors/newFixedThreadPool 2)
        t0 (System/nanoTime)]
    (try
      (let [classpath (compiled-classpath '[pyprof.conformance])
            jobs (vec (for [case cases, language languages] [case language]))
            futures (mapv (fn [[case language]]
                            (.submit pool ^Callable (fn [] (run-case case language classpath))))
                          jobs)
            runs (mapv (fn [[case language] fut]
                         (let [result (.get ^java.util.concurrent.Future fut)]
                           {:case case :language language :result result
                            :problems (vec (problems case language result))}))
                       jobs futures)]
        {:runs runs :seconds (/ (- (System/nanoTime) t0) 1e9)})
      (finally (.shutdownNow pool) (.awaitTermination pool 10 TimeUnit/SECONDS)))))

(defn summary
  "The counts docs/performance.md reports, per language."
  [runs]
  (into (sorted-map)
        (for [[language rs] (group-by :language runs)
              :let [ran (remove #(:skipped (:result %)) rs)
                    outs (mapcat #(get-in % [:result :outcomes]) ran)
                    errs (filter #(contains? % "error") outs)]]
          [language
           {:cases (count rs)
            :child-processes (count ran)
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
  (let [{:keys [runs seconds]} (run-matrix ["clojure" "java"])]
    (doseq [{:keys [case language problems result]} runs
            :let [where (str (get case "name") " (" language ")")]]
      (testing where
        (if-let [bug (get case "known_bug")]
          (is (and (seq problems) (not (:abort result)) (not (:hang result)))
              (str where ": the known bug is fixed; remove known_bug from the case "
                                  "(tests/misuse/make_cases.py): " bug))
          (is (empty? problems) (str where ":\n" (str/join "\n" problems))))))
    (let [counts (summary runs)]
      (println (format "misuse matrix (JVM): %d cases, %.0f s, two child JVMs at a time: %s"
                       (count cases) seconds (pr-str counts)))
      (is (<= 50 (get-in counts ["clojure" :child-processes]))
          "at least 50 cases run in child JVMs through Clojure")
      (is (<= 50 (get-in counts ["java" :child-processes]))
          "at least 50 cases run in child JVMs through the Java facade"))))
