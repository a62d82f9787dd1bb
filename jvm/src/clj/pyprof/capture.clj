(ns ^:no-doc pyprof.capture
  "Shapes, attributes and call sites of the executors bound through `LibMXNet` (its executor
  hook) on the operator events of a JVM session's windows: the session options :record-shapes,
  :with-stack, :with-flops (attribution.json capture.options; Python derives FLOPs and bytes from
  the shapes and attributes), under the args names of attribution.json trace_args. A bind keeps
  the executor's arrays' shapes and dtypes and its symbol's operator nodes; each forward made
  while a window records (`resume!` .. `pause!`) is recorded with its times, thread and, with
  :with-stack, its call site and stack (from the first frame outside capture.jvm_skip_classes);
  `annotate!` gives a window's operator events the args of the forwards that ran them."
  (:require [clojure.data.json :as json]
            [clojure.string :as str]
            [pyprof.native :as native :refer [mx]]
            [pyprof.raw-file :as raw-file]
            [pyprof.rules :as rules]
            [pyprof.trace.reader :as reader])
  (:import (com.sun.jna Pointer)
           (com.sun.jna.ptr IntByReference PointerByReference)
           (java.lang StackWalker StackWalker$StackFrame)
           (pyprof.jvm.capi ExecutorHook LibMXNet)))

(set! *warn-on-reflection* true)

(def ^:private spec (rules/read-spec "attribution.json"))
(def ^:private args-names (dissoc (spec "trace_args") "about"))
(def spec-capture "attribution.json capture." (spec "capture"))
(def ^:private cap spec-capture)
(def ^:private dtypes (cap "dtypes"))
(def ^:private skip (vec (cap "jvm_skip_classes")))
(def ^:private bookkeeping
  "trace.json bookkeeping: the engine's own work, never a recorded call."
  (set (get-in (rules/read-spec "trace.json") ["bookkeeping" "names"])))
(def ^:private categories (set (get-in spec ["matching" "categories"])))
(def ^:private labels (get-in spec ["matching" "match_labels"]))
(def ^:private subgraphs (dissoc (get-in spec ["matching" "subgraphs"]) "about"))

(def option-names
  "The session options this namespace records (attribution.json capture.options), as C spells
  them, in the file's order."
  (vec (keys (cap "options"))))

(def options "`option-names` as a set." (set option-names))

;; :executors address -> {:ins [[shape dtype]] :nodes [{:op :attrs}] :outs}; :forwards the
;; window's records; :active while a window records; :opts the session's options
(defonce ^:private state (atom {:executors {} :forwards [] :active false :opts nil}))

(defn- meta-of
  "[shape dtype-name] of NDArray handle `h` (C: MXNDArrayGetShapeEx, MXNDArrayGetDType)."
  [^Pointer h]
  (let [nd (IntByReference.) data (PointerByReference.) dt (IntByReference.)]
    (mx MXNDArrayGetShapeEx h nd data)
    (mx MXNDArrayGetDType h dt)
    [(if (pos? (.getValue nd)) (mapv long (.getIntArray (.getValue data) 0 (.getValue nd))) [])
     (get dtypes (str (.getValue dt)) (str "dtype" (.getValue dt)))]))

(defn- symbol-nodes
  "The operator nodes of symbol `sym`, in graph order: [{:op :attrs}] (C: MXSymbolSaveToJSON)."
  [^Pointer sym]
  (let [out (PointerByReference.)]
    (mx MXSymbolSaveToJSON sym out)
    (->> ((json/read-str (.getString (.getValue out) 0 "UTF-8")) "nodes")
         (remove #(= "null" (% "op")))
         (mapv (fn [n] {:op (n "op") :attrs (or (n "attrs") {})})))))

(defn- outputs-meta
  "[[shape dtype]] of executor `exec`'s outputs (C: MXExecutorOutputs; the handles it makes are
  freed, MXNDArrayFree)."
  [^Pointer exec]
  (let [n (IntByReference.) out (PointerByReference.)]
    (mx MXExecutorOutputs exec n out)
    (let [hs (if (pos? (.getValue n)) (.getPointerArray (.getValue out) 0 (.getValue n)) [])]
      (try (mapv meta-of hs)
           (finally (doseq [h hs] (mx MXNDArrayFree ^Pointer h)))))))

(defn- frame-name
  "\"file:line function\" of `f`; a Clojure function by its demunged class (ns/fn)."
  [^StackWalker$StackFrame f]
  (let [c (.getClassName f)
        clj? (and (str/includes? c "$") (#{"invoke" "invokeStatic" "doInvoke" "applyTo"} (.getMethodName f)))]
    (str (.getFileName f) ":" (.getLineNumber f) " "
         (if clj? (clojure.lang.Compiler/demunge c) (str c "." (.getMethodName f))))))

(defn- skipped?
  "Whether class `c` is one of capture.jvm_skip_classes (itself, or inside it: a . or $ after it)."
  [^String c]
  (some #(and (str/starts-with? c %)
              (or (= (count c) (count %)) (#{\. \$} (.charAt c (count %)))))
        skip))

(defonce ^:private names-cache (atom {})) ; [class method file line] -> name: code locations

(defn- frame-names
  "`frame-name` of `f`, made when a window is annotated, once per code location."
  [^StackWalker$StackFrame f]
  (let [k [(.getClassName f) (.getMethodName f) (.getFileName f) (.getLineNumber f)]]
    (or (@names-cache k) ((swap! names-cache assoc k (frame-name f)) k))))

(defn- stack
  "The frames from the call site outwards, innermost first (StackFrames: named when the window is
  annotated, not in the forward's call)."
  []
  (.walk (StackWalker/getInstance)
         (reify java.util.function.Function
           (apply [_ frames]
             (->> (iterator-seq (.iterator ^java.util.stream.Stream frames))
                  (drop-while (fn [^StackWalker$StackFrame f] (skipped? (.getClassName f))))
                  vec)))))

(defn- bound! [^Pointer exec ^Pointer sym args aux]
  (let [e {:ins (mapv meta-of (concat args aux)) :nodes (symbol-nodes sym)}]
    (swap! state assoc-in [:executors (Pointer/nativeValue exec)] e)))

(defn- forward! [^Pointer exec t pushed]
  (let [{:keys [active opts forwards]} @state]
    (when (and active (< (count forwards) (cap "max_calls")))
      (let [k (Pointer/nativeValue exec)]
        (when (and (get-in @state [:executors k]) (nil? (get-in @state [:executors k :outs])))
          (swap! state assoc-in [:executors k :outs] (outputs-meta exec)))
        (let [frames (when (opts "with_stack") (stack))]
          (swap! state update :forwards conj
                 {:exec k :e (get-in @state [:executors k]) :t t :pushed pushed
                  :thread (.getName (Thread/currentThread)) :stack frames}))))))

(defonce ^:private hook ; never throws: a call that is not recorded still succeeds
  (let [h (reify ExecutorHook
            (bound [_ exec sym args aux]
              (try (bound! exec sym args aux) (catch Throwable _ nil)))
            (forward [_ exec t pushed]
              (try (forward! exec t pushed) (catch Throwable _ nil)))
            (freed [_ exec]
              (swap! state update :executors dissoc (Pointer/nativeValue exec))))]
    (LibMXNet/setExecutorHook h)
    h))

(defn resume!
  "A window of a session with capture options `opts` (C names -> true) starts recording."
  [opts]
  (swap! state assoc :active true :opts opts))

(defn pause! "The window stopped recording." [] (swap! state assoc :active false))

(defn take!
  "The forwards recorded since the last take (the window's), in call order."
  []
  (let [[old _] (swap-vals! state assoc :forwards [])] (:forwards old)))

(defn segment-ops
  "The operator names of event `name`: [dot,relu] -> [\"dot\" \"relu\"], a,b -> [\"a\" \"b\"],
  relu -> [\"relu\"]; nil for a segment name MXNet cut at 127 characters (as Python's
  pyprof.attribution.segments/segment_ops)."
  [^String name]
  (cond (str/starts-with? name "[") (when (and (str/ends-with? name "]") (> (count name) 2))
                                      (str/split (subs name 1 (dec (count name))) #","))
        (str/includes? name ",") (str/split name #",")
        :else [name]))

(defn- fits?
  "Whether the operator nodes `ops` (graph order) are the segment listing `seg`: each name takes
  its node, a oneDNN subgraph operator (attribution.json matching.subgraphs) its base and the post
  nodes it fused after it, up to the next name's node (Python's segments.group_of)."
  [seg ops]
  (loop [[x & more] seg, ops ops]
    (if (nil? x)
      (empty? ops)
      (let [{base "base" post "post"} (subgraphs x)
            stop (when-let [y (first more)] (get-in subgraphs [y "base"] y))]
        (when (= (or base x) (first ops))
          (recur more (drop-while #(and (some #{%} post) (not= % stop)) (rest ops))))))))

(defn- args-of [{:keys [e thread stack]} label]
  (let [{:keys [ins outs nodes]} e
        one (when (= 1 (count nodes)) (first nodes))]
    (cond-> {(args-names "thread") thread
                   (args-names "source") (get-in cap ["sources" "executor"])
                   (args-names "match") label}
            ins (assoc (args-names "input_dims") (mapv first ins)
                       (args-names "input_type") (mapv second ins))
            outs (assoc (args-names "output_dims") (mapv first outs)
                        (args-names "output_type") (mapv second outs))
            one (assoc (args-names "attrs") (:attrs one))
            stack (assoc (args-names "call_site") (frame-names (first stack))
                         (args-names "stack") (mapv frame-names (rseq stack))))))

(defn annotate!
  "Gives the operator events of the window trace at `path` the args of the recorded `forwards`
  (see the namespace doc) and rewrites it; returns {:calls :matched :unmatched-calls
  :unmatched-events}."
  [^String path forwards]
  (let [events (reader/read-events path)
        ops (->> (map-indexed vector events)
                 (filter (fn [[_ ev]] (and (#{"B" "X"} (ev "ph")) (categories (ev "cat"))
                                           (not (bookkeeping (ev "name"))))))
                 (sort-by (fn [[i ev]] [(ev "ts") i])))
        ;; the operators of an executor's symbol -> its forwards, in call order (first in, first out)
        queues (update-vals (group-by #(mapv :op (get-in % [:e :nodes])) forwards) vec)
        found (first
               (reduce
                (fn [[found qs] [i ev]]
                  (let [seg (segment-ops (str (ev "name")))
                        k (some #(when (fits? seg %) %) (keys qs))
                        q (get qs k)
                        ts (ev "ts")]
                    (if (and (seq q) (<= (:t (first q)) ts))
                      (let [ready (take-while #(<= (:t %) ts) q)
                            label (labels (if (apply = (map :exec ready)) "exact" "ambiguous"))]
                        [(assoc found i (args-of (first q) label)) (assoc qs k (subvec q 1))])
                      [found qs])))
                [{} queues] ops))]
    (raw-file/write-trace! path (map-indexed (fn [i ev] (if-let [a (found i)] (update ev "args" merge a) ev))
                                        events))
    {:calls (count forwards) :matched (count found) :unmatched-calls (- (count forwards) (count found))
     :unmatched-events (- (count ops) (count found))}))
