"""Benchmark ``pyprof report``: a generated trace of ``--slices`` operator calls (default 200,000)
in headless Chromium, from page load to the first full draw.

The trace is what MXNet writes (``B``/``E`` pairs, pretty-printed, async ``b``/``e`` copies of
every operator on the ``operator`` pid, ``Memory: cpu/0`` counters) over two devices and four
threads, 40 operator names. Steps, each a child process or a fresh page:

1. ``pyprof report TRACE -o report.html`` (time, size of the file);
2. open it from file:// in Debian's chromium through Playwright (as tests/test_html_report.py
   does), best of ``--repeat`` fresh pages: ``first draw`` is ``performance.now()`` when the page
   has inflated the data, laid out the timeline, drawn it and built the tables (milliseconds
   since navigation start, so it includes reading the file and parsing the scripts);
3. redraw time of the whole view and of a 1/1000 zoom (the cost of one wheel step or drag move).

``--cnn`` also runs the tutorial's Gluon CNN (``pyprof train-demo``, bulk execution on and off)
and gives the size of its report.

    python bench/bench_report.py               # 200,000 slices
    python bench/bench_report.py --cnn
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_trace(path: Path, slices: int, seed: int = 0) -> int:
    """Write the trace; returns the number of events."""
    rng = random.Random(seed)
    names = [f"op_{i:02d}" for i in range(36)] + ["Convolution", "FullyConnected", "Pooling", "relu"]
    op_pid = 3060606181218273969
    meta = [{"ph": "M", "args": {"name": "cpu/0"}, "pid": 0, "name": "process_name"},
            {"ph": "M", "args": {"name": "cpu/1"}, "pid": 1, "name": "process_name"},
            {"ph": "M", "args": {"name": "operator"}, "pid": op_pid, "name": "process_name"}]
    tracks = [(0, 11063534467229197503), (0, 11063534467229197504), (1, 7), (1, 8)]
    clock = {t: 1_000_000.0 for t in tracks}
    events = 0
    mem = 0
    with open(path, "w") as f:
        f.write('{\n    "traceEvents": [\n')
        first = True

        def put(ev: dict) -> None:
            nonlocal first, events
            f.write(("" if first else "\n,\n") + json.dumps(ev, indent=4))
            first = False
            events += 1
        for m in meta:
            put(m)
        for i in range(slices):
            pid, tid = tracks[i % len(tracks)]
            name = names[int(rng.paretovariate(1.2)) % len(names)]
            start = clock[(pid, tid)] + rng.randint(1, 20)
            dur = rng.randint(2, 400)
            clock[(pid, tid)] = start + dur
            put({"name": name, "cat": "operator", "ph": "B", "ts": int(start), "pid": pid, "tid": tid})
            put({"name": name, "cat": "operator", "ph": "b", "ts": int(start), "id": tid, "pid": op_pid, "tid": tid})
            put({"name": name, "cat": "operator", "ph": "E", "ts": int(start + dur), "pid": pid, "tid": tid})
            put({"name": name, "cat": "operator", "ph": "e", "ts": int(start + dur), "id": tid, "pid": op_pid, "tid": tid})
            if i % 200 == 0:
                mem = max(0, mem + rng.randint(-4, 6) * 65536)
                put({"name": "Memory: cpu/0", "cat": "memory", "ph": "C", "ts": int(start), "pid": 0,
                     "args": {"Memory: cpu/0": mem}})
        f.write('\n    ],\n    "displayTimeUnit": "ms"\n}\n')
    return events


def cli(*args: str, cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pyprof", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"pyprof {' '.join(args)} failed:\n{proc.stderr}")
    return time.perf_counter() - t, proc


def measure(html: Path, repeat: int, chromium: str) -> dict:
    from playwright.sync_api import sync_playwright
    url = html.resolve().as_uri()
    out = {"first_draw_ms": [], "redraw_full_ms": [], "redraw_zoom_ms": [], "requests": set(), "errors": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium)
        for _ in range(repeat):
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.on("request", lambda r: out["requests"].add(r.url))
            page.on("pageerror", lambda e: out["errors"].append(str(e)))
            page.on("console", lambda m: out["errors"].append(m.text) if m.type == "error" else None)
            page.goto(url)
            page.wait_for_selector("body[data-ready]", state="attached", timeout=120000)
            r = page.evaluate("""() => { const s = pyprofReport, tl = s.timeline, t = [];
              const time = (f) => { const a = performance.now(); for (let i = 0; i < 5; i++) f();
                                    return (performance.now() - a) / 5; };
              const full = time(() => tl.setView(0, tl.span));
              const m = tl.span / 2, w = tl.span / 2000;
              const zoom = time(() => tl.setView(m - w, m + w));
              return {ready: document.body.dataset.ready, first: s.firstDrawMs, slices: s.slices,
                      full, zoom, drawn: tl.lastDrawn}; }""")
            if r["ready"] != "1":
                sys.exit(f"the page failed: {out['errors']}")
            out["first_draw_ms"].append(r["first"])
            out["redraw_full_ms"].append(r["full"])
            out["redraw_zoom_ms"].append(r["zoom"])
            out["slices"] = r["slices"]
            page.close()
        browser.close()
    out["requests"] = sorted(out["requests"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slices", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cnn", action="store_true", help="also the Gluon CNN report's size")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pyprof-bench-report-") as d:
        work = Path(d)
        trace = work / "big.json"
        events = make_trace(trace, a.slices)
        secs, proc = cli("report", str(trace), "-o", str(work / "big.html"), "--no-progress", cwd=work)
        html = work / "big.html"
        res = measure(html, a.repeat, a.chromium)
        print(f"trace: {a.slices} slices, {events} events, {trace.stat().st_size / 1e6:.1f} MB")
        print(f"pyprof report: {secs:.2f} s; {html.stat().st_size / 1e6:.2f} MB of HTML")
        print(f"page: {res['slices']} slices; first full draw (from navigation start), best of "
              f"{a.repeat}: {min(res['first_draw_ms']):.0f} ms (median "
              f"{statistics.median(res['first_draw_ms']):.0f} ms)")
        print(f"redraw, whole trace: {min(res['redraw_full_ms']):.1f} ms; zoomed 1/1000: "
              f"{min(res['redraw_zoom_ms']):.2f} ms")
        print(f"requests: {res['requests']}; errors: {res['errors'] or 'none'}")
        if a.cnn:
            for flag in ([], ["--per-operator"]):
                run = work / ("cnn" + "".join(flag))
                run.mkdir()
                subprocess.run([sys.executable, "-m", "pyprof", "train-demo", *flag, "--output",
                                "cnn_{window}.json", "--top", "1"], cwd=run, capture_output=True, check=True)
                cli("report", str(run / "cnn_0.json"), "-o", str(run / "cnn.html"), cwd=run)
                print(f"Gluon CNN{' ' + flag[0] if flag else ''}: trace "
                      f"{(run / 'cnn_0.json').stat().st_size / 1e3:.0f} kB, report "
                      f"{(run / 'cnn.html').stat().st_size / 1e3:.0f} kB")


if __name__ == "__main__":
    main()
