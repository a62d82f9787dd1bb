"""``pyprof report`` on the windows of a real scheduled session with ``record_shapes=True,
with_flops=True``: the steps of the schedule as marks on the timeline (at the times of the
window's ``ProfilerStep#N`` events, drawn on the canvas, the window's span shaded) and the
roofline view (one point per (operator, input shape) group with FLOPs, its values those of
``pyprof roofline --format json``), with 0 console errors and 0 requests. The browser side is
tests/report_page.py."""

from __future__ import annotations

import json

import pytest

from child import run_cli, run_scenario
from pyprof import rules
from pyprof.attribution.peaks import Cache, Peaks, read_caches
from pyprof.trace import report_html
from pyprof.trace.html.roofview import NO_PEAKS_NOTE
from report_page import TRACES, browser, open_report  # noqa: F401

STEP_RGB = (44, 160, 44)  # timeline.js STEP_COLOR, #2ca02c
STEPS = rules.spec("schedule.json")["step_marks"]

SESSION = """
import mxnet as mx
import pyprof
with pyprof.profile(schedule=pyprof.schedule(wait=1, warmup=1, active=3, repeat=1),
                    path="w_{window}.json", record_shapes=True, with_flops=True) as prof:
    a, v = mx.nd.ones((128, 64)), mx.nd.ones((64, 32))
    for i in range(6):
        (mx.nd.relu(mx.nd.dot(a, v)) + 1).wait_to_read()
        mx.nd.dot(v.T, a.T).wait_to_read()
        prof.step()
result = [w.path for w in prof.windows]
"""

PIXEL_JS = """([x, y]) => Array.from(document.getElementById('timeline').getContext('2d')
  .getImageData(x * devicePixelRatio, y * devicePixelRatio, 1, 1).data.slice(0, 3))"""


@pytest.fixture(scope="module")
def window(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("session")
    paths = run_scenario(SESSION, tmp)
    assert len(paths) == 1
    return tmp, paths[0]


def _peaks_file(tmp) -> tuple[str, Peaks]:
    peaks = Peaks(60.0, 12.5, 30.0, {256: 55.0, 512: 60.0}, {1024: 30.0}, 1 << 26, 1.5)
    path = tmp / "peaks.json"
    path.write_text(json.dumps(peaks.as_dict()))
    return str(path), peaks


def test_steps_are_marks_on_the_timeline(window, open_report):
    tmp, path = window
    events = json.loads(open(path).read())["traceEvents"]
    steps = [e for e in events if e.get("cat") == STEPS["cat"] and e.get("ph") == STEPS["ph"]]
    assert [e["name"] for e in steps] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    out = tmp / "marks.html"
    cli = run_cli(["report", path, "-o", str(out)], tmp)
    assert cli.returncode == 0, cli.stderr
    page = open_report(out)
    page.check_clean()
    t0 = page.js("pyprofReport.files[0].timeline.t0")
    drawn = page.js("pyprofReport.timeline.drawnSteps")
    assert [d["name"] for d in drawn] == [e["name"] for e in steps]
    assert [d["step"] for d in drawn] == [e["args"]["step"] for e in steps]
    assert [t0 + d["ts"] for d in drawn] == [e["ts"] for e in steps]
    # Where the timeline puts those times, a line of the step colour, from the file's head row
    # down to its last track; the other instants are not steps.
    xs = page.page.evaluate("(ts) => ts.map(t => Math.round(pyprofReport.timeline.xOf(t)))",
                            [d["ts"] for d in drawn])
    assert xs == [d["x"] for d in drawn] and xs == sorted(xs) and len(set(xs)) == len(xs)
    bottom = page.js("pyprofReport.timeline.fileEnd(0)")
    for d in drawn:
        for y in (d["y"] + 2, bottom - 2):
            assert page.page.evaluate(PIXEL_JS, [d["x"], y]) == list(STEP_RGB), (d, y)
    assert page.page.evaluate(PIXEL_JS, [xs[0] + (xs[1] - xs[0]) // 2, bottom - 2]) != list(STEP_RGB)
    assert page.js("pyprofReport.timeline.files[0].marks.length") == 0
    # The window's span: from its first step's start to its last step's end.
    span = page.js("pyprofReport.timeline.files[0].windows")
    last = steps[-1]
    assert span == [{"window": 0, "start": steps[0]["ts"] - t0,
                     "end": last["ts"] + last["args"]["step_us"] - t0}]
    # Zoomed in on the second step, only its mark is drawn, still at its time.
    page.page.evaluate("(v) => pyprofReport.timeline.setView(v[0], v[1])",
                       [drawn[1]["ts"] - 10, drawn[1]["ts"] + 10])
    again = page.js("pyprofReport.timeline.drawnSteps")
    assert [d["name"] for d in again] == [drawn[1]["name"]]
    assert page.page.evaluate(PIXEL_JS, [again[0]["x"], again[0]["y"] + 2]) == list(STEP_RGB)
    assert page.errors == []


def _page_points(page) -> list[dict]:
    return page.js("""pyprofReport.rooflines.map(r => r && ({
      rows: [...document.querySelectorAll('table.roofline tbody tr')].map(tr => ({
        name: tr.dataset.name, dims: JSON.parse(tr.dataset.dims), x: +tr.dataset.intensity,
        y: +tr.dataset.gflops, cells: [...tr.cells].map(td => td.textContent)})),
      drawn: r.chart.data[0].map((x, i) => [x, r.chart.data[1][i], r.order[i]]).filter(p => p[1] !== null),
      series: r.chart.series.map(s => s.label), data: r.chart.data }))""")[0]


def test_roofline_view_equals_pyprof_roofline(window, open_report):
    tmp, path = window
    peaks_path, peaks = _peaks_file(tmp)
    cli = run_cli(["roofline", path, "-o", str(tmp / "roof.png"), "--peaks", peaks_path,
                   "--format", "json"], tmp)
    assert cli.returncode == 0, cli.stderr
    roof = json.loads(cli.stdout)
    want = roof["groups"]
    assert {g["name"] for g in want} >= {"dot", "relu", "_plus_scalar"}
    assert sum(g["name"] == "dot" for g in want) == 2  # two input shapes
    out = tmp / "roof.html"
    cli = run_cli(["report", path, "-o", str(out), "--peaks", peaks_path], tmp)
    assert cli.returncode == 0, cli.stderr
    page = open_report(out)
    page.check_clean()
    got = _page_points(page)
    assert [(r["name"], r["dims"], r["x"], r["y"]) for r in got["rows"]] == [
        (g["name"], g["input_dims"], g["intensity"], g["gflops_per_s"]) for g in want]
    for r, g in zip(got["rows"], want):
        assert r["cells"][3:11] == [str(g["count"]), f"{g['intensity']:.3f}",
                                    f"{g['gflops_per_s']:.3f}", f"{g['gb_per_s']:.3f}",
                                    f"{g['roof_gflops']:.3f}", f"{g['roof_pct']:.1f}",
                                    f"compute ({g['peak']})" if g["bound"] == "compute"
                                    else f"memory ({g['memory_roof']})",
                                    "\u25b2 above" if g["above"] else ""]
    # One drawn point per group, at the group's (FLOP/byte, GFLOP/s).
    assert sorted((x, y) for x, y, _ in got["drawn"]) == sorted(
        (g["intensity"], g["gflops_per_s"]) for g in want)
    assert sorted(i for _, _, i in got["drawn"]) == list(range(len(want)))
    # The roofs: min(peak, x * copy GB/s) at every x, numpy GEMM's and MXNet dot's.
    assert got["series"][2:] == [f"numpy GEMM roof {peaks.gemm_gflops:.1f} GFLOP/s, copy 12.5 GB/s",
                                 f"MXNet dot roof {peaks.mxnet_dot_gflops:.1f} GFLOP/s, copy 12.5 GB/s",
                                 "above the roof (over 1.1x)"]  # the peaks list no caches
    xs = got["data"][0]
    assert got["data"][2] == [min(peaks.gemm_gflops, x * peaks.copy_gbs) for x in xs]
    assert got["data"][3] == [min(peaks.mxnet_dot_gflops, x * peaks.copy_gbs) for x in xs]
    assert got["data"][4] == [y if y is not None and want[i]["above"] else None
                              for y, i in zip(got["data"][1], page.js("pyprofReport.rooflines[0].order"))]
    assert page.js("[...document.querySelectorAll('.roofline-note')].length") == 0
    assert page.js("pyprofReport.rooflines[0].chart.scales.x.distr") == 3  # log
    assert page.js("pyprofReport.rooflines[0].chart.scales.y.distr") == 3
    # The engine's bookkeeping (the window's DeleteVariables, ...): no point, listed apart as
    # pyprof roofline lists it
    bk = roof["bookkeeping"]
    assert "DeleteVariable" in {b["name"] for b in bk}
    assert not {b["name"] for b in bk} & {r["name"] for r in got["rows"]}
    assert page.js("pyprofReport.rooflines[0].view.bookkeeping") == bk
    line = page.js("document.querySelector('.roofline-bookkeeping').textContent")
    calls = sum(b["count"] for b in bk)
    assert line.startswith(f"bookkeeping, not placed: {sum(b['total_us'] for b in bk) / 1e3:.3f} ms in "
                           f"{calls} call{'' if calls == 1 else 's'}; the engine's own work")
    assert all(f"{b['name']} ({b['device']}) {b['total_us'] / 1e3:.3f} ms" in line for b in bk)


def test_groups_above_their_roof_are_marked_with_their_notes(window, open_report):
    """Peaks far below anything measured: every group is above its roof. Each is marked in red
    on the chart and in the table, its note in the mark's title, and listed under the table as
    ``pyprof roofline`` lists it; the cache roofs are drawn, and each group names its own."""
    tmp, path = window
    caches = (Cache("L1d", 1, 48 << 10), Cache("L2", 2, 1 << 20, 256 << 10, 0.004),
              Cache("L3", 3, 32 << 20, 8 << 20, 0.003))
    peaks = Peaks(0.01, 0.002, 0.005, {256: 0.01}, {1024: 0.005}, 1 << 26, 1.0, caches)
    (tmp / "low.json").write_text(json.dumps(peaks.as_dict()))
    cli = run_cli(["roofline", path, "-o", str(tmp / "low.png"), "--peaks", "low.json"], tmp)
    assert cli.returncode == 0 and "warning:" in cli.stderr
    listed = cli.stdout.split("over 1.1x):\n")[1].split("\n\n")[0].splitlines()
    roof = json.loads(run_cli(["roofline", path, "-o", str(tmp / "low.png"), "--peaks", "low.json",
                               "--format", "json"], tmp).stdout)
    assert len(roof["above"]) == len(roof["groups"]) == len(listed) >= 4
    assert {g["memory_roof"] for g in roof["groups"]} == {"L2"}  # the window's arrays are small
    out = tmp / "low.html"
    assert run_cli(["report", path, "-o", str(out), "--peaks", "low.json"], tmp).returncode == 0
    page = open_report(out)
    page.check_clean()
    got = _page_points(page)
    assert all(r["cells"][10] == "\u25b2 above" for r in got["rows"])
    assert page.js("[...document.querySelectorAll('table.roofline tbody tr')].map(tr => [tr.className, "
                   "tr.cells[10].title])") == [["above", g["above_note"]] for g in roof["groups"]]
    assert all(g["above_note"].startswith("likely cache residency") or g["above_note"] ==
               rules.spec("attribution.json")["roofline"]["above_notes"]["counts"] for g in roof["groups"])
    assert page.js("[...document.querySelectorAll('ul.roofline-above li')].map(li => li.textContent)") == [
        line.strip() for line in listed]
    assert page.js("document.querySelector('.roofline-above-title').textContent") == (
        f"\u25b2 above the roof: {len(listed)} groups over 1.1x")
    assert got["series"][2:] == ["numpy GEMM roof 0.0 GFLOP/s, copy 0.0 GB/s",
                                 "MXNet dot roof 0.0 GFLOP/s, copy 0.0 GB/s",
                                 "L2 (1 MiB) copy 0.0 GB/s", "L3 (32 MiB) copy 0.0 GB/s",
                                 "above the roof (over 1.1x)"]
    xs = got["data"][0]
    assert got["data"][4] == [min(0.01, x * 0.004) for x in xs]  # under the best peak
    assert [y for y in got["data"][6] if y is not None] == [y for y in got["data"][1] if y is not None]
    red = page.js("pyprofReport.rooflines[0].chart.series[6].points.fill")
    assert red == "#d62728"
    assert page.errors == []


def test_roofline_without_peaks_has_points_and_a_note(window, open_report, tmp_path):
    _, path = window
    out = tmp_path / "r.html"
    report_html(path, out)
    page = open_report(out)
    page.check_clean()
    got = _page_points(page)
    assert got["series"] == ["FLOP/byte", "groups"]  # no roof
    assert len(got["drawn"]) == len(got["rows"]) >= 4
    assert all(r["cells"][7:11] == ["-", "-", "-", ""] for r in got["rows"])
    assert page.js("document.querySelector('.roofline-note').textContent") == NO_PEAKS_NOTE


def test_trace_without_flops_says_how_to_get_them(tmp_path, open_report):
    out = tmp_path / "r.html"
    report_html(TRACES / "small.json", out)
    page = open_report(out)
    page.check_clean()
    assert page.js("pyprofReport.rooflines") == [None]
    assert "with_flops=True" in page.js("document.getElementById('roofline').textContent")


def test_bad_peaks_file_is_one_line(window, tmp_path):
    _, path = window
    bad = tmp_path / "peaks.json"
    bad.write_text('{"gemm_gflops": 0}')
    res = run_cli(["report", path, "-o", str(tmp_path / "r.html"), "--peaks", str(bad)], tmp_path)
    assert res.returncode != 0 and not (tmp_path / "r.html").exists()
    assert res.stderr.strip().count("\n") == 0 and "cannot read peaks from" in res.stderr


def test_measure_peaks_gives_roofs(window, tmp_path):
    """``--measure-peaks``: the roofs measured in the run (numpy GEMM, copy, MXNet's dot)."""
    import re
    _, path = window
    out = tmp_path / "r.html"
    res = run_cli(["report", path, "-o", str(out), "--measure-peaks"], tmp_path)
    assert res.returncode == 0, res.stderr
    blob = re.search(r'id="pyprof-roofline-0">(.*?)</script>', out.read_text()).group(1)
    view = json.loads(blob)
    assert view["peaks_from"] == "measured" and view["note"] is None
    assert view["peaks"]["gemm_gflops"] > 0 and view["peaks"]["copy_gbs"] > 0
    assert [r["name"] for r in view["roofs"]] == ["numpy GEMM", "MXNet dot"]
    assert all(p["roof_gflops"] == min(p["peak_gflops"], p["intensity"] * p["memory_gbs"])
               for p in view["points"])
    assert [c["name"] for c in view["peaks"]["caches"]] == [c.name for c in read_caches()]
