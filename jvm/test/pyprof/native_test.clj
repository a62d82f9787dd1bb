(ns pyprof.native-test
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.example.context :as context]
            [pyprof.native :as native]
            [pyprof.test-util :refer [fast-start-jvm-args java-child temp-dir]])
  (:import (pyprof.jvm MXNetException)
           (pyprof.jvm.capi LibMXNet)))

(deftest loads-mxnet-1-9-1-once
  (let [path (native/load!)]
    (is (str/ends-with? path "libmxnet.so"))
    (is (.startsWith path "/") "loaded by absolute path")
    (is (identical? path (native/load!)))
    (is (= path (LibMXNet/loadedPath)))
    (is (= 10901 (LibMXNet/version)))
    (is (= "1.9.1" (LibMXNet/versionString (LibMXNet/version))))))

(deftest gpu-count-on-this-build
  (is (<= 0 (context/gpu-count))))

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
                    :jvm-args (conj fast-start-jvm-args (str "-Dmxnet.library.path=" missing)))]
    (is (= 0 exit) err)
    (is (str/starts-with? out "dlopen\ncannot load libmxnet.so; tried:"))
    (is (str/includes? out (str missing " (-Dmxnet.library.path): no such file")))
    (is (str/includes? out "fix: pip install 'mxnet==1.9.1'"))
    (is (str/includes? out "MXNET_LIBRARY_PATH"))))

(deftest exception-text-keeps-the-human-part
  (let [e (MXNetException. "MXFoo" "MXNetError: Check failed: x\nStack trace:\n  [bt] (0) lib.so")]
    (is (str/starts-with? (.getMessage e) "MXFoo failed: Check failed: x\n  fix: "))
    (is (str/includes? (.getMessage e) "correct that call"))   ; the catalogue's mxnet.call_failed
    (is (= "MXFoo" (.function e)))
    (is (str/includes? (.mxnetMessage e) "[bt] (0)"))
    (is (= {:pyprof/error :mxnet :fn "MXFoo" :mxnet-error (.mxnetMessage e)} (ex-data e)))))

(defn- jar-of
  "Packs the directory `dir` into the jar file `jar`."
  [^java.io.File dir ^java.io.File jar]
  (.mkdirs (.getParentFile jar))
  (with-open [out (java.util.jar.JarOutputStream. (io/output-stream jar))]
    (doseq [^java.io.File f (file-seq dir) :when (.isFile f)]
      (.putNextEntry out (java.util.jar.JarEntry.
                          (str/replace (str (.relativize (.toPath dir) (.toPath f))) "\\" "/")))
      (io/copy f out)
      (.closeEntry out))))

(deftest finds-the-repository-venv-from-deep-directories
  (let [repo (.getCanonicalFile (io/file ".."))
        venv-lib (first (for [^java.io.File d (.listFiles (io/file repo ".venv" "lib"))
                              :let [f (io/file d "site-packages" "mxnet" "libmxnet.so")]
                              :when (and (str/starts-with? (.getName d) "python3") (.isFile f))]
                          (str f)))
        classes (first (filter #(str/ends-with? % "target/classes")
                               (str/split (System/getProperty "java.class.path") #":")))
        run (fn [& {:keys [dir classpath]}]
              (java-child ["-e" "(require 'pyprof.native) (println (pyprof.native/load!))"]
                          :dir dir :classpath classpath :inherit-library false
                          :env {"MXNET_LIBRARY_PATH" nil "PATH" "/nonexistent"}))]
    (if-not (and venv-lib classes)
      (println "skipped: no" (if venv-lib "target/classes on the classpath" "../.venv with mxnet"))
      (do
        (testing "the working directory 5 levels below the repository (jar outside it)"
          (let [deep (io/file classes ".." "pyprof-deep" "a" "b")
                jar (io/file (temp-dir) "x" "pyprof.jar")
                _ (.mkdirs deep)
                _ (jar-of (io/file classes) jar)
                cp (str/join ":" (map #(if (= % classes) (str jar) %)
                                      (str/split (System/getProperty "java.class.path") #":")))
                {:keys [exit out err]} (run :dir deep :classpath cp)]
            (is (= 0 exit) err)
            (is (= venv-lib (str/trim out)))))
        (testing "a jar 4 levels below the repository (examples/matmul/target/uberjar), run elsewhere"
          (let [jar (io/file classes ".." "pyprof-deep" "uberjar" "pyprof.jar")
                _ (jar-of (io/file classes) jar)
                cp (str/join ":" (map #(if (= % classes) (str (.getCanonicalFile jar)) %)
                                      (str/split (System/getProperty "java.class.path") #":")))
                {:keys [exit out err]} (run :dir (temp-dir) :classpath cp)]
            (is (= 0 exit) err)
            (is (= venv-lib (str/trim out)))))))))

(deftest no-public-native-entry-point-bypasses-the-gate
  (let [mods #(.getModifiers ^java.lang.reflect.Method %)
        public-natives (for [m (.getDeclaredMethods LibMXNet)
                             :when (and (java.lang.reflect.Modifier/isPublic (mods m))
                                        (java.lang.reflect.Modifier/isNative (mods m)))]
                         (.getName ^java.lang.reflect.Method m))
        natives (Class/forName "pyprof.jvm.capi.Natives")]
    (is (empty? public-natives) "LibMXNet's public methods are gated wrappers, not natives")
    (is (not (java.lang.reflect.Modifier/isPublic (.getModifiers natives)))
        "the raw JNA mapping is package-private")
    (is (every? #(not (java.lang.reflect.Modifier/isPublic (mods %))) (.getDeclaredMethods natives)))))
