"""What closing a long window costs: ``stop()`` of a session after ``--ops`` tiny operators
(``b = a + 1`` on a 2x2 NDArray, bench_gate's workload) in one window, with ``profile_api`` on
(the session default), plain and with every attribution option; one child process per run,
the modes alternating over ``--rounds`` (docs/performance.md, "Closing a long window").

    .venv/bin/python bench/bench_window_cut.py [--ops 10000] [--rounds 2]
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
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for mode, options in MODES.items():
                out = subprocess.run([sys.executable, "-c", CHILD, str(args.ops), json.dumps(options),
                                      os.path.join(tmp, "w.json")], env=env, check=True,
                                     capture_output=True, text=True, timeout=900)
                runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    for mode, rs in runs.items():
        s = statistics.median(r["stop_s"] for r in rs)
        print(f"{mode}: stop() {s:.2f} s for {args.ops} operators ({s / args.ops * 1e6:.0f} µs an "
              f"operator; window {rs[0]['bytes'] / 1e6:.1f} MB; median of {len(rs)})")


if __name__ == "__main__":
    main()
