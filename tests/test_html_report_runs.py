"""``pyprof report`` on traces real runs write, each in a child process: MXNet with memory
counters, the tutorial's Gluon CNN (size; the page in Chromium and in Firefox; the README's
screenshot), ``pyprof run --dnnl`` (primitives nested under their operators) and a JVM
``ProfilerSession`` window. The browser side is tests/report_page.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from child import ROOT, run_cli, run_scenario
from pyprof.trace import report_html, summarize
from report_page import EACH_BROWSER, HIGHLIGHT_RGB, RED_PIXELS_JS, browser, check_table, open_report  # noqa: F401

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


# Pixels of colour [r, g, b] in the file's head row, left and right of the gutter's edge (GUTTER - 4).
HEAD_LABEL_PIXELS_JS = """([r, g, b]) => { const c = document.getElementById('timeline'), k = c.width / c.clientWidth;
  const row = pyprofReport.timeline.rows.find(x => x.head), edge = Math.round((PyprofTimeline.GUTTER - 4) * k);
  const d = c.getContext('2d').getImageData(0, Math.round(row.y * k), c.width, Math.round(row.h * k)).data;
  let left = 0, right = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i] === r && d[i+1] === g && d[i+2] === b) {
    if ((i / 4) % c.width < edge) left++; else right++; }
  return [left, right]; }"""


@pytest.fixture(scope="module")
def cnn_report(tmp_path_factory):
    """The tutorial's Gluon CNN (``pyprof train-demo``) in a child, and ``pyprof report`` on its
    window: (report, summarize's JSON), made once for the module."""
    tmp = tmp_path_factory.mktemp("cnn")
    demo = run_cli(["train-demo", "--per-operator", "--output", "cnn_{window}.json", "--top", "3"],
                   tmp, timeout=600, fresh=True)  # per-operator mode: before libmxnet loads
    assert demo.returncode == 0, demo.stderr[-3000:]
    cli = run_cli(["report", "cnn_0.json", "-o", "cnn.html", "--label", "Gluon CNN (train-demo --per-operator)"],
                  tmp)
    assert cli.returncode == 0, cli.stderr
    return tmp / "cnn.html", json.loads(summarize(tmp / "cnn_0.json", fmt="json"))


def test_gluon_cnn_report_size(cnn_report):
    out, summary = cnn_report
    assert out.stat().st_size < 2_000_000
    assert {"Convolution", "FullyConnected"} <= {o["name"] for o in summary["operators"]}


# Last in the module: the Chromium the tests above opened serves the first case too.
@pytest.mark.parametrize("browser", EACH_BROWSER, indirect=True)
def test_gluon_cnn_report_in_browser(browser, cnn_report, open_report, tmp_path):
    """The Gluon CNN's report in headless Chromium and Firefox: clean (no console error, no
    request), summarize's table, a click on Convolution's row marks its slices; the README's
    screenshot is Chromium's (PYPROF_UPDATE_SCREENSHOT=1 writes docs/report.png)."""
    out, summary = cnn_report
    page = open_report(out)
    page.check_clean()
    check_table(page, summary)
    assert page.page.evaluate(RED_PIXELS_JS, list(HIGHLIGHT_RGB)) == 0
    page.page.locator('table.ops tbody tr[data-key=\'["operator","Convolution","cpu/0"]\']').click()
    assert int(page.page.locator("#timeline").get_attribute("data-highlight-count")) == \
        next(o["count"] for o in summary["operators"] if o["name"] == "Convolution")
    assert page.page.evaluate(RED_PIXELS_JS, list(HIGHLIGHT_RGB)) > 0
    # The window's label, longer than the gutter, is cut at its edge: the step marks stay readable.
    left, right = page.page.evaluate(HEAD_LABEL_PIXELS_JS, [31, 78, 121])  # timeline.js HEAD_COLOR
    assert left > 0 and right == 0
    assert page.errors == []
    shot = tmp_path / "report.png"
    page.page.screenshot(path=str(shot), full_page=False)
    assert shot.stat().st_size > 10_000
    if page.kind == "chromium" and os.environ.get("PYPROF_UPDATE_SCREENSHOT") == "1":
        from PIL import Image  # matplotlib's dependency; 256 colours: 55 kB against 135 kB, same look
        Image.open(shot).convert("RGB").quantize(256, dither=Image.Dither.NONE).save(
            ROOT / "docs" / "report.png", optimize=True)
