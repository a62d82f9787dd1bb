"""The Trace Event Format as docs/trace-format.md states it: the issue's two inputs, and each rule
the statistics follow for traces MXNet does not write."""

import gzip
import importlib
import json

import pytest

from pyprof.trace import TraceFormatError, stats, summarize
from pyprof.trace.cli import main

S = importlib.import_module("pyprof.trace.statistics")


def _write(path, doc, text=None):
    path.write_text(text if text is not None else json.dumps(doc))
    return path


def _slice(ph, ts, name="dot", **kw):
    ev = {"ph": ph, "ts": ts, "pid": 1, "tid": 1, "cat": "operator", **kw}
    if name is not None:
        ev["name"] = name
    return ev


NAMELESS = {"traceEvents": [_slice("B", 1000), _slice("E", 1100, None),
                            _slice("B", 2000), _slice("E", 2064, None)]}
NEGATIVE = {"traceEvents": [_slice("B", 1000), _slice("E", 1100),
                            _slice("B", 2000), _slice("E", 1500),
                            {**_slice("X", 3000), "dur": -400}]}


def test_nameless_end_closes_the_innermost_begin(tmp_path, capsys):
    p = _write(tmp_path / "t.json", NAMELESS)
    [dot] = stats(p).operators
    assert (dot.name, dot.count, dot.total_us, dot.total_ms) == ("dot", 2, 164, 0.164)
    assert main(["summarize", str(p)]) == 0
    out = capsys.readouterr().out
    assert "no timed events" not in out
    row = next(line for line in out.splitlines() if "dot" in line)
    assert "0.164" in row and " 2 " in row


def test_an_end_without_cat_takes_its_begins(tmp_path):
    evs = [_slice("B", 0, cat="operator"), {"ph": "E", "ts": 7, "pid": 1, "tid": 1, "name": "dot"},
           _slice("B", 10, cat="operator"), {"ph": "E", "ts": 12, "pid": 1, "tid": 1}]
    [dot] = stats(_write(tmp_path / "t.json", {"traceEvents": evs})).operators
    assert (dot.category, dot.count, dot.total_us) == ("operator", 2, 9)


def test_negative_durations_are_left_out_and_noted(tmp_path):
    s = stats(_write(tmp_path / "t.json", NEGATIVE))
    [dot] = s.operators
    assert (dot.count, dot.total_us, dot.min_us) == (1, 100, 100)
    assert s.negative_durations == 2
    assert any("2 slice(s) with a negative duration" in n for n in s.notes)
    assert "negative duration" in summarize(s.reports[0].path)


def test_innermost_is_the_last_opened_even_at_equal_timestamps(tmp_path):
    evs = [_slice("B", 100, "outer"), _slice("B", 100, "inner"), _slice("E", 130, None),
           _slice("E", 150, None)]
    s = stats(_write(tmp_path / "t.json", {"traceEvents": evs}))
    assert {o.name: o.total_us for o in s.operators} == {"outer": 50, "inner": 30}


def test_named_ends_keep_overlapping_user_events_apart(tmp_path):
    # a starts, b starts, a stops, b stops: pairing by name keeps each event's own time.
    evs = [_slice("B", 0, "a"), _slice("B", 10, "b"), _slice("E", 20, "a"), _slice("E", 40, "b")]
    s = stats(_write(tmp_path / "t.json", {"traceEvents": evs}))
    assert {o.name: o.total_us for o in s.operators} == {"a": 20, "b": 30}


def test_unusable_events_are_counted_by_kind(tmp_path):
    evs = [_slice("B", 0), _slice("E", 5),
           {"ph": "B", "name": "x", "pid": 1, "tid": 1},            # no ts
           {**_slice("X", 10, "y"), "dur": "long"},                 # no numeric dur
           {"ph": "C", "name": "c", "ts": 1, "pid": 1, "args": {"v": "high", "w": 3}},
           {"ph": "Q", "ts": 1}, {"ph": "Q", "ts": 2}, {"ph": "?", "ts": 3},
           {"ph": "i", "ts": 4, "name": "mark", "s": "g"}]
    s = stats(_write(tmp_path / "t.json", {"traceEvents": evs}))
    assert [(o.name, o.count) for o in s.operators] == [("dot", 1)]
    assert (s.no_timestamp, s.bad_counter_values, s.unknown_phases) == (2, 1, {"Q": 2, "?": 1})
    assert s.counters[0].name == "w" and s.counters[0].last == 3
    assert "3 event(s) of unknown phase(s) '?', 'Q' were ignored" in s.notes


def test_floats_strings_and_async_ids(tmp_path):
    evs = [{"ph": "X", "name": "f", "cat": "c", "ts": 0.5, "dur": 1.25, "pid": "p", "tid": "t"},
           {"ph": "X", "name": "f", "cat": "c", "ts": 2, "dur": 2, "pid": "p", "tid": "t"},
           {"ph": "b", "name": "task", "cat": "dom", "ts": 10, "pid": 1, "id2": {"local": "0x1"}},
           {"ph": "b", "name": "task", "cat": "dom", "ts": 11, "pid": 1, "id2": {"global": "0x1"}},
           # local closes first: were id2's scopes merged, it would close the global begin (11)
           {"ph": "e", "name": "task", "cat": "dom", "ts": 15, "pid": 1, "id2": {"local": "0x1"}},
           {"ph": "e", "name": "task", "cat": "dom", "ts": 30, "pid": 1, "id2": {"global": "0x1"}},
           {"ph": "S", "name": "old", "cat": "dom", "ts": 40, "pid": 1, "id": "a"},
           {"ph": "T", "name": "old", "cat": "dom", "ts": 41, "pid": 1, "id": "a"},
           {"ph": "F", "name": "old", "cat": "dom", "ts": 47, "pid": 1, "id": "a"},
           {"ph": "M", "name": "process_name", "pid": "p", "args": {"name": "gpu/0"}}]
    s = stats(_write(tmp_path / "t.json", {"traceEvents": evs}))
    ops = {o.name: o for o in s.operators}
    assert ops["f"].device == "gpu/0" and ops["f"].total_us == 3.25 and ops["f"].min_us == 1.25
    assert list(ops["f"].durations_us) == [1.25, 2.0]
    assert sorted(ops["task"].durations_us.tolist()) == [5, 19]
    assert ops["old"].total_us == 7
    assert not s.notes


@pytest.mark.parametrize("chunk", [16 << 20, 700, 97])
@pytest.mark.parametrize("form", ["keys_first", "keys_last", "bare_array"])
def test_any_top_level_form_and_args_of_any_shape(tmp_path, monkeypatch, chunk, form):
    monkeypatch.setattr(S, "_CHUNK_BYTES", chunk)
    evs = [{"ph": "X", "name": f"op{i % 3}", "cat": "c", "ts": 10 * i, "dur": 5, "pid": 1, "tid": 1,
            "args": {"inputs": [{"shape": [2, 2]}, {"shape": [2, {"x": "}, {"}]}]}}
           for i in range(300)]
    extra = {"otherData": {"host": "h", "l": [{"a": 1}, {"b": 2}]}, "displayTimeUnit": "ns",
             "stackFrames": {"1": {"name": "f"}}, "samples": [{"cpu": 0}, {"cpu": 1}]}
    doc = (evs if form == "bare_array" else
           {**extra, "traceEvents": evs} if form == "keys_first" else {"traceEvents": evs, **extra})
    s = stats(_write(tmp_path / "t.json", doc))
    assert [(o.name, o.count, o.total_us) for o in s.operators] == \
        [("op0", 100, 500), ("op1", 100, 500), ("op2", 100, 500)]
    r = s.reports[0]
    assert not r.damaged and not s.notes
    if form != "bare_array":
        assert r.display_time_unit == "ns" and r.top_level["otherData"]["host"] == "h"
        assert r.other_keys == (["otherData", "stackFrames", "samples"])
    if chunk < 1000:
        assert r.carried_events > 0  # events cut inside their args were joined, not dropped


def test_not_a_trace_is_one_clear_error(tmp_path):
    with pytest.raises(TraceFormatError, match="no trace events"):
        stats(_write(tmp_path / "t.json", {"stackFrames": {}, "otherData": {"a": [{"b": 1}]}}))
    cut = gzip.compress(json.dumps(NAMELESS).encode())[:30]
    (tmp_path / "cut.json.gz").write_bytes(cut)
    with pytest.raises(TraceFormatError):
        stats(tmp_path / "cut.json.gz")  # a cut gzip stream ends the text: no event survives
