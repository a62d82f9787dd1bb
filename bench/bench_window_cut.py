"""What closing a long window costs: ``stop()`` of a session after ``--ops`` tiny operators
(``b = a + 1`` on a 2x2 NDArray, bench_gate's workload) in one window, with ``profile_api`` on
(the session default), plain and with every attribution option; one child process per run,
the modes alternating over ``--rounds`` (docs/performance.md, "Closing a long window").

    .venv/bin/python bench/bench_window_cut.py [--ops 10000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics

from bench_gate import WORKLOAD, alternate  # the same small-operator workload


CHILD = """
import json, os, sys, time
import mxnet as mx, pyprof
N, OPTIONS = int(sys.argv[1]), json.loads(sys.argv[2])
""" + WORKLOAD + """p = pyprof.profile(path=sys.argv[3], **OPTIONS)
p.start()
once()
t = time.perf_counter()
p.stop()
s = time.perf_counter() - t
print(json.dumps({"stop_s": s, "bytes": os.path.getsize(p.windows[0].path)}))
"""

MODES = {"session": {}, "every option": {"record_shapes": True, "with_stack": True, "with_flops": True}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    runs = alternate(CHILD, MODES, args.ops, args.rounds)
    for mode, rs in runs.items():
        s = statistics.median(r["stop_s"] for r in rs)
        print(f"{mode}: stop() {s:.2f} s for {args.ops} operators ({s / args.ops * 1e6:.0f} µs an "
              f"operator; window {rs[0]['bytes'] / 1e6:.1f} MB; median of {len(rs)})")


if __name__ == "__main__":
    main()
