"""What a long recording window costs per operator, collections included (docs/performance.md).

bench_capture.py takes medians over short blocks, which leave out the cyclic collector's full
passes; a window that records many calls makes them longer. Here each child runs ``--ops``
tiny operators (``b = a + 1`` on a 2x2 NDArray, bench_gate's workload) in one window without a
break, and reports the mean time per operator and the time the collector took (``gc.callbacks``),
per mode, the modes alternating over ``--rounds`` child processes; also the time
``Recorder.take`` took when the window was cut, per operator (the native recorder's log is
drained and parsed there), and which recorder ran. ``record_shapes (python)`` is
``record_shapes`` with the Python recorder forced (``PYPROF_RECORDER=python``).

    .venv/bin/python bench/bench_capture_gc.py [--ops 40000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics

from bench_gate import WORKLOAD, alternate  # the same small-operator workload


CHILD = """
import gc, json, sys, time
import mxnet as mx, pyprof
N, OPTIONS = int(sys.argv[1]), json.loads(sys.argv[2])
spent, began, full = [0.0], [0.0], [0]
def on_gc(phase, info):
    if phase == "start":
        began[0] = time.perf_counter()
    else:
        spent[0] += time.perf_counter() - began[0]
        full[0] += info["generation"] == 2
gc.callbacks.append(on_gc)
from pyprof.attribution import capture
took, kind, real_take = [0.0], [None], capture.Recorder.take
def take(self):
    t = time.perf_counter()
    out = real_take(self)
    took[0] += time.perf_counter() - t
    kind[0] = self.kind
    return out
capture.Recorder.take = take
""" + WORKLOAD + """with pyprof.profile(path=sys.argv[3], profile_api=False, **OPTIONS):
    N, ops = 200, N
    once()  # warm-up
    spent[0], full[0], N = 0.0, 0, ops
    us = once()
    gc_us, nfull = spent[0] / N * 1e6, full[0]
    took[0] = 0.0
print(json.dumps({"us_per_op": us, "gc_us_per_op": gc_us, "full": nfull,
                  "take_us_per_op": took[0] / (N + 200) * 1e6, "recorder": kind[0]}))
"""

MODES = {"session": {}, "record_shapes": {"record_shapes": True},
         "record_shapes (python)": {"record_shapes": True}, "with_stack": {"with_stack": True},
         "shapes+stack": {"record_shapes": True, "with_stack": True}}
ENV = {"record_shapes (python)": {"PYPROF_RECORDER": "python"}}  # the Python recorder forced


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=40000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    runs = alternate(CHILD, MODES, args.ops, args.rounds, ENV)
    base = statistics.median(r["us_per_op"] for r in runs["session"])
    for mode, rs in runs.items():
        us = statistics.median(r["us_per_op"] for r in rs)
        print(f"{mode}: {us:.2f} us/op (median of {len(rs)}; {us - base:+.2f} over the session), "
              f"collector {statistics.median(r['gc_us_per_op'] for r in rs):.2f} us/op, "
              f"full collections {[r['full'] for r in rs]}, take {statistics.median(r['take_us_per_op'] for r in rs):.2f} us/op"
              f" (recorder {rs[0]['recorder']})")


if __name__ == "__main__":
    main()
