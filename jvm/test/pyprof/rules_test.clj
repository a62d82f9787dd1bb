(ns pyprof.rules-test
  "pyprof.rules: the constants of api.json and the error catalogue errors.json, as the JVM layer
  reads them (the Python package reads the same files in pyprof/rules.py)."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is are testing]]
            [pyprof.rules :as rules]
            [pyprof.test-util :refer [python-json]])
  (:import (clojure.lang ExceptionInfo)
           (pyprof.jvm PyprofException)))

(def ^:private spec-dir (io/file ".." "pyprof" "spec"))

(deftest the-files-on-the-classpath-are-the-spec
  (is (= (json/read-str (slurp (io/file spec-dir "api.json"))) rules/api))
  (is (= (json/read-str (slurp (io/file spec-dir "errors.json"))) rules/catalogue)))

(deftest constants
  (is (= {"stop" 0 "run" 1} rules/states))
  (is (= {"worker" 0 "server" 1} rules/processes))
  (is (= {"table" 0 "json" 1} rules/dumps-formats))
  (is (= {"total" 0 "avg" 1 "min" 2 "max" 3 "count" 4} rules/dumps-sort-keys))
  (is (= ["stop" "run"] (rules/choices rules/states)))
  (is (= ["total" "avg" "min" "max" "count"] (rules/choices rules/dumps-sort-keys)))
  (is (= ["global" "process" "thread" "task" "marker"] rules/marker-scopes))
  (is (= "process" rules/default-marker-scope))
  (is (= {"reset" false "format" "table" "sort_by" "total" "ascending" false} rules/dumps-defaults))
  (is (= [127 ["\"" "\\"] 32 40]
         [rules/name-max-bytes rules/name-forbidden-chars rules/name-forbidden-below
          rules/name-shown-chars]))
  (is (= ["true" "false"] [rules/c-true rules/c-false]))
  (is (= {"1" "true" "0" "false"} (rules/config-values "bool_numbers"))))

(deftest choices-in-the-order-python-lists-them
  (testing "Python's list(table) is the file's order; clojure.data.json keeps no key order"
    (when-let [py (python-json (str "import json; from pyprof import rules; print(json.dumps("
                                    "[list(rules.STATES), list(rules.PROCESSES),"
                                    " list(rules.DUMPS_FORMATS), list(rules.DUMPS_SORT_KEYS),"
                                    " list(rules.MARKER_SCOPES)]))"))]
      (is (= py (conj (mapv rules/choices [rules/states rules/processes rules/dumps-formats
                                           rules/dumps-sort-keys])
                      rules/marker-scopes))))))

(deftest render-fills-templates
  (are [template fields out] (= out (rules/render template fields))
    "{a}" {:a "x"} "x"
    "{a!r}" {:a "x"} "\"x\""
    "{a!r}" {:a :server} "\"server\""
    "{a!r}" {:a 'server} "\"server\""
    "{a!r}" {:a nil} "nil"
    "{a!r}" {:a 1.5} "1.5"
    "{a}" {:a 18446744073709551615N} "18446744073709551615"
    "{a}" {:a ["x" :y 1]} "\"x\", \"y\", 1"
    "{a!r}" {:a ["x" 1]} "[\"x\" 1]"
    "{a} and {b!r}" {:a 1 :b "q"} "1 and \"q\""
    "no fields" {} "no fields"
    "{api.stop} first" {} "(profiler-set-state :stop) first")
  (is (= "Profiler.setState(\"stop\") first" (rules/render "{api.stop} first" {} "java")))
  (is (= "set_state('stop') first" (rules/render "{api.stop} first" {} "python")))
  (testing "a field the template needs is an error, as Python's KeyError"
    (is (thrown-with-msg? IllegalArgumentException #"needs field :b" (rules/render "{b}" {:a 1})))
    (is (thrown-with-msg? IllegalArgumentException #"no API name nope" (rules/render "{api.nope}" {})))))

(deftest error-builds-the-catalogue-exception
  (let [cause (RuntimeException. "c")
        e (rules/error "state.finished_run" {:trace "t.json"} cause)
        fix #(str "run the next session in a child JVM: nothing records again in this process (a"
                  " process that records only through " % ", whose windows share one trace"
                  " session, never finishes it)")]
    (is (instance? PyprofException e))
    (is (instance? ExceptionInfo e) "Clojure code catches it as any ex-info")
    (is (= (str "the profiler already wrote its finished trace (\"t.json\"); MXNet cannot record a"
                " second session in one process. fix: " (fix "pyprof.session"))
           (ex-message e)))
    (is (= {:pyprof/error :session-finished :pyprof/code "state.finished_run" :trace "t.json"
            :fix (fix "pyprof.session") :java-fix (fix "pyprof.jvm.ProfilerSession")}
           (ex-data e)))
    (is (identical? cause (ex-cause e)))
    (is (= "session-finished" (.kind e)))
    (is (= "state.finished_run" (.code e)))
    (testing "the Java phrasing, and back"
      (let [j (.inJava e)]
        (is (= (str "the profiler already wrote its finished trace (\"t.json\"); MXNet cannot"
                    " record a second session in one process. fix: " (fix "pyprof.jvm.ProfilerSession"))
               (ex-message j)))
        (is (= (ex-data e) (ex-data j)))
        (is (identical? cause (ex-cause j)))
        (is (= (vec (.getStackTrace e)) (vec (.getStackTrace j))))
        (is (= (ex-message e) (ex-message (.inClojure j))))
        (is (identical? j (.inJava j)) "already Java-phrased: itself")
        (is (identical? j (PyprofException/wrap j)))
        (is (= (ex-message j) (ex-message (PyprofException/wrap e))))))
    (is (= (str "pyprof.jvm.PyprofException: " (ex-message e)) (str e))))
  (is (= {:pyprof/error :invalid-state :pyprof/code "dumps.empty"}
         (select-keys (ex-data (rules/error "dumps.empty")) [:pyprof/error :pyprof/code])))
  (is (thrown-with-msg? IllegalArgumentException #"no error nope.nope" (rules/error "nope.nope"))))

(def ^:private placeholder #"\{(api\.)?([a-z_]+)(!r)?\}")

(defn- template-fields
  "The fields a template names (not {api.x})."
  [template]
  (set (for [[_ api? f] (re-seq placeholder template) :when (not api?)]
         (keyword f))))

(deftest every-catalogue-entry-renders-in-both-jvm-languages
  (doseq [[code {:strs [kind message fix] :as entry}] (rules/catalogue "errors")]
    (testing code
      (is (= #{"kind" "message" "fix"} (set (keys entry))))
      (is (contains? (rules/api "error_kinds") kind))
      (is (str/ends-with? message "."))
      (let [fields (zipmap (concat (template-fields message) (template-fields fix)) (repeat "v"))
            e (rules/error code fields)]
        (is (= (keyword kind) (:pyprof/error (ex-data e))))
        (is (str/ends-with? (ex-message e) (str ". fix: " (:fix (ex-data e)))) "its fix comes last")
        (is (str/ends-with? (ex-message (.inJava e)) (str ". fix: " (:java-fix (ex-data e)))))
        ;; API names may hold braces of their own (path "trace_{window}.json"): not placeholders
        (let [unfilled #(re-find placeholder (reduce (fn [m n] (str/replace m n ""))
                                                     % (mapcat vals (vals (rules/catalogue "api")))))]
          (is (not (unfilled (ex-message e))) "every placeholder filled")
          (is (not (unfilled (.getMessage (.inJava e))))))))))

(deftest every-api-name-is-spelled-in-every-language
  (doseq [[k names] (rules/catalogue "api")]
    ;; jmx: the JMX bean's options, where they differ from Java's (rules/render falls back)
    (is (contains? #{#{"python" "clojure" "java"} #{"python" "clojure" "java" "jmx"}} (set (keys names))) k))
  (let [used (set (for [s (tree-seq coll? #(if (map? %) (vals %) %)
                                    (select-keys rules/catalogue ["errors" "accepted"]))
                        :when (string? s)
                        [_ n] (re-seq #"\{api\.([a-z_]+)\}" s)]
                    n))]
    (is (every? (set (keys (rules/catalogue "api"))) used))))

(deftest every-code-the-jvm-layer-raises-is-in-the-catalogue
  (let [sources (concat (file-seq (io/file "src" "clj")) (file-seq (io/file "src" "java")))
        raised (set (for [^java.io.File f sources
                          :when (.isFile f)
                          [_ code] (re-seq #"(?:rules/error|catalogue\()\s*\"([a-z_]+\.[a-z_]+)\""
                                           (slurp f))]
                      code))]
    (is (< 30 (count raised)) "the scan finds the call sites")
    (is (empty? (remove (set (keys (rules/catalogue "errors"))) raised)))))

(deftest accepted-phrases
  (is (= "a number > 0 s (a number, or a decimal string such as \"0.5\" or \"2e-3\")"
         (rules/accepted "float_min" {:min "0" :unit "s"})))
  (is (= "one of \"worker\", \"server\"" (rules/accepted "enum" {:choices ["worker" "server"]})))
  (is (= "true/false, 1/0, or the strings \"true\"/\"false\"/\"1\"/\"0\" (any case)"
         (rules/accepted "bool" {}))))

(deftest a-control-character-in-a-clojure-literal-is-escaped
  ;; a new user's find: (domain "a\u0000b")'s message held a raw NUL (Java wrote \u0000,
  ;; Python '\x00'); the escapes are ones Clojure's reader reads back
  (let [shown (rules/render "{x!r}" {:x "a\u0000b\u001f\"c\\"})]
    (is (= "\"a\\u0000b\\u001f\\\"c\\\\\"" shown))
    (is (= "a\u0000b\u001f\"c\\" (read-string shown)))
    (is (= "\"é😀\"" (rules/render "{x!r}" {:x "é😀"})) "printable text stays as it is")))
