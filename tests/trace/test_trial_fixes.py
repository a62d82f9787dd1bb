"""Problems a new user's trial found in the trace tools: each test asserts the fixed behaviour."""

import gzip
import json
import os
import random
import sys
from pathlib import Path

import pytest

from pyprof.trace import (TraceError, TraceFormatError, TraceReader, diff, plot, repair,
                          stats, summarize)
from pyprof.trace.cli import main

from test_fast_path import API_PID, CLEAN, KWARGS, TID, engines, ev, random_events, write_trace  # noqa: F401

S = sys.modules["pyprof.trace.statistics"]
P = sys.modules["pyprof.trace.parallel"]

#: MXNet's header followed by a bare comma (``"traceEvents": [,``: second session in one process).
HEADER_COMMA = Path(__file__).resolve().parent / "fixtures" / "header_leading_comma.json"


def _err_line(capsys, command):
    """The CLI's stderr: exactly one line, ``pyprof <command>: error: ...``; returns it."""
    cap = capsys.readouterr()
    lines = cap.err.splitlines()
    assert len(lines) == 1, cap.err
    assert lines[0].startswith(f"pyprof {command}: error: ") and "Traceback" not in cap.err
    return lines[0], cap.out


# -- 1. empty files and JSON that is not a trace are errors everywhere ---------------------------

NOT_TRACES = {
    "empty.json": b"",
    "empty.json.gz": gzip.compress(b""),
    "blank.json": b"  \n\n",
    "object.json": b'{"foo":1}',
    "array.json": b"[1,2]",
    "no_events.json": b'{"traceEvents": [], "displayTimeUnit": "ms"}',
    "no_ph.json": b'{"traceEvents": [{"name": "dot", "ts": 1}, {"name": "x"}]}',
}


@pytest.fixture(params=sorted(NOT_TRACES))
def not_trace(request, tmp_path):
    p = tmp_path / request.param
    p.write_bytes(NOT_TRACES[request.param])
    return p


def test_stats_and_reader_reject_non_traces(not_trace):
    with pytest.raises(TraceFormatError) as e:
        stats(not_trace)
    msg = str(e.value)
    assert "\n" not in msg and str(not_trace) in msg
    if not_trace.name.startswith("empty"):
        assert "empty file" in msg and "re-run" in msg
    else:
        assert "no trace events found" in msg and "pass the file" in msg
    with pytest.raises(TraceFormatError):
        list(TraceReader(not_trace, chunk_bytes=64))
    with pytest.raises(TraceFormatError):  # also with the fast path off and with C API excluded
        S.stats(not_trace, exclude_categories={"MXNET_C_API"}, _workers=1)


def test_every_command_fails_on_non_traces(fx, not_trace, tmp_path, capsys):
    good = str(fx("small.json"))
    bad = str(not_trace)
    out = tmp_path / "out"
    commands = [
        ["summarize", bad], ["summarize", good, bad],
        ["diff", good, bad], ["diff", bad, good],
        ["compact", bad, "-o", str(out) + ".json"],
        ["merge", good, bad, "-o", str(out) + ".json"],
        ["plot", bad, "-o", str(out) + ".png"],
        ["repair", bad], ["repair", bad, "-o", str(out) + ".json"],
    ]
    before = not_trace.read_bytes()
    for argv in commands:
        assert main(argv) == 1, argv
        line, stdout = _err_line(capsys, argv[0])
        assert bad in line and ("pass the" in line or "re-run" in line), line
        assert "no regression" not in stdout and "removed" not in stdout
    assert not_trace.read_bytes() == before  # repair left it alone
    assert sorted(os.listdir(tmp_path)) == [not_trace.name]  # no output, no temporary file


def test_diff_against_crashed_empty_run_is_an_error(fx, tmp_path, capsys):
    """The CI-gate case: a 0-byte NEW used to show everything as removed and pass."""
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    assert main(["diff", str(fx("small.json")), str(empty)]) == 1
    line, stdout = _err_line(capsys, "diff")
    assert stdout == "" and "empty file" in line
    with pytest.raises(TraceFormatError, match="empty file"):
        diff(fx("small.json"), empty)


def test_diff_needs_timed_events_on_both_sides(fx, tmp_path, capsys):
    meta_only = tmp_path / "meta.json"  # a run that crashed right after the profiler started
    write_trace(meta_only, [ev("MXNet C API Calls", "MXNET_C_API", "C", 5, API_PID, 7,
                               '        "args": { "MXNet C API Calls": 1 },\n')])
    assert main(["diff", str(fx("small.json")), str(meta_only)]) == 1
    line, _ = _err_line(capsys, "diff")
    assert "new trace" in line and "no timed events" in line
    with pytest.raises(TraceFormatError, match="base trace .* no timed events in category nope"):
        diff(fx("small.json"), fx("small.json"), categories=["nope"])


def test_objects_without_ph_are_not_events(fx, tmp_path):
    text = fx("small.json").read_text()
    i = text.index("[") + 1
    p = tmp_path / "t.json"
    p.write_text(text[:i] + '{"foo": 1},' + text[i:])
    r = TraceReader(p)
    evs = list(r)
    assert len(evs) == 20 and all("ph" in e for e in evs)
    assert r.report.dropped_fragments == 1 and r.report.dropped_bytes == len('{"foo": 1}')


# -- 2. header + leading comma: nothing valid is dropped -----------------------------------------

@pytest.mark.parametrize("chunk", [64, 8 << 20])
def test_header_leading_comma_keeps_every_event(fx, chunk):
    r = TraceReader(HEADER_COMMA, chunk_bytes=chunk)
    evs = list(r)
    assert evs == json.loads(fx("small.json").read_text())["traceEvents"]
    assert evs[0] == {"ph": "M", "args": {"name": "cpu/0"}, "pid": 0, "name": "process_name"}
    rep = r.report
    assert rep.leading_comma and not rep.missing_head and not rep.missing_tail
    assert not rep.dropped_fragments and rep.problems() == [
        "bare comma before the first event (second profiling session in one process)"]


def test_header_leading_comma_repair_and_stats(fx, tmp_path, capsys):
    out = tmp_path / "fixed.json"
    assert main(["repair", str(HEADER_COMMA), "-o", str(out)]) == 0
    msg = capsys.readouterr().out
    assert "15 events" in msg and "dropped" not in msg  # 20, with 5 B/E pairs written as X
    repair(fx("small.json"), tmp_path / "small.json")
    assert json.loads(out.read_text()) == json.loads((tmp_path / "small.json").read_text())
    s, ref = stats(HEADER_COMMA), stats(fx("small.json"))
    assert [(o.category, o.name, o.device, o.durations_us.tolist()) for o in s.operators] == \
        [(o.category, o.name, o.device, o.durations_us.tolist()) for o in ref.operators]
    assert s.find("dot")[0].device == "cpu/0"  # the process_name event was kept


@pytest.mark.parametrize("kw", KWARGS)
def test_header_leading_comma_fast_and_parallel_exact(engines, tmp_path, kw):  # noqa: F811
    p = write_trace(tmp_path / "t.json", random_events(random.Random(3), 1500, CLEAN))
    p.write_text(p.read_text().replace('"traceEvents": [\n', '"traceEvents": [,\n', 1))
    fast, used = engines(p, chunk=4096, **kw)
    assert used["fast"] and fast.reports[0].leading_comma and not fast.reports[0].dropped_fragments
    seq = S.stats(p, _workers=1, **kw)
    if P.available():
        par = S.stats(p, _workers=2, **kw)
        assert summarize(par, fmt="json") == summarize(seq, fmt="json")
    assert {o.device for o in seq.operators} >= {"cpu/0", "cpu/1"}


# -- 3. repair refuses what is not a trace ------------------------------------------------------

@pytest.mark.parametrize("content", [b'{"foo":1}', b"[1,2]", b'{"foo": {"ph": 1}}', b""])
def test_repair_refuses_non_trace_json(tmp_path, capsys, content):
    p = tmp_path / "x.json"
    p.write_bytes(content)
    with pytest.raises(TraceFormatError):
        repair(p)
    assert main(["repair", str(p)]) == 1
    _err_line(capsys, "repair")
    assert p.read_bytes() == content and os.listdir(tmp_path) == ["x.json"]


# -- 4. plot: unwritable outputs are one-line errors --------------------------------------------

def test_plot_bad_outputs(fx, tmp_path, capsys):
    small = str(fx("small.json"))
    assert main(["plot", small, "-o", str(tmp_path / "p.txt")]) == 1
    line, _ = _err_line(capsys, "plot")
    assert "format 'txt' is not supported" in line and ".png" in line
    assert main(["plot", small, "-o", "/missing/dir/p.png"]) == 1
    line, _ = _err_line(capsys, "plot")
    assert ("directory '/missing/dir' does not exist; nothing was done. fix: create it first, "
            "or choose an existing directory") in line
    (tmp_path / "d.png").mkdir()  # exists, but cannot be opened for writing
    assert main(["plot", small, "-o", str(tmp_path / "d.png")]) == 1
    line, _ = _err_line(capsys, "plot")
    assert "is a directory" in line and "fix: name a file inside it" in line
    with pytest.raises(TraceError, match="not supported"):
        plot(small, tmp_path / "p.txt")
    assert main(["plot", small, "-o", str(tmp_path / "p.svg")]) == 0
    assert (tmp_path / "p.svg").read_bytes().lstrip().startswith(b"<?xml")


# -- 5. summarize group headers and tie-breaks ---------------------------------------------------

def _api_trace(path, calls):
    """A trace with one operator call and C API calls ``{name: [durations]}``."""
    evs = [ev("dot", "operator", "B", 1, 0, TID), ev("dot", "operator", "E", 11, 0, TID)]
    ts = 100
    for name, durs in calls.items():
        for d in durs:
            evs.append(ev(name, "MXNET_C_API", "b", ts, API_PID, 7, '        "id": 7,\n'))
            evs.append(ev(name, "MXNET_C_API", "e", ts + d, API_PID, 7, '        "id": 7,\n'))
            ts += 1000
    return write_trace(path, evs, metas=(("cpu/0", 0), ("MXNET_C_API", API_PID)))


def test_summarize_group_header_and_ties(tmp_path):
    p = _api_trace(tmp_path / "t.json", {"MXA": [5, 5], "MXB": [10, 20], "MXC": [50],
                                         "MXD": [1, 2, 2], "MXE": [15, 15], "MXF": [30]})
    text = summarize(p, include_api=True, sort="count", top=3)
    assert "host / MXNET_C_API: 0.155 ms in 11 calls, 3 of 6 operators shown" in text
    assert "cpu/0 / operator: 0.010 ms in 1 call, 1 operator\n" in text
    rows = json.loads(summarize(p, include_api=True, sort="count", fmt="json"))["operators"]
    api = [r["name"] for r in rows if r["category"] == "MXNET_C_API"]
    # count desc; ties (2 calls: MXB 30 us, MXE 30 us, MXA 10 us; 1 call: MXC 50, MXF 30) by total
    # time desc, then name.
    assert api == ["MXD", "MXB", "MXE", "MXA", "MXC", "MXF"]
    # share is of the whole group, consistent with the header
    top = json.loads(summarize(p, include_api=True, sort="count", top=1, fmt="json"))["operators"]
    assert [(r["name"], r["share_pct"]) for r in top if r["category"] == "MXNET_C_API"] == \
        [("MXD", pytest.approx(100 * 5 / 155))]
    md = summarize(p, include_api=True, sort="name", top=2, fmt="markdown")
    assert "### host / MXNET_C_API: 0.155 ms in 11 calls, 2 of 6 operators shown" in md
    assert md.index("| MXA") < md.index("| MXB") and "| MXC" not in md


def test_summarize_json_ends_with_newline(fx, capsys):
    assert summarize(fx("small.json"), fmt="json").endswith("}\n")
    assert main(["summarize", str(fx("small.json")), "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert out.endswith("}\n") and json.loads(out)["operators"]


# -- 6. CLI arguments ---------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["-5", "nan", "inf", "x"])
def test_diff_rejects_bad_threshold(fx, capsys, value):
    with pytest.raises(SystemExit) as e:
        main(["diff", str(fx("small.json")), str(fx("small.json")), "--threshold", value])
    assert e.value.code == 2
    assert "argument --threshold" in capsys.readouterr().err
    if value != "x":
        with pytest.raises(TraceError, match="threshold must be"):
            diff(fx("small.json"), fx("small.json"), threshold=float(value))


def test_diff_accepts_zero_threshold(fx):
    assert main(["diff", str(fx("small.json")), str(fx("small.json")), "--threshold", "0"]) == 0


@pytest.mark.parametrize("labels", [["--label", "x,y"], ["--label", "x", "--label", "y"],
                                    ["--label", " x , y "]])
def test_merge_labels_comma_or_repeated(fx, tmp_path, capsys, labels):
    out = tmp_path / "m.json"
    assert main(["merge", str(fx("small.json")), str(fx("quote.json")), "-o", str(out), *labels]) == 0
    names = {e["args"]["name"] for e in json.loads(out.read_text())["traceEvents"]
             if e.get("name") == "process_name"}
    assert {"x: cpu/0", "y: cpu/0"} <= names


@pytest.mark.parametrize("labels, msg", [(["--label", "x"], "1 label(s) for 2 trace(s)"),
                                         (["--label", "x,y,z"], "3 label(s) for 2 trace(s)"),
                                         (["--label", "x,"], "empty --label")])
def test_merge_bad_labels(fx, tmp_path, capsys, labels, msg):
    argv = ["merge", str(fx("small.json")), str(fx("quote.json")), "-o", str(tmp_path / "m.json")]
    assert main(argv + labels) == 1
    line, _ = _err_line(capsys, "merge")
    assert msg in line and "--label a,b" in line
    assert not (tmp_path / "m.json").exists()


def test_help_texts(capsys):
    for command, expected in [("plot", "the N with the most total time"),
                              ("merge", "comma-separated list"),
                              ("diff", "PCT >= 0"), ("diff", "--include-api")]:
        with pytest.raises(SystemExit) as e:
            main([command, "--help"])
        assert e.value.code == 0
        assert expected in " ".join(capsys.readouterr().out.split())


# -- 7. diff leaves C API calls out unless asked, like summarize ---------------------------------

def test_diff_excludes_api_calls_by_default(tmp_path, capsys):
    base = _api_trace(tmp_path / "base.json", {"MXA": [10] * 20})
    new = _api_trace(tmp_path / "new.json", {"MXA": [20] * 20})
    res = diff(base, new)
    assert [r.key for r in res.rows] == [("operator", "dot", "cpu/0")] and res.exit_code == 0
    res = diff(base, new, include_api=True)
    assert ("MXNET_C_API", "MXA", "") in [r.key for r in res.rows] and res.exit_code == 1
    assert diff(base, new, categories=["MXNET_C_API"]).exit_code == 1  # named explicitly
    assert main(["diff", str(base), str(new)]) == 0
    assert "MXA" not in capsys.readouterr().out
    assert main(["diff", str(base), str(new), "--include-api"]) == 1
    assert "MXNET_C_API / MXA" in capsys.readouterr().out
    # TraceStats inputs (which include API calls) are filtered the same way
    assert [r.key for r in diff(stats(base), stats(new)).rows] == [("operator", "dot", "cpu/0")]
    # stats() itself keeps them
    assert stats(base).find("MXA")[0].category == "MXNET_C_API"


# -- 2b. a second dump() appended after a finished trace: nothing dropped either ----------------

def _events_text(text):
    """The text between ``"traceEvents": [`` and the closing ``]`` of an MXNet trace."""
    return text[text.index("[") + 1:text.rindex("]")].rstrip()


@pytest.mark.parametrize("joint", ["comma", "header", "header_comma"])
@pytest.mark.parametrize("chunk", [64, 300, 8 << 20])
def test_dump_appended_after_finished_trace(fx, tmp_path, joint, chunk):
    small = fx("small.json").read_text()
    second = {"comma": ",\n\n" + _events_text(small) + "\n",  # what MXNet 1.9.1 writes
              "header": small,  # a whole second trace
              "header_comma": HEADER_COMMA.read_text()}[joint]
    p = tmp_path / "two.json"
    p.write_text(small + second + ("\n\n    ],\n    \"displayTimeUnit\": \"ms\"\n}\n"
                                   if joint == "comma" else ""))
    expected = json.loads(small)["traceEvents"] * 2
    r = TraceReader(p, chunk_bytes=chunk)
    assert list(r) == expected
    assert r.report.inner_tails == 1 and not r.report.dropped_fragments
    res = repair(p, tmp_path / "fixed.json")
    # the same as repairing a clean file of both dumps' events (B/E pairs as X, ids renumbered)
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps({"traceEvents": expected}))
    repair(clean, tmp_path / "clean_fixed.json")
    assert (json.loads((tmp_path / "fixed.json").read_text())["traceEvents"]
            == json.loads((tmp_path / "clean_fixed.json").read_text())["traceEvents"])
    assert res.events == 30 and res.slices.complete == 10 and not res.slices.dropped
    assert any("middle of the file" in f for f in res.fixed)
    assert stats(p).find("dot")[0].count == 6


@pytest.mark.parametrize("kw", KWARGS)
def test_appended_dump_fast_and_parallel_exact(engines, tmp_path, kw):  # noqa: F811
    rng = random.Random(4)
    first = write_trace(tmp_path / "a.json", random_events(rng, 700, CLEAN)).read_text()
    second = write_trace(tmp_path / "b.json", random_events(rng, 700, CLEAN)).read_text()
    p = tmp_path / "t.json"
    p.write_text(first + ",\n\n" + _events_text(second) + "\n\n    ],\n    \"displayTimeUnit\": \"ms\"\n}\n")
    fast, used = engines(p, chunk=4096, **kw)
    assert used["fast"] and not fast.reports[0].dropped_fragments
    seq = S.stats(p, _workers=1, **kw)
    if P.available():
        par = S.stats(p, _workers=2, **kw)
        assert summarize(par, fmt="json") == summarize(seq, fmt="json")


def test_merge_of_one_file_twice_names_the_label_option(fx, tmp_path, capsys):
    # a new user's find: "pass distinct labels" did not say how (the labels are the files' names)
    assert main(["merge", str(fx("small.json")), str(fx("small.json")), "-o",
                 str(tmp_path / "m.json")]) == 1
    err = capsys.readouterr().err
    assert "merge labels must be unique, got 'small.json', 'small.json'" in err
    assert "--label on the command line, labels=[...] in Python" in err
    assert main(["merge", str(fx("small.json")), str(fx("small.json")), "--label", "a,b", "-o",
                 str(tmp_path / "m.json")]) == 0


def test_repair_line_says_why_the_count_of_a_sound_trace_changed(tmp_path, capsys):
    # a new user's find: "8 events (nothing wrong)" for a 9-event input, the pair's rewrite unsaid
    p = tmp_path / "pair.json"
    p.write_text(json.dumps({"traceEvents": [
        {"name": "dot", "cat": "operator", "ph": "B", "ts": 10, "pid": 1, "tid": 1},
        {"name": "dot", "cat": "operator", "ph": "E", "ts": 30, "pid": 1, "tid": 1},
        {"name": "add", "cat": "operator", "ph": "X", "ts": 40, "dur": 5, "pid": 1, "tid": 1}]}))
    assert main(["repair", str(p), "-o", str(tmp_path / "out.json")]) == 0
    assert capsys.readouterr().out.strip() == (
        f"wrote {tmp_path / 'out.json'}: 2 events "
        "(nothing wrong; 1 B/E pair(s) written as one X event each)")
