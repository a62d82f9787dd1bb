;; Maven Central as Leiningen itself names it (its first default repository), without Clojars.
(def central (first leiningen.core.project/default-repositories))

(defproject pyprof/pyprof-jvm "0.1.0-SNAPSHOT"
  :description "JVM binding (Java + Clojure) of pyprof, an operator-level profiler for Apache MXNet 1.9.1."
  :license {:name "Apache License 2.0" :url "https://www.apache.org/licenses/LICENSE-2.0"}
  :dependencies [[org.clojure/clojure "1.11.1"]
                 [net.java.dev.jna/jna "5.13.0"]
                 [org.clojure/data.json "2.4.0"]
                 [com.fasterxml.jackson.core/jackson-core "2.14.1"]]
  ;; Every dependency is on Maven Central, and the pom (`lein pom`, `lein install`) names Central
  ;; only: a consumer needs no other repository (^:replace drops Clojars; see :debian below).
  :repositories ~(with-meta [central] {:replace true}) ; ^:replace on the value
  :java-source-paths ["src/java"]
  :javac-options ["--release" "11" "-Xlint:all,-options,-path"]
  :source-paths ["src/clj"]
  ;; ../pyprof/spec puts the one spec of profiler keys on the classpath as profiler_config.json;
  ;; ../pyprof/native/c the C source of the window cut's byte work, cutter.c, shared with Python.
  :resource-paths ["resources" "../pyprof/spec" "../pyprof/native/c"]
  :test-paths ["test"]
  ;; No AOT and no :main: the library jar (`lein jar`, `lein install`) holds pyprof's Java classes,
  ;; its Clojure sources and the spec files, never compiled copies of its dependencies. The dot
  ;; example and the org.apache.clojure-mxnet namespaces live in ../examples/matmul.
  ;; A -Dmxnet.library.path given to Leiningen's JVM (JVM_OPTS / LEIN_JVM_OPTS) reaches the
  ;; project JVM too; MXNET_LIBRARY_PATH is inherited from the environment as is.
  :jvm-opts ~(cond-> ["-XX:-OmitStackTraceInFastThrow"]
               (System/getProperty "mxnet.library.path")
               (conj (str "-Dmxnet.library.path=" (System/getProperty "mxnet.library.path"))))
  ;; :dev (lein test, run, repl, classpath; never lein jar, pom or install, so none of it reaches
  ;; the jar or the pom):
  ;; - :debian, Debian's packaged artifacts (/usr/share/maven-repo): Leiningen's own tooling
  ;;   (nREPL, which its :base profile adds) is on Clojars only, which these machines cannot reach;
  ;; - :example, the example's MXNet (../examples/matmul: pyprof.example.*, pyprof.jvm.example.*,
  ;;   org.apache.clojure-mxnet.*) and its tools.cli, the workload of the tests here and of the
  ;;   JPype classpath (pyprof.jvm.classpath: `pyprof matmul --binding jvm`, the bridge tests).
  ;; Tests write their sessions' files in temporary directories: the Java session's output root
  ;; (pyprof.jvm.OutputRoot) is the temp directory there, passed on to child JVMs. target/aot
  ;; holds the namespaces compiled ahead of time by pyprof.jvm.classpath (scripts/setup.sh):
  ;; Clojure loads a class only when it is newer than its source.
  :profiles {:debian {:repositories ~(with-meta [central ["debian" {:url "file:///usr/share/maven-repo"
                                                           :checksum :ignore :snapshots false}]]
                                        {:replace true})}
             :example {:source-paths ["../examples/matmul/src"]
                       :java-source-paths ["../examples/matmul/java"]
                       :dependencies [[org.clojure/tools.cli "1.0.194"]]}
             :dev [:debian :example]
             :test {:jvm-opts [~(str "-Dpyprof.outputRoot=" (System/getProperty "java.io.tmpdir"))]
                    :resource-paths ["target/aot"]}})
