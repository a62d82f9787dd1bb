"""What closing a window costs, in Python and on the JVM, beside MXNet's own stop and dump of the
same events (docs/performance.md, "Closing a window").

    .venv/bin/python bench/bench_window_close.py [--seconds 3] [--rounds 2] [--forwards 20]

One run measures, each in fresh child processes, the kinds alternating over ``--rounds``:

* **mxnet**: a plain ``mxnet.profiler`` with pyprof's recording defaults (symbolic, imperative,
  memory and API profiling on) and ``continuous_dump=False`` over a loop of small imperative
  operators (``a + 1`` on a 2x2 NDArray, a ``waitall`` every 100) for ``--seconds``; timed:
  ``set_state('stop')`` + ``dump(finished=True)``; events counted in the file written.
* **python**: the same loop in a ``pyprof.profile()`` session; timed: ``stop()`` (MXNet's last
  append to the raw trace, then the window's cut); also the cut alone, the raw bytes it read,
  and how far the peak RSS during ``stop()`` rose above the RSS before it.
* **jvm**: the same in a child JVM through the Java facade ``pyprof.jvm.ProfilerSession`` (a loop
  of ``random-uniform -1 1 [8 8]`` + ``wait-to-read``, pyprof.example.ndarray; after
  ``ProfilerSession.init()``, as a service calls it at start-up); timed: ``stop()``, which waits
  for its windows.
* **resnet**: 20 (``--forwards``) forwards of a gluon model zoo ResNet-18 (random weights, built
  locally, not hybridized, batch 1 at 224x224): MXNet's own stop and dump, a session's
  ``stop()``, and a session's ``stop()`` with ``record_shapes`` and ``with_flops`` (the cut,
  then the annotation of its calls).

Per kind: events, seconds, events/s, MB/s (bytes written: MXNet's trace, the window) and the
ratio of its cost per event to MXNet's (same workload; medians over the rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The small-operator loop, run for SECONDS (a waitall every 100 operators).
LOOP = """
a = mx.nd.ones((2, 2)); mx.nd.waitall()
def loop():
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < SECONDS:
        for _ in range(100):
            b = a + 1
        mx.nd.waitall(); n += 100
    return n
"""

RESNET = """
from mxnet.gluon.model_zoo import vision
net = vision.resnet18_v1()  # random weights: nothing downloaded
net.initialize(mx.init.Xavier())
x = mx.nd.random.uniform(shape=(1, 3, 224, 224))
net(x).wait_to_read()  # the first forward allocates: not profiled
def loop():
    for _ in range(int(SECONDS)):
        net(x).wait_to_read()
    return int(SECONDS)
"""

MXNET = """
import json, os, sys, time
import orjson
import mxnet as mx
from mxnet import profiler
SECONDS, OUT = float(sys.argv[1]), sys.argv[2]
%(workload)s
profiler.set_config(filename=OUT, profile_symbolic=True, profile_imperative=True,
                    profile_memory=True, profile_api=True, continuous_dump=False)
profiler.set_state("run")
ops = loop()
t = time.perf_counter()
profiler.set_state("stop")
profiler.dump(finished=True)
s = time.perf_counter() - t
with open(OUT, "rb") as f:
    events = len(orjson.loads(f.read())["traceEvents"])
print(json.dumps({"s": s, "events": events, "bytes": os.path.getsize(OUT), "ops": ops}))
"""

PYTHON = """
import json, os, sys, time
import mxnet as mx, pyprof
from pyprof.session import raw as _raw
SECONDS, OUT, OPTIONS = float(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
%(workload)s%(kib)s
cuts = []
def cut(start, end, out, extra=(), keep=None, tail=None, _cut=_raw.RAW.cut):
    t = time.perf_counter()
    n = _cut(start, end, out, extra, keep, tail)
    cuts.append((time.perf_counter() - t, end - start))
    return n
_raw.RAW.cut = cut
p = pyprof.profile(path=OUT, **OPTIONS)
p.start()
ops = loop()
rss = kib("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak RSS starts again from now
t = time.perf_counter()
p.stop()
s = time.perf_counter() - t
w = p.windows[0]
print(json.dumps({"s": s, "events": w.events, "bytes": os.path.getsize(w.path), "ops": ops,
                  "cut_s": cuts[0][0], "raw_bytes": cuts[0][1], "rss_mb": rss / 1024,
                  "peak_mb": kib("VmHWM") / 1024,
                  "matched": w.attribution.matched if w.attribution else None}))
"""

#: The process's VmRSS / VmHWM (peak RSS) in KiB, from /proc/self/status.
KIB = """
def kib(field):
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) for x in f if x.startswith(field + ":"))
"""

JVM = """
(require '[pyprof.example.ndarray :as nd])
(import '(pyprof.jvm ProfilerSession))
(ProfilerSession/init)  ; as a service does at start-up: the namespaces and the cut warmed up
(let [seconds %(seconds)s
      s (.start (ProfilerSession. {"path" "%(out)s"}))
      t0 (System/nanoTime)
      ops (loop [n 0]
            (if (< (- (System/nanoTime) t0) (* seconds 1e9))
              (do (dotimes [_ 100] (let [x (nd/random-uniform -1 1 [8 8])] (nd/wait-to-read x) (nd/close x)))
                  (recur (+ n 100)))
              n))
      t (System/nanoTime)
      ws (.stop s)
      dt (/ (- (System/nanoTime) t) 1e9)
      w (first ws)]
  (println (str "{\\"s\\": " dt ", \\"events\\": " (get w "events") ", \\"bytes\\": "
                (.length (java.io.File. (str (get w "path")))) ", \\"ops\\": " ops "}")))
(shutdown-agents)
"""


def _python(code: str, *args: str, tmp: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=tmp, check=True,
                         capture_output=True, text=True, timeout=900)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _jvm(seconds: float, tmp: str, cp: str, env: dict[str, str]) -> dict:
    out = subprocess.run(["java", f"-Dpyprof.outputRoot={tmp}", "-cp", cp, "clojure.main", "-e",
                          JVM % {"seconds": seconds, "out": os.path.join(tmp, "jvm_{window}.json")}],
                         env=env, cwd=tmp, capture_output=True, text=True, timeout=900)
    if out.returncode:
        raise SystemExit(f"the JVM child exited {out.returncode}:\n{out.stderr[-3000:]}")
    return json.loads([x for x in out.stdout.splitlines() if x.startswith("{")][-1])


def measure(seconds: float, rounds: int, forwards: int, jvm: bool = True) -> dict[str, list[dict]]:
    """Every kind, ``rounds`` times, the kinds alternating: {kind: [child results]}."""
    kinds: dict[str, list[dict]] = {}
    small, resnet = LOOP, RESNET
    cp = env = None
    if jvm:
        sys.path.insert(0, str(ROOT))
        from pyprof import jvm as _jvm_mod
        from pyprof.native import capi as _capi
        cp = os.pathsep.join(_jvm_mod.classpath())
        env = dict(os.environ, MXNET_LIBRARY_PATH=_capi.library_path())
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            runs = [
                ("mxnet", lambda: _python(MXNET % {"workload": small}, str(seconds), "mx.json", tmp=tmp)),
                ("python", lambda: _python(PYTHON % {"workload": small, "kib": KIB}, str(seconds), "py_{window}.json",
                                           "{}", tmp=tmp)),
                ("mxnet resnet", lambda: _python(MXNET % {"workload": resnet}, str(forwards),
                                                 "mxr.json", tmp=tmp)),
                ("python resnet", lambda: _python(PYTHON % {"workload": resnet, "kib": KIB}, str(forwards),
                                                  "pyr_{window}.json", "{}", tmp=tmp)),
                ("python resnet, shapes and flops", lambda: _python(
                    PYTHON % {"workload": resnet, "kib": KIB}, str(forwards), "pyf_{window}.json",
                    json.dumps({"record_shapes": True, "with_flops": True}), tmp=tmp)),
            ]
            if jvm:
                runs.insert(2, ("jvm", lambda: _jvm(seconds, tmp, cp, env)))
            for kind, run in runs:
                kinds.setdefault(kind, []).append(run())
    return kinds


def _row(kind: str, rs: list[dict], base: list[dict] | None) -> str:
    s = statistics.median(r["s"] for r in rs)
    ev = statistics.median(r["events"] for r in rs)
    mb = statistics.median(r["bytes"] for r in rs) / 1e6
    per = statistics.median(r["s"] / r["events"] for r in rs)
    ratio = "" if base is None else f"{per / statistics.median(r['s'] / r['events'] for r in base):.2f}x"
    extra = ""
    if "cut_s" in rs[0]:
        cut = statistics.median(r["cut_s"] for r in rs)
        raw = statistics.median(r["raw_bytes"] for r in rs) / 1e6
        peak = statistics.median(r["peak_mb"] - r["rss_mb"] for r in rs)
        extra = f"cut {cut:.2f} s of {raw:.0f} MB raw ({raw / cut:.0f} MB/s); peak RSS +{peak:.0f} MB"
    return (f"| {kind} | {ev:,.0f} | {s:.2f} | {ev / s / 1e6:.2f} M | {mb / s:.0f} | {ratio} | "
            f"{extra} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="seconds of small operators")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--forwards", type=int, default=20, help="ResNet-18 forwards")
    ap.add_argument("--no-jvm", action="store_true")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    t0 = time.time()
    kinds = measure(args.seconds, args.rounds, args.forwards, jvm=not args.no_jvm)
    print(f"# {platform.machine()}, {os.cpu_count()} cores, load {load:.2f} at the start, "
          f"{os.getloadavg()[0]:.2f} at the end, {time.time() - t0:.0f} s; medians of {args.rounds}\n")
    print("| kind | events | stop (s) | events/s | MB/s written | per event vs MXNet | |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for kind, rs in kinds.items():
        base = kinds["mxnet resnet"] if "resnet" in kind else kinds["mxnet"]
        print(_row(kind, rs, None if kind.startswith("mxnet") else base))
    print("\n" + json.dumps(kinds))


if __name__ == "__main__":
    main()
