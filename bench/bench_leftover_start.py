"""How long a session's start() takes with a dead process's leftover (docs/performance.md).

Makes a real leftover: a child records operators and API calls into one window until its raw
trace holds --mb MiB, then SIGKILLs itself. With --sparse-gb the raw trace is then extended by
a sparse tail to that size (hardly any disk). A second child then times ``start()`` and how
long the sweep of the leftover took behind it, each run in a fresh directory.

    .venv/bin/python bench/bench_leftover_start.py --mb 12 --runs 3
    .venv/bin/python bench/bench_leftover_start.py --mb 1 --sparse-gb 5 --runs 3
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

VICTIM = """
import os, signal, mxnet as mx, pyprof
from pyprof.session import raw_trace_path
a = mx.nd.ones((4,))
with pyprof.profile(path="big.json", profile_imperative=True, profile_api=True, dump_period=0.05):
    while not os.path.exists(raw_trace_path()) or os.path.getsize(raw_trace_path()) < {size}:
        for _ in range(200):
            a += 1
        mx.nd.waitall()
    mx.nd.waitall()
    os.kill(os.getpid(), signal.SIGKILL)
"""

NEXT = """
import json, time, mxnet, pyprof
from pyprof.session import leftovers
t0 = time.monotonic()
prof = pyprof.profile(path="next.json")
prof.start()
took = time.monotonic() - t0
prof.stop()
leftovers.start_sweep(None).join(600)
print(json.dumps({"start_s": took, "swept_s": time.monotonic() - t0}))
"""


def run(code: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=12, help="MiB of real raw trace (default 12)")
    ap.add_argument("--sparse-gb", type=float, default=0, help="extend it sparsely to this")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            work, rawbase = Path(tmp) / "work", Path(tmp) / "rawbase"
            work.mkdir()
            env = {"PYPROF_RAW_DIR": str(rawbase)}
            run(VICTIM.format(size=int(args.mb * 2**20)), work, env)
            (raw,) = rawbase.glob("pyprof-raw-*/raw.json")
            if args.sparse_gb:
                os.truncate(raw, int(args.sparse_gb * 2**30))
            size = raw.stat().st_size
            r = run(NEXT, work, env)
            result = json.loads(r.stdout.strip().splitlines()[-1])
            said = [ln for ln in r.stderr.splitlines() if ln.startswith("pyprof: ")]
            print(f"run {i}: leftover {size / 2**20:.0f} MiB: start() {result['start_s']:.3f} s, "
                  f"sweep done after {result['swept_s']:.2f} s; {said[0][:60] if said else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
