(ns pyprof.flops
  "FLOPs and bytes of one MXNet operator call, from its input shapes and attributes, by the
  table Python reads too: `pyprof/spec/flops.json` (on the classpath). An operator maps to a
  family; a family's `let`, `flops` and `out` are expressions of the spec's grammar, evaluated
  here as `pyprof.attribution.flops` evaluates them (docs/attribution.md). Conventions: a
  multiply-add is 2 FLOPs, bias and elementwise work 1 per element, bytes are the bytes of the
  inputs read plus the outputs written. Pure logic: no C function is called.

  Errors are catalogue errors (`pyprof.rules/error`): :flops.bad_input for shapes or attributes
  a formula cannot use, :flops.bad_spec for a malformed entry."
  (:require [clojure.string :as str]
            [pyprof.rules :as rules]))

(set! *warn-on-reflection* true)

(def spec "flops.json, string keys as in the file." (rules/read-spec "flops.json"))
(def operators "operator name -> family name" (spec "operators"))
(def families "family name -> {\"let\" [[name expr] ...], \"flops\" expr, \"out\" [expr ...]}"
  (spec "families"))
(def dtype-bytes "dtype name -> bytes per element" (spec "dtype_bytes"))
(def ^:private arity (get-in spec ["grammar" "ops"]))

(defn- show
  "A value in a message, as Python's message shows it (shapes as [2, 3], strings quoted '')."
  [v]
  (cond (sequential? v) (str "[" (str/join ", " (map show v)) "]")
        (string? v) (str "'" v "'")
        (boolean? v) (if v "True" "False")
        (nil? v) "None"
        :else (str v)))

(defn parse-attr
  "An attribute as MXNet writes it (\"(3, 3)\", \"True\", \"64\", \"relu\") or as a JVM value, as
  the grammar sees it: a shape (vector of long), boolean, long or string; nil for missing,
  \"None\" and an empty tuple (the default applies)."
  [v]
  (cond (sequential? v) (not-empty (mapv long v))
        (instance? java.util.List v) (not-empty (mapv long v))
        (integer? v) (long v)
        (keyword? v) (name v)
        (not (string? v)) v
        :else
        (let [t (str/trim v) lower (str/lower-case t)]
          (cond (#{"true" "false"} lower) (= "true" lower)
                (#{"none" ""} lower) nil
                (#{\( \[} (first t))
                (let [items (remove str/blank? (map str/trim (str/split (str/replace t #"^[()\[\]]+|[()\[\]]+$" "") #",")))]
                  (if (every? #(re-matches #"-?\d+" %) items)
                    (not-empty (mapv #(Long/parseLong %) items))
                    t))
                (re-matches #"-?\d+" t) (Long/parseLong t)
                :else t))))


(defn- input "The fields of a flops.bad_input error." [op why] {:op op :why why})
(defn- entry "The fields of a flops.bad_spec error." [where why] {:where where :why why})

(defn- shape [op s]
  (if (vector? s)
    s
    (throw (rules/error "flops.bad_input" (input op (str "expected a shape, got " (show s)))))))

(defn- scalar [op x]
  (if (integer? x)
    (long x)
    (throw (rules/error "flops.bad_input" (input op (str "expected an integer, got " (show x)))))))

(defn- arith [op f a b]
  (if (or (vector? a) (vector? b))
    (let [n (count (if (vector? a) a b))
          aa (if (vector? a) a (vec (repeat n a)))
          bb (if (vector? b) b (vec (repeat n b)))]
      (when (not= (count aa) (count bb))
        (throw (rules/error "flops.bad_input" (input op (str (show f) " of shapes of different lengths " (show aa) " and " (show bb))))))
      (mapv #(arith op f %1 %2) aa bb))
    (let [a (scalar op a) b (scalar op b)]
      (case f
        "+" (+ a b) "*" (* a b) "-" (- a b) ">" (> a b)
        "//" (if (zero? b) (throw (rules/error "flops.bad_input" (input op "division by zero (a stride or group of 0)"))) (Math/floorDiv (long a) (long b)))))))

(defn- index [op s i]
  (let [n (count s) j (if (neg? i) (+ n i) i)]
    (if (< -1 j n) j (throw (rules/error "flops.bad_input" (input op (str "shape " (show s) " has no axis " i)))))))

(defn- py-slice [s from to]
  (let [n (count s)
        clamp (fn [i dflt] (cond (nil? i) dflt (neg? i) (max 0 (+ n i)) :else (min i n)))
        a (clamp from 0) b (clamp to n)]
    (if (< a b) (subvec s a b) [])))

(defn- broadcast [op shapes]
  (let [n (reduce max 0 (map count shapes))]
    (reduce (fn [out s]
              (mapv (fn [o d]
                      (cond (= o d) o (= 1 o) d (= 1 d) o
                            :else (throw (rules/error "flops.bad_input" (input op (str "shapes " (show shapes) " do not broadcast"))))))
                    out (concat (repeat (- n (count s)) 1) s)))
            (vec (repeat n 1)) shapes)))

(declare flops)

(defn- ev
  "The value of expression `e` in the call `c` ({:op :ins :outs :attrs}) and the let names `env`."
  [c env e]
  (let [op (:op c)]
    (cond
      (or (nil? e) (boolean? e)) e
      (integer? e) (long e)
      (string? e) (if (contains? env e) (env e) (throw (rules/error "flops.bad_spec" (entry op (str "no let name '" e "'")))))
      :else
      (let [[f & args] e]
        (case f
          "if" (let [v (ev c env (first args))]
                 (when-not (boolean? v) (throw (rules/error "flops.bad_input" (input op (str "'if' needs a boolean, got " (show v))))))
                 (ev c env (if v (second args) (nth args 2))))
          "attr" (let [v (get (:attrs c) (first args))]
                   (cond (some? v) v
                         (< (count args) 2) (throw (rules/error "flops.bad_input" (input op (str "attribute '" (first args) "' is required"))))
                         :else (ev c env (second args))))
          "str" (first args)
          "call" (flops (first args) (mapv #(ev c env %) (second args)) (:attrs c))
          (let [v (mapv #(ev c env %) args)]
            (case f
              "in" (let [i (first v)]
                     (if (< i (count (:ins c))) ((:ins c) i)
                         (throw (rules/error "flops.bad_input" (input op (str "needs input " i ", got " (count (:ins c)) " shape(s)"))))))
              "out" (let [i (first v)]
                      (if (and (:outs c) (< i (count (:outs c)))) ((:outs c) i)
                          (throw (ex-info "unknown-output" {::unknown true}))))
              "ins" (:ins c)
              "nin" (long (count (:ins c)))
              ("+" "*" "-" "//" ">") (let [r (reduce #(arith op f %1 %2) v)]
                                       (if (and (= "+" f) (= 1 (count v))) (arith op f 0 r) r))
              "=" (= (first v) (second v))
              "len" (long (count (shape op (first v))))
              "prod" (reduce * 1 (shape op (first v)))
              "at" (let [s (shape op (first v))] (s (index op s (second v))))
              "slice" (py-slice (shape op (first v)) (second v) (nth v 2))
              "set" (let [s (shape op (first v))] (assoc s (index op s (second v)) (nth v 2)))
              "vec" (mapv #(scalar op %) v)
              "cat" (vec (mapcat #(shape op %) v))
              "fill" (vec (repeat (first v) (second v)))
              "broadcast" (broadcast op (first v))
              (throw (rules/error "flops.bad_spec" (entry op (str "unknown operation '" f "'")))))))))))

(defn- call [op ins attrs outs]
  {:op op :ins (mapv #(mapv long %) ins) :outs (some->> outs (mapv #(mapv long %)))
   :attrs (into {} (for [[k v] attrs] [(if (keyword? k) (name k) (str k)) (parse-attr v)]))})

(defn- env [c fam]
  (reduce (fn [m [n e]] (assoc m n (ev c m e))) {} (fam "let")))

(defn family
  "The family of `op` in flops.json, or nil when the operator has no formula."
  [op]
  (some-> (operators op) families))

(defn flops
  "Floating-point operations of one call of `op` (a multiply-add is 2), or nil when the spec has
  no formula for it. `input-shapes`: the inputs' shapes in MXNet's order; `attrs`: the
  operator's attributes (string or keyword keys; MXNet's strings or JVM values). Throws
  :flops.bad_input / :flops.bad_spec catalogue errors."
  ([op input-shapes] (flops op input-shapes {}))
  ([op input-shapes attrs]
   (when-let [fam (family op)]
     (let [c (call op input-shapes attrs nil)]
       (scalar op (ev c (env c fam) (fam "flops")))))))

(defn output-shapes
  "The output shapes the spec gives for `op` (hidden outputs too), or nil when it has no formula
  or leaves them to the recorded outputs."
  ([op input-shapes] (output-shapes op input-shapes {}))
  ([op input-shapes attrs]
   (let [fam (family op)]
     (when (and fam (contains? fam "out"))
       (let [c (call op input-shapes attrs nil) m (env c fam)]
         (try (vec (for [e (fam "out") :let [s (ev c m e)] :when (some? s)] (shape op s)))
              (catch clojure.lang.ExceptionInfo e
                (if (::unknown (ex-data e)) nil (throw e)))))))))

(defn- nbytes [shapes dtypes default]
  (reduce + 0 (map (fn [s dt]
                     (* (or (dtype-bytes dt)
                            (throw (rules/error "flops.bad_input" (input "bytes" (str "unknown dtype " (show dt))))))
                        (reduce * 1 (map long s))))
                   shapes (if (sequential? dtypes) dtypes (repeat (or dtypes default))))))

(defn bytes-moved
  "Bytes of the inputs read plus the outputs written by one call of `op`, or nil when the spec
  has no formula and no recorded outputs are given. Options: :dtypes (one name, or one per
  input; default float32), :output-shapes (the recorded outputs, used instead of the spec's),
  :output-dtypes (default the first input's). Throws as `flops`."
  ([op input-shapes] (bytes-moved op input-shapes {} {}))
  ([op input-shapes attrs] (bytes-moved op input-shapes attrs {}))
  ([op input-shapes attrs {:keys [dtypes output-dtypes] outs :output-shapes}]
   (when-let [outs (or outs (output-shapes op input-shapes attrs))]
     (let [default (spec "default_dtype")
           first-dt (if (sequential? dtypes) (or (first dtypes) default) (or dtypes default))]
       (+ (nbytes input-shapes dtypes default) (nbytes outs output-dtypes first-dt))))))

(defn segment-flops
  "FLOPs of a bulk segment: the sum over its nodes [op input-shapes attrs], or nil when any node
  has no formula."
  [nodes]
  (let [cs (map (fn [[op ins attrs]] (flops op ins attrs)) nodes)]
    (when (every? some? cs) (reduce + 0 cs))))

(defn segment-bytes
  "Bytes of a bulk segment: the sum of its nodes' `bytes-moved` (float32), or nil."
  [nodes]
  (let [cs (map (fn [[op ins attrs]] (bytes-moved op ins attrs)) nodes)]
    (when (every? some? cs) (reduce + 0 cs))))

(defn check-spec
  "Checks every expression of `s` (default the loaded spec) against the grammar: known
  operations, their numbers of arguments, called operators and families that exist. Throws
  :flops.bad_spec naming the entry."
  ([] (check-spec spec))
  ([s]
   (let [ar (get-in s ["grammar" "ops"])
         walk (fn walk [e where]
                (when (sequential? e)
                  (let [[f & args] e [lo hi] (ar f)]
                    (when-not lo (throw (rules/error "flops.bad_spec" (entry where (str "unknown operation [" (show f) "]")))))
                    (when-not (<= lo (count args) (or hi (count args)))
                      (throw (rules/error "flops.bad_spec" (entry where (str (show f) " takes " lo " to " (show hi) " arguments, got " (count args))))))
                    (cond (= "call" f) (do (when-not (contains? (s "operators") (first args))
                                             (throw (rules/error "flops.bad_spec" (entry where (str "calls unknown " (show (first args)))))))
                                           (doseq [a (second args)] (walk a where)))
                          (not= "str" f) (doseq [a args] (walk a where))))))]
     (doseq [[op n] (s "operators")]
       (when-not (contains? (s "families") n)
         (throw (rules/error "flops.bad_spec" (entry (str "operators." op) (str "no family " (show n)))))))
     (doseq [[n fam] (s "families")]
       (when-not (and (contains? fam "flops") (sequential? (fam "let")))
         (throw (rules/error "flops.bad_spec" (entry (str "families." n) "needs let and flops"))))
       (doseq [pair (fam "let")]
         (when-not (and (sequential? pair) (= 2 (count pair)) (string? (first pair)))
           (throw (rules/error "flops.bad_spec" (entry (str "families." n ".let") (str (show pair) " is not a [name, expression] pair")))))
         (walk (second pair) (str "families." n ".let." (first pair))))
       (walk (fam "flops") (str "families." n ".flops"))
       (doseq [e (fam "out")] (walk e (str "families." n ".out"))))
     true)))

(check-spec)
