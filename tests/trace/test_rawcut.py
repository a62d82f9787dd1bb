"""The streaming cut of a window (pyprof.trace.rawcut) writes the events the tolerant, whole-range
path writes: on the shared layout cases (tests/fixtures/mxnet_layout_cases.json, which the JVM's
raw_layout_test cuts with pyprof.jvm.WindowCutter), on an id numbered before a safe id that holds
its number, on runs cut at any block size, and on slices the writers' plan moves or leaves out."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from pyprof.trace import rawcut, slices

CASES = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "mxnet_layout_cases.json")
                   .read_text("utf-8"))["cases"]
#: A session's step mark, written after the range's events (tid 1: a safe id).
MARK = {"name": "ProfilerStep#0", "cat": "pyprof", "ph": "i", "s": "g", "ts": 1, "pid": 7, "tid": 1,
        "args": {"step": 0, "window": 0, "step_us": 5}}
HEADER = '{\n    "traceEvents": [\n'


def event(name: str, ph: str, ts: int, tid: int = 17378283666853208238, pid: int = 0,
          cat: str = "operator", extra: str | None = None) -> str:
    """One event as MXNet 1.9.1 writes it (EmitEvent: a field a line, the name as it is)."""
    lines = [f'        "name": "{name}",', f'        "cat": "{cat}",', f'        "ph": "{ph}",',
             f'        "ts": {ts},']
    if extra:
        lines.append(f"        {extra},")
    lines += [f'        "pid": {pid},', f'        "tid": {tid}']
    return "    {\n" + "\n".join(lines) + "\n    }\n"


def raw(*events: str, header: bool = False) -> str:
    return (HEADER if header else ",\n") + ",\n".join(events)


def cut_both(tmp_path: Path, text: str, extra=(MARK,), known=(), planned=None, **kw):
    """(streamed events and store, or "refused"; the tolerant path's events and store).
    ``planned``: whether the streamed cut must go by the writers' plan (None: either)."""
    path = tmp_path / "raw.json"
    path.write_bytes(text.encode("utf-8"))
    results = []
    for streamed in (True, False):
        store = {rawcut.metadata_key(m): m for m in known}
        out = tmp_path / f"out_{streamed}.json"
        if streamed:
            plans = []
            real = rawcut.write_events
            rawcut.write_events = lambda *a, **k: plans.append(1) or real(*a, **k)
            try:
                n = rawcut.cut(str(path), kw.get("start", 0), kw.get("end"), store, str(out), extra)
            except rawcut.Refused:
                results.append("refused")
                continue
            finally:
                rawcut.write_events = real
            assert planned is None or bool(plans) == planned
        else:
            n = rawcut.read_range(str(path), kw.get("start", 0), kw.get("end"), store, str(out),
                                  str(tmp_path), extra, streamed=False)
        events = orjson.loads(out.read_bytes())["traceEvents"]
        assert n == len(events)
        results.append((events, list(store.values())))
    return results


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["about"][:40])
def test_the_streaming_cut_writes_what_the_tolerant_reader_reads(case, tmp_path):
    if "error" in case:  # no such layout: refused, nothing written
        path = tmp_path / "raw.json"
        path.write_text(case["text"], "utf-8")
        with pytest.raises(rawcut.Refused):
            rawcut.cut(str(path), 0, None, {}, str(tmp_path / "w.json"), [MARK])
        assert not (tmp_path / "w.json").exists()
        return
    streamed, tolerant = cut_both(tmp_path, case["text"])
    # the events and ids of the tolerant path, the metadata found stored alike
    assert streamed == "refused" or streamed == tolerant
    # read_range, streamed unless refused: the tolerant path's events whatever the bytes
    out = tmp_path / "auto.json"
    store: dict = {}
    rawcut.read_range(str(tmp_path / "raw.json"), 0, None, store, str(out), str(tmp_path), [MARK])
    assert (orjson.loads(out.read_bytes())["traceEvents"], list(store.values())) == tolerant


def test_which_cases_stream(tmp_path):
    """The cases with an event cut short (a crash's) are the tolerant path's, as on the JVM."""
    streamed = []
    for case in CASES:
        if "error" not in case and cut_both(tmp_path, case["text"])[0] != "refused":
            streamed.append(case["about"].split(":")[0].split("(")[0])
    assert streamed == ["an empty range", "a range of separators only", "a later range",
                        "the last range", "names holding a quote or a back slash beside what "
                        "Java's regular expressions take as a line end without UNIX_LINES "]


def test_an_id_numbered_before_a_safe_id_that_holds_it(tmp_path, monkeypatch):
    """A tid past 2**53 gets 1 in the order it comes; the step mark's tid 1, safe, comes later:
    the cut goes again with every safe id first, and the MXNet thread gets 2."""
    passes = []
    real = rawcut._pass
    monkeypatch.setattr(rawcut, "_pass", lambda *a: passes.append(a[5] is not None) or real(*a))
    text = raw(event("a", "i", 1, tid=2**53 + 1, extra='"s": "t"'), header=True)
    streamed, tolerant = cut_both(tmp_path, text)
    assert [e["tid"] for e in streamed[0]] == [2, 1]
    assert streamed == tolerant
    assert passes == [True, False, True]  # written, the safe ids scanned, written again


def _mixed(n: int) -> str:
    """MXNet's own mix of events: metadata, operator pairs, API calls (b/e with an id), counters,
    names that hold a quote, a back slash, a tab, a brace, a line's worth of quotes."""
    names = ['dot', 'a"b', "C:\\tmp", "tab\there", "x},{y", '"""""', "na\u00efve"]
    meta = ('        {\n            "ph": "M",\n            "args": {\n                "name": "cpu/0"\n'
            '            },\n            "pid": 0,\n            "name": "process_name"\n        },\n\n')
    events = []
    for i in range(n):
        name, t = names[i % len(names)], 1000 + 10 * i
        events += [event(name, "B", t), event(name, "E", t + 4),
                   event("MXImperativeInvoke", "b", t + 5, cat="MXNET_C_API", pid=2**60 + 3,
                         extra=f'"id": {2**62 + i % 3}'),
                   event("MXImperativeInvoke", "e", t + 6, cat="MXNET_C_API", pid=2**60 + 3,
                         extra=f'"id": {2**62 + i % 3}'),
                   event("Memory: cpu/0", "C", t + 7, cat="Device Storage",
                         extra=f'"args": {{ "Memory: cpu/0": {i * 64} }}')]
    return HEADER + meta + ",\n".join(events)


@pytest.mark.parametrize("block", [41, 300, 4096, 1 << 22])
def test_runs_cut_at_any_block_size_give_the_same_events(block, tmp_path, monkeypatch):
    monkeypatch.setattr(rawcut, "BLOCK", block)
    streamed, tolerant = cut_both(tmp_path, _mixed(60), planned=False)
    assert streamed == tolerant
    names = [e["name"] for e in streamed[0] if e.get("cat") == "operator"]
    assert names[:14:2] == ['dot', 'a"b', "C:\\tmp", "tab\there", "x},{y", '"""""', "na\u00efve"]
    assert {e["pid"] for e in streamed[0]} == {0, 1, 7}  # 2**60 + 3 as 1; the mark's 7
    assert {e["id"] for e in streamed[0] if "id" in e} == {1, 2, 3}


def test_a_later_range_of_a_file(tmp_path):
    """Bytes [start, end) of a raw trace: a leading and a trailing comma, known metadata first,
    each metadata event once, the new one stored."""
    first = _mixed(3)
    later = ",\n" + ",\n".join([event("relu", "B", 5000), event("relu", "E", 5001)]) + "\n"
    text = first + later
    known = [{"ph": "M", "args": {"name": "cpu/0"}, "pid": 0, "name": "process_name"},
             {"ph": "M", "args": {"name": "gpu/0"}, "pid": 5, "name": "process_name"}]
    streamed, tolerant = cut_both(tmp_path, text, known=known, start=len(first.encode()))
    assert streamed == tolerant
    assert [e["name"] for e in streamed[0]] == ["process_name", "process_name", "relu", "relu",
                                                "ProfilerStep#0"]
    whole, tolerant = cut_both(tmp_path, text, known=known)
    assert whole == tolerant
    assert [e["name"] for e in whole[0]].count("process_name") == 2  # cpu/0 once
    assert whole[1] == known  # nothing new


SLICES = {
    "a partial overlap": [event("a", "B", 10), event("b", "B", 12), event("a", "E", 14),
                          event("b", "E", 16)],
    "children ended before their parent (as MXNet writes them)":
        [event("DeleteVariable", "B", 12), event("DeleteVariable", "E", 13),
         event("copy", "B", 13), event("copy", "E", 14), event("broadcast_add", "B", 10),
         event("broadcast_add", "E", 15), event("relu", "B", 15), event("relu", "E", 20)],
    "a child that overlaps the parent written after it":
        [event("c", "B", 12), event("c", "E", 16), event("p", "B", 10), event("p", "E", 15)],
    "an end without a begin": [event("a", "E", 10), event("b", "B", 11), event("b", "E", 12)],
    "a begin never closed": [event("a", "B", 10), event("b", "B", 11), event("b", "E", 12)],
    "a negative duration": [event("a", "B", 10), event("a", "E", 9)],
    "an end of another name": [event("a", "B", 10), event("b", "B", 11), event("a", "E", 12),
                               event("b", "E", 13)],
    "complete events": [event("x", "X", 10, extra='"dur": 5'), event("y", "X", 11, extra='"dur": 2'),
                        event("z", "X", 14, extra='"dur": 3')],
    "a time that is no integer": [event("a", "B", 10), event("a", "E", "10.5")],
}
#: The cases the one pass writes as they come (the others go by the plan's two passes).
AS_THEY_COME = {"children ended before their parent (as MXNet writes them)"}


@pytest.mark.parametrize("about", SLICES)
def test_slices_as_the_writers_plan_writes_them(about, tmp_path):
    streamed, tolerant = cut_both(tmp_path, raw(*SLICES[about], header=True),
                                  planned=about not in AS_THEY_COME)
    assert streamed == tolerant


def test_a_thread_keeps_a_bounded_number_of_slices(tmp_path, monkeypatch):
    """Memory: a thread's outer slices are let go past slices.KEPT_SLICES; a parent that begins
    before the last one let go goes by the plan (same events)."""
    monkeypatch.setattr(slices, "KEPT_SLICES", 4)
    kids = [e for i in range(10) for e in (event("k", "B", 100 + 2 * i), event("k", "E", 101 + 2 * i))]
    streamed, tolerant = cut_both(tmp_path, raw(*kids, event("p", "B", 99), event("p", "E", 130),
                                                header=True), planned=True)
    assert streamed == tolerant
    nesting = slices.Nesting()
    nesting.feed([orjson.loads(e) for e in kids])
    (thread,) = nesting.threads.values()
    assert len(thread.begins) == 4 and thread.floor == 111


def test_metadata_of_a_range_not_written(tmp_path):
    """read_range without out (the bytes between windows): the metadata events only, streamed
    runs holding none unparsed, as the tolerant path stores them."""
    path = tmp_path / "raw.json"
    path.write_text(_mixed(20) + ",\n" + event("x", "B", 1) + "\n", "utf-8")
    stores = []
    for streamed in (True, False):
        store: dict = {}
        assert rawcut.read_range(str(path), 0, None, store, None, str(tmp_path), streamed=streamed) == 0
        stores.append(list(store.values()))
    assert stores[0] == stores[1] == [{"ph": "M", "args": {"name": "cpu/0"}, "pid": 0,
                                       "name": "process_name"}]
