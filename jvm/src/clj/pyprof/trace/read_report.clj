(ns pyprof.trace.read-report
  "What the trace reader found and fixed in one file: the read report, a port of
  `pyprof/trace/readreport.py` (`ReadReport`). While a file is read the report is a volatile map
  (`new-report`, counted with `add!` and `flag!`); `finish-report` adds `:damaged` and
  `:problems`, the sentences of Python's `ReadReport.problems()`.")

(set! *warn-on-reflection* true)

(defn new-report
  "The report of a file not read yet: a volatile map, nothing found. Besides the damage:
  `:display-time-unit` (the trace's `displayTimeUnit`), `:other-keys` (top-level keys other than
  traceEvents, in order), `:top-level` (the values of displayTimeUnit, otherData and metadata,
  when at most 1 MiB, which the writers keep), `:carried-events` (events cut in two by a `}, {`
  inside their args at a read boundary, read whole by joining the parts: not damage)."
  [path]
  (volatile! {:path path :bytes-read 0 :events 0 :missing-head false :leading-comma false
              :missing-tail false :inner-tails 0 :escaped-names 0 :dropped-fragments 0
              :dropped-bytes 0 :display-time-unit nil :other-keys [] :top-level {}
              :carried-events 0}))

(defn problems
  "Human-readable list of what was wrong with a file (its read report), empty for a valid file;
  the same sentences as Python's `ReadReport.problems()`."
  [{:keys [leading-comma missing-head missing-tail inner-tails escaped-names dropped-fragments
           dropped-bytes]}]
  (cond-> []
    leading-comma (conj "bare comma before the first event (second profiling session in one process)")
    missing-head (conj "missing {\"traceEvents\": [ header")
    missing-tail (conj "missing closing ]} (process crashed or profiler not finalised)")
    (pos? inner-tails) (conj (str inner-tails " closing ]} in the middle of the file (a dump appended "
                                  "after a finished trace), events on both sides kept"))
    (pos? escaped-names) (conj (str escaped-names " event(s) with unescaped characters in names"))
    (pos? dropped-fragments) (conj (str dropped-fragments " unreadable fragment(s), " dropped-bytes
                                        " bytes, dropped"))))

(defn finish-report
  "The report `r` of a file read to its end, with `:damaged` and `:problems`."
  [r]
  (let [ps (problems r)]
    (assoc r :damaged (boolean (seq ps)) :problems ps)))

(defn add!
  "Adds `n` to the count `k` of the report `rep` (a volatile)."
  [rep k ^long n] (vswap! rep update k + n))
(defn flag!
  "Sets the flag `k` of the report `rep` (a volatile)."
  [rep k] (vswap! rep assoc k true))
