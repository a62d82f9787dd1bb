(ns ^:no-doc pyprof.session.template
  "Window-path templates by grammar.json `window_path`, as Python's `pyprof.session.template`:
  text, fields {window} {step} {pid} ({window:02d}), escapes {{ and }}."
  (:require [clojure.string :as str]
            [pyprof.rules :as rules]))

(set! *warn-on-reflection* true)

(def ^:private spec (get (rules/read-spec "grammar.json") "window_path"))
(def fields "The field names, as in grammar.json." (set (keys (spec "fields"))))
(def ^:private token (re-pattern (spec "token")))
(def ^:private field (re-pattern (str "(?s)" (spec "field"))))
(def ^:private fmt (re-pattern (spec "spec")))

(defn parse
  "The template `text` as a vector of strings and field maps {:name :fill :width};
  template.unknown_field, template.bad_spec, template.unbalanced."
  [^String text]
  (let [m (re-matcher token text)]
    (loop [pos 0, parts []]
      (if (>= pos (count text))
        parts
        (let [_ (.find m (int pos))
              tok (.group m)
              inside (.group m 1)
              fail #(throw (rules/error %1 (merge {:path text :position (.codePointCount text 0 (int pos))}
                                                  %2)))]
          (recur (.end m)
                 (conj parts
                       (cond (#{"{{" "}}"} tok) (subs tok 0 1)
                             inside (let [[_ nm sp] (re-matches field inside)
                                          [_ zero width] (re-matches fmt (or sp ""))]
                                      (cond (not (fields nm))
                                            (fail "template.unknown_field" {:field nm})
                                            (not (re-matches fmt (or sp "")))
                                            (fail "template.bad_spec" {:field nm :spec sp})
                                            :else {:name nm :fill (if (seq zero) \0 \space)
                                                   :width (if width (Long/parseLong width) 0)}))
                             (#{"{" "}"} tok) (fail "template.unbalanced" {:brace tok})
                             :else tok))))))))

(defn escape
  "`text` as template text that fills to itself (every brace doubled)."
  ^String [^String text]
  (-> text (str/replace "{" "{{") (str/replace "}" "}}")))

(defn fill
  "The parsed `parts` with each field's value in `values` (name -> integer >= 0)."
  ^String [parts values]
  (str/join (map (fn [p]
                   (if (string? p)
                     p
                     (let [v (str (values (:name p)))]
                       (str (str/join (repeat (- (:width p) (count v)) (:fill p))) v))))
                 parts)))

(defn canonical
  "The template `parts` written one way for what they name: a field as {name} when its width is
  1 or less, every literal brace doubled."
  ^String [parts]
  (str/join (map (fn [p]
                   (cond (string? p) (escape p)
                         (<= (:width p) 1) (str "{" (:name p) "}")
                         :else (str "{" (:name p) ":" (when (= \0 (:fill p)) "0") (:width p) "d}")))
                 parts)))
