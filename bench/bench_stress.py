"""The concurrency stress cases in long mode: many child processes per case, many toggles each,
counting aborts and hangs (tests/test_concurrency.py runs the same cases, short).

    .venv/bin/python bench/bench_stress.py [--trials 20] [--toggles 100] [--cases py-py,...]

Prints a Markdown table for docs/performance.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from stress_harness import CASES, run_case  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--toggles", type=int, default=100)
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    print("| case | trials | toggles | aborts | hangs | other failures | worker ops | "
          "C API events | seconds |")
    print("|---|---|---|---|---|---|---|---|---|")
    for case in args.cases.split(","):
        t = run_case(case, trials=args.trials, toggles=args.toggles, timeout=600)
        print(f"| {case} | {t.trials} | {t.toggles} | {t.aborts} | {t.hangs} | {t.failures} | "
              f"{t.ops} | {t.api_events} | {t.seconds} |", flush=True)
        for p in t.problems:
            print(f"<!-- {p[:300]} -->", flush=True)


if __name__ == "__main__":
    main()
