(ns pyprof.stress-child
  "The JVM half of the concurrency stress cases (tests/stress_harness.py runs them in child
  processes and counts aborts and hangs): worker threads busy with small NDArray work, and a
  thread that switches API profiling on and off. Used from a plain JVM (`jvm-jvm`) and from a
  Python process through the JPype bridge (`start-workers!`, `toggle!`)."
  (:require [pyprof.example.ndarray :as nd]
            [pyprof.profiler :as profiler]))

(defonce ^:private workers (atom nil))
(defonce ^:private made (atom 0))

(defn- work
  "Small NDArray work until `stop` is set; returns the number of operations."
  [stop]
  (loop [n 0]
    (if @stop
      n
      (let [a (nd/random-uniform -1 1 [4 4])]
        (nd/wait-to-read a)
        (nd/close a)
        (swap! made inc)
        (recur (inc n))))))

(defn ops-made
  "Operations the workers made so far."
  []
  @made)

(defn start-workers!
  "Starts `n` threads doing small NDArray work (the first ones load libmxnet)."
  [n]
  (let [stop (atom false)]
    (reset! workers {:stop stop :futures (doall (for [_ (range n)] (future (work stop))))})
    nil))

(defn stop-workers!
  "Stops the workers; returns the operations they made."
  []
  (let [{:keys [stop futures]} @workers]
    (reset! stop true)
    (reduce + (map deref futures))))

(defn toggle!
  "On a new JVM thread: `n` times run, then stop, with API profiling on; waits for it."
  [n pause-ms]
  @(future
     (dotimes [_ n]
       (profiler/profiler-set-state :run)
       (Thread/sleep (long pause-ms))
       (profiler/profiler-set-state :stop)
       (Thread/sleep (long pause-ms))))
  n)

(defn jvm-jvm
  "A plain JVM: 8 workers start NDArray work while another thread configures the profiler right
  away (nothing has loaded libmxnet yet) and toggles it `toggles` times; prints one EDN line."
  [path toggles]
  (start-workers! 8)
  @(future (profiler/profiler-set-config {:profile-api true :profile-imperative true
                                          :filename path :continuous-dump false}))
  (toggle! toggles 2)
  (let [ops (stop-workers!)]
    (profiler/dump-profile true)
    (prn {:ops ops :toggles toggles})
    (shutdown-agents)))
