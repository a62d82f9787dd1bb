"""What recording a bound executor's forward costs: ``relu(dot)`` of 4x4 arrays bound once and
forwarded in a pyprof session window with ``record_shapes``, ``with_stack`` and
``with_flops``, beside the same session without them.

    .venv/bin/python bench/bench_capture_executor.py [--forwards 300] [--rounds 3]

Each mode runs in fresh child processes (the profiler is one per process), alternating,
``rounds`` each. A child times ``forwards`` calls of ``Executor.forward()`` (a ``waitall``
every 50, outside the timing) and reports the median call in microseconds; with the options
on, also the median over ``BLOCKS`` pairs of passes in the same window with the recorder paused
and resumed (the added cost per forward, which a loaded machine disturbs less than a difference
between processes), and the seconds the window took to cut and annotate (matching its calls to
its events and rewriting it: ``Session.stop``).
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

CHILD = """
import json, os, statistics, sys, time
N, ON, BLOCKS = int(sys.argv[1]), sys.argv[2] == "1", 9
import mxnet as mx, pyprof
A, B = mx.sym.var("A"), mx.sym.var("B")
ex = mx.sym.relu(mx.sym.dot(A, B)).bind(mx.cpu(), {"A": mx.nd.ones((4, 4)), "B": mx.nd.ones((4, 4))})
ex.forward(); mx.nd.waitall()
def once(n):
    ts = []
    for i in range(n):
        t = time.perf_counter_ns(); ex.forward(); ts.append(time.perf_counter_ns() - t)
        if i % 50 == 49: mx.nd.waitall()
    mx.nd.waitall()
    return statistics.median(ts) / 1000
opts = dict(record_shapes=True, with_stack=True, with_flops=True) if ON else {}
prof = pyprof.profile(path=os.environ["TRACE"], **opts)
prof.start()
us, paired = once(N), []
rec = prof._recorder
if rec is not None:
    for _ in range(BLOCKS):
        rec.pause(); off = once(N // BLOCKS)
        rec.resume(); on = once(N // BLOCKS)
        paired.append(on - off)
t = time.perf_counter(); prof.stop(); cut = time.perf_counter() - t
rep = prof.windows[0].attribution
print(json.dumps({"us": us, "added_us": statistics.median(paired) if paired else None, "cut_s": cut,
                  "matched": rep.matched if rep else None, "ambiguous": rep.ambiguous if rep else None}))
"""


def _run(on: bool, forwards: int, tmp: str) -> dict:
    env = dict(os.environ, TRACE=os.path.join(tmp, f"{int(on)}.json"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", CHILD, str(forwards), "1" if on else "0"], env=env,
                         capture_output=True, text=True, check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--forwards", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    runs: dict[str, list[dict]] = {"session": [], "recording": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for mode in runs:
                runs[mode].append(_run(mode == "recording", args.forwards, tmp))
    med = {m: {k: statistics.median(r[k] for r in v) for k in ("us", "cut_s")} for m, v in runs.items()}
    rec = runs["recording"]
    report = {"forwards": args.forwards, "rounds": args.rounds, "median": med,
              "added_us": statistics.median(r["added_us"] for r in rec),
              "ambiguous": [r["ambiguous"] for r in rec], "matched": [r["matched"] for r in rec]}
    print(f"forward(): session {med['session']['us']:.1f} us, recording {med['recording']['us']:.1f} us;"
          f" added per forward (resumed minus paused, same window) {report['added_us']:+.1f} us;"
          f" cut {med['session']['cut_s']:.3f} s, cut and annotate {med['recording']['cut_s']:.3f} s")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
