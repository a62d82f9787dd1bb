"""Benchmark ``pyprof dnnl`` against the seed's ``grep | awk`` recipe on one oneDNN verbose log.

Generates a log of about ``--size-mb`` MB by repeating real oneDNN 2.4.4 lines (the committed
fixtures tests/dnnl/fixtures/v2_plain_level2.log and v2_timestamps.log, captured from MXNet
1.9.1, timestamps advanced per copy, with some program output mixed in), then times, in the same
run and on the same (page-cached) file, each contender as a child process (best of ``--repeat``):

* ``pyprof``: ``pyprof dnnl LOG --format json`` (every primitive kind: count, total, mean,
  min, max, share; creations);
* ``awk-seed``: the seed's recipe for one primitive, ``grep exec,cpu,convolution LOG | awk
  'BEGIN{FS=","} {SUM+=$11} END {print SUM}'`` (note: $11 is not the time on timestamped lines);
* ``awk-seed-each``: the seed's recipe run once per primitive kind in the log (a shell loop),
  which is how the seed's reader gets the per-kind totals pyprof's table shows;
* ``awk-all``: one awk pass giving what pyprof gives per kind (count and total of exec lines,
  time = last field, kind found with or without a timestamp).

The parent checks that pyprof's convolution total equals awk-all's.

    python bench/bench_dnnl.py                 # 500 MB
    python bench/bench_dnnl.py --size-mb 50    # quick
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "dnnl" / "fixtures"
AWK_ALL = ('BEGIN{FS=","} $1=="dnnl_verbose" {i=($2 ~ /^[0-9]/) ? 3 : 2; '
           'if ($i=="exec") {k=$(i+2); n[k]++; s[k]+=$NF}} END {for (k in n) printf "%s %d %.6f\\n", k, n[k], s[k]}')


def make_log(path: Path, size: int) -> None:
    plain = [ln for ln in (FIXTURES / "v2_plain_level2.log").read_text().splitlines()
             if ln.startswith("dnnl_verbose,") and ",info," not in ln]
    stamped = [ln.split(",", 2) for ln in (FIXTURES / "v2_timestamps.log").read_text().splitlines()
               if ln.startswith("dnnl_verbose,1")]
    with open(path, "w") as f:
        f.write((FIXTURES / "v2_timestamps.log").read_text())
        t, written = 1796121156697.0, 0
        while written < size:
            block = []
            for _ in range(20):
                block += plain
                for m, _ts, rest in stamped:
                    t += 0.05
                    block.append(f"{m},{t:.6f},{rest}")
                block.append("epoch 3, batch 17, loss 0.25")
            text = "\n".join(block) + "\n"
            f.write(text)
            written += len(text)


def timed(cmd: str, repeat: int) -> tuple[float, str]:
    best, out = float("inf"), ""
    for _ in range(repeat):
        t = time.perf_counter()
        out = subprocess.run(cmd, shell=True, capture_output=True, text=True, check=True).stdout
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    o = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pyprof-bench-dnnl-") as d:
        log = Path(d) / "dnnl_verbose.log"
        make_log(log, o.size_mb << 20)
        size = log.stat().st_size
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # page cache
        q = str(log)
        results = {}
        results["pyprof"], out = timed(f"{sys.executable} -m pyprof dnnl {q} --format json", o.repeat)
        conv = next(r for r in json.loads(out)["rows"] if r["primitive"] == "convolution")
        results["awk-seed"], _ = timed(
            f"grep exec,cpu,convolution {q} | awk 'BEGIN{{FS=\",\"}} {{SUM+=$11}} END {{print SUM}}'", o.repeat)
        kinds = " ".join(r["primitive"] for r in json.loads(out)["rows"])
        results["awk-seed-each"], _ = timed(
            f"for k in {kinds}; do grep exec,cpu,$k, {q} | "
            f"awk 'BEGIN{{FS=\",\"}} {{SUM+=$11}} END {{print SUM}}'; done", o.repeat)
        results["awk-all"], out = timed(f"awk '{AWK_ALL}' {q}", o.repeat)
        awk_conv = next(ln.split() for ln in out.splitlines() if ln.startswith("convolution "))
        assert int(awk_conv[1]) == conv["exec_count"], (awk_conv, conv)
        assert abs(float(awk_conv[2]) - conv["exec_total_ms"]) <= 1e-6 * conv["exec_total_ms"] + 1e-3
    print(f"log: {size / 2**20:.0f} MiB, best of {o.repeat}; cpus {os.cpu_count()}, load {os.getloadavg()[0]:.2f}")
    for name, sec in results.items():
        print(f"  {name:<13} {sec:7.3f} s  {size / 2**20 / sec:8.1f} MiB/s")
    print("  pyprof / " + ", pyprof / ".join(f"{n}: {results['pyprof'] / results[n]:.2f}x"
                                             for n in results if n != "pyprof"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
