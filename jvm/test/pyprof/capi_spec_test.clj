(ns pyprof.capi-spec-test
  "The JNA direct mappings (`pyprof.jvm.capi.Natives`, and the dot example's
  `pyprof.jvm.example.MXNet`) against pyprof/spec/capi.json, the one list of the C functions
  pyprof binds (tests/test_capi_spec.py checks that list against the wheel's c_api.h). Every
  declared native method is a function the spec lists for its language (\"jvm\", \"example\"),
  and its Java types are what the spec's C types map to by the table below."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.rules :as rules])
  (:import (com.sun.jna Pointer)
           (com.sun.jna.ptr IntByReference LongByReference PointerByReference)
           (java.lang.reflect Method Modifier)))

(def spec (rules/read-spec "capi.json"))

(defn c-type
  "[base depth] of a C type as the spec spells it: const dropped, typedefs resolved."
  [typedefs spelled]
  (let [flat (str/replace spelled #"\bconst\b|\s" "")
        base (str/replace flat #"\*+$" "")
        depth (- (count flat) (count base))]
    (if-let [t (get typedefs base)]
      (let [[b d] (c-type typedefs t)] [b (+ depth d)])
      [base depth])))

(def ^:private int32 #{"int" "uint32_t"})
(def ^:private int64 #{"int64_t" "uint64_t" "size_t"})

(defn java-type
  "The Java type JNA direct mapping takes for a C type. `out?`: the function writes through the
  pointer (a ...ByReference); an input array of numbers is a Java array, an input array of
  pointers or strings a Pointer (built by LibMXNet/strings or LibMXNet/pointers)."
  [typedefs spelled out?]
  (let [[base depth] (c-type typedefs spelled)]
    (cond
      (zero? depth) (cond (int32 base) Integer/TYPE (int64 base) Long/TYPE)
      out? (cond (> depth 1) PointerByReference
                 (int32 base) IntByReference
                 (int64 base) LongByReference)
      (and (= depth 1) (= base "char")) String
      (and (= depth 1) (= base "void")) Pointer
      (and (= depth 1) (int32 base)) (Class/forName "[I")
      (and (= depth 1) (int64 base)) (Class/forName "[J")
      :else Pointer)))

(defn natives
  "name -> {:args [Class] :returns Class} of the native methods declared by `cls`."
  [^Class cls]
  (into (sorted-map)
        (for [^Method m (.getDeclaredMethods cls)
              :when (Modifier/isNative (.getModifiers m))]
          [(.getName m) {:args (vec (.getParameterTypes m)) :returns (.getReturnType m)}])))

(defn problems
  "Where the native methods `found` (as `natives` returns them) differ from the functions of
  `spec` for `language` (default \"jvm\"): a method the spec does not list for it, a listed
  function with no method, an argument count, an argument's or the return's Java type."
  ([spec found] (problems spec found "jvm"))
  ([spec found language]
   (let [typedefs (get spec "typedefs")
         want (into (sorted-map) (filter #(some #{language} (get (val %) "languages")))
                    (get spec "functions"))
         name-of #(if (class? %) (.getName ^Class %) (str %))]
     (concat
      (for [n (keys found) :when (not (contains? want n))]
        (str n ": a native method, not listed for " language " in capi.json"))
      (for [n (keys want) :when (not (contains? found n))]
        (str n ": listed for " language " in capi.json, no native method"))
      (for [[n f] want :let [m (get found n)] :when m
            p (let [args (get f "args")
                    ret (java-type typedefs (get f "returns") false)]
                (concat
                 (when (not= ret (:returns m))
                   [(str n ": returns " (name-of (:returns m)) ", not " (name-of ret)
                         " (" (get f "returns") ")")])
                 (if (not= (count args) (count (:args m)))
                   [(str n ": " (count (:args m)) " parameters, " (count args) " in capi.json")]
                   (for [[i [t arg out] actual] (map vector (range) args (:args m))
                         :let [expected (java-type typedefs t (= out "out"))]
                         :when (not= expected actual)]
                     (str n " argument " i " (" arg "): " (name-of actual) ", not "
                          (name-of expected) " (" t (when out " out") ")")))))]
        p)))))

(def natives-class (Class/forName "pyprof.jvm.capi.Natives"))

(deftest the-table-maps-c-types-as-jna-direct-mapping-takes-them
  (let [td (get spec "typedefs")]
    (is (= ["void" 2] (c-type td "ProfileHandle*")))
    (is (= ["char" 2] (c-type td "const char* const*")))
    (is (= Long/TYPE (java-type td "uint64_t" false)))
    (is (= Integer/TYPE (java-type td "uint32_t" false)))
    (is (= String (java-type td "const char*" false)))
    (is (= Pointer (java-type td "const char* const*" false)))
    (is (= PointerByReference (java-type td "const char**" true)))
    (is (= PointerByReference (java-type td "NDArrayHandle**" true)))
    (is (= IntByReference (java-type td "int*" true)))
    (is (= (Class/forName "[I") (java-type td "uint32_t*" false)))
    (is (= Pointer (java-type td "NDArrayHandle*" false)))))

(deftest every-native-method-is-what-capi-json-declares
  (let [found (natives natives-class)]
    (is (= [] (vec (problems spec found))))
    (testing "the reflection sees the real methods"
      (is (= (count (filter #(some #{"jvm"} (get (val %) "languages")) (get spec "functions")))
             (count found)))
      (is (= {:args [Pointer Long/TYPE] :returns Integer/TYPE} (get found "MXProfileSetCounter")))
      (is (= {:args [] :returns String} (get found "MXGetLastError"))))))

(deftest the-example-s-native-methods-are-what-capi-json-declares
  (let [found (natives (Class/forName "pyprof.jvm.example.MXNet$N"))]
    (is (= [] (vec (problems spec found "example"))))
    (is (= (count (filter #(some #{"example"} (get (val %) "languages")) (get spec "functions")))
           (count found)))
    (is (= ["MXSymbolFree: a native method, not listed for example in capi.json"]
           (vec (problems (assoc-in spec ["functions" "MXSymbolFree" "languages"] ["jvm"]) found
                          "example"))))))

(deftest the-check-finds-a-planted-break
  (let [found (natives natives-class)]
    (testing "a spec that says another type, another count, another language"
      (let [broken (-> spec
                       (assoc-in ["functions" "MXProfileSetCounter" "args" 1 0] "int")
                       (assoc-in ["functions" "MXGetLastError" "returns"] "int")
                       (update-in ["functions" "MXExecutorForward" "args"] pop)
                       (assoc-in ["functions" "MXNDArrayFree" "languages"] ["python"])
                       (assoc-in ["functions" "MXListAllOpNames" "languages"] ["python" "jvm"]))]
        (is (= #{"MXNDArrayFree: a native method, not listed for jvm in capi.json"
                 "MXListAllOpNames: listed for jvm in capi.json, no native method"
                 "MXGetLastError: returns java.lang.String, not int (int)"
                 "MXExecutorForward: 2 parameters, 1 in capi.json"
                 "MXProfileSetCounter argument 1 (value): long, not int (int)"}
               (set (problems broken found))))))
    (testing "a native method with another Java type"
      (is (= ["MXProfileCreateDomain argument 1 (out): com.sun.jna.Pointer, not com.sun.jna.ptr.PointerByReference (ProfileHandle* out)"]
             (vec (problems spec (assoc-in found ["MXProfileCreateDomain" :args 1] Pointer))))))))
