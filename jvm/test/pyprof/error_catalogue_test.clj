(ns pyprof.error-catalogue-test
  "Every error of the JVM layer ends in a fix (\"... fix: <what to do>\"), as Python's
  tests/test_error_catalogue.py checks for the Python package: every entry of the catalogue
  (pyprof/spec/errors.json, the same file) renders in Clojure and Java with its fix last, and no
  `throw`/`ex-info` in jvm/src builds an error from a literal message without a fix."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.rules :as rules])
  (:import (pyprof.jvm PyprofException)))

(def ^:private field-re #"\{(api\.)?([a-z_]+)(!r)?\}")

(defn- sample-fields
  "A value for every field the entry's templates name (a vector for `choices`)."
  [{:strs [message fix]}]
  (into {} (for [[_ api? f] (mapcat #(re-seq field-re %) [message fix]) :when (not api?)]
             [(keyword f) (if (= f "choices") ["a" "b"] (str "<" f ">"))])))

(deftest every-entry-renders-with-a-fix
  (doseq [[code entry] (rules/catalogue "errors")
          :let [fields (sample-fields entry)]]
    (testing code
      (is (contains? (rules/api "error_kinds") (entry "kind")))
      (is (not (str/blank? (entry "fix"))))
      (doseq [lang ["clojure" "java"]
              :let [fix (rules/render (entry "fix") fields lang)
                    text (str (rules/render (entry "message") fields lang) " fix: " fix)]]
        (is (not (str/blank? fix)) lang)
        (doseq [v (vals fields) :when (string? v)]
          (is (str/includes? text v) (str lang " shows " v))))
      (let [e (rules/error code fields)
            j (PyprofException/catalogue code (into-array Object (mapcat (fn [[k v]] [(name k) v]) fields)))]
        (is (= (keyword (entry "kind")) (:pyprof/error (ex-data e))))
        (is (str/ends-with? (ex-message e) (str " fix: " (:fix (ex-data e)))))
        (is (str/ends-with? (ex-message j) (str " fix: " (:java-fix (ex-data j)))))))))

;; ------------------------------------------------------------------ the static check

(defn- form-at
  "The text of the form that opens at index `i` of `s` (a `(`), strings and comments skipped."
  [^String s i]
  (loop [j (inc i) depth 1 in-str false]
    (let [c (.charAt s j)]
      (cond
        in-str (cond (= c \\) (recur (+ j 2) depth true)
                     (= c \") (recur (inc j) depth false)
                     :else (recur (inc j) depth true))
        (= c \") (recur (inc j) depth true)
        (= c \;) (recur (inc (str/index-of s "\n" j)) depth false)
        (= c \\) (recur (+ j 2) depth false)
        (= c \() (recur (inc j) (inc depth) false)
        (= c \)) (if (= 1 depth) (subs s i (inc j)) (recur (inc j) (dec depth) false))
        :else (recur (inc j) depth false)))))

(defn- literals [form] (map second (re-seq #"\"((?:[^\"\\]|\\.)*)\"" form)))

(defn- lacks-fix?
  "A form whose string literals include a message (a literal with a space) but no `fix:`."
  [form]
  (let [ls (literals form)]
    (and (str/includes? (str/trim (str/join ls)) " ")
         (not-any? #(str/includes? % "fix:") ls))))

(defn scan-clojure
  "The `(throw ...)` and `(ex-info ...)` forms of Clojure source `s` that build an error from a
  literal message without a fix (catalogue errors, `rules/error`, carry theirs), as
  \"file:line: form\" (once per line: a throw holds its ex-info)."
  [s file]
  (->> (for [i (let [m (re-matcher #"\((?:throw|ex-info)[\s(]" s)]
             (loop [acc []] (if (.find m) (recur (conj acc (.start m))) acc)))
        :let [form (form-at s i)]
        :when (and (lacks-fix? form) (not (str/includes? form "rules/error")))]
    [(str file ":" (inc (count (re-seq #"\n" (subs s 0 i))))) (subs form 0 (min 80 (count form)))])
       (reduce (fn [m [at form]] (if (contains? m at) m (assoc m at form))) (sorted-map))
       (map (fn [[at form]] (str at ": " form)))))

(defn scan-java
  "The `throw new X(...)` statements and `PyprofException.state/option(...)` calls of Java source
  `s` with a literal message and no fix. `WindowCutter.NotLayout` is left out: a signal its
  callers catch (they read the range the tolerant way, whose errors carry fixes), never shown."
  [s file]
  (for [[stmt] (re-seq #"(?s)(throw new \w+\(.*?\);|PyprofException\.(?:state|option)\(.*?\);)" s)
        :when (and (lacks-fix? stmt) (not (str/starts-with? stmt "throw new NotLayout(")))]
    (str file ": " (subs stmt 0 (min 80 (count stmt))))))

(defn- sources [ext]
  (for [^java.io.File f (file-seq (io/file "src")) :when (str/ends-with? (.getName f) ext)] f))

(deftest no-literal-error-message-lacks-a-fix
  (let [found (distinct (concat (mapcat #(scan-clojure (slurp %) (str %)) (sources ".clj"))
                                (mapcat #(scan-java (slurp %) (str %)) (sources ".java"))))]
    (is (empty? found) (str/join "\n" found))))

(deftest the-scan-finds-planted
  (let [clj (str "(defn f [x] (throw (ex-info (str \"bad \" x \" given\") {:pyprof/error :x})))\n"
                 "(defn g [] (throw (IllegalStateException. \"no session runs\")))\n"
                 "(defn h [x] (ex-info (str x \"; nothing to do\") {}))\n"
                 "(defn ok [x] (throw (ex-info (str \"bad \" x \". fix: pass one\") {})))\n"
                 "(defn ok2 [x] (throw (rules/error \"trace.empty\" {:path x})))\n"
                 "(defn ok3 [e] (throw e))\n")
        java (str "class A { void f(int x) { throw new IllegalArgumentException(\"x must be > 0, got \" + x); }\n"
                  "void g() { throw PyprofException.state(\"it is closed\"); }\n"
                  "void ok() { throw new IllegalStateException(\"none runs. fix: call start()\"); } }")]
    (is (= ["p.clj:1" "p.clj:2" "p.clj:3"] (map #(subs % 0 7) (scan-clojure clj "p.clj"))))
    (is (= 2 (count (scan-java java "A.java"))))))
