"""What the JVM's executor capture (pyprof.capture) costs per forward, in fresh JVMs.

    .venv/bin/python bench/bench_capture_jvm.py [--forwards 1000] [--rounds 3]

Each round is a child JVM (the jvm/ project's classpath, as bench_jmx_start.py runs it) that
binds a 4x4 ``dot`` (pyprof.example.*), warms it up, then runs one session per mode in turn:
``off`` (no capture option), ``shapes`` (``:record-shapes``) and ``all`` (``:record-shapes
:with-stack :with-flops``), twice. A session times ``forwards`` calls of
``pyprof.example.executor/forward`` (a ``wait-all`` every 50, outside the timing) and reports
the median call in microseconds and the seconds its ``stop!`` took (cutting the window and, with
capture, annotating it). Prints each mode's median and range over all sessions, as JSON.
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
sys.path.insert(0, str(ROOT))

TIMED = """
(require '[pyprof.session :as session] '[pyprof.example.symbol :as sym] '[pyprof.example.ndarray :as nd]
         '[pyprof.example.executor :as executor] '[pyprof.example.context :as context])
(let [n %(forwards)d
      a (nd/random-uniform -1 1 [4 4]) b (nd/random-uniform -1 1 [4 4])
      ex (sym/bind (sym/dot "dot" [(sym/variable "A") (sym/variable "B")]) (context/cpu) {:A a :B b})
      once (fn [] (let [ts (long-array n)]
                    (dotimes [i n]
                      (let [t (System/nanoTime)] (executor/forward ex) (aset ts i (- (System/nanoTime) t)))
                      (when (zero? (mod (inc i) 50)) (nd/wait-all)))
                    (nd/wait-all)
                    (/ (nth (sort ts) (quot n 2)) 1000.0)))
      modes [["off" {}] ["shapes" {:record-shapes true}]
             ["all" {:record-shapes true :with-stack true :with-flops true}]]]
  (once)
  (doseq [[mode opts] (concat modes modes)]
    (let [s (session/start! (session/profile (merge {:path (str mode "_{window}.json")} opts)))
          us (once)
          t (System/nanoTime)
          ws (session/stop! s)]
      (println (str "{\\"mode\\": \\"" mode "\\", \\"us\\": " us ", \\"stop_s\\": " (/ (- (System/nanoTime) t) 1e9)
                    ", \\"matched\\": " (get-in (first ws) [:attribution :matched] -1) "}")))))
(shutdown-agents)
"""


def child(forwards: int, cp: str, env: dict[str, str]) -> list[dict]:
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run(["java", f"-Dpyprof.outputRoot={d}", "-cp", cp, "clojure.main", "-e",
                              TIMED % {"forwards": forwards}], env=env, cwd=d,
                             capture_output=True, text=True, timeout=600, check=True)
        return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--forwards", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from pyprof import jvm
    from pyprof.native import capi as _capi
    cp = os.pathsep.join(jvm.classpath())
    env = dict(os.environ, MXNET_LIBRARY_PATH=_capi.library_path())
    rows: dict[str, list[dict]] = {}
    for _ in range(args.rounds):
        for r in child(args.forwards, cp, env):
            rows.setdefault(r["mode"], []).append(r)
    print(json.dumps({m: {"median_us": round(statistics.median(x["us"] for x in v), 1),
                          "range_us": [round(min(x["us"] for x in v), 1), round(max(x["us"] for x in v), 1)],
                          "median_stop_s": round(statistics.median(x["stop_s"] for x in v), 3),
                          "matched": sorted({x["matched"] for x in v})}
                      for m, v in rows.items()}, indent=1))


if __name__ == "__main__":
    main()
