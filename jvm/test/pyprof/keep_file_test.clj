(ns pyprof.keep-file-test
  "A config without :filename once the profiler has run keeps the file (api.json keep_filename)
  and loses none of the events already dumped into it, as the Python reference
  (tests/test_keep_filename.py): real MXNet, each scenario in its own child JVM."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.test-util :refer [java-child side-by-side temp-dir]]))

(def ^:private body
  "(require '[pyprof.profiler :as p] '[pyprof.example.ndarray :as nd] '[clojure.java.io :as io])
   (defn work [n] (dotimes [_ n] (let [a (nd/random-uniform -1 1 [4 4])] (nd/wait-to-read a) (nd/close a))))
   (p/profiler-set-config {:filename \"t.json\" :profile-imperative true :profile-api false
                           :profile-memory false :continuous-dump CD :dump-period 0.1})
   (p/profiler-set-state :run)
   (work 3)
   (Thread/sleep 300)
   (when MIDDUMP ; continuous dump off: refused (MXNet would close the file for good)
     (println \"middump\" (try (p/dump-profile false) :dumped
                               (catch clojure.lang.ExceptionInfo e (:pyprof/code (ex-data e))))))
   (println \"sent\" (get (p/profiler-set-config {:profile-api true :continuous-dump CD :dump-period 0.1}) \"filename\"))
   (work 4)
   (Thread/sleep 300)
   (when TWICE (p/profiler-set-config {:profile-api true :continuous-dump CD :dump-period 0.1}) (work 5))
   (println \"during\" (pr-str (sort (.list (io/file \".\")))))
   (when FINISH (p/profiler-set-state :stop) (p/dump-profile))
   (shutdown-agents)")

(defn- ops [^java.io.File f]
  (let [events (get (json/read-str (slurp f)) "traceEvents")]
    {:uniform (count (filter #(and (= "_random_uniform" (% "name")) (= "B" (% "ph"))) events))
     :api (boolean (some #(= "MXNET_C_API" (% "cat")) events))
     :process-names (boolean (some #(= "process_name" (% "name")) events))}))

(deftest a-config-without-filename-keeps-every-event
  ;; each case a child JVM that mostly sleeps and waits for MXNet's dump timer: run side by side
  (let [cases (for [cd [true false]
                    [label middump twice finish] [["plain" false false true]
                                                  ["after an intermediate dump" true false true]
                                                  ["twice" false true true]
                                                  ["exit without dump" false true false]]]
                [(str label (if cd ", continuous dump" ", no continuous dump")) cd middump twice finish])
        runs (side-by-side
              (fn [[_ cd middump twice finish]]
                (let [dir (temp-dir)
                      code (-> body (str/replace "CD" (str cd)) (str/replace "MIDDUMP" (str middump))
                               (str/replace "TWICE" (str twice)) (str/replace "FINISH" (str finish)))]
                  (assoc (java-child ["-e" code] :dir (str dir)) :dir dir)))
              cases)]
    (doseq [[[label cd middump twice] {:keys [exit out err dir]}] (map vector cases runs)]
      (testing label
        (is (zero? exit) err)
        (when middump
          (is (str/includes? out (str "middump " (if cd ":dumped" "dump.intermediate_finishes"))) out))
        (is (str/includes? out (str "sent " (io/file dir "t.json"))) out) ; absolute when configured
        (is (not (str/includes? out "profile.json")) out)
        (is (= {:uniform (if twice 12 7) :api true :process-names true} (ops (io/file dir "t.json"))))
        (is (= ["t.json"] (vec (sort (.list ^java.io.File dir)))) "no part and no ./profile.json left")))))
