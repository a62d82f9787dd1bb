(ns pyprof.util-test
  (:require [clojure.test :refer [deftest is are testing]]
            [pyprof.test-util :refer [python-json]]
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

(deftest key->c-rejects-what-c-cannot-take
  (let [e (is (thrown? clojure.lang.ExceptionInfo (util/key->c 42)))]
    (is (= {:pyprof/error :invalid-config :pyprof/code "config.bad_key_type" :key 42}
           (select-keys (ex-data e) [:pyprof/error :pyprof/code :key])))
    (is (= (str "profiler config key must be a keyword or string, got 42. fix: use a keyword such"
                " as :profile-api or a string such as \"profile_api\"")
           (ex-message e)))))

(deftest c-float-is-the-shortest-plain-decimal
  (testing "the plain shortest decimal, trailing zeros dropped"
    (are [d s] (= s (util/c-float d))
      0.5 "0.5"
      1.0 "1"
      1e-5 "0.00001"
      1e8 "100000000"
      1e22 "10000000000000000000000"
      123.456 "123.456"
      -2.5 "-2.5"
      0.0 "0"
      -0.0 "-0"
      0.1 "0.1"
      (+ 0.1 0.2) "0.30000000000000004"
      5e-324 (str "0." (apply str (repeat 323 \0)) "5")
      Double/MAX_VALUE (str "17976931348623157" (apply str (repeat 292 \0)))))
  (testing "where Double/toString before JDK 19 is not the shortest (2.82879384806159008E17,
            9.999999999999999E22)"
    (is (= "282879384806159000" (util/c-float 2.82879384806159E17)))
    (is (= "100000000000000000000000" (util/c-float 1e23))))
  (testing "random doubles of every magnitude, against pyprof.config.c_float"
    (let [r (java.util.Random. 7)
          ds (->> (concat (repeatedly 4000 #(Double/longBitsToDouble (.nextLong r)))
                          (repeatedly 1000 #(* (.nextDouble r) (Math/pow 10 (- (.nextInt r 30) 15))))
                          [Double/MIN_VALUE Double/MAX_VALUE Double/MIN_NORMAL 5e-324 1.18575755E-316])
                  (filter #(Double/isFinite %))
                  vec)]
      (when-let [py (python-json (str "import json, struct, sys\nfrom pyprof.config import c_float\n"
                                      "print(json.dumps([c_float(struct.unpack('>d', bytes.fromhex(h))[0])"
                                      " for h in json.load(sys.stdin)]))")
                                 (mapv #(format "%016x" (Double/doubleToRawLongBits %)) ds))]
        (is (= py (mapv util/c-float ds)))))))

(deftest numbers-by-the-grammar
  (testing "strings: grammar.json number, after trimming ASCII whitespace"
    (are [s d] (= d (util/number s))
      "1" 1.0
      " 2.5\n" 2.5
      "\u000b2.5\f\r\t" 2.5
      "+.5" 0.5
      "5." 5.0
      "-1e-3" -0.001
      "1E3" 1000.0
      "00.50" 0.5
      "1e400" nil
      "1_000.5" nil
      "1e1_0" nil
      "\uff11\uff12" nil
      "\u0661" nil
      "\u00a01\u2003" nil
      "-inf" nil
      "Infinity" nil
      "NaN" nil
      "0x10" nil
      "1.5f" nil
      "1.5d" nil
      "" nil
      "." nil
      "1 0" nil
      "\u200b1" nil))
  (testing "numbers of the language, booleans never"
    (are [v d] (= d (util/number v))
      1 1.0
      (int 3) 3.0
      9007199254740993 9007199254740992.0
      100000000000000000000N 1e20
      1/3 (/ 1.0 3.0)
      1.50M 1.5
      (float 1.5) 1.5
      ##Inf nil
      ##NaN nil
      (bigint (.pow (biginteger 10) 400)) nil
      true nil
      nil nil
      :x nil)))

(deftest booleans-by-the-grammar
  (are [v b] (= b (util/boolean-value v))
    true true
    false false
    1 true
    0 false
    1N true
    (short 0) false
    2 nil
    1.0 nil
    "TRUE" true
    " fAlSe\n" false
    "\t1\r" true
    "0" false
    "\u00a0true" nil
    "fal\u017fe" nil
    "yes" nil
    "" nil
    nil nil))

(deftest trim-is-ascii-whitespace-only
  (is (= "a b" (util/trim " \t\n\u000b\f\ra b\r ")))
  (is (= "\u00a0a\u3000" (util/trim "\u00a0a\u3000")))
  (is (= "" (util/trim " \t "))))
