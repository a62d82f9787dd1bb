"""Benchmark ``pyprof.trace.summarize`` against a plain ``json.load``-and-aggregate baseline.

Generates an MXNet-style trace (pretty-printed events exactly as MXNet 1.9.1 writes them:
operator B/E pairs with their async b/e copies, C API b/e calls with their counters, memory
counters, metadata with 64-bit pids/tids) of about ``--size-mb`` MB in a temporary directory, then
runs each contender in its own child process and reports wall time, CPU time (the child's plus
its reaped worker processes', ``RUSAGE_CHILDREN``), throughput and peak RSS: the child's
``ru_maxrss`` plus, when pyprof parsed the file in worker processes, the sum of every worker's own
``ru_maxrss`` (an over-estimate of their joint peak, never an under-estimate).

Both contenders compute the same thing: per (category, name, device) count, total, min, max,
mean, p50/p90/p99 of B/E pairs and non-duplicate async pairs outside MXNET_C_API (summarize's
default), plus memory high-water marks. Each child prints a digest of those numbers and the parent
checks that the digests agree (the benchmark fails otherwise). A third contender, ``stats``, times
``pyprof.trace.stats(path)`` with its defaults (everything, C API calls included) for the docs.

    python bench/bench_summarize.py               # ~1 GB
    python bench/bench_summarize.py --size-mb 100 # the docs' "pyprof.stats on a 100 MB trace"
    python bench/bench_summarize.py --size-mb 50 --contenders pyprof,baseline  # quick
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shlex
import subprocess
import sys
import tempfile
import time

OPS = ["Convolution", "BatchNorm", "Activation", "Pooling", "FullyConnected", "dot", "_plus_scalar",
       "elemwise_add", "softmax", "SoftmaxOutput", "[dot]", "Activation,Convolution", "DeleteVariable",
       "WaitForVar", "_copyto", "Reshape", "transpose", "broadcast_add", "mean", "sum"]
APIS = ["MXImperativeInvokeEx", "MXNDArrayFree", "MXNDArrayWaitToRead", "MXExecutorForward"]
DEV_TID = 11063534467229197503
API_PID, OP_PID, MEM_PID, API_TID = 849786139768988538, 3060606181218273969, 9785678402843609691, 3479342850793368915


def _ev(name: str, cat: str, ph: str, ts: int, pid: int, tid: int, extra: str = "") -> str:
    return (f'    {{\n        "name": "{name}",\n        "cat": "{cat}",\n        "ph": "{ph}",\n'
            f'        "ts": {ts},\n{extra}        "pid": {pid},\n        "tid": {tid}\n    }}\n')


def generate(path: str, size_mb: float, seed: int = 0) -> int:
    """Write an MXNet-style trace of about ``size_mb`` MB; returns the number of events."""
    rng = random.Random(seed)
    target = int(size_mb * 1e6)
    meta = ['        {\n            "ph": "M",\n            "args": {\n                "name": "%s"\n'
            '            },\n            "pid": %d,\n            "name": "process_name"\n        }'
            % (n, p) for n, p in (("cpu/0", 0), ("cpu/1", 1), ("MXNET_C_API", API_PID),
                                  ("Device Storage", MEM_PID), ("operator", OP_PID))]
    written = 0
    events = len(meta)
    ts = 1_795_937_667_000_000
    calls = 0
    mem = 0
    with open(path, "w") as f:
        f.write('{\n    "traceEvents": [\n' + ",\n".join(meta) + ",\n\n")
        while written < target:
            parts = []
            for _ in range(2000):
                op = OPS[rng.randrange(len(OPS))]
                dev = rng.randrange(2)
                api = APIS[rng.randrange(len(APIS))]
                d_api = rng.randrange(1, 30)
                d = rng.randrange(1, 2000)
                idl = f'        "id": {DEV_TID},\n'
                calls += 1
                mem = max(0, mem + rng.choice((16384, -16384, 32768)))
                parts += [
                    _ev("MXNet C API Calls", "MXNET_C_API", "C", ts, API_PID, API_TID,
                        f'        "args": {{ "MXNet C API Calls": {calls} }},\n'),
                    _ev(api, "MXNET_C_API", "b", ts + 1, API_PID, API_TID, f'        "id": {API_TID},\n'),
                    _ev(api, "MXNET_C_API", "e", ts + 1 + d_api, API_PID, API_TID, f'        "id": {API_TID},\n'),
                    _ev(op, "operator", "B", ts + 40, dev, DEV_TID),
                    _ev(op, "operator", "E", ts + 40 + d, dev, DEV_TID),
                    _ev(op, "operator", "b", ts + 40, OP_PID, DEV_TID, idl),
                    _ev(op, "operator", "e", ts + 40 + d, OP_PID, DEV_TID, idl),
                    _ev(f"Memory: cpu/{dev}", "Device Storage", "C", ts + 41, MEM_PID, DEV_TID,
                        f'        "args": {{ "Memory: cpu/{dev}": {mem} }},\n'),
                ]
                ts += d + 50
            chunk = ",\n".join(parts) + ",\n"
            f.write(chunk)
            written += len(chunk)
            events += len(parts)
        f.write(_ev("MXNet C API Calls", "MXNET_C_API", "C", ts, API_PID, API_TID,
                    f'        "args": {{ "MXNet C API Calls": {calls + 1} }},\n')
                + '\n\n    ],\n    "displayTimeUnit": "ms"\n}\n')
    return events + 1


def _digest(rows: list[tuple], mem: dict[str, int]) -> str:
    """Order-independent digest of the per-operator rows and memory high-water marks."""
    import hashlib
    text = repr((sorted(rows), sorted(mem.items())))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def baseline(path: str) -> tuple[int, str]:
    """json.load the whole file, then aggregate in Python (what a script would do)."""
    import numpy as np
    with open(path) as f:
        data = json.load(f)
    names = {e["pid"]: e["args"]["name"] for e in data["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    open_, durs, mem = {}, {}, {}
    for e in data["traceEvents"]:
        ph = e["ph"]
        if ph in ("B", "b"):
            if e["cat"] == "MXNET_C_API" or ph == "b" and e["cat"] == "operator":
                continue
            open_.setdefault((ph, e["pid"], e.get("tid"), e.get("id"), e["name"]), []).append(e["ts"])
        elif ph in ("E", "e"):
            if e["cat"] == "MXNET_C_API" or ph == "e" and e["cat"] == "operator":
                continue
            b = open_[("B" if ph == "E" else "b", e["pid"], e.get("tid"), e.get("id"), e["name"])].pop()
            durs.setdefault((e["cat"], e["name"], names.get(e["pid"], "")), []).append(e["ts"] - b)
        elif ph == "C":
            for k, v in e["args"].items():
                if k.startswith("Memory: "):
                    mem[k] = max(mem.get(k, 0), v)
    rows = []
    for key, d in durs.items():
        a = np.asarray(d)
        rows.append((*key, int(a.size), int(a.sum()), int(a.min()), int(a.max()), round(float(a.mean()), 6),
                     *(float(x) for x in np.percentile(a, [50, 90, 99]))))
    return len(rows), _digest(rows, {k[len("Memory: "):]: int(v) for k, v in mem.items()})


def contender(path: str) -> tuple[int, str]:
    from pyprof.trace import summarize
    data = json.loads(summarize(path, fmt="json", progress=False))
    rows = [(r["category"], r["name"], r["device"], r["count"], r["total_us"], r["min_us"], r["max_us"],
             round(r["mean_us"], 6), r["p50_us"], r["p90_us"], r["p99_us"]) for r in data["operators"]]
    return len(rows), _digest(rows, {m["device"]: m["max_bytes"] for m in data["memory"]})


def stats_only(path: str) -> tuple[int, str]:
    from pyprof.trace import stats
    s = stats(path, progress=False)
    return len(s.operators), ""


CONTENDERS = {"pyprof": ("pyprof.trace.summarize", contender),
              "pyprof1": ("pyprof.trace.summarize, one core (PYPROF_TRACE_WORKERS=1)", contender),
              "baseline": ("json.load + aggregate", baseline),
              "stats": ("pyprof.trace.stats (all categories)", stats_only)}


def child(mode: str, path: str) -> None:
    def cpu() -> float:
        return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                     resource.getrusage(resource.RUSAGE_CHILDREN)))

    cpu0 = cpu()
    t0 = time.perf_counter()
    n, digest = CONTENDERS[mode][1](path)
    wall = time.perf_counter() - t0
    cpu_s = cpu() - cpu0  # worker processes (reaped) included
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux
    # Worker processes of the parallel fast path: add each worker's own peak RSS (a sum of peaks,
    # which over-counts: they do not peak at the same moment, and forked pages are shared).
    run = getattr(sys.modules.get("pyprof.trace.parallel"), "LAST_RUN", None) or {}
    worker_peaks = list(run.get("worker_peak_rss_kb", []))
    if run.get("workers", 0) > len(worker_peaks):  # a worker that did not report: assume the worst
        biggest = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        worker_peaks += [biggest] * (run["workers"] - len(worker_peaks))
    print(json.dumps({"mode": mode, "wall_s": wall, "cpu_s": cpu_s,
                      "peak_rss_mb": (peak_kb + sum(worker_peaks)) / 1024,
                      "parent_peak_rss_mb": peak_kb / 1024, "workers": len(worker_peaks),
                      "worker_peaks_mb": [round(k / 1024) for k in worker_peaks],
                      "rows": n, "digest": digest}))


def run_child(mode: str, path: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.environ.get("PYTHONPATH", "")]))
    if mode == "pyprof1":
        env["PYPROF_TRACE_WORKERS"] = "1"
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode, path],
                         check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=1000.0)
    ap.add_argument("--dir", default=None, help="where to write the trace (default: a temp dir)")
    ap.add_argument("--contenders", default="pyprof,pyprof1,baseline,stats",
                    help="comma-separated subset of: " + ", ".join(CONTENDERS))
    ap.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = os.path.join(tmp, "trace.json")
        t0 = time.perf_counter()
        events = generate(path, args.size_mb)
        size = os.path.getsize(path)
        print(f"generated {size / 1e6:.0f} MB, {events} events in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
        # Same starting point for every contender: file written back and in the page cache.
        os.sync()
        with open(path, "rb") as f:
            while f.read(64 << 20):
                pass
        load0 = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        res = {m: run_child(m, path) for m in args.contenders.split(",")}
    for m in ("pyprof", "pyprof1"):
        if m in res and "baseline" in res:
            assert res[m]["rows"] >= 1
            if res[m]["digest"] != res["baseline"]["digest"]:
                sys.exit(f"results differ: {res[m]} vs {res['baseline']}")
    b = res.get("baseline")
    print(f"\nCommand: `{' '.join(shlex.quote(a) for a in [sys.executable, *sys.argv])}`  \n"
          f"Trace: {size / 1e6:.0f} MB, {events} events; Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs\n")
    print(f"Load average before/after: {load0} / {', '.join(f'{x:.2f}' for x in os.getloadavg())} "
          "(wall times depend on other work on the machine; CPU time much less)\n")
    print("| contender | workers | wall (s) | CPU (s, incl. workers) | throughput (MB/s) | peak RSS (MB, "
          "parent + workers) | speed vs baseline (wall) | speed vs baseline (CPU) | memory vs baseline |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for m, r in res.items():
        speed = f"{b['wall_s'] / r['wall_s']:.2f}x" if b else "-"
        cspeed = f"{b['cpu_s'] / r['cpu_s']:.2f}x" if b else "-"
        mem = f"{r['peak_rss_mb'] / b['peak_rss_mb']:.3f}" if b else "-"
        peak = f"{r['peak_rss_mb']:.0f}"
        if r.get("workers"):
            peak += f" ({r['parent_peak_rss_mb']:.0f} + {' + '.join(str(k) for k in r['worker_peaks_mb'])})"
        print(f"| {CONTENDERS[m][0]} | {r.get('workers', 0)} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} "
              f"| {size / 1e6 / r['wall_s']:.0f} | {peak} | {speed} | {cspeed} | {mem} |")
    if "pyprof" in res and "baseline" in res:
        print(f"\nBoth computed the same {res['pyprof']['rows']} operator rows and memory high-water "
              f"marks (digest {res['pyprof']['digest']}).")


if __name__ == "__main__":
    main()
