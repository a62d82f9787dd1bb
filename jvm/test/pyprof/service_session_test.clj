(ns pyprof.service-session-test
  "The service surface's rules (api.json service_session): a Java facade session leaves
  profile_api off by default and says so; a step never waits for the saver thread, which writes
  the windows later in the order they ended, each with its own events."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.test-util :refer [java-child temp-dir]])
  (:import (java.util.concurrent CountDownLatch)
           (pyprof.jvm Profiler ProfilerSession)))

(defn child-saver-busy
  "Run in a child JVM: the saver thread is held (a task of the test waits on a latch) while a
  session whose every step is a window takes 3 steps, a marker in each; prints what the session
  showed before and after the saver was let go."
  [dir]
  (let [latch (CountDownLatch. 1)
        _ ((requiring-resolve 'pyprof.session.saver/submit!) #(.await latch))
        d (Profiler/domain "service")
        saved (atom [])
        s (.start (ProfilerSession. {"path" "w_{window}.json" "schedule" {"active" 1}
                                     "on_trace_ready" (reify java.util.function.Consumer
                                                        (accept [_ w] (swap! saved conj (get w "index"))))}
                                    dir))
        note (first (.notes s))
        api (get (Profiler/currentConfig) "profile_api")]
    (dotimes [i 3]
      (Profiler/mark d (str "window-" i) "process")
      (.step s))
    (let [held {:written (count (get (.stateNow s) "windows")) :heard @saved
                :done-within-100ms (.awaitSaved s 100)}]
      (.countDown latch)
      (let [done (.awaitSaved s 60000)
            ws (.stop s)
            explicit (vec (.notes (ProfilerSession. {"profile_api" true} dir)))
            capture (vec (.notes (ProfilerSession. {"profile_api" true "record_shapes" true} dir)))]
        (prn {:note note :api api :held held :done done :heard @saved :explicit explicit :capture capture
              :windows (mapv #(select-keys % ["index" "path"]) ws)})))))

(deftest a-step-never-waits-for-the-saver-and-windows-come-in-order
  (let [dir (str (temp-dir))
        {:keys [exit out err]} (java-child ["-e" (str "(require 'pyprof.service-session-test)"
                                                       "(pyprof.service-session-test/child-saver-busy \""
                                                       dir "\")")])
        r (read-string (last (str/split-lines out)))
        markers (fn [path] (->> (get (json/read-str (slurp path)) "traceEvents")
                                (keep #(re-matches #"window-\d" (str (get % "name"))))
                                set))]
    (is (= 0 exit) err)
    (testing "default options: profile_api off, said in one line; asked for, it is on"
      (is (str/starts-with? (:note r) "profile_api off: another MXNet binding in this process (DJL)"))
      (is (= "false" (str (:api r))))
      (is (= ["profile_api on without steady mode: safe only while every MXNet call of this process goes through pyprof; a thread of another binding (DJL) inside a C call when recording switches aborts the process (c_api_profile.cc:140)"]
             (:explicit r)) "asked for without steady mode: said"))
    (testing "record_shapes on a service session: what it cannot record, in one line"
      (is (= ["profile_api on without steady mode: safe only while every MXNet call of this process goes through pyprof; a thread of another binding (DJL) inside a C call when recording switches aborts the process (c_api_profile.cc:140)"
              "record_shapes, with_stack and with_flops give shapes, attributes and call sites (FLOPs are derived from them when the window is read) to the operators of executors bound through pyprof; imperative calls, and every call of another MXNet binding in this process (DJL), get none"]
             (:capture r))))
    (testing "three steps while the saver was held: each returned, no window written yet"
      (is (= {:written 0 :heard [] :done-within-100ms false} (:held r))))
    (testing "then every window is written, in order, each with its own marker only"
      (is (true? (:done r)))
      (is (= [0 1 2 3] (:heard r)) "on_trace_ready: each window once, in order")
      (is (= [0 1 2 3] (mapv #(get % "index") (:windows r))) "the fourth: from the last step to stop")
      (doseq [[i w] (map-indexed vector (:windows r))]
        (is (= (if (< i 3) #{(str "window-" i)} #{}) (markers (get w "path"))) (get w "path"))))))
