(defproject pyprof/pyprof-jvm "0.1.0-SNAPSHOT"
  :description "JVM binding (Java + Clojure) of pyprof, an operator-level profiler for Apache MXNet 1.9.1."
  :license {:name "Apache License 2.0" :url "https://www.apache.org/licenses/LICENSE-2.0"}
  :dependencies [[org.clojure/clojure "1.11.1"]
                 [net.java.dev.jna/jna "5.13.0"]
                 [org.clojure/data.json "2.4.0"]
                 [org.clojure/tools.cli "1.0.194"]
                 [com.fasterxml.jackson.core/jackson-core "2.14.1"]]
  ;; Debian's packaged artifacts (leiningen, clojure, libjna-java, ...). Elsewhere the same
  ;; coordinates resolve from the default repositories.
  :repositories [["debian" {:url "file:///usr/share/maven-repo" :checksum :ignore :snapshots false}]]
  :java-source-paths ["src/java"]
  :javac-options ["--release" "11" "-Xlint:all,-options,-path"]
  :source-paths ["src/clj"]
  ;; ../pyprof/spec puts the one spec of profiler keys on the classpath as profiler_config.json.
  :resource-paths ["resources" "../pyprof/spec"]
  :test-paths ["test"]
  ;; No AOT for the library jar (`lein jar`, `lein install`): it holds pyprof's Java classes, its
  ;; Clojure sources and the spec files, never compiled copies of its dependencies (AOT of the
  ;; :main namespace would compile clojure.data.json and tools.cli into it). Only the uberjar,
  ;; which bundles every dependency anyway, compiles pyprof.example.matmul for `java -jar`.
  :main ^:skip-aot pyprof.example.matmul
  ;; A -Dmxnet.library.path given to Leiningen's JVM (JVM_OPTS / LEIN_JVM_OPTS) reaches the
  ;; project JVM too; MXNET_LIBRARY_PATH is inherited from the environment as is.
  :jvm-opts ~(cond-> ["-XX:-OmitStackTraceInFastThrow"]
               (System/getProperty "mxnet.library.path")
               (conj (str "-Dmxnet.library.path=" (System/getProperty "mxnet.library.path"))))
  ;; Tests write their sessions' files in temporary directories: the Java session's output root
  ;; (pyprof.jvm.OutputRoot) is the temp directory there, passed on to child JVMs. target/aot
  ;; holds the namespaces compiled ahead of time by pyprof.jvm.classpath (scripts/setup.sh):
  ;; Clojure loads a class only when it is newer than its source.
  :profiles {:uberjar {:aot [pyprof.example.matmul] :target-path "target/uberjar"}
             :test {:jvm-opts [~(str "-Dpyprof.outputRoot=" (System/getProperty "java.io.tmpdir"))]
                    :resource-paths ["target/aot"]}})
