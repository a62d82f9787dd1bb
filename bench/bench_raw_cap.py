"""How far past its cap the raw trace goes when only the watchdog holds it (docs/performance.md).

A child records ``_plus_scalar`` operators and API calls into one window without a step, with
the cap lowered to --cap-mb MiB ($PYPROF_RAW_MAX_BYTES) and dump_period 0.05 s, and samples the
raw trace's size every 5 ms until it has not grown for 1 s. Reported per run: the bytes past
the cap, the same as seconds of recording at the rate of the second before the cap (the spec's bound is
dump_period + watch_seconds = 0.3 s of events), and how long after the cap the file still grew.
The suite's tests check only that the trace stopped growing, whatever the load.

    .venv/bin/python bench/bench_raw_cap.py --cap-mb 3 --runs 5
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

CHILD = """
import json, os, threading, time, mxnet as mx, pyprof
from pyprof.session import raw_trace_path
cap, sizes, done = int(os.environ["PYPROF_RAW_MAX_BYTES"]), [], threading.Event()
def sample():
    while not done.is_set():
        try:
            sizes.append((time.monotonic(), os.path.getsize(raw_trace_path())))
        except (TypeError, OSError):
            pass
        time.sleep(0.005)
def settled():
    ss = list(sizes)
    return len(ss) > 2 and ss[-1][1] >= cap and any(s != ss[-1][1] for _, s in ss) and \\
        ss[-1][0] - next(t for t, s in ss if s == ss[-1][1]) > 1.0
a = mx.nd.ones((4,))
with pyprof.profile(path="cap_{window}.json", profile_imperative=True, profile_api=True,
                    dump_period=0.05):
    threading.Thread(target=sample, daemon=True).start()
    hard = time.monotonic() + 120
    while time.monotonic() < hard and not settled():
        for _ in range(50):
            a += 1
        mx.nd.waitall()
done.set()
k = next(i for i, (_, s) in enumerate(sizes) if s >= cap)
t_cap = sizes[k][0]
j = next(i for i, (t, _) in enumerate(sizes) if t >= t_cap - 1.0)  # the last second before the cap
top = max(s for _, s in sizes)
print(json.dumps({"over": top - cap, "rate": (sizes[k][1] - sizes[j][1]) / max(1e-6, t_cap - sizes[j][0]),
                  "grew_s": next(t for t, s in sizes if s == top) - t_cap}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cap-mb", type=float, default=3, help="the cap in MiB (default 3)")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    seconds = []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, PYTHONPATH=str(ROOT),
                       PYPROF_RAW_MAX_BYTES=str(int(args.cap_mb * 2**20)))
            r = subprocess.run([sys.executable, "-c", CHILD], cwd=tmp, env=env, text=True,
                               capture_output=True, timeout=300, check=True)
            res = json.loads(r.stdout.strip().splitlines()[-1])
            seconds.append(res["over"] / res["rate"])
            print(f"run {i}: {res['over'] / 2**20:.2f} MiB past the cap = {seconds[-1]:.3f} s of "
                  f"recording at {res['rate'] / 2**20:.1f} MiB/s; grew for {res['grew_s']:.3f} s "
                  f"after the cap")
    print(f"past the cap: {min(seconds):.3f}-{max(seconds):.3f} s of recording "
          f"(bound: dump_period + watch_seconds = 0.30 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
