(ns pyprof.config-test
  (:require [clojure.data.json :as json]
            [clojure.string :as str]
            [clojure.test :refer [deftest is are testing]]
            [pyprof.config :as config]
            [pyprof.output :as output]
            [pyprof.steady]
            [pyprof.test-util :refer [python-json]]))

(defn- error [options]
  (try (config/validate options) nil
       (catch clojure.lang.ExceptionInfo e {:message (ex-message e) :data (ex-data e)})))

(defn- outcome
  "The C string `config/validate` gives for `value` under the C key `k`, or the catalogue code of
  its error as a keyword (config.bad_value -> :bad-value)."
  [k value]
  (try (get (config/validate {k value}) k)
       (catch clojure.lang.ExceptionInfo e
         (keyword (str/replace (second (str/split (:pyprof/code (ex-data e)) #"\.")) "_" "-")))))

(def ^:private python-cases
  "[C key, value, what pyprof.config (Python) makes of it]: a C string, or the code of its error.
  Values that JSON carries to Python unchanged, so `python-and-jvm-agree` checks the table
  against the Python reference itself. Run in jvm/ (a relative filename is checked there)."
  [
   ["profile_api" true "true"]
   ["profile_api" false "false"]
   ["profile_api" 0 "false"]
   ["profile_api" 1 "true"]
   ["profile_api" 2 :bad-value]
   ["profile_api" -1 :bad-value]
   ["profile_api" 1.0 :bad-value]
   ["profile_api" 0.0 :bad-value]
   ["profile_api" 100000000000000000000000000000N :bad-value]
   ["profile_api" "true" "true"]
   ["profile_api" "TRUE" "true"]
   ["profile_api" " False " "false"]
   ["profile_api" "1" "true"]
   ["profile_api" "0" "false"]
   ["profile_api" " 1\n" "true"]
   ["profile_api" "01" :bad-value]
   ["profile_api" "yes" :bad-value]
   ["profile_api" "" :bad-value]
   ["profile_api" " " :bad-value]
   ["profile_api" "t" :bad-value]
   ["profile_api" "\u00a0true\u2003" :bad-value] ; only ASCII whitespace is trimmed
   ["profile_api" "\u0085true\u3000" :bad-value]
   ["profile_api" "\u200btrue" :bad-value]
   ["profile_api" "\u001ctrue\u001f" :bad-value]
   ["profile_api" "\t\u000btrue\f\r" "true"]
   ["profile_api" "\u017f" :bad-value]
   ["profile_api" "fal\u017fe" :bad-value] ; long s: case is ASCII only
   ["profile_api" "tRuE" "true"]
   ["profile_api" nil :bad-value]
   ["profile_api" [] :bad-value]
   ["profile_api" {} :bad-value]
   ["dump_period" 1 "1"]
   ["dump_period" 0 :bad-value]
   ["dump_period" -1 :bad-value]
   ["dump_period" 0.5 "0.5"]
   ["dump_period" 1e-05 "0.00001"]
   ["dump_period" 100000000.0 :bad-value]
   ["dump_period" 1e+22 :bad-value]
   ["dump_period" 1e-300 (str "0." (str/join (repeat 299 \0)) "1")]
   ["dump_period" 5e-324 (str "0." (str/join (repeat 323 \0)) "5")]
   ["dump_period" 2.82879384806159e+17 :bad-value]
   ["dump_period" 0.1 "0.1"]
   ["dump_period" 60 "60"] ; at most 60 s (profiler_config.json max_inclusive)
   ["dump_period" "6e1" "60"]
   ["dump_period" 60.00000000000001 :bad-value]
   ["dump_period" 59.99999999999999 "59.99999999999999"]
   ["dump_period" "12.345678901234567" "12.345678901234567"]
   ["dump_period" 9007199254740993 :bad-value]
   ["dump_period" 100000000000000000000N :bad-value]
   ["dump_period" "1" "1"]
   ["dump_period" "1.5" "1.5"]
   ["dump_period" " 2.5 " "2.5"]
   ["dump_period" "1_000" :bad-value] ; no underscores (grammar.json number)
   ["dump_period" "1__0" :bad-value]
   ["dump_period" "_1" :bad-value]
   ["dump_period" "1_" :bad-value]
   ["dump_period" "1_.5" :bad-value]
   ["dump_period" "1._5" :bad-value]
   ["dump_period" "1e1_0" :bad-value]
   ["dump_period" "1_0.5_5" :bad-value]
   ["dump_period" "1e3" :bad-value]
   ["dump_period" "1E-3" "0.001"]
   ["dump_period" ".5" "0.5"]
   ["dump_period" "5." "5"]
   ["dump_period" "5.e1" "50"]
   ["dump_period" "." :bad-value]
   ["dump_period" "e5" :bad-value]
   ["dump_period" "inf" :bad-value]
   ["dump_period" "-inf" :bad-value]
   ["dump_period" "nan" :bad-value]
   ["dump_period" "Infinity" :bad-value]
   ["dump_period" "1e400" :bad-value]
   ["dump_period" "0" :bad-value]
   ["dump_period" "-0" :bad-value]
   ["dump_period" "+1.5" "1.5"]
   ["dump_period" "\uff11.\uff15" :bad-value] ; ASCII digits only
   ["dump_period" "\u0661\u0662" :bad-value]
   ["dump_period" "\u00a01.5\u2029" :bad-value]
   ["dump_period" "\u000b1.5\f\n" "1.5"]
   ["dump_period" "1e-3" "0.001"]
   ["dump_period" "-1e-3" :bad-value]
   ["dump_period" "0.5e+1" "5"]
   ["dump_period" "00.50" "0.5"]
   ["dump_period" "0x10" :bad-value]
   ["dump_period" "1.5f" :bad-value]
   ["dump_period" "1.5d" :bad-value]
   ["dump_period" "" :bad-value]
   ["dump_period" " " :bad-value]
   ["dump_period" "1 000" :bad-value]
   ["dump_period" "--1" :bad-value]
   ["dump_period" "1e" :bad-value]
   ["dump_period" "1e+" :bad-value]
   ["dump_period" "0.000001" "0.000001"]
   ["dump_period" "123456789.123456789" :bad-value]
   ["dump_period" nil :bad-value]
   ["dump_period" true :bad-value]
   ["dump_period" false :bad-value]
   ["dump_period" [] :bad-value]
   ["filename" "t.json" "t.json"]
   ["filename" "" :bad-value]
   ["filename" " " " "]
   ["filename" "a\u0000b" :bad-path]
   ["filename" 1 :bad-value]
   ["filename" true :bad-value]
   ["filename" nil :bad-value]
   ["filename" "/" :bad-path]
   ["filename" "//x.json" "//x.json"]
   ["filename" "///x.json" "///x.json"]
   ["filename" "/tmp/../tmp/x.json" "/tmp/../tmp/x.json"]
   ["filename" "./x.json" "./x.json"]
   ["filename" "/nonexistent-pyprof/x.json" :missing-directory]
   ["filename" "nonexistent-pyprof/x.json" :missing-directory]
   ["filename" "nonexistent-pyprof/../x.json" "nonexistent-pyprof/../x.json"]
   ["filename" "src/" :bad-path]
   ["filename" "src//x.json" "src//x.json"]
   ["filename" "src/./x.json" "src/./x.json"]
   ["filename" "../../../../../../../../x.json" "../../../../../../../../x.json"]
   ["profile_process" "worker" "worker"]
   ["profile_process" "server" "server"]
   ["profile_process" "Worker" :bad-value]
   ["profile_process" " worker" :bad-value]
   ["profile_process" "" :bad-value]
   ["profile_process" 0 :bad-value]
   ["profile_process" nil :bad-value]
   ["profile_process" true :bad-value]])

(defn- expected-c
  "A case's expected C string: a filename made absolute against the working directory."
  [k expected]
  (if (and (= "filename" k) (string? expected)) (output/abspath expected) expected))

(deftest values-convert-as-in-python
  (doseq [[k v expected] python-cases]
    (is (= (expected-c k expected) (outcome k v)) (pr-str [k v]))))

(deftest python-and-jvm-agree
  (testing "the table above is what pyprof.config does (skipped without the repository's .venv)"
    (when-let [py (python-json (str "import json, sys\n"
                                    "from pyprof import config\n"
                                    "out = []\n"
                                    "for key, value in json.load(sys.stdin):\n"
                                    "    try:\n"
                                    "        out.append(config.validate({key: value})[key])\n"
                                    "    except Exception as e:\n"
                                    "        out.append(getattr(e, 'code', type(e).__name__))\n"
                                    "print(json.dumps(out))\n")
                               (mapv (fn [[k v]] [k v]) python-cases))]
      (doseq [[[k v expected] p] (map vector python-cases py)]
        (is (= (if (keyword? expected)
                 (str "config." (str/replace (name expected) "-" "_"))
                 (expected-c k expected))
               p)
            (pr-str [k v]))))))

(deftest clojure-values
  (testing "Clojure's own kinds of value: ratios, big numbers, keywords, files"
    (are [options c] (= c (config/validate options))
      {:dump-period 1/4} {"dump_period" "0.25"}
      {:dump-period 1/3} {"dump_period" "0.3333333333333333"}
      {:dump-period 2/3} {"dump_period" "0.6666666666666666"}
      {:dump-period 1.5M} {"dump_period" "1.5"}
      {:dump-period 10N} {"dump_period" "10"}
      {:dump-period (float 0.1)} {"dump_period" "0.10000000149011612"}
      {:dump-period (int 3)} {"dump_period" "3"}
      {:profile-api 1N} {"profile_api" "true"}
      {:profile-api (byte 0)} {"profile_api" "false"}
      {:profile-api :true} {"profile_api" "true"}
      {:profile-api (biginteger 1)} {"profile_api" "true"}
      ;; a filename made absolute against the working directory (grammar.json paths)
      {:filename (java.io.File. "t.json")} {"filename" (output/abspath "t.json")}
      {:filename (.toPath (java.io.File. "t.json"))} {"filename" (output/abspath "t.json")}
      {:filename :t.json} {"filename" (output/abspath "t.json")}
      {:profile-process :worker} {"profile_process" "worker"}
      {:profile-process 'server} {"profile_process" "server"}
      {:profile-process :ns/server} {"profile_process" "server"}
      {} {}))
  (testing "rejected as Python rejects their nearest Python values"
    (are [options] (= "config.bad_value" (:pyprof/code (:data (error options))))
      {:dump-period (/ 10000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000N 3)}
      {:dump-period \1}
      {:profile-api \1}
      {:profile-api 1.0M}
      {:profile-api 1/2}
      {:filename (.getBytes "t.json")}
      {:profile-process \w})))

(deftest spec-is-the-shared-file
  (testing "the classpath copy is ../pyprof/spec/profiler_config.json itself"
    (is (= (mapv #(get % "name") (get (json/read-str (slurp "../pyprof/spec/profiler_config.json")) "keys"))
           (config/key-names))))
  (is (= ["profile_all" "profile_symbolic" "profile_imperative" "profile_memory" "profile_api"
          "filename" "continuous_dump" "dump_period" "aggregate_stats" "profile_process"]
         (config/key-names))))

(deftest every-default-validates
  (doseq [{:keys [name default]} (config/spec)]
    (is (contains? (config/validate {name default}) name) name))
  (testing "the effective defaults are Python's C strings (dump_period 1.0 -> \"1\")"
    (is (= {"profile_all" "false" "profile_symbolic" "true" "profile_imperative" "true"
            "profile_memory" "true" "profile_api" "true" "filename" "profile.json"
            "continuous_dump" "true" "dump_period" "1" "aggregate_stats" "false"
            "profile_process" "worker"}
           (config/effective {})))
    (is (= "2.5" (get (config/effective {"dump_period" "2.5"}) "dump_period")))))

(deftest unknown-key-names-the-nearest
  (are [k nearest] (let [{:keys [message data]} (error {k true})
                         c-key (if (string? k) k (str/replace (name k) "-" "_"))]
                     (and (= :invalid-config (:pyprof/error data))
                          (= "config.unknown_key" (:pyprof/code data))
                          (= c-key (:key data))
                          (= k (:given data))
                          (= nearest (:nearest data))
                          (= (str/join ", " (config/key-names)) (:valid data))
                          (= (str "unknown profiler config key " (pr-str c-key) ": did you mean "
                                  (pr-str nearest) "? valid keys are " (:valid data) ". fix: use "
                                  ;; the fix spells the key as the caller does: :kebab-case or "c_name"
                                  (if (keyword? k) (keyword (str/replace nearest "_" "-")) (pr-str nearest))
                                  " (or another valid key; docs/configuration.md"
                                  " lists them)")
                             message)))
    :profile-symbolc "profile_symbolic"
    :profile-symbolics "profile_symbolic"
    :file-name "filename"
    "file_name" "filename"
    :aggregate-stat "aggregate_stats"
    :dump-perod "dump_period"
    :profile-imperativ "profile_imperative"
    :continous-dump "continuous_dump"
    :profile-alll "profile_all"))

(def ^:private nearest-cases
  ["profile_symbolc" "file_name" "x" "" "profile" "profile_" "dump" "aggregate" "memory"
   "continuous" "zzzzzzzzzzzzzzzzzzzzzzzz" "fi" "profile_api\ud83d\ude00\ud83d\ude00"
   "\ud83d\ude00profile_all" "PROFILE_ALL" "process" "profile-process"])

(deftest nearest-key-as-python
  (testing "ties go to the earlier key in the spec; characters are code points"
    (is (= ["profile_symbolic" "filename" "filename" "filename" "profile_all" "profile_all"
            "filename" "filename" "filename" "continuous_dump" "profile_all" "filename"
            "profile_api" "profile_all" "profile_all" "profile_all" "profile_process"]
           (mapv config/nearest-key nearest-cases))))
  (when-let [py (python-json (str "import json, sys\nfrom pyprof import config\n"
                                  "print(json.dumps([config.nearest_key(k) for k in json.load(sys.stdin)]))")
                             nearest-cases)]
    (is (= py (mapv config/nearest-key nearest-cases)))))

(deftest bad-values-name-key-value-and-what-is-accepted
  (are [options k accepted] (let [{:keys [message data]} (error options)
                                  v (val (first options))]
                              (and (= :invalid-config (:pyprof/error data))
                                   (= "config.bad_value" (:pyprof/code data))
                                   (= k (:key data))
                                   (= v (:value data))
                                   (= accepted (:accepted data))
                                   (= (str "invalid value "
                                           (pr-str (if (keyword? v) (name v) v))
                                           " for profiler config key " (pr-str k) ": expected "
                                           accepted ". fix: pass a value of that form"
                                           " (docs/configuration.md lists every key and what it"
                                           " takes)")
                                      message)))
    {:profile-symbolic "yes"} "profile_symbolic" "true/false, 1/0, or the strings \"true\"/\"false\"/\"1\"/\"0\" (any case)"
    {:profile-symbolic 2} "profile_symbolic" "true/false, 1/0, or the strings \"true\"/\"false\"/\"1\"/\"0\" (any case)"
    {:profile-symbolic nil} "profile_symbolic" "true/false, 1/0, or the strings \"true\"/\"false\"/\"1\"/\"0\" (any case)"
    {:aggregate-stats 1.0} "aggregate_stats" "true/false, 1/0, or the strings \"true\"/\"false\"/\"1\"/\"0\" (any case)"
    {:dump-period 0} "dump_period" "a number > 0 and <= 60 s (a number, or a decimal string such as \"0.5\" or \"2e-3\")"
    {:dump-period -1.5} "dump_period" "a number > 0 and <= 60 s (a number, or a decimal string such as \"0.5\" or \"2e-3\")"
    {:dump-period "one"} "dump_period" "a number > 0 and <= 60 s (a number, or a decimal string such as \"0.5\" or \"2e-3\")"
    {:dump-period ##Inf} "dump_period" "a number > 0 and <= 60 s (a number, or a decimal string such as \"0.5\" or \"2e-3\")"
    {:dump-period true} "dump_period" "a number > 0 and <= 60 s (a number, or a decimal string such as \"0.5\" or \"2e-3\")"
    {:filename ""} "filename" "a non-empty string (a file path)"
    {:filename 42} "filename" "a non-empty string (a file path)"
    {:profile-process "Server"} "profile_process" "one of \"worker\", \"server\""
    {:profile-process :client} "profile_process" "one of \"worker\", \"server\""))

(deftest nan-is-not-a-number-of-seconds
  (is (= (str "invalid value ##NaN for profiler config key \"dump_period\": expected a number > 0 and <= 60 s (a number, or"
              " a decimal string such as \"0.5\" or \"2e-3\")."
              " fix: pass a value of that form (docs/configuration.md lists every key and what it"
              " takes)")
         (:message (error {:dump-period ##NaN})))))

(deftest a-vector-value-shows-as-the-vector
  (is (str/starts-with? (:message (error {:filename ["a" "b"]}))
                        "invalid value [\"a\" \"b\"] for profiler config key \"filename\"")))

(deftest other-mistakes
  (let [{:keys [message data]} (error {:profile-all true "profile_all" false})]
    (is (= "config.duplicate_key" (:pyprof/code data)))
    (is (= "profile_all" (:key data)))
    (is (str/starts-with? message "profiler config key profile_all given twice. fix: give each key once")))
  (let [{:keys [message data]} (error [[:profile-all true]])]
    (is (= {:pyprof/error :invalid-config :pyprof/code "config.not_a_map" :value [[:profile-all true]]}
           (select-keys data [:pyprof/error :pyprof/code :value])))
    (is (= (str "profiler config must be a map, got [[:profile-all true]]. fix: pass a map of keys"
                " to values, e.g. (profiler-set-config {...})")
           message)))
  (let [{:keys [message data]} (error {42 true})]
    (is (= {:pyprof/code "config.bad_key_type" :key 42} (select-keys data [:pyprof/code :key])))
    (is (str/starts-with? message "profiler config key must be a keyword or string, got 42."))))

(deftest edit-distance
  (are [a b d] (= d (config/edit-distance a b))
    "" "" 0
    "abc" "" 3
    "" "abc" 3
    "kitten" "sitting" 3
    "profile_symbolc" "profile_symbolic" 1
    "\ud83d\ude00" "" 1
    "a\ud83d\ude00b" "ab" 1))

(deftest file-keys-need-an-existing-directory
  (let [dir (.toFile (java.nio.file.Files/createTempDirectory
                      "pyprof-config" (make-array java.nio.file.attribute.FileAttribute 0)))
        missing (str dir "/no/such/dir")
        v (str missing "/t.json")]
    (testing "the spec marks filename as a file"
      (is (true? (:file (first (filter #(= "filename" (:name %)) (config/spec)))))))
    (testing "a directory that does not exist: MXNet would silently write nothing"
      (let [{:keys [message data]} (error {:filename v})]
        (is (= (str "invalid value \"" v "\" for profiler config key \"filename\": directory \""
                    missing "\" does not exist. fix: create it first (MXNet would silently write"
                    " no trace)")
               message))
        (is (= {:pyprof/error :invalid-config :pyprof/code "config.missing_directory"
                :key "filename" :given :filename :value v :directory missing}
               (select-keys data [:pyprof/error :pyprof/code :key :given :value :directory])))))
    (testing "relative paths are checked against the absolute path (grammar.json paths)"
      (is (= missing (:directory (:data (error {"filename" (str missing "/../dir/t.json")}))))
          "normalised: no/such/dir/../dir is still missing")
      (is (= {"filename" (output/abspath "t.json")} (config/validate {:filename "t.json"})) "the working directory")
      (is (= {"filename" (str dir "/a.json")} (config/validate {:filename (str dir "/a.json")})))
      (is (= {"filename" (str dir "/a.json")}
             (config/validate {:filename (java.io.File. (str dir "/a.json"))}))))
    (testing "it exists once created"
      (.mkdirs (java.io.File. missing))
      (is (= {"filename" v} (config/validate {:filename v}))))))

(deftest unknown-key-fix-spells-the-key-as-the-caller-writes-keys
  (let [message (fn [m] (try (config/validate m) nil
                             (catch clojure.lang.ExceptionInfo e (.getMessage e))))]
    (is (str/includes? (message {:profile-symbolc true})
                       "did you mean \"profile_symbolic\"? valid keys are"))
    (is (str/ends-with? (message {:profile-symbolc true})
                        "fix: use :profile-symbolic (or another valid key; docs/configuration.md lists them)"))
    (is (str/includes? (message {"profile_symbolc" true}) "fix: use \"profile_symbolic\" (or another"))))

(deftest steady-mode-reads-filename-spelt-as-any-config-key
  ;; a "filename" key was dropped: steady mode recorded into the raw trace, not the user's file
  (let [split #'pyprof.steady/split-filename]
    (is (= ["/tmp/s.json" {"profile_api" true}] (split {"filename" "/tmp/s.json" "profile_api" true})))
    (is (= ["/tmp/s.json" {:profile-api true}] (split {:filename "/tmp/s.json" :profile-api true})))
    (is (= [nil {}] (split {})))
    (is (= "config.duplicate_key"
           (try (split {:filename "a.json" "filename" "b.json"}) nil
                (catch clojure.lang.ExceptionInfo e (:pyprof/code (ex-data e))))))))
