"""How long pyprof's control calls take beside a DJL service: the JMX MBean and the Java facade.

    .venv/bin/python bench/bench_jmx_control.py [--cycles 100] [--parts jmx,facade] [--out DIR]

Both parts run examples/djl-service (4 workers serving an MLP on DJL's MXNet engine, 5 ms
between a worker's requests) with ``MXNET_LIBRARY_PATH`` set to the venv's libmxnet:

- ``jmx``: the stress harness, ``lein stress -- --cycles N --out DIR/jmx``: a JMX client in
  another JVM cycles ``start("", 0)``, 3 ``step()``s 50 ms apart and ``stop()``, each call
  timed by the client; read back from its ``report.json`` (with the windows written and the
  ``pyprof.window.saved`` notifications it counted);
- ``facade``: in one JVM on the same classpath (``lein run -m clojure.main``), the service's
  ``main`` on a thread, then the same cycles on ``pyprof.jvm.ProfilerSession`` (default
  options: ``profile_api`` off, as the MBean's; one window per cycle): ``start()``, 3
  ``step()``s 50 ms apart, ``stopAsync()``, each call timed in-process; before the next
  cycle it waits for the stop's future (a row of its own, ``stopAsync, until saved``, not a
  control call: left out of the overall figure); ``on_trace_ready`` counts the saved windows.

Prints one Markdown row per call kind (p50, p99, max in ms, nearest rank; count; windows and
their notifications), then each part's p99 over its calls, whether it and each kind's p99 are
within 100 ms, and which calls took longer (their kind and index in call order).
The harness's ``attrs`` (reading the service's counters) and ``await`` (``awaitSaved``, which
waits by design) are left out of the overall figure. Exit status 1 when a part was not clean.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SERVICE = ROOT / "examples" / "djl-service"
LIMIT_MS = 100.0
CONTROL = ("start", "step", "stop")
WAITS = ("stopAsync, until saved",)  # shown, not control calls: left out of the overall p99

FACADE = r"""
(require '[clojure.data.json :as json])
(import '[pyprof.jvm ProfilerSession] '[java.lang.management ManagementFactory]
        '[javax.management ObjectName])
(let [cycles %(cycles)d steps 3 step-ms 50
      mbs (ManagementFactory/getPlatformMBeanServer)
      svc (ObjectName. "pyprof.example.djl:type=Service")
      attr #(if (.isRegistered mbs svc) (.getAttribute mbs svc %%) 0)
      deadline (+ (System/currentTimeMillis) 180000)]
  (doto (Thread. #(pyprof.example.djl.Service/main
                   (into-array String ["--workers" "4" "--pause-ms" "5"])))
    (.setDaemon true) (.start))
  (while (and (< (attr "Requests") 1) (< (System/currentTimeMillis) deadline))
    (Thread/sleep 100))
  (when (< (attr "Requests") 1)
    (binding [*out* *err*] (println "facade: the service served no request in 180 s"))
    (System/exit 1))
  (ProfilerSession/init) ; what a service calls at start-up: the namespaces load now
  (let [ms (fn [t0] (/ (- (System/nanoTime) t0) 1e6))
        times (atom {}) add! (fn [k v] (swap! times update k (fnil conj []) v))
        saved (atom 0) windows (atom 0) errors (atom [])
        req0 (attr "Requests")
        t-run (System/nanoTime)]
    (dotimes [i cycles]
      (try
        (let [s (ProfilerSession. {"path" (str "facade-" i "-{window}.json")
                                   "on_trace_ready" (reify java.util.function.Consumer
                                                      (accept [_ _] (swap! saved inc)))})
              t0 (System/nanoTime) _ (.start s) _ (add! "start" (ms t0))]
          (dotimes [_ steps]
            (Thread/sleep step-ms)
            (let [t (System/nanoTime)] (.step s) (add! "step" (ms t))))
          (Thread/sleep step-ms)
          (let [t (System/nanoTime) f (.stopAsync s)]
            (add! "stopAsync" (ms t))
            (swap! windows + (count (.get f 60 java.util.concurrent.TimeUnit/SECONDS)))
            (add! "stopAsync, until saved" (ms t))))
        (catch Throwable e (swap! errors conj (str e)))))
    (println (str "FACADE " (json/write-str {:times @times :saved @saved :windows @windows
                                     :errors @errors
                                     :requests (- (attr "Requests") req0)
                                     :failed_requests (attr "FailedRequests")
                                     :seconds (/ (ms t-run) 1000.0)})))
    (flush)
    (System/exit 0)))
"""


def percentile(values: list[float], p: int) -> float:
    """Nearest rank, as the harness's Report.percentile."""
    v = sorted(values)
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)]


def row(part: str, kind: str, v: list[float], windows: str) -> str:
    return (f"| {part} | {kind} | {percentile(v, 50):.1f} | {percentile(v, 99):.1f} | "
            f"{max(v):.1f} | {len(v)} | {windows} |")


def env() -> dict[str, str]:
    from pyprof.native import capi as _capi
    return dict(os.environ, MXNET_LIBRARY_PATH=_capi.library_path())


def run_jmx(cycles: int, out: Path) -> tuple[dict[str, list[float]], str, bool, str]:
    proc = subprocess.run(["lein", "stress", "--", "--cycles", str(cycles), "--out", str(out)],
                          cwd=SERVICE, env=env(), capture_output=True, text=True,
                          timeout=60 * 60)
    report = out / "report.json"
    if not report.exists():
        sys.exit(f"lein stress wrote no report (exit {proc.returncode}):\n"
                 f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    r = json.loads(report.read_text())
    times = {k: r["timings"][k]["ms"] for k in CONTROL if k in r["timings"]}
    windows = (f"{r['window_files']} windows ({r['windows_valid']} valid), "
               f"{r['saved_notifications']} saved notifications, "
               f"{r['failed_notifications']} failed")
    about = (f"{r['cycles_completed']} cycles in {r['wall_s']} s, {r['requests']} requests "
             f"({r['failed_requests']} failed), aborts {r['aborts']}, hangs {r['hangs']}, "
             f"errors {r['errors']}; report {report}")
    for p in r["problems"]:
        about += f"\n  problem: {p}"
    return times, windows, bool(r["clean"]), about


def run_facade(cycles: int, out: Path) -> tuple[dict[str, list[float]], str, bool, str]:
    out.mkdir(parents=True, exist_ok=True)
    script = out / "facade.clj"
    script.write_text(FACADE % {"cycles": cycles})
    e = env()
    e["JVM_OPTS"] = (e.get("JVM_OPTS", "") + f" -Dpyprof.outputRoot={out / 'windows'}").strip()
    proc = subprocess.run(["lein", "run", "-m", "clojure.main", str(script)], cwd=SERVICE,
                          env=e, capture_output=True, text=True, timeout=60 * 60)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("FACADE ")]
    if proc.returncode != 0 or not lines:
        sys.exit(f"the facade's JVM failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                 f"{proc.stderr[-3000:]}")
    r = json.loads(lines[-1][len("FACADE "):])
    files = [p for p in (out / "windows").rglob("*") if p.is_file()]
    valid = sum(1 for p in files if isinstance(json.loads(p.read_text()).get("traceEvents"), list))
    windows = (f"{r['windows']} windows ({len(files)} files, {valid} valid), {r['saved']} "
               f"on_trace_ready calls")
    clean = (not r["errors"] and r["failed_requests"] == 0 and r["saved"] == r["windows"]
             == len(files) == valid == cycles)
    about = (f"{cycles} cycles in {r['seconds']:.1f} s, {r['requests']} requests "
             f"({r['failed_requests']} failed), errors {len(r['errors'])}")
    for x in r["errors"][:10]:
        about += f"\n  error: {x}"
    return r["times"], windows, clean, about


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--parts", default="jmx,facade")
    ap.add_argument("--out", help="keep the reports and windows here (default: a temp dir)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-jmx-control-") as tmp:
        out = Path(args.out).resolve() if args.out else Path(tmp)
        results = []
        for part in args.parts.split(","):
            run = {"jmx": run_jmx, "facade": run_facade}[part]
            results.append((part, *run(args.cycles, out / part)))
        print("| part | call | p50 ms | p99 ms | max ms | calls | windows and notifications |")
        print("|---|---|---:|---:|---:|---:|---|")
        for part, times, windows, _, _ in results:
            for kind, v in times.items():
                print(row(part, kind, v, windows))
        ok = True
        for part, times, _, clean, about in results:
            times = {k: v for k, v in times.items() if k not in WAITS}
            every = [x for v in times.values() for x in v]
            p99 = percentile(every, 99)
            late = [k for k, v in times.items() if percentile(v, 99) > LIMIT_MS]
            within = p99 <= LIMIT_MS and not late
            ok = ok and clean
            over = [f"{kind} #{i} {x:.0f}" for kind, v in times.items()
                    for i, x in enumerate(v) if x > LIMIT_MS]
            print(f"{part}: p99 over {len(every)} calls {p99:.1f} ms, max {max(every):.1f} ms: "
                  f"{'within' if within else 'NOT within'} {LIMIT_MS:.0f} ms (each kind's p99 "
                  f"{'too' if not late else 'over it: ' + ', '.join(late)}); {len(over)} calls "
                  f"over it{' (' + ', '.join(over[:10]) + ' ms)' if over else ''}; "
                  f"{'clean' if clean else 'NOT clean'}; {about}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
