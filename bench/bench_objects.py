"""Per-call cost of the custom profiler objects: pyprof against mxnet.profiler.

Run:  PYTHONPATH=. /tmp/venvtest/bin/python bench/bench_objects.py [--calls 20000] [--repeats 15]

Prints a Markdown table. Measured with the profiler running (every call records an event, as
in real use): ``Counter.increment()`` and one ``Task.start()`` + ``Task.stop()`` pair. Both
implementations drive the same libmxnet in one process (they share MXNet's profiler), and
their timed loops of ``--calls`` calls alternate, so background load hits both alike; the table
gives the minimum and the median over ``--repeats`` loops, after a warm-up.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def loops(profiler, calls: int) -> dict:
    domain = profiler.Domain(f"bench_{profiler.__name__}")
    counter = profiler.Counter(domain, "counter", 0)
    task = profiler.Task(domain, "task")

    def increment() -> None:
        for _ in range(calls):
            counter.increment(1)

    def start_stop() -> None:
        for _ in range(calls):
            task.start()
            task.stop()

    return {"Counter.increment": increment, "Task start+stop": start_stop}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    from mxnet import profiler as mxprof

    from pyprof import profiler as pyprof

    workdir = tempfile.mkdtemp(prefix="bench-objects-")
    pyprof.set_config(filename=os.path.join(workdir, "bench.json"), continuous_dump=False,
                      profile_api=False, profile_memory=False)
    pyprof.set_state("run")
    impls = {"mxnet.profiler": loops(mxprof, args.calls), "pyprof": loops(pyprof, args.calls)}
    samples = {(impl, op): [] for impl in impls for op in impls[impl]}
    for op in impls["pyprof"]:
        for impl in impls:
            impls[impl][op]()  # warm-up
        for _ in range(args.repeats):
            for impl in impls:
                t0 = time.perf_counter()
                impls[impl][op]()
                samples[impl, op].append((time.perf_counter() - t0) / args.calls * 1e6)
    pyprof.set_state("stop")

    print(f"Command: `PYTHONPATH=. python bench/bench_objects.py --calls {args.calls} "
          f"--repeats {args.repeats}`  ")
    print(f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, MXNet 1.9.1 (CPU); profiler running; µs per call, "
          f"min / median of {args.repeats} alternating loops of {args.calls} calls.\n")
    print("| operation | mxnet.profiler min / median | pyprof min / median | pyprof / mxnet (min) |")
    print("|---|---:|---:|---:|")
    for op in impls["pyprof"]:
        a, b = samples["mxnet.profiler", op], samples["pyprof", op]
        print(f"| {op} | {min(a):.2f} / {statistics.median(a):.2f} | "
              f"{min(b):.2f} / {statistics.median(b):.2f} | {min(b) / min(a):.2f}x |")
    sys.stdout.flush()
    os._exit(0)  # skip MXNet's exit-time dump of a trace nobody reads (hundreds of MB)


if __name__ == "__main__":
    sys.exit(main())
