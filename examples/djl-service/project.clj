;; Maven Central as Leiningen itself names it (its first default repository), without Clojars.
(def central (first leiningen.core.project/default-repositories))

(defproject djl-service "0.1.0-SNAPSHOT"
  :description "A JVM service on DJL's MXNet engine, profiled over JMX by pyprof"
  :dependencies [[org.clojure/clojure "1.11.1"]
                 [org.clojure/data.json "2.4.0"]
                 [org.clojure/tools.cli "1.0.194"]
                 [com.fasterxml.jackson.core/jackson-core "2.14.1"]
                 [ai.djl/api "0.36.0"]
                 [ai.djl.mxnet/mxnet-engine "0.36.0"]
                 [org.slf4j/slf4j-simple "2.0.17"]]
  ;; Maven Central only (no Clojars): DJL, Clojure and pyprof's other dependencies are all there.
  :repositories ~(with-meta [central] {:replace true}) ; ^:replace on the value
  :source-paths ["../../jvm/src/clj"]
  :java-source-paths ["src/java" "../../jvm/src/java"]
  :javac-options ["--release" "11" "-Xlint:all,-options,-path"]
  :resource-paths ["../../pyprof/spec" "../../pyprof/native/c"]
  :main ^:skip-aot pyprof.example.djl.Service
  ;; `lein stress -- --cycles 50`: the JMX client that cycles start/step/stop (Stress.java)
  :aliases {"stress" ["run" "-m" "pyprof.example.djl.Stress"]}
  ;; Leiningen's :base profile adds nREPL (for `lein repl`), which is on Clojars only: this
  ;; project's :base leaves it out, so every dependency resolves from Central.
  :profiles {:base {}})
