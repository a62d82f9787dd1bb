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

import pytest

from child import run_cli
from pyprof.trace import diff, format_diff, report_html, summarize
from pyprof.trace.html import CSP
from report_page import (CASES, HIGHLIGHT_RGB, RED_PIXELS_JS, ROWS_JS, TRACES, browser,  # noqa: F401
                         check_notes, check_table, open_report)

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


def test_bookkeeping_after_compute_whatever_the_sort(tmp_path, open_report):
    """A real window whose largest operator is the engine's bookkeeping: the page lists compute
    first and the bookkeeping under its own title row, marked, also after a click on a header;
    the footer's total keeps its time."""
    from child import bookkeeping_trace
    trace = bookkeeping_trace(tmp_path / "bk.json")
    out = tmp_path / "r.html"
    report_html(trace, out)
    summary = json.loads(summarize(trace, fmt="json"))
    assert max(summary["operators"], key=lambda o: o["total_us"])["bookkeeping"]  # the case
    page = open_report(out)
    page.check_clean()
    check_table(page, summary)
    rows = page.page.evaluate(ROWS_JS, 0)
    assert not rows[0]["bookkeeping"] and rows[-1]["bookkeeping"]
    assert any(r["key"][1] == "WaitForVar" and r["bookkeeping"] for r in rows)
    bk = [o for o in summary["operators"] if o["bookkeeping"]]
    title = page.js("document.querySelector('table.ops tbody.bookkeeping tr.section').textContent")
    calls = sum(o["count"] for o in bk)
    assert title == (f"bookkeeping: {sum(o['total_us'] for o in bk) / 1e3:.3f} ms in {calls} calls, "
                     "the engine's own work (waits, deletions, seeding), not compute")
    assert page.js("document.querySelectorAll('table.ops tr.bookkeeping').length") == len(bk)
    for col in ("total_us", "total_us", "name", "count"):  # descending, ascending, by name, calls
        page.page.locator(f'table.ops th[data-col="{col}"]').click()
        marks = [r["bookkeeping"] for r in page.page.evaluate(ROWS_JS, 0)]
        assert marks == sorted(marks), col
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


def test_instant_marks_and_window(tmp_path, open_report):
    """Instant events (MXNet markers, ``ph`` ``i``) are marks on the timeline; each file is
    shown as a window spanning its events."""
    events = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "cpu/0"}},
              {"ph": "X", "name": "dot", "cat": "operator", "ts": 100, "dur": 50, "pid": 0, "tid": 1},
              {"ph": "i", "name": "step 1", "cat": "marker", "ts": 160, "pid": 0, "tid": 1, "s": "p"},
              {"ph": "X", "name": "relu", "cat": "operator", "ts": 200, "dur": 20, "pid": 0, "tid": 1}]
    trace = tmp_path / "marks.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    out = tmp_path / "r.html"
    report_html(trace, out)
    page = open_report(out)
    page.check_clean()
    tl = page.js("(() => { const t = pyprofReport.files[0].timeline; return {marks: t.marks, span: t.span}; })()")
    assert tl["marks"] == [{"name": "step 1", "ts": 60, "track": 0, "cat": "marker"}] and tl["span"] == 120


def test_not_one_or_two_traces(tmp_path):
    from pyprof.trace import TraceError
    with pytest.raises(TraceError, match=r"3 trace\(s\) for one report\. fix: "):
        report_html([TRACES / "small.json"] * 3, tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()
