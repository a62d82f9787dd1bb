(ns pyprof.steady-child
  "The JVM half of the foreign-binding cases of tests/foreign_harness.py (run in child JVMs that
  count aborts and hangs): 8 Java threads call libmxnet through this namespace's own JNA
  `Library` (declared here, as DJL declares its own: pyprof does not gate it), creating and
  freeing NDArrays, while the main thread takes windows in steady mode, with profile_api on,
  through the Java facade (`jvm-session`: a steady ProfilerSession) or the JMX bean
  (`jvm-jmx`: -Dpyprof.steady=true read by ProfilerControl.register, sessions by MBean calls).
  A marker `window-<n>` is set in each window. Prints one JSON line."
  (:require [clojure.data.json :as json]
            [pyprof.profiler :as profiler])
  (:import (com.sun.jna Native)
           (com.sun.jna.ptr PointerByReference)
           (java.lang.management ManagementFactory)
           (javax.management ObjectName)
           (pyprof.jvm Profiler ProfilerControl ProfilerSession)))

;; The service's own binding of libmxnet: a JNA interface mapping, not pyprof's gated LibMXNet.
(gen-interface
 :name pyprof.steady_child.ForeignMXNet
 :extends [com.sun.jna.Library]
 :methods [[MXNDArrayCreateEx [ints int int int int int com.sun.jna.ptr.PointerByReference] int]
           [MXNDArrayFree [com.sun.jna.Pointer] int]])

(defn- foreign-library []
  (Native/load ^String (pyprof.jvm.capi.LibMXNet/load) ; the one libmxnet, by its absolute path
               ^Class (Class/forName "pyprof.steady_child.ForeignMXNet" true
                                     (clojure.lang.RT/baseLoader))))

(defn- start-threads!
  "`n` threads creating and freeing 4x4 NDArrays in bursts through `lib`, until `stop`."
  [lib n stop calls]
  (doall (for [_ (range n)]
           (doto (Thread.
                  ^Runnable
                  (fn []
                    (let [shape (int-array [4 4])
                          out (PointerByReference.)]
                      (while (not @stop)
                        (dotimes [_ 5]
                          (when-not (zero? (.MXNDArrayCreateEx ^pyprof.steady_child.ForeignMXNet lib
                                                               shape 2 1 0 0 0 out))
                            (throw (IllegalStateException. "MXNDArrayCreateEx failed")))
                          (.MXNDArrayFree ^pyprof.steady_child.ForeignMXNet lib (.getValue out)))
                        (swap! calls + 5)
                        (Thread/sleep 2)))))
             (.start)))))

(defn run
  "One child: `case` jvm-session, jvm-jmx or jvm-hazard (a plain session: stop and run),
  window files in `out`, `windows` windows."
  [case out windows threads]
  (let [switched (atom 0)
        running (atom false)
        real profiler/profiler-set-state
        _ (alter-var-root #'profiler/profiler-set-state
                          (fn [_] (fn [& args] (when @running (swap! switched inc))
                                    (apply real args))))
        lib (foreign-library)
        domain (Profiler/domain "steady-test")
        stop (atom false)
        calls (atom 0)
        opts {"profile_api" true "profile_imperative" true}
        schedule {"wait" 1 "active" 1 "repeat" windows}
        jmx? (= case "jvm-jmx")
        bean (ObjectName. ProfilerControl/OBJECT_NAME)
        server (ManagementFactory/getPlatformMBeanServer)
        invoke (fn [op params sig] (.invoke server bean op (object-array params)
                                            (into-array String sig)))
        session (if jmx?
                  (do (ProfilerControl/register) ; -Dpyprof.steady=true: steady from here
                      (invoke "start" [(json/write-str (merge opts schedule
                                                              {"path" "w_{window}.json"})) 0]
                              ["java.lang.String" "long"])
                      nil)
                  (.start (ProfilerSession. (merge opts {"steady" (not= case "jvm-hazard")
                                                         "schedule" schedule
                                                         "path" (str out "/w_{window}.json")})
                                            (str out))))
        ;; a JMX step returns at once (its boundary taken in call order): the marker after it
        ;; belongs to the next window once the step is done, which awaitSaved waits for
        step (fn [] (if jmx?
                      (do (invoke "step" [] []) (invoke "awaitSaved" [60000] ["long"]))
                      (.step ^ProfilerSession session)))
        _ (reset! running true)
        ts (start-threads! lib threads stop calls)]
    (Thread/sleep 20)
    (dotimes [w windows]
      (step) ; the idle step ends: the window opens (resume)
      (Profiler/mark domain (str "window-" w) "process")
      (Thread/sleep 5)
      (step)) ; the active step ends: the window is saved (pause)
    (if jmx? (invoke "stop" [] []) (.close ^ProfilerSession session))
    (reset! stop true)
    (doseq [^Thread t ts] (.join t))
    (reset! running false)
    (Profiler/steadyEnd)
    (println (json/write-str {"calls" @calls "windows" windows "switches" @switched
                              "steady" (if jmx? "property" "session")}))
    (shutdown-agents)))
