"""What the API gate costs: thousands of tiny imperative operators with the profiler running,
pyprof (every MXNet call gated) against raw mxnet.profiler (no gate), in one benchmark run;
and the per-call cost of one gated C call, in Python and in the JVM.

    .venv/bin/python bench/bench_gate.py [--ops 20000] [--rounds 7]

The small-op workload is ``a + 1`` on a 2x2 NDArray, ``ops`` times, then ``waitall``
(profile_api and profile_imperative on, continuous dump off), in five modes: raw
mxnet.profiler and pyprof with the profiler running, pyprof with it configured and stopped,
and steady mode (``pyprof.steady.begin``) paused and resumed. The modes alternate in fresh
child processes, ``rounds`` each; each child reports the median of 3 passes in microseconds
per operator. The per-call figure times ``MXGetVersion``
(the cheapest C API call) raw and through the gate, in alternating blocks of one process, best
block of each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The small-operator workload (bench_capture.py runs it too): N times ``b = a + 1`` on a 2x2
#: NDArray, then waitall; ``once()`` gives microseconds per operator.
WORKLOAD = """
a = mx.nd.ones((2, 2)); mx.nd.waitall()
def once():
    t0 = time.perf_counter()
    for _ in range(N):
        b = a + 1
    mx.nd.waitall()
    return (time.perf_counter() - t0) / N * 1e6
"""

SMALL_OPS = """
import json, os, statistics, sys, time
N = int(sys.argv[1])
{imports}
CONFIG = dict(profile_api=True, profile_imperative=True, continuous_dump=False)
{setup}""" + WORKLOAD.replace("{", "{{").replace("}", "}}") + """once()  # warm-up
us = statistics.median(once() for _ in range(3))
{teardown}
print(json.dumps({{"us_per_op": us}}))
"""

_MX = "import mxnet as mx\nfrom mxnet import profiler"
_PYPROF = "import pyprof\nimport mxnet as mx\nfrom pyprof import profiler"
_CONFIGURE = 'profiler.set_config(filename=os.environ["TRACE"], **CONFIG)'
_STEADY = 'pyprof.steady.begin(filename=os.environ["TRACE"], **CONFIG)'

#: The modes measured, each (imports, setup, teardown): raw mxnet.profiler and pyprof with the
#: profiler running; pyprof configured and stopped; steady mode paused (running, every API call
#: still pushed and popped by MXNet, nothing recorded) and resumed (recording).
IMPORTS = {
    "mxnet.profiler": (_MX, f'{_CONFIGURE}\nprofiler.set_state("run")',
                       'profiler.set_state("stop")'),
    "pyprof": (_PYPROF, f'{_CONFIGURE}\nprofiler.set_state("run")', 'profiler.set_state("stop")'),
    "pyprof stopped": (_PYPROF, _CONFIGURE, ""),
    "pyprof steady, paused": (_PYPROF, _STEADY, "pyprof.steady.end()"),
    "pyprof steady, resumed": (_PYPROF, f"{_STEADY}\nprofiler.resume()", "pyprof.steady.end()"),
}

PER_CALL = """
import ctypes, json, statistics, time
import mxnet as mx
raw = mx.base._LIB.MXGetVersion
import pyprof  # guards mxnet.base._LIB
gated = mx.base._LIB.MXGetVersion
v = ctypes.c_int(); ref = ctypes.byref(v)
def block(f, n=100000):
    t0 = time.perf_counter_ns()
    for _ in range(n): f(ref)
    return (time.perf_counter_ns() - t0) / n
times = {"raw": [], "gated": []}
for _ in range(15):  # alternating blocks: both see the same machine
    times["raw"].append(block(raw)); times["gated"].append(block(gated))
print(json.dumps({k + "_ns": min(v) for k, v in times.items()}))
"""

JVM_PER_CALL = """
(import '(com.sun.jna.ptr IntByReference) '(pyprof.jvm.capi LibMXNet))
(let [v (IntByReference.)
      n 2000000
      run (fn [] (let [t0 (System/nanoTime)]
                   (dotimes [_ n] (LibMXNet/MXGetVersion v))
                   (/ (double (- (System/nanoTime) t0)) n)))]
  (dotimes [_ 3] (run))
  (println (nth (sort (repeatedly 5 run)) 2)))
"""


def _python(code: str, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        env["TRACE"] = os.path.join(tmp, "trace.json")
        out = subprocess.run([sys.executable, "-c", code, *args], env=env, check=True,
                             capture_output=True, text=True, timeout=600).stdout
    return json.loads(out.strip().splitlines()[-1])


def alternate(child: str, modes: dict[str, dict], ops: int, rounds: int,
              env: dict[str, dict[str, str]] | None = None) -> dict[str, list[dict]]:
    """Run ``child`` (``python -c``, argv: ops, the mode's session options as JSON, a trace
    path) once per mode per round, the modes alternating, each in a fresh process with this
    checkout on its path (and ``env[mode]`` added); the JSON of each run's last line, by mode."""
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    base = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for mode, options in modes.items():
                out = subprocess.run([sys.executable, "-c", child, str(ops), json.dumps(options),
                                      os.path.join(tmp, "w.json")], env={**base, **(env or {}).get(mode, {})},
                                     check=True, capture_output=True, text=True, timeout=900)
                runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    return runs


def small_ops(ops: int, rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in IMPORTS}
    for _ in range(rounds):
        for name, (imports, setup, teardown) in IMPORTS.items():
            code = SMALL_OPS.format(imports=imports, setup=setup, teardown=teardown)
            times[name].append(_python(code, str(ops))["us_per_op"])
    return times


def jvm_per_call() -> float:
    sys.path.insert(0, str(ROOT))
    from pyprof import jvm

    out = subprocess.run(["java", "-cp", os.pathsep.join(jvm.classpath()), "clojure.main",
                          "-e", JVM_PER_CALL], check=True, capture_output=True, text=True,
                         timeout=600).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    times = small_ops(args.ops, args.rounds)
    med = {k: statistics.median(v) for k, v in times.items()}
    per_call = _python(PER_CALL)
    print(f"## Small operators, profiler running ({args.ops} ops, {args.rounds} rounds "
          "alternating, median)\n")
    print("| path | us per operator (median) | all rounds |")
    print("|---|---|---|")
    for k, v in times.items():
        print(f"| {k} | {med[k]:.2f} | {', '.join(f'{x:.2f}' for x in v)} |")
    best = {k: min(v) for k, v in times.items()}
    print(f"\nratio pyprof / mxnet.profiler: {med['pyprof'] / med['mxnet.profiler']:.3f} "
          f"(medians), {best['pyprof'] / best['mxnet.profiler']:.3f} (best rounds)")
    for k in ("pyprof stopped", "pyprof steady, paused", "pyprof steady, resumed"):
        print(f"ratio {k} / mxnet.profiler (running): "
              f"{med[k] / med['mxnet.profiler']:.3f} (medians)")
    print()
    print("## One C call (MXGetVersion), ns per call (best of 15 alternating blocks)\n")
    print("| path | ns |")
    print("|---|---|")
    print(f"| Python, raw ctypes (mxnet.base._LIB before pyprof) | {per_call['raw_ns']:.0f} |")
    print(f"| Python, gated (mxnet.base._LIB after import pyprof) | {per_call['gated_ns']:.0f} |")
    print(f"| JVM, gated (LibMXNet.MXGetVersion: read lock + JNA direct call) | "
          f"{jvm_per_call():.0f} |")


if __name__ == "__main__":
    main()
