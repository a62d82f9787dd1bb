(ns pyprof.native-test
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.native :as native]
            [pyprof.test-util :refer [java-child temp-dir]])
  (:import (pyprof.jvm LibMXNet MXNetException)))

(deftest loads-mxnet-1-9-1-once
  (let [path (native/load!)]
    (is (str/ends-with? path "libmxnet.so"))
    (is (.startsWith path "/") "loaded by absolute path")
    (is (identical? path (native/load!)))
    (is (= path (LibMXNet/loadedPath)))
    (is (= 10901 (native/version)))
    (is (= "1.9.1" (LibMXNet/versionString (native/version))))))

(deftest gpu-count-on-this-build
  (is (<= 0 (native/gpu-count))))

(defn- npe-length
  "Throws (and catches) a NullPointerException when `s` is nil: JIT-compiled code turns the null
  check into a SIGSEGV trap that the JVM's own signal handler must still receive."
  ^long [^String s]
  (try (.length s) (catch NullPointerException _ -1)))

(defn npe-loop
  "Calls `npe-length` n times on nil and non-nil strings; returns the sum of results."
  ^long [^long n]
  (loop [i 0, acc 0]
    (if (< i n)
      (recur (inc i) (+ acc (npe-length (when (odd? i) "ab"))))
      acc)))

(deftest jit-null-checks-survive-libmxnet
  (native/load!)
  (testing "in this JVM"
    (is (= (* 50000 (+ 2 -1)) (npe-loop 100000))))
  (testing "in a fresh JVM with full tiered compilation (C2), after loading libmxnet"
    (let [{:keys [exit out err]}
          (java-child ["-e" (str "(require 'pyprof.native 'pyprof.native-test)"
                                 "(do (pyprof.native/load!) nil)"
                                 "(println (pyprof.native-test/npe-loop 200000))")]
                      :jvm-args ["-XX:+TieredCompilation"])]
      (is (= 0 exit) err)
      (is (= "100000" (str/trim out))))))

(deftest load-failure-lists-paths-and-the-fix
  (let [missing (str (temp-dir) "/nowhere/libmxnet.so")
        {:keys [exit out err]}
        (java-child ["-e" (str "(require 'pyprof.native)"
                               "(try (pyprof.native/load!)"
                               " (catch pyprof.jvm.MXNetException e"
                               "  (println (.function e)) (println (.getMessage e))))")]
                    :jvm-args [(str "-Dmxnet.library.path=" missing)])]
    (is (= 0 exit) err)
    (is (str/starts-with? out "dlopen\ncannot load libmxnet.so; tried:"))
    (is (str/includes? out (str missing " (-Dmxnet.library.path): no such file")))
    (is (str/includes? out "fix: pip install 'mxnet==1.9.1'"))
    (is (str/includes? out "MXNET_LIBRARY_PATH"))))

(deftest exception-text-keeps-the-human-part
  (let [e (MXNetException. "MXFoo" "MXNetError: Check failed: x\nStack trace:\n  [bt] (0) lib.so")]
    (is (= "MXFoo failed: Check failed: x" (.getMessage e)))
    (is (= "MXFoo" (.function e)))
    (is (str/includes? (.mxnetMessage e) "[bt] (0)"))
    (is (= {:pyprof/error :mxnet :fn "MXFoo" :mxnet-error (.mxnetMessage e)} (ex-data e)))))
