"""Every trace pyprof writes is valid for Perfetto (docs/trace-format.md, "What the writers
guarantee"), and :func:`pyprof.trace.validate` catches each kind of invalid trace."""

from __future__ import annotations

import gzip
import json

import pytest

from pyprof.process.rawfile import read_range
from pyprof.trace import SliceCounts, compact, merge, repair, stats, validate
from pyprof.trace.cli import main

BIG = 2 ** 63 + 5                 # a 64-bit pid (MXNet's are hashes)
TID = 11063534467229197503        # a 64-bit tid / async id

EVENTS = [
    {"ph": "M", "name": "process_name", "pid": BIG, "args": {"name": "cpu/0"}},
    {"ph": "M", "name": "thread_name", "pid": BIG, "tid": 7, "args": {"name": "worker"}},
    # the issue's trace: two dot slices closed by nameless E events (0.164 ms in all)
    {"ph": "B", "name": "dot", "cat": "operator", "ts": 1000, "pid": BIG, "tid": TID, "args": {"a": 1}},
    {"ph": "E", "ts": 1100, "pid": BIG, "tid": TID, "args": {"b": 2}},
    {"ph": "B", "name": "dot", "cat": "operator", "ts": 1200, "pid": BIG, "tid": TID},
    {"ph": "E", "ts": 1264, "pid": BIG, "tid": TID},
    {"ph": "b", "name": "dot", "cat": "operator", "id": TID, "ts": 1000, "pid": BIG, "tid": TID},
    {"ph": "e", "name": "dot", "cat": "operator", "id": TID, "ts": 1100, "pid": BIG, "tid": TID},
    # thread "worker": A [0, 100] holds inner [10, 20]; C [50, 150] overlaps A without nesting
    {"ph": "B", "name": "A", "ts": 0, "pid": BIG, "tid": 7},
    {"ph": "B", "name": "C", "ts": 50, "pid": BIG, "tid": 7},
    {"ph": "E", "name": "A", "ts": 100, "pid": BIG, "tid": 7},
    {"ph": "E", "name": "C", "ts": 150, "pid": BIG, "tid": 7},
    {"ph": "X", "name": "inner", "ts": 10, "dur": 10, "pid": BIG, "tid": 7},
    # negative durations: dur < 0, and an E before its B
    {"ph": "X", "name": "negX", "ts": 300, "dur": -5, "pid": BIG, "tid": 7},
    {"ph": "B", "name": "neg", "ts": 500, "pid": BIG, "tid": 7},
    {"ph": "E", "name": "neg", "ts": 400, "pid": BIG, "tid": 7},
    # unmatched: an E without B, a B without E, and an E written before its B
    {"ph": "E", "name": "orphan", "ts": 600, "pid": BIG, "tid": 7},
    {"ph": "B", "name": "open", "ts": 700, "pid": BIG, "tid": 7},
    {"ph": "E", "name": "late", "ts": 800, "pid": BIG, "tid": 7},
    {"ph": "B", "name": "late", "ts": 790, "pid": BIG, "tid": 7},
    # no numeric ts
    {"ph": "X", "name": "nots", "dur": 3, "pid": BIG, "tid": 7},
    # string ids, a string and a 64-bit async id
    {"ph": "X", "name": "s", "ts": 5, "dur": 1, "pid": "proc", "tid": "main"},
    {"ph": "b", "name": "task", "cat": "domain", "id": "0x1f", "ts": 5, "pid": "proc", "tid": "main"},
    {"ph": "e", "name": "task", "cat": "domain", "id": "0x1f", "ts": 9, "pid": "proc", "tid": "main"},
    {"ph": "b", "name": "big", "cat": "domain", "id": TID, "ts": 5, "pid": "proc", "tid": "main"},
    {"ph": "e", "name": "big", "cat": "domain", "id": TID, "ts": 7, "pid": "proc", "tid": "main"},
]
TOP = {"displayTimeUnit": "ns", "otherData": {"version": "MXNet 1.9.1"}, "metadata": {"host": "h"}}

# What every writer does to the slices of EVENTS (complete: B/E pairs written as X)
COUNTS = SliceCounts(complete=4, moved=1, overlap_tracks=1, negative=2, unmatched_begin=2,
                     unmatched_end=2, untimed=1)


def _write(path, events, **top):
    """A trace file; the top-level keys other than traceEvents come first."""
    path.write_text(json.dumps({**top, "traceEvents": events}))
    return path


def _load(path):
    data = path.read_bytes()
    doc = json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    return doc


def _slices(events):
    """(name, ts, dur, pid, tid) of the X events, sorted."""
    return sorted(((e["name"], e["ts"], e["dur"], e["pid"], e["tid"]) for e in events if e["ph"] == "X"),
                  key=lambda s: s[:2])


def _thread_names(events):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in events
            if e["ph"] == "M" and e["name"] == "thread_name"}


@pytest.fixture
def inp(tmp_path):
    return _write(tmp_path / "in.json", EVENTS, **TOP)


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("writer", ["compact", "merge", "repair"])
def test_top_level_kept(tmp_path, writer, where):
    events = [{"ph": "X", "name": "a", "ts": 0, "dur": 1, "pid": 1, "tid": 1}]
    doc = {**TOP, "traceEvents": events} if where == "before" else {"traceEvents": events, **TOP}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    out = tmp_path / "out.json"
    {"compact": compact, "repair": repair, "merge": lambda i, o: merge([i], o, labels=["a"])}[writer](p, out)
    got = _load(out)
    if writer == "merge":
        assert got["otherData"] == {"a": TOP["otherData"]} and got["metadata"] == {"a": TOP["metadata"]}
        assert got["displayTimeUnit"] == "ns"
    else:
        assert {k: got[k] for k in TOP} == TOP


def test_the_input_breaks_every_rule(inp):
    res = validate(inp)
    assert not res.ok
    # pid BIG on 21 events, tid TID on 6, async id TID on 4
    assert res.counts == {"overlap": 1, "negative_duration": 2, "unmatched_begin": 2,
                          "unmatched_end": 2, "untimed": 1, "unsafe_id": 31}
    assert len(res.problems) == 6 and "pid: 21, tid: 6, id: 4" in res.problems[-1]


def test_compact(inp, tmp_path):
    out = tmp_path / "c.json.gz"
    res = compact(inp, out)
    assert validate(out).ok
    assert res.slices == COUNTS and res.complete == 4 and res.async_copies_dropped == 2
    assert (res.unmatched_begin, res.unmatched_end) == (2, 2)
    doc = _load(out)
    evs = doc["traceEvents"]
    assert {k: doc[k] for k in TOP} == TOP
    # pids, tids and async ids renumbered 1, 2, ... in order of first use; the overlap track is new
    assert res.ids == {"pid": {BIG: 1, "proc": 2}, "tid": {7: 1, TID: 2, "main": 4},
                       "id": {"0x1f": 1, TID: 2}}
    assert _slices(evs) == [("A", 0, 100, 1, 1), ("C", 50, 100, 1, 3), ("dot", 1000, 100, 1, 2),
                            ("dot", 1200, 64, 1, 2), ("inner", 10, 10, 1, 1), ("s", 5, 1, 2, 4)]
    assert _thread_names(evs) == {(1, 1): "worker", (1, 3): "worker (overlap 1)"}
    assert not [e for e in evs if e["ph"] in "BE"]
    first_dot = next(e for e in evs if e.get("name") == "dot")
    assert first_dot["args"] == {"a": 1, "b": 2} and first_dot["cat"] == "operator"
    assert sorted((e["ph"], e["id"]) for e in evs if e["ph"] in "be") == [
        ("b", 1), ("b", 2), ("e", 1), ("e", 2)]
    assert res.events_out == len(evs) == 13
    assert stats(out).find("dot")[0].total_us == 164  # the issue: 0.164 ms


def test_compact_issue_nameless_ends(tmp_path):
    inp = _write(tmp_path / "dot.json", EVENTS[2:6])
    res = compact(inp, tmp_path / "c.json")
    evs = _load(tmp_path / "c.json")["traceEvents"]
    assert [(e["ph"], e["name"], e["ts"], e["dur"]) for e in evs] == [
        ("X", "dot", 1000, 100), ("X", "dot", 1200, 64)]
    assert res.slices == SliceCounts(complete=2) and validate(tmp_path / "c.json").ok


def test_merge(inp, tmp_path):
    other = _write(tmp_path / "other.json", [
        {"ph": "X", "name": "dot", "ts": 0, "dur": 10, "pid": 3, "tid": 3},
        {"ph": "X", "name": "relu", "ts": 5, "dur": 10, "pid": 3, "tid": 3}])
    out = tmp_path / "m.json"
    res = merge([inp, other], out, labels=["a", "b"])
    assert validate(out).ok
    assert res.slices == COUNTS + SliceCounts(moved=1, overlap_tracks=1)
    doc = _load(out)
    evs = doc["traceEvents"]
    assert doc["displayTimeUnit"] == "ns"
    assert doc["otherData"] == {"a": TOP["otherData"]} and doc["metadata"] == {"a": TOP["metadata"]}
    assert res.pids == {"a": {BIG: 1, "proc": 2}, "b": {3: 3}}
    assert res.ids["a"]["tid"] == {7: 1, TID: 2, "main": 4} and res.ids["b"]["tid"] == {3: 5}
    assert res.ids["a"]["id"] == {TID: 1, "0x1f": 2} and res.ids["b"]["id"] == {}
    assert _slices(evs) == [("A", 0, 100, 1, 1), ("C", 50, 100, 1, 3), ("dot", 0, 10, 3, 5),
                            ("dot", 1000, 100, 1, 2), ("dot", 1200, 64, 1, 2),
                            ("inner", 10, 10, 1, 1), ("relu", 5, 10, 3, 6), ("s", 5, 1, 2, 4)]
    assert _thread_names(evs) == {(1, 1): "worker", (1, 3): "worker (overlap 1)",
                                  (3, 6): "5 (overlap 1)"}
    names = {e["pid"]: e["args"]["name"] for e in evs if e.get("name") == "process_name"}
    assert names == {1: "a: cpu/0", 2: "a: pid proc", 3: "b: pid 3"}
    assert not [e for e in evs if e["ph"] in "BE"]
    # merge keeps MXNet's async copies (only compact drops them)
    assert sorted(e["id"] for e in evs if e["ph"] == "b") == [1, 1, 2]


def test_repair(inp, tmp_path):
    out = tmp_path / "r.json"
    res = repair(inp, out)
    assert validate(out).ok
    assert res.slices == COUNTS
    doc = _load(out)
    evs = doc["traceEvents"]
    assert {k: doc[k] for k in TOP} == TOP
    # only the ids viewers cannot hold are renumbered; 7, "proc", "main" and "0x1f" are kept
    assert res.ids == {"pid": {BIG: 1}, "tid": {TID: 1}, "id": {TID: 1}}
    assert _slices(evs) == [("A", 0, 100, 1, 7), ("C", 50, 100, 1, 2), ("dot", 1000, 100, 1, 1),
                            ("dot", 1200, 64, 1, 1), ("inner", 10, 10, 1, 7),
                            ("s", 5, 1, "proc", "main")]
    assert _thread_names(evs) == {(1, 7): "worker", (1, 2): "worker (overlap 1)"}
    assert [(e["ph"], e["id"]) for e in evs if e["ph"] in "be"] == [
        ("b", 1), ("e", 1), ("b", "0x1f"), ("e", "0x1f"), ("b", 1), ("e", 1)]
    assert res.events == len(evs) == 15
    assert any("1 overlapping slice(s) moved" in f for f in res.fixed)
    assert any("renumbered (1 pid(s), 1 tid(s), 1 id(s))" in f for f in res.fixed)


def test_repair_new_ids_avoid_kept_ones(tmp_path):
    p = _write(tmp_path / "t.json", [
        {"ph": "X", "name": "a", "ts": 0, "dur": 1, "pid": 1, "tid": 1},
        {"ph": "X", "name": "b", "ts": 0, "dur": 1, "pid": BIG, "tid": 2 ** 53},
        {"ph": "X", "name": "c", "ts": 0, "dur": 1, "pid": 2, "tid": 2}])
    res = repair(p)  # in place: the ids needed fixing
    assert res.out == str(p) and validate(p).ok
    assert res.ids == {"pid": {BIG: 3}, "tid": {2 ** 53: 3}, "id": {}}
    assert repair(p).out is None  # valid now: nothing to do


def test_repair_in_place_leaves_a_valid_trace_alone(tmp_path):
    p = _write(tmp_path / "t.json", [
        {"ph": "B", "name": "a", "ts": 0, "pid": 1, "tid": 1},
        {"ph": "E", "name": "a", "ts": 5, "pid": 1, "tid": 1}])
    before = p.read_bytes()
    res = repair(p)
    assert res.out is None and res.slices == SliceCounts() and p.read_bytes() == before


def test_float_times_overlap(tmp_path):
    p = _write(tmp_path / "t.json", [
        {"ph": "X", "name": "a", "ts": 0.5, "dur": 1.0, "pid": 1, "tid": 1},
        {"ph": "X", "name": "b", "ts": 1.0, "dur": 1.0, "pid": 1, "tid": 1},
        {"ph": "X", "name": "c", "ts": 1.5, "dur": 0.25, "pid": 1, "tid": 1}])
    assert validate(p).counts == {"overlap": 1}
    res = compact(p, tmp_path / "c.json")
    assert res.slices == SliceCounts(moved=1, overlap_tracks=1) and validate(tmp_path / "c.json").ok
    # b partially overlaps a: b moves, c (inside b, after a) stays
    assert _slices(_load(tmp_path / "c.json")["traceEvents"]) == [
        ("a", 0.5, 1.0, 1, 1), ("b", 1.0, 1.0, 1, 2), ("c", 1.5, 0.25, 1, 1)]


def test_staircase_takes_one_track_per_step(tmp_path):
    # [0,10], [1,11], [2,12]: each partially overlaps the one before, so each needs its own track
    p = _write(tmp_path / "t.json", [{"ph": "X", "name": f"s{i}", "ts": i, "dur": 10, "pid": 1, "tid": 1}
                                     for i in range(3)])
    res = compact(p, tmp_path / "c.json")
    assert res.slices == SliceCounts(moved=2, overlap_tracks=2) and validate(tmp_path / "c.json").ok
    evs = _load(tmp_path / "c.json")["traceEvents"]
    assert [e["tid"] for e in evs if e["ph"] == "X"] == [1, 2, 3]
    assert sorted(_thread_names(evs).values()) == ["1 (overlap 1)", "1 (overlap 2)"]


def test_session_window(inp, tmp_path):
    raw = tmp_path / "raw.json"
    # what MXNet appends: pretty-printed events, the window's range without header
    raw.write_text('{"traceEvents": [\n' + ",\n".join(json.dumps(e, indent=4) for e in EVENTS))
    out = tmp_path / "w.json"
    metadata: dict = {}
    n = read_range(str(raw), 0, None, metadata, str(out))
    assert validate(out).ok
    assert len(metadata) == 2  # the window's metadata events, as read, for the next windows
    evs = _load(out)["traceEvents"]
    assert n == len(evs) == 18
    # B/E pairs that stay on their thread are kept as MXNet wrote them (nameless ends too); the
    # moved one becomes an X event; 64-bit ids are renumbered, the others kept
    phases = [(e["ph"], e.get("name"), e.get("tid")) for e in evs if e["ph"] in "BEX"]
    assert phases == [("B", "dot", 1), ("E", None, 1), ("B", "dot", 1), ("E", None, 1),
                      ("B", "A", 7), ("E", "A", 7), ("X", "C", 2), ("X", "inner", 7),
                      ("X", "s", "main")]
    assert _thread_names(evs) == {(1, 7): "worker", (1, 2): "worker (overlap 1)"}
    assert {e["pid"] for e in evs} == {1, "proc"}


# -- validate catches each kind of problem ---------------------------------------------------

def _x(ts, dur, **kw):
    return {"ph": "X", "name": "x", "ts": ts, "dur": dur, "pid": 1, "tid": 1, **kw}


@pytest.mark.parametrize("events, counts", [
    ([_x(0, 10), _x(10, 5), _x(0, 10), _x(2, 0), _x(10, 0)], {}),  # touching, equal, zero-length
    ([_x(0, 10), _x(5, 10)], {"overlap": 1}),
    ([_x(0, 10), _x(5, 10, tid=2)], {}),  # another thread
    ([_x(0, -1)], {"negative_duration": 1}),
    ([{"ph": "B", "name": "a", "ts": 5, "pid": 1, "tid": 1},
      {"ph": "E", "name": "a", "ts": 4, "pid": 1, "tid": 1}], {"negative_duration": 1}),
    ([{"ph": "B", "name": "a", "ts": 5, "pid": 1, "tid": 1}], {"unmatched_begin": 1}),
    ([{"ph": "E", "name": "a", "ts": 5, "pid": 1, "tid": 1}], {"unmatched_end": 1}),
    ([{"ph": "E", "name": "a", "ts": 5, "pid": 1, "tid": 1},
      {"ph": "B", "name": "a", "ts": 4, "pid": 1, "tid": 1}], {"unmatched_begin": 1, "unmatched_end": 1}),
    ([_x(None, 1), _x("1", 1), _x(1, None), {"ph": "B", "name": "a", "pid": 1, "tid": 1}],
     {"untimed": 4}),
    # named E closes the latest B of its name: a [0, 20], b [10, 30] overlap
    ([{"ph": "B", "name": "a", "ts": 0, "pid": 1, "tid": 1},
      {"ph": "B", "name": "b", "ts": 10, "pid": 1, "tid": 1},
      {"ph": "E", "name": "a", "ts": 20, "pid": 1, "tid": 1},
      {"ph": "E", "name": "b", "ts": 30, "pid": 1, "tid": 1}], {"overlap": 1}),
    # nameless E closes the innermost: b [10, 20] inside a [0, 30]
    ([{"ph": "B", "name": "a", "ts": 0, "pid": 1, "tid": 1},
      {"ph": "B", "name": "b", "ts": 10, "pid": 1, "tid": 1},
      {"ph": "E", "ts": 20, "pid": 1, "tid": 1},
      {"ph": "E", "ts": 30, "pid": 1, "tid": 1}], {}),
    ([_x(0, 1, pid=2 ** 53 - 1, tid=-(2 ** 53 - 1)), _x(0, 1, pid="p", tid="t", id="0x1")], {}),
    ([_x(0, 1, pid=2 ** 53), _x(0, 1, tid=1.0), _x(0, 1, id=True), _x(0, 1, bind_id=2 ** 60),
      _x(0, 1, id2={"local": -2 ** 53}), _x(0, 1, id2={"global": None})], {"unsafe_id": 6}),
])
def test_validate_checks(tmp_path, events, counts):
    res = validate(_write(tmp_path / "t.json", events))
    assert res.counts == counts and res.ok == (not counts) and len(res.problems) == len(counts)


@pytest.mark.parametrize("text, counts", [
    ('{"traceEvents": [{"ph": "X", "name": "x", "ts": 0, "dur": 1, "pid": 1, "tid": 1},]}',
     {"json": 1}),
    ('[{"ph": "X", "name": "x", "ts": 0, "dur": 1, "pid": 1, "tid": 1}]', {"no_trace_events": 1}),
    ('{"traceEvents": [1, {"ph": "X", "name": "x", "ts": 0, "dur": 1, "pid": 1, "tid": 1}]}',
     {"not_an_object": 1}),
    ('{"traceEvents": [{"ph": "X", "name": "x", "ts": 0, "dur": 1, "pid": 1, "tid": 1}]',
     {"json": 1}),  # no closing brace
    ('{"traceEvents": [{"foo": 1}]}', {"not_an_object": 1}),
    ('{"traceEvents": []}', {}),
    ('{"foo": 1}', {"no_trace_events": 1}),
])
def test_validate_file_checks(tmp_path, text, counts):
    p = tmp_path / "t.json"
    p.write_text(text)
    assert validate(p).counts == counts
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    assert validate(gz).counts == counts


def test_cli(inp, tmp_path, capsys):
    assert main(["validate", str(inp)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("6 problem(s)") and len(out) == 8
    assert any("partially overlap" in line and "pid" in line for line in out)
    fix = f"  fix: pyprof repair {inp} -o {str(inp)[:-5]}.repaired.json writes a valid copy"
    assert out[-1].startswith(fix)
    assert main(["compact", str(inp), "-o", str(tmp_path / "c.json")]) == 0
    line = capsys.readouterr().out
    assert "4 B/E pairs -> X" in line and "1 overlapping slice(s) moved to 1 overlap track(s)" in line
    assert "2 slice(s) with a negative duration left out" in line
    assert main(["validate", str(tmp_path / "c.json")]) == 0
    assert "valid (13 events)" in capsys.readouterr().out
    # several files: each checked on its own, exit 1 when any has a problem
    assert main(["validate", str(tmp_path / "c.json"), str(inp)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("c.json: valid (13 events)") and out[1].endswith("6 problem(s)")
    assert main(["merge", str(inp), "-o", str(tmp_path / "m.json"), "--label", "a"]) == 0
    assert "2 begin(s) without an end left out" in capsys.readouterr().out
    assert main(["repair", str(inp), "-o", str(tmp_path / "r.json")]) == 0
    assert "2 end(s) without a begin left out" in capsys.readouterr().out
    assert main(["validate", str(tmp_path / "missing.json")]) == 1
    assert "check the path" in capsys.readouterr().err
    # a file without any trace event: no repair suggested (it would find nothing to keep)
    (tmp_path / "junk.json").write_text("garbage, not JSON")
    assert main(["validate", str(tmp_path / "junk.json")]) == 1
    out = capsys.readouterr().out
    assert "pyprof repair" not in out and out.splitlines()[-1].startswith(
        "  fix: pass the file named by profiler.set_config(filename=...)")
    assert main(["repair", str(tmp_path / "junk.json"), "-o", str(tmp_path / "j.json")]) == 1
    assert "no trace events found" in capsys.readouterr().err
    # events outside the traceEvents object (a bare array): a repair keeps them
    (tmp_path / "bare.json").write_text('[{"ph": "X", "name": "x", "ts": 0, "dur": 1, "pid": 1, "tid": 1}]')
    assert main(["validate", str(tmp_path / "bare.json")]) == 1
    assert "fix: pyprof repair" in capsys.readouterr().out
    assert main(["repair", str(tmp_path / "bare.json"), "-o", str(tmp_path / "b.json")]) == 0
    assert main(["validate", str(tmp_path / "b.json")]) == 0


def test_validate_gzip_cut_short(tmp_path):
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(json.dumps({"traceEvents": [_x(0, 1)] * 50}).encode())[:40])
    res = validate(gz)
    # The JSON check names the cut; the reader, which ends the text there, finds no event.
    assert res.counts == {"json": 1, "no_trace_events": 1} and "ended before" in res.problems[0]
