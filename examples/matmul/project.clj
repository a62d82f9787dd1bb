;; MXNet's Clojure profiler example (contrib/clojure-package/examples/profiler), unchanged, on
;; pyprof's JVM layer. It uses the jvm project straight from its sources (../../jvm), so
;; `lein run` and `lein test` work in a fresh clone with no install step.
(defproject profiler "0.1.0-SNAPSHOT"
  :description "MXNet's Clojure profiler example (profile a 4096x4096 dot) on pyprof"
  :dependencies [[org.clojure/clojure "1.11.1"]
                 [net.java.dev.jna/jna "5.13.0"]
                 [org.clojure/data.json "2.4.0"]
                 [org.clojure/tools.cli "1.0.194"]]
  :repositories [["debian" {:url "file:///usr/share/maven-repo" :checksum :ignore :snapshots false}]]
  :source-paths ["src" "../../jvm/src/clj"]
  :java-source-paths ["../../jvm/src/java"]
  :javac-options ["--release" "11" "-Xlint:all,-options,-path"]
  :resource-paths ["../../pyprof/spec"]
  :test-paths ["test"]
  :jvm-opts ~(cond-> ["-XX:-OmitStackTraceInFastThrow"]
               (System/getProperty "mxnet.library.path")
               (conj (str "-Dmxnet.library.path=" (System/getProperty "mxnet.library.path"))))
  :main profiler.core
  :profiles {:uberjar {:aot [profiler.core] :target-path "target/uberjar"}})
