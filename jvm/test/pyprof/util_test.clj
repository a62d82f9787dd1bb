(ns pyprof.util-test
  (:require [clojure.test :refer [deftest is are testing]]
            [pyprof.util :as util]))

(deftest key->c-table
  (are [k c] (= c (util/key->c k))
    :profile-symbolic "profile_symbolic"
    :profile-all "profile_all"
    :aggregate-stats "aggregate_stats"
    :continuous-dump "continuous_dump"
    :dump-period "dump_period"
    :filename "filename"
    :profile_symbolic "profile_symbolic"
    :my.ns/profile-api "profile_api"
    ::profile-memory "profile_memory"
    'profile-process "profile_process"
    "profile_symbolic" "profile_symbolic"
    "profile-symbolic" "profile-symbolic"
    "Filename" "Filename"))

(deftest value->c-table
  (are [v c] (= c (util/value->c v))
    true "true"
    false "false"
    1 "1"
    0 "0"
    2.5 "2.5"
    0.001 "0.001"
    1/2 "0.5"
    (int 3) "3"
    (float 1.5) "1.5"
    "profile.json" "profile.json"
    "True" "True"
    "" ""
    :server "server"
    :worker "worker"
    :ns/server "server"
    'server "server"))

(deftest convert-config-table
  (is (= {"filename" "/tmp/p.json"
          "profile_symbolic" "true"
          "profile_imperative" "false"
          "dump_period" "0.5"
          "profile_process" "server"
          "aggregate_stats" "1"
          "continuous_dump" "True"}
         (util/convert-config {:filename "/tmp/p.json"
                               :profile-symbolic true
                               :profile-imperative false
                               :dump-period 0.5
                               :profile-process :server
                               "aggregate_stats" 1
                               :continuous-dump "True"})))
  (testing "the old binding's bug: a keyword value kept its colon"
    (is (not= ":server" (get (util/convert-config {:profile-process :server}) "profile_process"))))
  (is (= {} (util/convert-config {}))))

(deftest convert-config-rejects-what-c-cannot-take
  (is (= :invalid-config (:pyprof/error (ex-data (is (thrown? clojure.lang.ExceptionInfo
                                                              (util/convert-config {42 true})))))))
  (is (thrown-with-msg? clojure.lang.ExceptionInfo #"boolean, number, string or keyword"
                        (util/convert-config {:filename nil}))))
