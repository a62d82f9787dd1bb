"""Foundation benchmark: dot GFLOP/s per binding against numpy, and set_state cost.

Run:  .venv/bin/python bench/bench_foundation.py [--size 4096] [--pairs 20000]

Prints a Markdown report (paste it into docs/performance.md). Each measurement that
records a trace runs in its own child process (one profiler session per process).
1. dot GFLOP/s: `pyprof matmul` with the Python and the JVM binding (profiler operator
   time and wall clock), and numpy's own matmul on the same inputs in the same process
   as the Python binding's run.
2. Per-call cost of a set_state('run') / set_state('stop') pair through pyprof,
   mxnet.profiler and the JVM binding (timed inside the JVM, and through JPype).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DOT_PY = """
import argparse, json, sys, time
import mxnet as mx
from pyprof.examples import matmul
p = argparse.ArgumentParser(); matmul.add_arguments(p)
o = p.parse_args(sys.argv[2:])
mx.random.seed(7)
r = matmul.run_jvm(o) if o.binding == "jvm" else matmul.run(o)
out = {"gflops": r.gflops, "wall_gflops": r.wall_gflops, "dot_ms": r.dot_ms, "name": r.dot_name}
if o.binding == "python":
    mx.random.seed(7)  # the same inputs the profiled run used
    a = mx.nd.random.uniform(-1.0, 1.0, (o.size, o.size)).asnumpy()
    b = mx.nd.random.uniform(-1.0, 1.0, (o.size, o.size)).asnumpy()
    a @ b  # warm-up
    best = []
    for _ in range(3):
        t = time.perf_counter(); a @ b; best.append(time.perf_counter() - t)
    out["numpy_gflops"] = 2 * o.size ** 3 / min(best) / 1e9
json.dump(out, open(sys.argv[1], "w"))
"""

STATE_PY = """
import json, sys, time
PAIRS = int(sys.argv[2])
from mxnet import profiler as mxprof
from pyprof import profiler, jvm
profiler.set_config(filename=sys.argv[3], continuous_dump=False, profile_api=False)

def per_pair(run, stop, n=PAIRS):
    for _ in range(200):
        run(); stop()
    samples = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            run(); stop()
        samples.append((time.perf_counter() - t) / n * 1e6)
    return min(samples)

out = {}
out["pyprof"] = per_pair(lambda: profiler.set_state("run"), lambda: profiler.set_state("stop"))
out["mxnet.profiler"] = per_pair(lambda: mxprof.set_state("run"), lambda: mxprof.set_state("stop"))
set_state = jvm.require("pyprof.profiler")["profiler-set-state"]
out["JVM binding, called from Python via JPype"] = per_pair(
    lambda: set_state("run"), lambda: set_state("stop"), n=PAIRS // 4)
out["JVM binding, timed inside the JVM"] = jvm.eval_clojure(f'''
(let [set-state pyprof.profiler/profiler-set-state
      n {PAIRS}
      pairs (fn [] (dotimes [_ n] (set-state "run") (set-state "stop")))]
  (dotimes [_ 3] (pairs))
  (reduce min (for [_ (range 5)]
                (let [t (System/nanoTime)] (pairs) (/ (- (System/nanoTime) t) 1000.0 n)))))''')
json.dump(out, open(sys.argv[1], "w"))
"""


def child(code: str, *args: str) -> dict:
    with tempfile.TemporaryDirectory() as d:
        res = Path(d) / "r.json"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        subprocess.run([sys.executable, "-c", code, str(res), *args], cwd=d, env=env,
                       check=True, stdout=subprocess.DEVNULL)
        return json.loads(res.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--pairs", type=int, default=20000)
    o = ap.parse_args()
    rows = []
    for binding in ("python", "jvm"):
        with tempfile.TemporaryDirectory() as d:
            r = child(DOT_PY, "--size", str(o.size), "--iters", "5", "--begin", "1",
                      "--end", "4", "--binding", binding, "--output", f"{d}/t.json")
        rows.append((binding, r))
    with tempfile.TemporaryDirectory() as d:
        s = child(STATE_PY, str(o.pairs), f"{d}/t.json")
    print(f"## Foundation benchmark\n\nCommand: `.venv/bin/python bench/bench_foundation.py "
          f"--size {o.size} --pairs {o.pairs}`  \nMachine: {os.cpu_count()} cores, "
          f"{platform.processor() or platform.machine()}, Python {platform.python_version()}\n")
    print(f"### dot {o.size}x{o.size} float32 (3 profiled iterations)\n")
    print("| binding | GFLOP/s (profiler operator time) | GFLOP/s (wall clock) | numpy matmul GFLOP/s (same process) |")
    print("|---|---|---|---|")
    for binding, r in rows:
        npg = f"{r['numpy_gflops']:.1f}" if "numpy_gflops" in r else "—"
        print(f"| {binding} | {r['gflops']:.1f} | {r['wall_gflops']:.1f} | {npg} |")
    print("\n### set_state('run') + set_state('stop'), per pair (best of 5)\n")
    print("| path | us per pair |")
    print("|---|---|")
    for k, v in s.items():
        print(f"| {k} | {v:.2f} |")


if __name__ == "__main__":
    main()
