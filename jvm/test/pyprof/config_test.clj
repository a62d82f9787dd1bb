(ns pyprof.config-test
  (:require [clojure.data.json :as json]
            [clojure.string :as str]
            [clojure.test :refer [deftest is are testing]]
            [pyprof.config :as config]))

(defn- error [options]
  (try (config/validate options) nil
       (catch clojure.lang.ExceptionInfo e {:message (ex-message e) :data (ex-data e)})))

(deftest spec-is-the-shared-file
  (testing "the classpath copy is ../pyprof/spec/profiler_config.json itself"
    (is (= (mapv #(get % "name") (get (json/read-str (slurp "../pyprof/spec/profiler_config.json")) "keys"))
           (config/key-names))))
  (is (= ["profile_all" "profile_symbolic" "profile_imperative" "profile_memory" "profile_api"
          "filename" "continuous_dump" "dump_period" "aggregate_stats" "profile_process"]
         (config/key-names))))

(deftest every-default-validates
  (doseq [{:keys [name default]} (config/spec)]
    (is (contains? (config/validate {name default}) name) name)))

(deftest accepted-values
  (are [options c] (= c (config/validate options))
    {:profile-symbolic true} {"profile_symbolic" "true"}
    {:profile-symbolic false} {"profile_symbolic" "false"}
    {:profile-symbolic 1} {"profile_symbolic" "true"}
    {:profile-symbolic 0} {"profile_symbolic" "false"}
    {:profile-symbolic "TRUE"} {"profile_symbolic" "true"}
    {:profile-symbolic " false "} {"profile_symbolic" "false"}
    {:profile-symbolic "1"} {"profile_symbolic" "true"}
    {"profile_api" "0"} {"profile_api" "false"}
    {:dump-period 2} {"dump_period" "2.0"}
    {:dump-period 0.25} {"dump_period" "0.25"}
    {:dump-period 1/4} {"dump_period" "0.25"}
    {:filename "/tmp/t.json"} {"filename" "/tmp/t.json"}
    {:filename (java.io.File. "t.json")} {"filename" "t.json"}
    {:profile-process :worker} {"profile_process" "worker"}
    {:profile-process "server"} {"profile_process" "server"}
    {} {}))

(deftest unknown-key-names-the-nearest
  (are [k nearest] (let [{:keys [message data]} (error {k true})]
                     (and (= :invalid-config (:pyprof/error data))
                          (= k (:key data))
                          (= nearest (:nearest data))
                          (= (config/key-names) (:valid data))
                          (str/includes? message (str "did you mean " (pr-str nearest)))
                          (every? #(str/includes? message %) (config/key-names))))
    :profile-symbolc "profile_symbolic"
    :profile-symbolics "profile_symbolic"
    :file-name "filename"
    "file_name" "filename"
    :aggregate-stat "aggregate_stats"
    :dump-perod "dump_period"
    :profile-imperativ "profile_imperative"
    :continous-dump "continuous_dump"
    :profile-alll "profile_all"))

(deftest bad-values-name-key-value-and-what-is-accepted
  (are [options k accepted-re] (let [{:keys [message data]} (error options)]
                                 (and (= :invalid-config (:pyprof/error data))
                                      (= k (:c-key data))
                                      (= (val (first options)) (:value data))
                                      (re-find accepted-re (:accepted data))
                                      (str/includes? message k)
                                      (str/includes? message (pr-str (val (first options))))))
    {:profile-symbolic "yes"} "profile_symbolic" #"true/false"
    {:profile-symbolic 2} "profile_symbolic" #"true/false"
    {:profile-symbolic ""} "profile_symbolic" #"true/false"
    {:profile-symbolic nil} "profile_symbolic" #"true/false"
    {:aggregate-stats 1.0} "aggregate_stats" #"true/false"
    {:dump-period 0} "dump_period" #"> 0"
    {:dump-period -1.5} "dump_period" #"> 0"
    {:dump-period "1"} "dump_period" #"a number"
    {:dump-period ##Inf} "dump_period" #"a number"
    {:dump-period true} "dump_period" #"a number"
    {:filename ""} "filename" #"non-empty string"
    {:filename 42} "filename" #"non-empty string"
    {:profile-process "Server"} "profile_process" #"\"worker\", \"server\""
    {:profile-process :client} "profile_process" #"\"worker\", \"server\""))

(deftest nan-is-not-a-number-of-seconds
  (is (re-find #"invalid value ##NaN for profiler config key :dump-period \(dump_period\): expected a number > 0.0 \(s\)"
               (:message (error {:dump-period ##NaN})))))

(deftest other-mistakes
  (is (re-find #"given twice" (:message (error {:profile-all true "profile_all" false}))))
  (is (re-find #"must be a map" (:message (error [[:profile-all true]])))))

(deftest edit-distance
  (are [a b d] (= d (config/edit-distance a b))
    "" "" 0
    "abc" "" 3
    "" "abc" 3
    "kitten" "sitting" 3
    "profile_symbolc" "profile_symbolic" 1))

(deftest file-keys-need-an-existing-directory
  (let [dir (.toFile (java.nio.file.Files/createTempDirectory
                      "pyprof-config" (make-array java.nio.file.attribute.FileAttribute 0)))
        missing (str dir "/no/such/dir")
        v (str missing "/t.json")]
    (testing "the spec marks filename as a file"
      (is (true? (:file (first (filter #(= "filename" (:name %)) (config/spec)))))))
    (testing "a directory that does not exist: MXNet would silently write nothing"
      (let [{:keys [message data]} (error {:filename v})]
        (is (= (str "invalid value \"" v "\" for profiler config key 'filename': directory '"
                    missing "' does not exist. fix: create it first (MXNet would silently write"
                    " no trace)")
               message))
        (is (= {:pyprof/error :invalid-config :key :filename :c-key "filename" :value v
                :directory missing}
               (select-keys data [:pyprof/error :key :c-key :value :directory])))))
    (testing "relative paths are checked against the absolute path (as Python's abspath)"
      (is (= missing (:directory (:data (error {"filename" (str missing "/../dir/t.json")}))))
          "normalised: no/such/dir/../dir is still missing")
      (is (= {"filename" "t.json"} (config/validate {:filename "t.json"})) "the working directory")
      (is (= {"filename" (str dir "/a.json")} (config/validate {:filename (str dir "/a.json")})))
      (is (= {"filename" (str dir "/a.json")}
             (config/validate {:filename (java.io.File. (str dir "/a.json"))}))))
    (testing "it exists once created"
      (.mkdirs (java.io.File. missing))
      (is (= {"filename" v} (config/validate {:filename v}))))))
