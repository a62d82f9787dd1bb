"""Foreign bindings under steady mode, the long mode of tests/test_steady_foreign.py: 8 threads
calling libmxnet through their own binding (Python: their own ctypes.CDLL; Java: their own JNA
Library) while the main thread takes windows with profile_api on, in many child processes;
aborts, hangs and windows holding another window's events, per case (tests/foreign_harness.py).
The ``*-hazard`` cases are the same workload without steady mode (plain sessions: stop/run).

    .venv/bin/python bench/bench_foreign.py [--processes 10] [--windows 40] [--cases ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import foreign_harness as harness  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=10)
    ap.add_argument("--windows", type=int, default=40)
    ap.add_argument("--cases", nargs="*", default=list(harness.CASES))
    args = ap.parse_args()
    print(f"{harness.THREADS} foreign threads, profile_api on, {args.windows} windows per "
          f"process, {args.processes} processes per case\n")
    print("| case | processes | windows | aborts | hangs | failures | bad windows | "
          "switches while threads ran | foreign calls | their API events in windows | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for case in args.cases:
        t = harness.run_case(case, processes=args.processes, windows=args.windows, timeout=300)
        print(f"| {case} | {t.processes} | {t.windows} | {t.aborts} | {t.hangs} | {t.failures} "
              f"| {t.bad_windows} | {t.switches} | {t.calls} | {t.api_events} | {t.seconds} |",
              flush=True)


if __name__ == "__main__":
    main()
