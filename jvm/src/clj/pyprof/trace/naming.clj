(ns pyprof.trace.naming
  "What MXNet's event categories and names mean to the statistics: a port of
  `pyprof/trace/naming.py` (C API category, async operator copies, bulk segments and the note
  about them, the prefix of memory counters)."
  (:require [clojure.string :as str]))

(set! *warn-on-reflection* true)

(def async-copy-categories
  "Async (b/e) categories that duplicate a B/E pair; never counted."
  #{"operator" "Custom Operator"})

(def api-category
  "Category of MXNet's C API call events (included unless `:exclude-categories` names it)."
  "MXNET_C_API")

(def bulk-note
  "Python's `BULK_NOTE`: what bulk-merged operator names mean."
  (str "names like 'A,B' or '[op]' are operators MXNet ran as one bulk segment; for "
       "per-operator numbers set MXNET_EXEC_BULK_EXEC_INFERENCE=0 and "
       "MXNET_EXEC_BULK_EXEC_TRAIN=0 in the environment before MXNet's engine starts "
       "(before `import mxnet`)"))

(def memory-prefix
  "Prefix of memory counter names: \"Memory: <device>\" (values in bytes)."
  "Memory: ")

(defn bulk-name?
  "True for names of MXNet bulk segments: \"Activation,Convolution\" or \"[dot]\"."
  [^String name]
  ;; (?d): only \n ends a line, as in Python's re
  (boolean (or (re-find #"(?d)^\[.*\]$" name) (str/includes? name ","))))
