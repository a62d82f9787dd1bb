#!/usr/bin/env python3
"""Do ``pyprof bench``'s two engines agree? Timings on the machine as it is, not a test.

After subtracting the python engine's fixed per-run cost (measured on a one-element
``identity``), the forward medians of ``dot`` and ``sin`` (512x512) should differ by less than
twice the larger IQR plus 5 % of the native median. Prints one row per operator and exits 1
when an operator is outside that band (rerun on an idle machine before reading much into it).

    .venv/bin/python bench/bench_engines.py [--runs 25]
"""

from __future__ import annotations

import argparse
import sys

from pyprof import bench
from pyprof.bench.inputs import Tensor

HEAVY = ["dot", "sin"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=25)
    args = ap.parse_args()
    cases = [c for c in bench.plan(HEAVY, []) if list(c.inputs.values())[0].shape[0] == 512]
    cases.append(bench.Case("identity", {"data": Tensor((1,))}))
    opts = dict(runs=args.runs, warmup=3, run_backward=False, progress=False)
    res = {eng: bench.run_cases(cases, profiler=eng, **opts) for eng in bench.ENGINES}
    nat, py = res["native"], res["python"]
    overhead = (py.find("identity")[0]["forward"]["median_ms"]
                - nat.find("identity")[0]["forward"]["median_ms"])
    print(f"python engine's fixed per-run cost: {overhead:.3f} ms")
    print("| op | native median (ms) | python median - cost (ms) | difference (ms) | band (ms) |")
    print("|---|---:|---:|---:|---:|")
    ok = True
    for op in HEAVY:
        a, b = nat.find(op)[0]["forward"], py.find(op)[0]["forward"]
        band = 2 * max(a["iqr_ms"], b["iqr_ms"]) + 0.05 * a["median_ms"]
        diff = b["median_ms"] - overhead - a["median_ms"]
        ok &= abs(diff) <= band
        print(f"| {op} | {a['median_ms']:.3f} | {b['median_ms'] - overhead:.3f} | {diff:+.3f} "
              f"| {band:.3f} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
