"""Per-call cost of counter increment and task start/stop through every binding: pyprof's
Python objects against mxnet.profiler, and the JVM binding (timed inside the JVM, and called
from Python through JPype).

    .venv/bin/python bench/bench_objects.py [--calls 200000]

Each binding runs in its own child process with the profiler running (profile_api, imperative
and symbolic off; continuous dump off), after a warm-up of the same size; the median of 5
rounds is reported in nanoseconds per call (a task start/stop pair counts as one call).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CONFIG = dict(profile_symbolic=False, profile_imperative=False, profile_api=False,
              profile_memory=False, continuous_dump=False, aggregate_stats=False)

PY_COMMON = """
import json, os, statistics, sys, time
N = int(sys.argv[1])
def bench(f):
    f(N)
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter_ns(); f(N); rounds.append((time.perf_counter_ns() - t0) / N)
    return statistics.median(rounds)
"""

# pyprof.profiler and mxnet.profiler have the same object API: one body serves both.
PYTHON_OBJECTS = PY_COMMON + """
from {module} import profiler
profiler.set_config(filename=os.environ["TRACE"], **json.loads(os.environ["CONFIG"]))
profiler.set_state("run")
d = profiler.Domain("bench"); c = profiler.Counter(d, "c"); t = profiler.Task(d, "t")
def inc(n):
    for _ in range(n): c.increment(1)
def task(n):
    for _ in range(n): t.start(); t.stop()
print(json.dumps({{"counter": bench(inc), "task": bench(task)}}))
"""

JPYPE = PY_COMMON + """
from pyprof import jvm
p = jvm.require("pyprof.profiler")
p.profiler_set_config({k.replace("_", "-"): v for k, v in json.loads(os.environ["CONFIG"]).items()}
                      | {"filename": os.environ["TRACE"]})
p.profiler_set_state("run")
d = p.domain("bench"); c = p.counter(d, "c"); t = p.task(d, "t")
inc_ns, start, stop = p["increment"], p["start"], p["stop"]
def inc(n):
    for _ in range(n): inc_ns(c, 1)
def task(n):
    for _ in range(n): start(t); stop(t)
# the Java objects directly (JPype method calls, no Clojure conversion)
def inc_java(n):
    for _ in range(n): c.increment(1)
def task_java(n):
    for _ in range(n): t.start(); t.stop()
print(json.dumps({"counter": bench(inc), "task": bench(task),
                  "counter_java": bench(inc_java), "task_java": bench(task_java)}))
"""

CLOJURE = """
(require '[pyprof.profiler :as p] '[clojure.data.json :as json])
(let [n (Long/parseLong (System/getenv "CALLS"))
      cfg (into {} (map (fn [[k v]] [(keyword (clojure.string/replace k "_" "-")) v]))
                (json/read-str (System/getenv "CONFIG")))
      _ (p/profiler-set-config (assoc cfg :filename (System/getenv "TRACE")))
      _ (p/profiler-set-state :run)
      d (p/domain "bench") c (p/counter d "c") t (p/task d "t")
      bench (fn [f] (f n)
              (let [rs (sort (for [_ (range 5)]
                               (let [t0 (System/nanoTime)] (f n) (/ (double (- (System/nanoTime) t0)) n))))]
                (nth rs 2)))]
  (println (json/write-str
            {"counter" (bench (fn [^long n] (dotimes [_ n] (p/increment c 1))))
             "task" (bench (fn [^long n] (dotimes [_ n] (p/start t) (p/stop t))))})))
"""


def _run(cmd, env, calls):
    e = dict(os.environ, **env, CALLS=str(calls), CONFIG=json.dumps(CONFIG),
             PYTHONPATH=str(ROOT))
    out = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=900, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200_000)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from pyprof.native import capi as _capi
    from pyprof import jvm
    lib = _capi.library_path()
    cp = os.pathsep.join(jvm.classpath())
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        def trace(name):
            return {"TRACE": os.path.join(tmp, name + ".json")}
        py = [sys.executable, "-c"]
        for label, module in (("mxnet.profiler (Python)", "mxnet"),
                              ("pyprof.profiler (Python)", "pyprof")):
            res[label] = _run(py + [PYTHON_OBJECTS.format(module=module), str(args.calls)],
                              trace(module), args.calls)
        res["JVM, timed in the JVM (Clojure)"] = _run(
            ["java", f"-Dmxnet.library.path={lib}", "-cp", cp, "clojure.main", "-e", CLOJURE],
            trace("clj"), args.calls)
        jp = _run(py + [JPYPE, str(args.calls)], trace("jpype"), args.calls)
        res["JVM via JPype (pyprof.jvm namespace call)"] = {"counter": jp["counter"], "task": jp["task"]}
        res["JVM via JPype (Java method on ProfileObject)"] = {"counter": jp["counter_java"],
                                                             "task": jp["task_java"]}
    print(f"Command: {' '.join([os.path.relpath(sys.executable, ROOT)] + sys.argv)}\n")
    print(f"{args.calls} calls per round, median of 5 rounds, profiler running; ns per call\n")
    print("| binding | counter increment (ns) | task start+stop (ns) |")
    print("|---|---:|---:|")
    for k, v in res.items():
        print(f"| {k} | {v['counter']:.0f} | {v['task']:.0f} |")


if __name__ == "__main__":
    main()
