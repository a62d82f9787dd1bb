(ns ^:no-doc pyprof.session.saver
  "The saver of the Java facade's sessions: one daemon thread at the lowest priority that writes
  ended windows in order, so that a service's step does not wait for a window's file."
  (:import (java.util.concurrent ExecutorService ExecutionException Future TimeUnit TimeoutException)
           (pyprof.jvm Background)))

(set! *warn-on-reflection* true)

(def thread-name "pyprof-window-saver")

(defonce ^:private ^ExecutorService executor (Background/singleThread thread-name))

(defn submit!
  "Runs `f` on the saver thread after everything submitted before; returns its Future."
  ^Future [f]
  (.submit executor ^Callable (fn [] (f))))

(defn await!
  "Waits at most `timeout-ms` (nil: no bound) for `fut` (of `submit!`, or nil); true when done.
  A task reports its own failure."
  ([fut] (await! fut nil))
  ([^Future fut timeout-ms]
   (cond
     (nil? fut) true
     (= thread-name (.getName (Thread/currentThread))) (.isDone fut) ; never wait on itself
     :else (try (if timeout-ms (.get fut (long timeout-ms) TimeUnit/MILLISECONDS) (.get fut))
                true
                (catch TimeoutException _ false)
                (catch ExecutionException _ true)))))
