(ns ^:no-doc pyprof.session.saver
  "The background saver of the Java facade's sessions (api.json service_session): one daemon
  thread, `pyprof-window-saver`, at the lowest priority (`pyprof.jvm.Background`), that cuts and
  writes ended windows in the order they ended, so that a service's step returns after the
  boundary (a few C calls) and not after the window's file is written."
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
  "Waits until `fut` (a Future of `submit!`, or nil) is done, at most `timeout-ms` (nil: no
  bound); true when done. A task's failure is its own to report."
  ([fut] (await! fut nil))
  ([^Future fut timeout-ms]
   (cond
     (nil? fut) true
     (= thread-name (.getName (Thread/currentThread))) (.isDone fut) ; never wait on itself
     :else (try (if timeout-ms (.get fut (long timeout-ms) TimeUnit/MILLISECONDS) (.get fut))
                true
                (catch TimeoutException _ false)
                (catch ExecutionException _ true)))))
