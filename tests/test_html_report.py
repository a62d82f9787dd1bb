"""``pyprof report``: the offline HTML report, opened from file:// in a real headless Chromium.

Debian's ``chromium`` (scripts/setup.sh installs it) driven by Playwright (pyproject's test extras)
with ``executable_path``: no browser download. One browser for the module, a fresh page per
report; every page is opened with all requests recorded and every request but the file itself
refused, and its console errors and uncaught exceptions collected. The figures the page shows are
compared with ``pyprof summarize --format json`` / ``pyprof diff --format json`` on the same
traces, the errors with ``pyprof summarize``'s.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from child import ROOT, run_cli, run_scenario
from pyprof.trace import diff, format_diff, report_html, summarize
from pyprof.trace.html import CSP

TRACES = ROOT / "tests" / "fixtures" / "traces"
CASES = ROOT / "tests" / "fixtures" / "stats_cases"
CHROMIUM = os.environ.get("PYPROF_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
HIGHLIGHT_RGB = (214, 39, 40)  # timeline.js HIGHLIGHT, #d62728


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"no Chromium at {CHROMIUM}; fix: run scripts/setup.sh (it installs Debian's "
                    "chromium), or set PYPROF_CHROMIUM to a Chromium binary")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM)
        yield b
        b.close()


class Page:
    """One report opened in a fresh context: the page, its requests and its errors."""

    def __init__(self, browser, path: Path, width: int = 1280):
        self.url = path.resolve().as_uri()
        self.context = browser.new_context(viewport={"width": width, "height": 900})
        self.requests: list[str] = []
        self.refused: list[str] = []
        self.errors: list[str] = []

        def route(r):
            if r.request.url == self.url:
                r.continue_()
            else:
                self.refused.append(r.request.url)
                r.abort()
        self.context.route("**/*", route)
        self.page = self.context.new_page()
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(self.url)
        self.page.wait_for_function("document.body.dataset.ready", timeout=30000)
        self.ready = self.page.evaluate("document.body.dataset.ready")

    def js(self, expr: str):
        return self.page.evaluate(expr)

    def close(self) -> None:
        self.context.close()

    def check_clean(self) -> None:
        assert self.ready == "1", self.js("pyprofReport.errors")
        assert self.errors == []
        assert self.requests == [self.url] and self.refused == []


@pytest.fixture()
def open_report(browser):
    pages: list[Page] = []

    def opener(path: Path, width: int = 1280) -> Page:
        p = Page(browser, path, width)
        pages.append(p)
        return p
    yield opener
    for p in pages:
        p.close()


ROWS_JS = """(fi) => [...document.querySelectorAll(`table.ops[data-file="${fi}"] tbody tr`)].map(tr => ({
  key: JSON.parse(tr.dataset.key), count: +tr.dataset.count, total_us: +tr.dataset.totalUs,
  cells: [...tr.cells].map(td => td.textContent)}))"""
TOTAL_JS = """(fi) => { const tr = document.querySelector(`table.ops[data-file="${fi}"] tfoot tr`);
  return {count: +tr.dataset.count, total_us: +tr.dataset.totalUs, cells: [...tr.cells].map(td => td.textContent)}; }"""
RED_PIXELS_JS = """([r, g, b]) => { const c = document.getElementById('timeline');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i] === r && d[i+1] === g && d[i+2] === b) n++;
  return n; }"""


def check_table(page: Page, summary: dict, fi: int = 0) -> None:
    """The table's rows and totals are summarize's operators, figure for figure."""
    rows = page.page.evaluate(ROWS_JS, fi)
    ops = summary["operators"]
    assert len(rows) == len(ops)
    # As floats: a JavaScript number comes back as the int it prints as (1.8e19 as 18446744073709552000).
    want = sorted(([o["category"], o["name"], o["device"]], o["count"], float(o["total_us"])) for o in ops)
    assert sorted((r["key"], r["count"], float(r["total_us"])) for r in rows) == want
    by_key = {(o["category"], o["name"], o["device"]): o for o in ops}
    for r in rows:
        o = by_key[tuple(r["key"])]
        dev, cat, name, calls, total, share = r["cells"][:6]
        assert (dev, cat, name) == (o["device"] or "host", o["category"], o["name"])
        assert int(calls) == o["count"]
        assert total == f"{o['total_us'] / 1e3:.3f}"
        assert share == f"{o['share_pct']:.2f}"
        assert r["cells"][6:] == [f"{o[k] / 1e3:.3f}" for k in
                                  ("mean_us", "p50_us", "p90_us", "p99_us", "min_us", "max_us")]
    total = page.page.evaluate(TOTAL_JS, fi)
    assert total["count"] == sum(o["count"] for o in ops)
    assert float(total["total_us"]) == float(sum(o["total_us"] for o in ops))
    assert total["cells"][2] == f"{sum(o['total_us'] for o in ops) / 1e3:.3f}"
    # Rows in the page's default order: total time descending, as summarize sorts each group.
    totals = [r["total_us"] for r in rows]
    assert totals == sorted(totals, reverse=True)


def check_notes(page: Page, summary: dict) -> None:
    text = page.js("document.getElementById('notes').textContent")
    for note in summary["notes"]:
        assert note in text
    if not summary["notes"]:
        assert "no repairs or notes" in text


FIXTURES = [TRACES / n for n in ("small.json", "leading_comma.json", "missing_head.json",
                                 "missing_tail.json", "quote.json")] + \
           [CASES / n for n in ("appended_dump.json", "escapes.json", "float_times.json",
                                "mixed.json", "small.json.gz", "string_ids.json")]


@pytest.mark.parametrize("trace", FIXTURES, ids=lambda p: p.name)
def test_fixture_table_equals_summarize(trace, tmp_path, open_report):
    out = tmp_path / "r.html"
    res = report_html(trace, out)
    summary = json.loads(summarize(trace, fmt="json"))
    assert res.operators == len(summary["operators"]) and res.bytes == out.stat().st_size
    page = open_report(out)
    page.check_clean()
    check_table(page, summary)
    check_notes(page, summary)
    assert page.js("pyprofReport.slices") == res.slices


def test_page_is_self_contained(tmp_path):
    out = tmp_path / "r.html"
    report_html(TRACES / "small.json", out)
    text = out.read_text()
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP.replace(chr(39), "&#x27;")}">' in text
    assert "default-src 'none'" in CSP and "connect-src" not in CSP
    # No reference to anything outside the file: no src/href attributes, no URLs but uPlot's
    # licence comment.
    for needle in (" src=", " href=", "@import", "url("):
        assert needle not in text, needle
    assert "uPlot (v1.6.32)" in text and "DecompressionStream" in text


def test_click_row_highlights_slices(tmp_path, open_report):
    trace = TRACES / "small.json"
    out = tmp_path / "r.html"
    report_html(trace, out)
    summary = json.loads(summarize(trace, fmt="json"))
    dot = next(o for o in summary["operators"] if o["name"] == "dot")
    page = open_report(out)
    page.check_clean()
    assert page.page.evaluate(RED_PIXELS_JS, list(HIGHLIGHT_RGB)) == 0
    row = page.page.locator("table.ops tbody tr", has_text="dot").filter(
        has=page.page.locator("td", has_text="dot")).first
    page.page.locator('table.ops tbody tr[data-key=\'["operator","dot","cpu/0"]\']').click()
    canvas = page.page.locator("#timeline")
    assert json.loads(canvas.get_attribute("data-highlight")) == ["operator", "dot", "cpu/0"]
    assert int(canvas.get_attribute("data-highlight-count")) == dot["count"]  # one slice per call
    assert page.page.evaluate(RED_PIXELS_JS, list(HIGHLIGHT_RGB)) > 0
    assert "sel" in (page.page.locator("table.ops tr.sel").get_attribute("class") or "")
    assert row.count() == 1
    # A second click clears it.
    page.page.locator('table.ops tbody tr[data-key=\'["operator","dot","cpu/0"]\']').click()
    assert canvas.get_attribute("data-highlight") == ""
    assert page.page.evaluate(RED_PIXELS_JS, list(HIGHLIGHT_RGB)) == 0
    assert page.errors == []


def test_sort_by_header(tmp_path, open_report):
    trace = CASES / "mixed.json"
    out = tmp_path / "r.html"
    report_html(trace, out)
    page = open_report(out)
    page.page.locator('table.ops th[data-col="count"]').click()
    counts = [r["count"] for r in page.page.evaluate(ROWS_JS, 0)]
    assert counts == sorted(counts, reverse=True)
    page.page.locator('table.ops th[data-col="count"]').click()
    counts = [r["count"] for r in page.page.evaluate(ROWS_JS, 0)]
    assert counts == sorted(counts)
    page.page.locator('table.ops th[data-col="name"]').click()
    names = [r["key"][1] for r in page.page.evaluate(ROWS_JS, 0)]
    assert names == sorted(names)
    page.check_clean()


def test_zoom_pan_and_slice_args(tmp_path, open_report):
    trace = CASES / "args_lists.json"
    out = tmp_path / "r.html"
    report_html(trace, out)
    page = open_report(out)
    page.check_clean()
    view0 = [float(v) for v in page.page.locator("#timeline").get_attribute("data-view").split(",")]
    box = page.page.locator("#timeline").bounding_box()
    page.page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 40)
    page.page.mouse.wheel(0, -400)  # zoom in
    view1 = [float(v) for v in page.page.locator("#timeline").get_attribute("data-view").split(",")]
    assert view1[1] - view1[0] < (view0[1] - view0[0]) / 2
    page.page.mouse.down()
    page.page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + 40, steps=4)
    page.page.mouse.up()
    view2 = [float(v) for v in page.page.locator("#timeline").get_attribute("data-view").split(",")]
    assert view2[0] > view1[0] and abs((view2[1] - view2[0]) - (view1[1] - view1[0])) < 1e-6 * view1[1]
    page.page.locator("#timeline").dblclick(position={"x": 300, "y": 10})
    # A click on a slice shows its arguments: find one that has some and click its middle.
    target = page.js("""(() => { const tl = pyprofReport.timeline; tl.setView(0, tl.span);
      for (const f of tl.files) for (const r of tl.rows) { if (r.head) continue;
        for (const [d, lane] of r.track.lanes.entries()) { if (!lane) continue;
          for (let j = 0; j < lane.n; j++) { const s = lane.slice[j];
            if (f.tl.slices.args[s] >= 0) return {x: (tl.xOf(lane.start[j]) + tl.xOf(lane.end[j])) / 2,
              y: r.y + 2 + d * 14 + 6, name: f.tl.names[f.tl.slices.name[s]],
              args: f.tl.args[f.tl.slices.args[s]]}; } } } return null; })()""")
    assert target is not None
    page.page.locator("#timeline").click(position={"x": target["x"], "y": target["y"]})
    text = page.js("document.getElementById('details').textContent")
    assert target["name"] in text
    for k in target["args"]:
        assert k in text
    assert page.js("pyprofReport.selected.name") == target["name"]
    assert page.errors == []


def test_two_traces_diff_equals_pyprof_diff(tmp_path, open_report):
    base, new = TRACES / "small.json", CASES / "mixed.json"
    out = tmp_path / "d.html"
    report_html([base, new], out, labels=["base", "new"])
    want = json.loads(format_diff(diff(base, new), "json"))
    page = open_report(out)
    page.check_clean()
    got = page.js("""[...document.querySelectorAll('table.diff tbody tr')].map(tr => ({
        key: JSON.parse(tr.dataset.key), verdict: tr.dataset.verdict, impact: +tr.dataset.impact,
        cells: [...tr.cells].map(td => td.textContent)}))""")
    assert [(g["key"], g["verdict"], g["impact"]) for g in got] == \
        [(r["key"], r["verdict"], r["impact"]) for r in want["rows"]]
    for g, r in zip(got, want["rows"]):
        assert g["cells"][2:4] == [str(r["base_count"]), str(r["new_count"])]
    check_table(page, json.loads(summarize(base, fmt="json")), 0)
    check_table(page, json.loads(summarize(new, fmt="json")), 1)
    assert page.js("document.querySelectorAll('table.ops').length") == 2


# Empty, foreign (JSON that is not a trace, not JSON at all), and damaged past repair (a gzip
# stream cut inside its header, made in the test from a committed fixture).
BAD = [CASES / n for n in ("empty.json", "blank.json", "not_json.json", "no_events.json",
                           "no_ph.json", "empty.json.gz")] + ["cut.json.gz"]


@pytest.mark.parametrize("trace", BAD, ids=lambda p: getattr(p, "name", p))
def test_bad_trace_same_error_as_summarize(trace, tmp_path):
    if trace == "cut.json.gz":
        trace = tmp_path / trace
        trace.write_bytes(b"\x1f\x8b\x08\x00" + (CASES / "small.json.gz").read_bytes()[4:12])
    out = tmp_path / "r.html"
    want = run_cli(["summarize", str(trace)], tmp_path)
    got = run_cli(["report", str(trace), "-o", str(out)], tmp_path)
    assert want.returncode == got.returncode == 1
    line = want.stderr.strip()
    assert line.startswith("pyprof summarize: error: ") and "\n" not in line and "fix:" in line
    assert got.stderr.strip() == line.replace("pyprof summarize:", "pyprof report:", 1)
    assert not out.exists() and got.stdout == ""


def test_missing_trace_and_bad_output(tmp_path):
    want = run_cli(["summarize", str(tmp_path / "nope.json")], tmp_path)
    got = run_cli(["report", str(tmp_path / "nope.json"), "-o", str(tmp_path / "r.html")], tmp_path)
    assert got.returncode == 1
    assert got.stderr.strip() == want.stderr.strip().replace("pyprof summarize:", "pyprof report:", 1)
    bad = run_cli(["report", str(TRACES / "small.json"), "-o", str(tmp_path / "no" / "r.html")], tmp_path)
    assert bad.returncode == 1 and "fix:" in bad.stderr and "\n" not in bad.stderr.strip()


REAL = """
import pyprof.profiler as profiler
import mxnet as mx
profiler.set_config(profile_imperative=True, profile_memory=True, profile_api=False,
                    profile_symbolic=False, filename="real.json")
profiler.set_state("run")
a = mx.nd.ones((256, 256))
for i in range(5):
    c = mx.nd.relu(mx.nd.dot(a, a)) + 1
mx.nd.waitall()
profiler.set_state("stop")
profiler.dump()
result = "real.json"
"""


def test_real_mxnet_trace_with_memory(tmp_path, open_report):
    trace = tmp_path / run_scenario(REAL, tmp_path)
    out = tmp_path / "real.html"
    cli = run_cli(["report", str(trace), "-o", str(out)], tmp_path)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.startswith(f"wrote {out}: ")
    summary = json.loads(run_cli(["summarize", str(trace), "--format", "json"], tmp_path).stdout)
    assert {o["name"] for o in summary["operators"]} >= {"dot", "relu"}
    page = open_report(out)
    page.check_clean()
    check_table(page, summary)
    # The memory counter drawn by uPlot: one series per "Memory: <device>" counter.
    series = page.js("[...document.querySelectorAll('#memory .u-legend .u-series')].map(e => e.textContent)")
    assert any("Memory: cpu/0" in s for s in series)
    samples = sum(m["samples"] for m in summary["memory"])
    drawn = page.js("pyprofReport.files[0].timeline.counters.filter(c => c.name.startsWith('Memory: '))"
                    ".reduce((n, c) => n + c.ts.length, 0)")
    assert drawn == samples


def test_gluon_cnn_report_size_and_screenshot(tmp_path, open_report):
    """The tutorial's Gluon CNN (``pyprof train-demo``) in a child: its report is under 2 MB;
    the README's screenshot is taken here (PYPROF_UPDATE_SCREENSHOT=1 writes docs/report.png)."""
    demo = run_cli(["train-demo", "--per-operator", "--output", "cnn_{window}.json", "--top", "3"],
                   tmp_path, timeout=600)
    assert demo.returncode == 0, demo.stderr[-3000:]
    trace = tmp_path / "cnn_0.json"
    out = tmp_path / "cnn.html"
    cli = run_cli(["report", "cnn_0.json", "-o", "cnn.html", "--label", "Gluon CNN (train-demo --per-operator)"],
                  tmp_path)
    assert cli.returncode == 0, cli.stderr
    assert out.stat().st_size < 2_000_000
    summary = json.loads(summarize(trace, fmt="json"))
    assert {"Convolution", "FullyConnected"} <= {o["name"] for o in summary["operators"]}
    page = open_report(out)
    page.check_clean()
    check_table(page, summary)
    page.page.locator('table.ops tbody tr[data-key=\'["operator","Convolution","cpu/0"]\']').click()
    assert int(page.page.locator("#timeline").get_attribute("data-highlight-count")) == \
        next(o["count"] for o in summary["operators"] if o["name"] == "Convolution")
    shot = tmp_path / "report.png"
    page.page.screenshot(path=str(shot), full_page=False)
    assert shot.stat().st_size > 10_000
    if os.environ.get("PYPROF_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(shot, ROOT / "docs" / "report.png")


DNNL_WORKLOAD = """
import mxnet as mx
x = mx.nd.random.uniform(shape=(2, 32, 16, 16))
w = mx.nd.random.uniform(shape=(64, 32, 3, 3))
for i in range(3):
    y = mx.nd.Convolution(x, w, mx.nd.zeros((64,)), kernel=(3, 3), num_filter=64, pad=(1, 1))
    z = mx.nd.Pooling(y, kernel=(2, 2), stride=(2, 2), pool_type="max")
mx.nd.waitall()
"""

SLICES_JS = """() => { const f = pyprofReport.timeline.files[0], c = f.tl.slices, out = [];
  for (let i = 0; i < f.start.length; i++) out.push({track: c.track[i], depth: c.depth[i],
    start: f.start[i], end: f.start[i] + c.dur[i], name: f.tl.names[c.name[i]], cat: f.tl.cats[c.cat[i]],
    args: c.args[i] >= 0 ? f.tl.args[c.args[i]] : null});
  return out; }"""


def test_dnnl_primitives_nest_under_their_operators(tmp_path, open_report):
    """A real ``pyprof run --dnnl --trace`` of MXNet convolutions: on the page every primitive
    lies on its operator's track, one level deeper, inside the operator's slice."""
    (tmp_path / "work.py").write_text(DNNL_WORKLOAD)
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "pyprof", "run", "--dnnl", "--log", "dnnl.log",
                           "--trace", "trace.json", "--", sys.executable, "work.py"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "r.html"
    report_html(tmp_path / "trace.json", out)
    page = open_report(out)
    page.check_clean()
    check_table(page, json.loads(summarize(tmp_path / "trace.json", fmt="json")))
    slices = page.page.evaluate(SLICES_JS)
    prims = [s for s in slices if s["cat"] == "dnnl" and s["args"].get("operator")]
    assert len([p for p in prims if p["name"] == "convolution"]) == 3
    for p in prims:
        holders = [s for s in slices if s["cat"] == "operator" and s["name"] == p["args"]["operator"]
                   and s["track"] == p["track"] and s["depth"] < p["depth"]
                   and s["start"] - 1e-3 <= p["start"] and p["end"] <= s["end"] + 1e-3]
        assert len(holders) == 1, p
    # The primitive's arguments (shapes, layouts) show when it is clicked.
    conv = next(p for p in prims if p["name"] == "convolution")
    assert conv["args"]["problem"].startswith("mb2_ic32oc64")


JVM_SESSION = """
import mxnet as mx
from pyprof import jvm
jvm.start()
import jpype
opts = jpype.JClass("java.util.HashMap")()
opts.put("path", "jvm_{window}.json")
session = jpype.JClass("pyprof.jvm.ProfilerSession")(opts, os.getcwd())
session.start()
a = mx.nd.ones((64, 64))
for i in range(3):
    mx.nd.relu(mx.nd.dot(a, a)).wait_to_read()
mx.nd.waitall()
result = [str(w.get("path")) for w in session.stop()]   # the window files the JVM wrote
"""


def test_report_of_a_jvm_window(tmp_path, open_report):
    """The JVM service's way: ProfilerSession.stop() names the window files (Java, through the
    JPype bridge in a child); ``pyprof report`` on one gives the page summarize's figures."""
    paths = run_scenario(JVM_SESSION, tmp_path)
    assert len(paths) == 1 and Path(paths[0]).is_file()
    out = tmp_path / "jvm.html"
    cli = run_cli(["report", paths[0], "-o", str(out)], tmp_path)
    assert cli.returncode == 0, cli.stderr
    summary = json.loads(run_cli(["summarize", paths[0], "--format", "json"], tmp_path).stdout)
    dot = [o for o in summary["operators"] if o["name"] == "dot"]
    assert dot and dot[0]["count"] == 3
    page = open_report(out)
    page.check_clean()
    check_table(page, summary)


def test_names_are_text_not_markup(tmp_path, open_report):
    """Operator names, args and labels that look like markup stay text: nothing runs, nothing
    is requested."""
    evil = "</script><img src=x onerror=\"window.pwned=1\">"
    events = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "cpu/0"}},
              {"ph": "X", "name": evil, "cat": "operator", "ts": 10, "dur": 5, "pid": 0, "tid": 1,
               "args": {"Input Dims": evil}},
              {"ph": "X", "name": "dot", "cat": "operator", "ts": 20, "dur": 5, "pid": 0, "tid": 1}]
    trace = tmp_path / "evil.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    out = tmp_path / "r.html"
    report_html(trace, out, labels=[evil])
    page = open_report(out)
    page.check_clean()
    assert page.js("window.pwned") is None
    assert page.js("document.querySelectorAll('img').length") == 0
    check_table(page, json.loads(summarize(trace, fmt="json")))
