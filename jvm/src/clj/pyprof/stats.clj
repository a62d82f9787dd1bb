(ns pyprof.stats
  "Exact per-operator statistics of traces in the Trace Event Format (MXNet's and any other),
  computed the way `pyprof.trace.stats` (the Python reference) computes them, so both agree on
  the same file; streamed in bounded memory.

  Units are in the keys: times in microseconds (`:total-us`; `ts` in MXNet traces is integer
  microseconds, so count, total, min and max are exact integers; they are floats, as numpy's
  float64, for a record where a duration is not a whole number of microseconds), memory in bytes.

  How calls are counted: the rules of docs/trace-format.md, the phase table, pairing scopes and
  note wording read from pyprof/spec/trace.json (`pyprof.trace.phases`), as in Python:
  - `B`/`E` and frame `(`/`)` pairs: an end with a name closes the latest open begin of that name
    on its thread [pid tid], an end without a name the innermost open begin of its thread; one
    pair is one call, of the category of its end event. `X` events count as one call of `dur`.
  - Async `b`/`e` and legacy `S`/`F` pairs are matched per [begin phase, pid cat id name] (`id`,
    else `id2`, with `scope`; b/e and S/F pair only with their own kind); a nameless end closes the last one opened. MXNet's `b`/`e` copies of every
    operator (categories \"operator\" and \"Custom Operator\") are skipped, never counted twice.
  - `C` counters named \"Memory: <device>\" are memory samples in bytes; other counters are
    summarised as value series.
  - Left out and counted in `:notes`: ends without a begin and begins without an end, negative
    durations, events of a timed phase without a numeric `ts` (or `X` without `dur`), counter
    values that are not numbers, unknown phases.
  - Every category is included by default, C API calls (\"MXNET_C_API\") too; `:exclude-categories`
    leaves some out (after parsing), as Python's `exclude_categories`.
  - Files are read by `pyprof.trace.reader`: one event at a time, damaged MXNet files repaired as
    Python's reader does (the damage is listed in `:notes`), other top-level keys before or after
    the events found from the JSON structure. Memory holds the per-operator durations (8 bytes a
    call, for exact percentiles, as Python's `array('q')`), the memory samples (16 bytes each)
    and the open begin events; never the file.
  - p50/p90/p99 are exact: numpy's default linear interpolation between order statistics, in
    the same floating-point steps as numpy 1.23.

  The entry point, as `pyprof/trace/stats.py`: events are paired and pooled by
  `pyprof.trace.accumulate`, whose results are the records of `pyprof.trace.records`; what
  categories and names mean is `pyprof.trace.naming`, Python's and numpy's arithmetic
  `pyprof.trace.pycompat`."
  (:require [pyprof.trace.accumulate :as accumulate]
            [pyprof.trace.naming :as naming]
            [pyprof.trace.pycompat :as pycompat]
            [pyprof.trace.reader :as reader]
            [pyprof.rules :as rules])
  (:import (java.util ArrayList List)))

(set! *warn-on-reflection* true)

(def async-copy-categories
  "Async (b/e) categories that duplicate a B/E pair; never counted."
  naming/async-copy-categories)

(def api-category
  "Category of MXNet's C API call events (included unless `:exclude-categories` names it)."
  naming/api-category)

(def bulk-note
  "Python's `BULK_NOTE`: what bulk-merged operator names mean."
  naming/bulk-note)

(defn bulk-name?
  "True for names of MXNet bulk segments (trace.json bulk.names): \"ImperativeBulk\", \"[dot]\",
  \"Activation,Convolution\"."
  [^String name]
  (naming/bulk-name? name))

(defn percentile
  "The `p`th percentile (0..100) of the sorted long array `sorted`, with numpy's default
  (linear) method, computed in the same floating-point steps as numpy 1.23 (`_quantile`,
  `_lerp`): virtual index (n-1)*p/100, int64 difference, interpolation from the nearer end."
  ^double [^longs sorted p]
  (pycompat/percentile sorted p))


;; ------------------------------------------------------------------ API

(defn read-events
  "The events of the trace file at `path`, valid or damaged (see `pyprof.trace.reader`), in a
  vector: the whole file in memory; `stats` streams instead."
  [path]
  (reader/read-events path))

(defn- path-like? [x]
  (or (string? x) (instance? java.io.File x) (instance? java.nio.file.Path x)))

(defn stats
  "Exact statistics of one trace file or a sequence of them (records with the same
  [category name device] are pooled across files; device names, not pids, identify a device):

    {:units {:time \"us\" :memory \"bytes\"}
     :operators [{:category :name :device :count :total-us :min-us :max-us
                  :mean-us :p50-us :p90-us :p99-us :bulk} ...]   ; by :total-us, descending
     :memory    [{:device :samples :min-bytes :max-bytes :mean-bytes
                  :time-weighted-mean-bytes :last-bytes :first-ts-us :last-ts-us} ...]
     :counters  [{:category :name :count :min :max :mean :last} ...]
     :unmatched-begin n :unmatched-end n
     :negative-durations n :no-timestamp n :bad-counter-values n   ; left out (see the notes)
     :unknown-phases {\"Q\" n ...}
     :phase-counts {\"B\" n ...}   ; events parsed per ph (async copies, excluded categories not)
     :reports [read report per file, see pyprof.trace.reader/read-trace]
     :notes [\"...\"]}             ; Python's TraceStats.notes

  The same numbers as Python's `pyprof.trace.stats(...).to_dict()`. Files (plain or gzip,
  damaged ones too) are streamed: memory grows with the number of calls, not the file size.

  Options: `:categories` keeps only those categories; `:exclude-categories` skips those before
  parsing (e.g. #{\"MXNET_C_API\"}; C API calls are included by default, as in Python);
  `:chunk-bytes` the read size. `paths` may also be sequences of event maps (already read
  traces; no report).

  Throws ex-info with `:pyprof/error` `:trace-not-found` or `:trace-format` (a file that cannot
  be opened or holds no trace event), `:invalid-option` (no paths)."
  ([paths] (stats paths {}))
  ([paths {:keys [categories exclude-categories chunk-bytes]}]
   (let [sources (if (path-like? paths) [paths] paths)
         _ (when (empty? sources)
             (throw (rules/error "trace.no_paths")))
         excluded (not-empty (set exclude-categories))
         acc (accumulate/new-acc (some-> categories set) excluded)
         reports (ArrayList.)]
     (doseq [src sources]
       (let [st (accumulate/new-file-state)]
         (if (or (sequential? src) (instance? List src))
           (doseq [ev src] (accumulate/add-event! acc st ev))
           (.add reports (reader/read-trace (str src)
                                            (cond-> {:drop-async-copies true
                                                     :exclude-categories excluded}
                                              chunk-bytes (assoc :chunk-bytes chunk-bytes))
                                            #(accumulate/add-event! acc st %))))
         (accumulate/end-file! acc st)))
     (accumulate/result acc reports))))

(defn find-ops
  "The operator records of `result` named `name` (optionally of one category)."
  ([result name] (find-ops result name nil))
  ([result name category]
   (filterv #(and (= name (:name %)) (or (nil? category) (= category (:category %))))
            (:operators result))))
