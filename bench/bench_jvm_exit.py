"""How long a JVM takes to exit on SIGTERM with an open window of a given raw size, and what it
leaves (api.json ``raw_trace.exit_about``): a Java facade session records a busy loop of small
operators until its raw trace holds ``--mb`` MB, then the JVM gets SIGTERM; the time from the
signal to the process's end, the exit's line on stderr, and the files beside the window.

    .venv/bin/python bench/bench_jvm_exit.py [--mb 100]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SERVICE = r"""
(require 'pyprof.example.ndarray)
(import '(pyprof.jvm ProfilerSession))
(def s (.start (ProfilerSession. {"path" "w_{window}.json" "profile_imperative" true}
                                 (System/getProperty "user.dir"))))
(println "running") (flush)
(loop [] (with-open [a (pyprof.example.ndarray/random-uniform -1 1 [8 8])]
           (pyprof.example.ndarray/wait-to-read a))
      (recur))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100, help="raw trace size at the signal (MB)")
    args = ap.parse_args()
    from pyprof import jvm

    with tempfile.TemporaryDirectory() as d:
        work, raw = Path(d), Path(d) / "raw"
        raw.mkdir()
        (work / "service.clj").write_text(SERVICE)
        p = subprocess.Popen(["java", f"-Dpyprof.outputRoot={work}", "-cp",
                              os.pathsep.join(jvm.classpath()), "clojure.main", "service.clj"],
                             cwd=work, env=dict(os.environ, PYPROF_RAW_DIR=str(raw)),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "running", p.stderr.read()
        size = 0
        while size < args.mb * 1e6:
            time.sleep(0.2)
            size = sum(f.stat().st_size for f in raw.rglob("raw.json"))
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=600)
        took = time.monotonic() - t0
        lines = [x for x in err.splitlines() if x.startswith("pyprof: at exit")]
        window = work / "w_0.json"
        left = sorted(f.name for f in work.iterdir()
                      if f.name.startswith(".pyprof-") or f.name.endswith((".tmp", ".partial"))
                      or (f.is_file() and f.stat().st_size == 0))
        print(f"raw trace at SIGTERM: {size / 1e6:.1f} MB; exit took {took:.2f} s "
              f"({size / 1e6 / took:.0f} MB/s); window {window.stat().st_size / 1e6:.1f} MB; "
              f"lines: {lines}; left beside it: {left or 'nothing'}; load {os.getloadavg()[0]:.1f}")
        assert len(lines) == 1 and re.search(r"window 0 saved: .*w_0\.json", lines[0]), err[-2000:]


if __name__ == "__main__":
    main()
