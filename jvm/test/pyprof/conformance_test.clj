(ns pyprof.conformance-test
  "The conformance suite, JVM side: every scenario of tests/conformance/scenarios runs through
  the Clojure API and through the Java facade, each in a child JVM, and must give the outcomes
  the scenario states (the Python reference gives them too: tests/test_conformance.py). Every
  public function of the Clojure API namespaces and of the Java facades must be called by some
  scenario."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.conformance :as c]))

(defn- run-all
  "Outcome differences of every scenario through `language`, two child JVMs at a time."
  [language]
  (let [files (c/scenario-files)
        results (->> files
                     (partition-all 2)
                     (mapcat (fn [pair] (mapv deref (mapv #(future [% (try (c/run-scenario % language)
                                                                           (catch Exception e e))])
                                                          pair)))))]
    (into {} (for [[f out] results]
               [(.getName ^java.io.File f)
                (if (instance? Exception out)
                  [(.getMessage ^Exception out)]
                  (vec (c/differences (c/load-json f) out language)))]))))

(deftest the-clojure-api-gives-each-scenarios-outcomes
  (doseq [[scenario diffs] (run-all "clojure")]
    (testing scenario
      (is (empty? diffs) (str scenario ":\n" (str/join "\n" diffs))))))

(deftest the-java-facade-gives-each-scenarios-outcomes
  (doseq [[scenario diffs] (run-all "java")]
    (testing scenario
      (is (empty? diffs) (str scenario ":\n" (str/join "\n" diffs))))))

(deftest every-public-clojure-function-is-covered-by-a-scenario
  (is (= [] (c/uncovered-clojure))
      "public functions no scenario calls: add a binding in tests/conformance/bindings.json and a step"))

(deftest every-public-java-method-is-covered-by-a-scenario
  (is (= [] (c/uncovered-java))
      "public methods no scenario calls: add a binding in tests/conformance/bindings.json and a step"))
