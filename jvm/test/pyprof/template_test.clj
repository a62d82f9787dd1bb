(ns pyprof.template-test
  "Window-path templates and paths by pyprof/spec/grammar.json: the case tables Python runs too
  (tests/grammar/*.json), the session errors, and real windows written in a child JVM."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.output :as output]
            [pyprof.example.ndarray :as nd]
            [pyprof.profiler :as profiler]
            [pyprof.session :as session]
            [pyprof.session.template :as template]
            [pyprof.test-util :refer [java-child temp-dir]])
  (:import (pyprof.jvm ProfilerSession PyprofException)))

(defn- cases [file]
  (get (json/read-str (slurp (io/file ".." "tests" "grammar" file))) "cases"))

(defn- outcome [text fields]
  (try (template/fill (template/parse text) fields)
       (catch clojure.lang.ExceptionInfo e
         (let [d (ex-data e)]
           (is (= :invalid-option (:pyprof/error d)))
           (is (str/includes? (ex-message e) " fix: "))
           [(:pyprof/code d) (:position d)]))))

(deftest the-case-table-python-runs-too
  (let [all (cases "window_path_cases.json")]
    (is (< 40 (count all)))
    (doseq [{:strs [template fields expect error position]} all]
      (is (= (if error [error position] expect) (outcome template fields)) template))))

(deftest the-canonical-table-python-runs-too
  (doseq [{:strs [template canonical]} (cases "window_path_canonical.json")]
    (is (= canonical (template/canonical (template/parse template))) template)))

(deftest the-example-of-issue-20
  (is (= "w_00.json" (template/fill (template/parse "w_{window:02d}.json") {"window" 0})))
  (is (= "a{b}/c" (template/fill (template/parse (str (template/escape "a{b}") "/c")) {}))))

(deftest template-errors-name-the-place-and-the-fix
  (let [e (try (template/parse "w_{windw}.json") (catch clojure.lang.ExceptionInfo e e))]
    (is (= (str "window path \"w_{windw}.json\" names the field \"windw\" at index 2, which a window"
                " path does not have. fix: use only the fields {window}, {step} or {pid}; write a"
                " literal brace as {{ or }}")
           (ex-message e)))))

(deftest paths-by-the-rule-python-runs-too
  (let [cwd (System/getProperty "user.dir")
        at-cwd #(some-> ^String % (str/replace "$CWD" cwd))]
    (doseq [{:strs [path absolute directory]} (cases "path_cases.json")]
      (is (= (at-cwd absolute) (output/abspath path)) path)
      (when directory
        (is (= (at-cwd directory) (output/parent-directory path)) path)))))

(deftest a-session-refuses-a-bad-template-when-made
  (doseq [[path code] [["w_{windw}.json" "template.unknown_field"]
                       ["w_{window:>3}.json" "template.bad_spec"]
                       ["w_{window.json" "template.unbalanced"]]]
    (is (= code (:pyprof/code (ex-data (try (session/profile {:path path}) nil
                                            (catch clojure.lang.ExceptionInfo e e))))))
    (let [e (try (ProfilerSession. {"path" path}) nil (catch PyprofException e e))]
      (is (= [code "invalid-option"] [(.code e) (.kind e)]))
      (is (re-find #"^window path \"w_.* fix: .*\{window" (.getMessage e)) "the Java message too")))
  (is (= "session.path_needs_window"
         (:pyprof/code (ex-data (try (session/profile {:schedule (session/schedule {:active 1 :repeat 2})
                                                        :path "w_{{window}}.json"})
                                     nil (catch clojure.lang.ExceptionInfo e e)))))
      "an escaped {{window}} is no window field"))

(defn child-windows
  "Run in a child JVM: windows of a Clojure session and of a Java session whose output root has
  braces in its name."
  [dir]
  (let [work #(with-open [a (nd/random-uniform -1 1 [8 8])] (nd/wait-to-read a))
        ws (session/with-session [s {:schedule (session/schedule {:active 1 :repeat 2})
                                     :path (str dir "/w_{window:02d}.json")}]
             (dotimes [_ 3] (work) (session/step! s))
             (session/windows s))
        root (io/file dir "r{oot}")
        _ (.mkdirs root)
        java (ProfilerSession. {"path" "j_{window:03d}_{{x}}.json"} (str root))]
    (prn (mapv :path ws))
    (.start java)
    (work)
    (prn (vec (.dump java)))
    (.close java)))

(deftest windows-are-named-by-the-template
  (let [dir (str (.getCanonicalFile (temp-dir)))
        {:keys [exit out err]} (java-child ["-e" (str "(require 'pyprof.template-test)"
                                                       "(pyprof.template-test/child-windows \"" dir "\")")])
        [clj java] (mapv read-string (str/split-lines out))]
    (is (= 0 exit) err)
    (is (= [(str dir "/w_00.json") (str dir "/w_01.json")] clj))
    (is (= [(str dir "/r{oot}/j_000_{x}.json")] java))
    (doseq [p (concat clj java)]
      (is (.isFile (io/file p)) p))))

(defn child-same-file
  "Run in a child JVM: the trace file named again in another spelling while recording."
  [dir]
  (let [work #(with-open [a (nd/random-uniform -1 1 [8 8])] (nd/wait-to-read a))]
    (profiler/profiler-set-config {:filename (str dir "/a.json") :profile-imperative true})
    (profiler/profiler-set-state :run)
    (work)
    (profiler/dump-profile false)
    (profiler/profiler-set-config {:filename (str dir "/./a.json") :profile-imperative true})
    (work)
    (.mkdirs (io/file dir "sub")) ; the OS resolves sub/.. only through an existing sub
    (profiler/profiler-set-config {:filename (str dir "/sub/../a.json") :profile-imperative true})
    (work)
    (profiler/profiler-set-state :stop)
    (profiler/dump-profile)))

(deftest the-same-file-spelt-another-way-keeps-its-events
  (let [dir (str (.getCanonicalFile (temp-dir)))
        {:keys [exit err]} (java-child ["-e" (str "(require 'pyprof.template-test)"
                                                   "(pyprof.template-test/child-same-file \"" dir "\")")])
        events (get (json/read-str (slurp (io/file dir "a.json"))) "traceEvents")
        ops (frequencies (keep #(when (= "operator" (% "cat")) [(% "name") (% "ph")]) events))]
    (is (= 0 exit) err)
    (is (= 3 (ops ["_random_uniform" "B"])) "the events dumped before each config are kept")
    (is (= ["a.json" "sub"] (sort (map #(.getName ^java.io.File %) (.listFiles (io/file dir))))))))
