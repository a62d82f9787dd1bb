"""What operator attribution costs per call: tiny imperative operators in a pyprof session
window with ``record_shapes``, ``with_stack``, both, and ``with_flops``, beside the same session
without them and raw ``mxnet.profiler``, in one benchmark run.

    .venv/bin/python bench/bench_capture.py [--ops 5000] [--rounds 3]

The workload is bench_gate.py's: ``b = a + 1`` on a 2x2 NDArray, ``ops`` times, then
``waitall``, inside one recording window. Every mode runs in fresh child processes, the modes
alternating, ``rounds`` each (``record_shapes (python)``: with the Python recorder forced,
``PYPROF_RECORDER=python``; ``record_shapes (native-api)``: the native one asking MXNet for
shapes, ``PYPROF_RECORDER=native-api``; plain ``record_shapes`` runs the native one where it
builds, reading shapes in place); a child reports the median of 3 passes in microseconds per
operator (writing the window, and matching, come after the timed passes). Then, in the same
window, ``BLOCKS`` pairs of passes with the recorder paused and resumed, alternating: the added
cost of a mode is the median of (resumed - paused), which a loaded machine disturbs much less
than a difference between processes. Twice: with ``profile_api`` on (the session default: the
recorder's shape queries are traced too) and off.
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

from bench_gate import WORKLOAD  # the same small-operator workload

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, os, statistics, sys, time
BLOCKS = 15
N, API = int(sys.argv[1]), sys.argv[2] == "1"
OPTIONS = json.loads(sys.argv[3])
import mxnet as mx
""" + WORKLOAD + """if OPTIONS is None:
    from mxnet import profiler
    profiler.set_config(filename=os.environ["TRACE"], profile_api=API, profile_imperative=True)
    profiler.set_state("run")
    once(); us = statistics.median(once() for _ in range(3))
    profiler.set_state("stop")
else:
    import pyprof
    with pyprof.profile(path=os.environ["TRACE"], profile_api=API, **OPTIONS) as prof:
        once(); us = statistics.median(once() for _ in range(3))
        rec, paired = prof._recorder, []
        if rec is not None:  # the same window, blocks with recording paused and resumed, alternating
            for _ in range(BLOCKS):
                rec.pause(); off = once()
                rec.resume(); on = once()
                paired.append(on - off)
    if paired:
        print(json.dumps({"us_per_op": us, "added_us": statistics.median(paired)}))
        sys.exit(0)
print(json.dumps({"us_per_op": us}))
"""

#: Mode -> the session's options (None: raw mxnet.profiler, no session).
MODES = {
    "mxnet.profiler": None,
    "session": {},
    "record_shapes": {"record_shapes": True},
    "record_shapes (native-api)": {"record_shapes": True},
    "record_shapes (python)": {"record_shapes": True},
    "with_stack": {"with_stack": True},
    "shapes+stack": {"record_shapes": True, "with_stack": True},
    "with_flops": {"with_flops": True},
}
# The Python recorder forced; the native one asking MXNet for shapes (no in-place read).
ENV = {"record_shapes (python)": {"PYPROF_RECORDER": "python"},
       "record_shapes (native-api)": {"PYPROF_RECORDER": "native-api"}}


def _run(mode: str, ops: int, api: bool, tmp: str) -> dict[str, float]:
    env = dict(os.environ, TRACE=os.path.join(tmp, f"{mode}.json"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               **ENV.get(mode, {}))
    out = subprocess.run([sys.executable, "-c", CHILD, str(ops), "1" if api else "0",
                          json.dumps(MODES[mode])], env=env, capture_output=True, text=True,
                         check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    report = {"ops": args.ops, "rounds": args.rounds, "us_per_op": {}, "added_us": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for api in (True, False):
            runs: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
            for _ in range(args.rounds):
                for mode in MODES:
                    runs[mode].append(_run(mode, args.ops, api, tmp))
            med = {m: statistics.median(r["us_per_op"] for r in v) for m, v in runs.items()}
            key = "profile_api on" if api else "profile_api off"
            report["us_per_op"][key] = med
            report["added_us"][key] = {m: statistics.median(r["added_us"] for r in v)
                                       for m, v in runs.items() if v and "added_us" in v[0]}
            print(f"{key}: " + ", ".join(f"{m} {v:.2f}" for m, v in med.items()) + " us/op", flush=True)
            print("  added per op (recording resumed minus paused, same window): " + ", ".join(
                f"{m} {v:+.2f} us" for m, v in report["added_us"][key].items()), flush=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
