;; MXNet's Clojure profiler example (contrib/clojure-package/examples/profiler), unchanged, on
;; pyprof's JVM layer, with pyprof's own dot example (pyprof.example.matmul) and the minimal MXNet
;; both use (pyprof.example.*, pyprof.jvm.example.* in java/, and the retired package's
;; org.apache.clojure-mxnet.* namespaces): none of it is in the library jar. It uses the jvm
;; project straight from its sources (../../jvm), so `lein run` and `lein test` work in a fresh
;; clone with no install step. ../../jvm's :dev profile puts src/ and java/ on its classpath too
;; (its tests and pyprof.jvm.classpath use them as their workload).
(defproject profiler "0.1.0-SNAPSHOT"
  :description "MXNet's Clojure profiler example (profile a 4096x4096 dot) on pyprof"
  :dependencies [[org.clojure/clojure "1.11.1"]
                 [net.java.dev.jna/jna "5.13.0"]
                 [org.clojure/data.json "2.4.0"]
                 [org.clojure/tools.cli "1.0.194"]
                 [com.fasterxml.jackson.core/jackson-core "2.14.1"]]
  :repositories [["debian" {:url "file:///usr/share/maven-repo" :checksum :ignore :snapshots false}]]
  :source-paths ["src" "../../jvm/src/clj"]
  :java-source-paths ["java" "../../jvm/src/java"]
  :javac-options ["--release" "11" "-Xlint:all,-options,-path"]
  :resource-paths ["../../pyprof/spec" "../../pyprof/native/c"]
  :test-paths ["test"]
  :jvm-opts ~(cond-> ["-XX:-OmitStackTraceInFastThrow"]
               (System/getProperty "mxnet.library.path")
               (conj (str "-Dmxnet.library.path=" (System/getProperty "mxnet.library.path"))))
  ;; `lein run` is the seed's example; `lein run -m pyprof.example.matmul -- [options]` pyprof's.
  :main profiler.core
  ;; The tests' child JVMs (java-child) come from the jvm project's test helpers.
  :profiles {:uberjar {:aot [profiler.core pyprof.example.matmul] :target-path "target/uberjar"}
             :test {:source-paths ["../../jvm/test"]}})
