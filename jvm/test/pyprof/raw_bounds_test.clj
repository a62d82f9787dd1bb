(ns pyprof.raw-bounds-test
  "The raw trace's cap and the bounded sweep of leftovers on the JVM (api.json raw_trace), as
  tests/test_raw_bounds.py in Python: bounds lowered through the variables the spec names, a
  real leftover of a SIGKILLed child JVM recovered behind a start that waited at most its bound,
  the same leftover with a sparse tail of 5 GiB reported once, and an interrupted claim reported,
  not started over."
  (:require [clojure.data.json :as json]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.rules :as rules]
            [pyprof.session.leftovers :as leftovers]
            [pyprof.test-util :refer [java-child temp-dir]])
  (:import (java.nio.file Files Paths)
           (java.nio.file.attribute FileAttribute)))

(def ^:private spec (rules/api "raw_trace"))

(def ^:private capped
  "A child JVM: a session recording operators and API calls without a step for 3 s (only the
  watchdog holds the cap), sampling the raw trace's size every 5 ms; prints an EDN result."
  "(require '[pyprof.session :as s] '[pyprof.example.ndarray :as nd])
   (let [sess (s/start! (s/profile {:path (str (System/getProperty \"user.dir\") \"/cap_{window}.json\")
                                    :profile-imperative true :profile-api true :dump-period 0.05}))
         sizes (atom []) done (atom false) t0 (System/nanoTime)
         sampler (doto (Thread. (fn [] (while (not @done)
                                          (when-let [p (s/raw-trace-path)]
                                            (swap! sizes conj [(/ (- (System/nanoTime) t0) 1e9)
                                                               (.length (java.io.File. ^String p))]))
                                          (Thread/sleep 5))))
                   (.setDaemon true) .start)
         deadline (+ (System/currentTimeMillis) 3000)
         hard (+ (System/currentTimeMillis) 60000)
         cap (Long/parseLong (System/getenv \"PYPROF_RAW_MAX_BYTES\"))
         ;; sampled for 1.5 s past the cap and 1 s unchanged, however slow the machine
         past-cap? #(let [ss @sizes now (/ (- (System/nanoTime) t0) 1e9)
                          [t] (first (filter (fn [[_ s]] (>= s cap)) ss))
                          [grew] (first (filter (fn [[_ s]] (not= s (second (peek ss)))) (rseq ss)))]
                      (and t grew (> (- now t) 1.5) (> (- now grew) 1.0)))]
     (while (and (< (System/currentTimeMillis) hard)
                 (or (< (System/currentTimeMillis) deadline) (not (past-cap?))))
       (dotimes [_ 20] (with-open [a (nd/random-uniform -1 1 [4 4])] (nd/wait-to-read a))))
     (let [ws (s/stop! sess)
           _ (reset! done true)
           ss @sizes
           [t-over s-over] (first (filter #(>= (second %) cap) ss))
           top (apply max (map second ss))
           t-top (ffirst (filter #(= top (second %)) ss))] ; when the raw trace last grew
       (prn {:truncated (:truncated (first ws)) :max top
             :rate (/ s-over (max 1e-6 (- t-over (ffirst ss)))) :after-s (- (first (peek ss)) t-over)
             :still-s (- (first (peek ss)) t-top) :grew-s (- t-top t-over)})
       (shutdown-agents)))")

(deftest the-watchdog-holds-the-cap-between-steps
  (let [dir (temp-dir)
        cap 3000000
        {:keys [exit out err]} (java-child ["-e" capped] :dir (str dir) :timeout-s 180
                                          :env {"PYPROF_RAW_MAX_BYTES" (str cap)})
        r (read-string (last (str/split-lines out)))
        notes (filter #(str/includes? % "stopped recording at step") (str/split-lines err))]
    (is (= 0 exit) err)
    (is (true? (:truncated r)) (pr-str r))
    ;; the raw trace stopped growing while the operators ran on: unchanged for the last second,
    ;; it grew for less than half of the time after the cap (how far past the cap it goes, at
    ;; most dump_period + watch_seconds of events when quiet, is bench/bench_raw_cap.py's figure)
    (is (> (:after-s r) 1.0) (pr-str r))
    (is (<= cap (:max r) (+ cap (/ (* (:rate r) (:after-s r)) 2))) (pr-str r))
    (is (and (> (:still-s r) 1.0) (< (:grew-s r) (/ (:after-s r) 2))) (pr-str r))
    (is (= 1 (count notes)) err)
    (is (str/includes? (first notes) (str "past its cap of " cap)) err)
    (is (str/ends-with? (first notes) "fix: set PYPROF_RAW_MAX_BYTES to a larger number of bytes, or record fewer steps per window"))))

(def ^:private victim
  "A child JVM whose window records until its raw trace holds BYTES, then kill -9 of itself."
  "(require '[pyprof.session :as s] '[pyprof.example.ndarray :as nd] '[clojure.java.shell :as sh])
   (println (.pid (java.lang.ProcessHandle/current)))
   (let [sess (s/start! (s/profile {:path (str (System/getProperty \"user.dir\") \"/big.json\")
                                    :profile-imperative true :profile-api true :dump-period 0.05}))]
     (while (< (.length (java.io.File. ^String (s/raw-trace-path))) BYTES)
       (dotimes [_ 50] (with-open [a (nd/random-uniform -1 1 [4 4])] (nd/wait-to-read a))))
     (Thread/sleep 200)
     (sh/sh \"kill\" \"-9\" (str (.pid (java.lang.ProcessHandle/current))))
     (Thread/sleep 60000))")

(def ^:private next-start
  "A child JVM's next start: prints how long start! took, then joins the sweep."
  "(require '[pyprof.session :as s] '[pyprof.session.leftovers :as l] '[pyprof.example.ndarray :as nd])
   (with-open [a (nd/random-uniform -1 1 [1])] (nd/wait-to-read a)) ; MXNet loaded: start! alone is timed
   (def spent (atom nil)) ; what start! spends on leftovers: start-sweep! (its own work comes on top)
   (alter-var-root #'l/start-sweep!
                   (fn [f] (fn [d w] (let [t (System/nanoTime)]
                                     (try (f d w) (finally (compare-and-set! spent nil (/ (- (System/nanoTime) t) 1e9))))))))
   (let [t0 (System/nanoTime)
         sess (s/start! (s/profile {:path (str (System/getProperty \"user.dir\") \"/next.json\")}))
         took (/ (- (System/nanoTime) t0) 1e9)]
     (s/stop! sess)
     (.join (l/start-sweep! nil nil) 120000)
     (prn {:start-s took :swept-s (/ (- (System/nanoTime) t0) 1e9) :leftovers-s @spent})
     (shutdown-agents))")

(defn- files [dir] (sort (map #(.getName ^java.io.File %) (.listFiles (io/file dir)))))

(defn- no-empty-file [dir]
  (is (empty? (filter #(and (.isFile ^java.io.File %) (zero? (.length ^java.io.File %)))
                      (.listFiles (io/file dir)))))
  (is (empty? (filter #(str/starts-with? % ".pyprof-") (files dir))) "no temporary file is left"))

(deftest a-real-leftover-is-recovered-behind-a-bounded-start-and-a-huge-one-reported-once
  (let [dir (temp-dir)
        rawbase (io/file dir "rawbase")
        env {"PYPROF_RAW_DIR" (str rawbase)}
        kill! (fn [bytes]
                (let [{:keys [exit out err]} (java-child ["-e" (str/replace victim "BYTES" (str bytes))]
                                                         :dir (str dir) :timeout-s 180 :env env)]
                  (is (= 137 exit) err)
                  (Long/parseLong (str/trim (first (str/split-lines out))))))
        next! (fn [extra]
                (let [{:keys [exit out err]} (java-child ["-e" next-start] :dir (str dir)
                                                         :timeout-s 180 :env (merge env extra))]
                  (is (= 0 exit) err)
                  [(read-string (last (str/split-lines out))) err]))
        window (str (io/file dir "big.json"))]
    (testing "start! waits at most its bound; the sweep recovers the leftover behind it"
      (let [p (kill! (* 6 1024 1024))
            [r err] (next! {"PYPROF_RECOVER_WAIT_SECONDS" "0.1"})
            recovered (str (io/file dir (str "big.recovered-" p ".json")))]
        ;; start! gave up waiting after 0.1 s (its own work comes on top: up to a second on a
        ;; busy 2-core machine); the sweep ended later, on its own thread
        (is (<= 0.1 (:leftovers-s r) 0.4) (pr-str r))
        (is (< (:start-s r) 5.1) (pr-str r))
        (is (> (:swept-s r) (+ (:start-s r) 0.2)) (pr-str r))
        (is (some #{(str "pyprof: recovered window " window " of dead process " p " as " recovered)}
                  (str/split-lines err)) err)
        (is (< 1000 (count (filter #(= "E" (% "ph")) (get (json/read-str (slurp recovered)) "traceEvents")))))
        (is (empty? (.listFiles rawbase)) "the leftover's directory is deleted")
        (no-empty-file dir)))
    (testing "a leftover of several GB (a real trace with a sparse tail) is reported once"
      (let [p (kill! (* 1024 1024))
            raw (first (for [^java.io.File d (.listFiles rawbase)] (io/file d "raw.json")))
            size (* 5 1024 1024 1024)
            start ((json/read-str (slurp (str window ".partial"))) "start")
            _ (with-open [f (java.io.RandomAccessFile. ^java.io.File raw "rw")] (.setLength f size))
            [r err] (next! {})]
        (is (< (:leftovers-s r) (+ 0.3 (spec "start_wait_seconds"))) (pr-str r))
        (is (= [(str "pyprof: did not recover window " window " of dead process " p ": its range holds "
                     (- size start) " bytes, more than " (spec "recover_max_bytes")
                     " (set PYPROF_RECOVER_MAX_BYTES to recover it at start); its raw trace " raw
                     " (" size " bytes) is kept. fix: run `pyprof recover " window
                     "` to write it beside that path, or delete " (.getParent raw))]
               (filter #(str/starts-with? % "pyprof: did not recover") (str/split-lines err)))
            err)
        (is (empty? (filter #(str/starts-with? % (str "big.recovered-" p)) (files dir))))
        (no-empty-file dir)
        (let [[_ err] (next! {})]
          (is (not (str/includes? err "big.json")) "reported once")
          (is (.exists (io/file (.getParent raw) "reported"))))
        (testing "an interrupted claim is reported, not started over"
          (let [d (.getParentFile raw)]
            (doseq [n ["reported" "recovering"]] (.delete (io/file d n)))
            (Files/createSymbolicLink (.toPath (io/file d "recovering")) (Paths/get (str p "-1") (make-array String 0))
                                      (make-array FileAttribute 0))
            (spit (io/file dir (str ".pyprof-" p "-recover-1.tmp")) "cut")
            (let [out (with-out-str (binding [*err* *out*] (is (false? (leftovers/sweep-dir! d p nil)))))]
              (is (= [(str "pyprof: did not recover window " window " of dead process " p
                           ": its recovery by process " p " was interrupted; its raw trace " raw
                           " (" size " bytes) is kept. fix: run `pyprof recover " window
                           "` to write it beside that path, or delete " d)]
                     (str/split-lines out))))
            (no-empty-file dir)
            (is (= "" (with-out-str (binding [*err* *out*] (leftovers/sweep-dir! d p nil))))
                "reported once")))))))

(deftest a-failed-recovery-deletes-its-temporary-file-and-is-reported-once
  (let [dir (temp-dir)
        p (let [pr (.start (ProcessBuilder. ^java.util.List ["true"]))] (.waitFor pr) (.pid pr))
        d (io/file dir (str "pyprof-raw-" p "-0-abc"))
        window (str (io/file dir "w.json"))]
    (.mkdirs (io/file d "raw.json")) ; a raw trace that cannot be read
    (spit (io/file d "window.json") (json/write-str {"windows" [window]}))
    (spit (str window ".partial") (json/write-str {"raw" (str (io/file d "raw.json")) "start" 0
                                                   "window" 0 "pid" p "metadata" []}))
    (let [out (with-out-str (binding [*err* *out*] (is (false? (leftovers/sweep-dir! d p nil)))))]
      (is (= 1 (count (str/split-lines out))) out)
      (is (str/starts-with? out (str "pyprof: did not recover window " window " of dead process " p ": "))
          out))
    (is (empty? (filter #(or (str/starts-with? % ".pyprof-") (str/starts-with? % "w.recovered"))
                        (files dir))))
    (is (= "" (with-out-str (binding [*err* *out*] (leftovers/sweep-dir! d p nil)))) "reported once")))

(deftest a-sweep-within-an-output-root-leaves-windows-outside-it-alone
  ;; a JVM service (ProfilerSession, JMX) writes only under its output root: a dead process's
  ;; window elsewhere is left for a sweep allowed to write there (before, recovered and cleaned)
  (let [dir (temp-dir), root (temp-dir)
        p (let [pr (.start (ProcessBuilder. ^java.util.List ["true"]))] (.waitFor pr) (.pid pr))
        d (io/file dir (str "pyprof-raw-" p "-0-abc"))
        window (str (io/file dir "w.json"))
        before #(sort (map str (file-seq (io/file dir))))]
    (.mkdirs (io/file d "raw.json")) ; a raw trace that cannot be read: a sweep would report it
    (spit (io/file d "window.json") (json/write-str {"windows" [window]}))
    (spit (str window ".partial") (json/write-str {"raw" (str (io/file d "raw.json")) "start" 0
                                                   "window" 0 "pid" p "metadata" []}))
    (let [files (before)]
      (is (= "" (with-out-str (binding [*err* *out*] (is (false? (leftovers/sweep-dir! d p (str root))))))))
      (is (= files (before)) "nothing written, claimed or deleted outside the root"))
    (is (str/starts-with? (with-out-str (binding [*err* *out*] (leftovers/sweep-dir! d p (str dir))))
                          (str "pyprof: did not recover window " window))
        "a window under the root is swept")))
