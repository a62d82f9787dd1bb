"""How long the JMX MBean takes to answer its first start, in fresh JVMs.

    .venv/bin/python bench/bench_jmx_start.py [--rounds 5]

Each round is a fresh child JVM (the jvm/ project's classpath, sources not AOT-compiled, as
the library jar ships them) that times, in milliseconds:

- ``register``: ``ProfilerControl.register()``, which loads what a session needs (the Clojure
  namespaces, the JSON reader, the error catalogue, libmxnet) before any JMX client calls;
- ``first_start``, ``second_start``: ``start("profile_imperative=true,...", 30)`` on the
  registered MBean, the first and the second session (``stop()`` between them);
- ``unregistered_first_start``: in another fresh JVM, the first ``start`` on
  ``ProfilerControl.instance()`` without ``register()``: what a JMX client's first request
  would wait for without the preloading.

Prints the median and the range of each over the rounds, as JSON.
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
(let [ms #(/ (- (System/nanoTime) %%) 1e6)
      opts #(str "profile_imperative=true,path=" %% "_{window}.json") ; relative: under the root
      t0 (System/nanoTime)
      _ (when %(register)s (pyprof.jvm.ProfilerControl/register))
      register (ms t0)
      ctl (pyprof.jvm.ProfilerControl/instance)
      t1 (System/nanoTime)
      _ (.start ctl (opts "a") 30)
      first-start (ms t1)
      _ (.stop ctl)
      t2 (System/nanoTime)
      _ (.start ctl (opts "b") 30)
      second-start (ms t2)]
  (.stop ctl)
  (println (str "{\\"register\\": " register ", \\"first_start\\": " first-start
                ", \\"second_start\\": " second-start "}")))
"""


def child(register: bool, cp: str, env: dict[str, str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        code = TIMED % {"register": "true" if register else "false"}
        out = subprocess.run(["java", f"-Dpyprof.outputRoot={d}", "-cp", cp, "clojure.main",
                              "-e", code], env=env,
                             capture_output=True, text=True, timeout=300, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    from pyprof.native import capi as _capi
    from pyprof import jvm
    cp = os.pathsep.join(jvm.classpath())
    env = dict(os.environ, MXNET_LIBRARY_PATH=_capi.library_path())
    rows: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for k, v in child(True, cp, env).items():
            rows.setdefault(k, []).append(v)
        rows.setdefault("unregistered_first_start", []).append(
            child(False, cp, env)["first_start"])
    print(json.dumps({k: {"median_ms": round(statistics.median(v), 1),
                          "min_ms": round(min(v), 1), "max_ms": round(max(v), 1)}
                      for k, v in rows.items()}, indent=1))


if __name__ == "__main__":
    main()
