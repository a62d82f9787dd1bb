(ns pyprof.output-test
  "Trace paths, as the Python reference checks them (tests/test_output_paths.py): refused at
  configuration with config.bad_path, a dump into a vanished directory refused with
  dump.unwritable while the events stay for another filename; lone surrogates in names."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.config :as config]
            [pyprof.output :as output]
            [pyprof.test-util :refer [java-child temp-dir]])
  (:import (pyprof.jvm PyprofException ProfileObject)))

(defn- refusal [f]
  (try (f) nil (catch PyprofException e [(:pyprof/code (ex-data e)) (ex-message e)])))

(deftest paths-mxnet-cannot-write-are-refused-at-configuration
  (let [dir (temp-dir)]
    (doseq [[path words] [[(str dir) "is a directory"]
                          ["/proc/pyprof-x.json" "no file can be created in directory \"/proc\" (No such file or directory)"]
                          ["/dev/null" "is not a regular file"]
                          [(str dir "/a\u0000b.json") "NUL character at character"]
                          [(str dir "/\udcff.json") "lone surrogate U+DCFF at character"]
                          ;; a file name over output_paths max_name_bytes (a probe's find)
                          [(str dir "/" (apply str (repeat 97 "\u00e9")) "xx.json")
                           "its file name is 201 bytes of UTF-8, more than the 200"]]]
      (testing path
        (let [[code message] (refusal #(config/validate {:filename path}))]
          (is (= "config.bad_path" code))
          (is (str/includes? (str message) words) message)
          (is (str/includes? (str message) " fix: ")))))
    (is (= [] (vec (.list dir))) "the probe left nothing behind")
    (is (= "config.missing_directory"
           (first (refusal #(config/validate {:filename (str dir "/no/t.json")})))))))

(deftest free-space-below-the-threshold-is-a-problem
  (let [dir (temp-dir)
        free (.getUsableSpace dir)]
    (is (str/includes? (:problem (output/file-problem (str dir "/t.json") (+ free (bit-shift-left 1 40))))
                       "bytes free, less than the"))
    (is (nil? (output/file-problem (str dir "/t.json") 0)))))

(deftest names-with-a-lone-surrogate-are-refused-as-in-python
  (let [[code message] (refusal #(ProfileObject/checkName "Domain" "d\udcff"))]
    (is (= "object.name_not_unicode" code))
    (is (str/includes? message "Domain name has a lone surrogate U+DCFF at character 1")))
  (is (= "a\uD83D\uDE00b" (ProfileObject/checkName "Domain" "a\uD83D\uDE00b")) "a pair is fine"))

(def ^:private dump-after-rmdir
  "(require '[pyprof.profiler :as p] '[pyprof.example.ndarray :as nd] '[clojure.java.io :as io])
   (.mkdir (io/file \"gone\"))
   (p/profiler-set-config {:filename \"gone/t.json\" :profile-imperative true :profile-api false
                           :profile-memory false :continuous-dump CD})
   (p/profiler-set-state :run)
   (dotimes [_ 3] (nd/wait-to-read (nd/random-uniform -1 1 [4 4])))
   (p/profiler-set-state :stop)
   ;; what MXNet's dump timer wrote there goes too (under load a run outlasts its 1 s period)
   (run! #(.delete ^java.io.File %) (.listFiles (io/file \"gone\")))
   (println \"gone removed:\" (.delete (io/file \"gone\")))
   (println (try (p/dump-profile) \"no error\"
                 (catch clojure.lang.ExceptionInfo e (str (:pyprof/code (ex-data e)) \" | \" (ex-message e)))))
   (p/profiler-set-config {:filename \"saved.json\" :profile-imperative true :profile-api false
                           :profile-memory false :continuous-dump CD})
   (p/dump-profile)
   (shutdown-agents)")

(deftest a-dump-into-a-removed-directory-is-an-error-and-the-events-survive
  (doseq [cd [true false]]
    (testing (str "continuous_dump " cd)
      (let [dir (temp-dir)
            {:keys [exit out err]} (java-child ["-e" (str/replace dump-after-rmdir "CD" (str cd))]
                                               :dir dir)]
        (is (zero? exit) err)
        (is (str/includes? out "gone removed: true") out)
        (is (str/includes? out (str "\ndump.unwritable | cannot dump the trace to \""
                                    (.getCanonicalPath (io/file dir "gone" "t.json")) "\"")) out)
        (is (str/includes? out "the events MXNet holds are kept"))
        (let [events ((json/read-str (slurp (io/file dir "saved.json"))) "traceEvents")]
          (is (= 3 (count (filter #(and (= "_random_uniform" (% "name")) (= "B" (% "ph"))) events)))))))))
