"""The window cut's C byte work (pyprof.native.cutter) writes what the Python reading writes,
byte for byte: on MXNet's own raw traces (a real one, and the layout cases), on every kind of
event that makes it hand a run to Python, on runs cut at any block size; and it takes the
runs of a plain MXNet trace (else the cut is not faster)."""

from __future__ import annotations

import io
import time
from pathlib import Path

import orjson
import pytest

from child import run_scenario
from pyprof.native import cutter
from pyprof.trace import rawcut

from test_rawcut import CASES, HEADER, MARK, _mixed, event, raw

pytestmark = pytest.mark.skipif(not cutter.available(), reason="no C compiler: the cut reads in Python")


def cut_twice(tmp_path: Path, text: str | bytes, monkeypatch, start: int = 0, end=None):
    """The window of ``text`` cut in Python and with the C code: (bytes, bytes, runs the C code
    took), or "refused" (both refused)."""
    path = tmp_path / "raw.json"
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    outs, took = [], []
    real = cutter.read
    monkeypatch.setattr(cutter, "read", lambda run: (r := real(run)) is not None and took.append(1) or r)
    for mode in ("python", "native"):
        monkeypatch.setenv(cutter.ENV, mode)
        out = tmp_path / f"{mode}.json"
        try:
            rawcut.cut(str(path), start, end, {}, str(out), [MARK])
        except rawcut.Refused:
            outs.append("refused")
            continue
        outs.append(out.read_bytes())
    assert (outs[0] == "refused") == (outs[1] == "refused")
    return "refused" if outs[0] == "refused" else (outs[0], outs[1], len(took))


def test_a_real_mxnet_trace_is_cut_alike_and_by_the_c_code(tmp_path, monkeypatch):
    # MXNet's own file (profile_all: operators, API calls with async ids, counters, metadata)
    run_scenario("""
import mxnet as mx
from mxnet import profiler
profiler.set_config(profile_all=True, filename="mx.json", continuous_dump=True)
profiler.set_state("run")
a = mx.nd.ones((2, 2))
for i in range(300):
    b = mx.nd.dot(a + i, a)
mx.nd.waitall()
profiler.set_state("stop")
profiler.dump(finished=False)
""", tmp_path)
    monkeypatch.setattr(rawcut, "BLOCK", 1 << 14)  # many runs
    python, native, took = cut_twice(tmp_path, (tmp_path / "mx.json").read_bytes(), monkeypatch)
    assert python == native
    events = orjson.loads(native)["traceEvents"]
    assert sum(e.get("name") == "dot" and e["ph"] == "B" for e in events) == 300
    assert all(type(v) is int and v < 2**53 for e in events for k, v in e.items() if k in ("pid", "tid", "id"))
    assert took >= 5  # every run but the one with the metadata


@pytest.mark.parametrize("case", [c for c in CASES if "error" not in c], ids=lambda c: c["about"][:40])
def test_the_layout_cases(case, tmp_path, monkeypatch):
    r = cut_twice(tmp_path, case["text"], monkeypatch)
    assert r == "refused" or r[0] == r[1]


@pytest.mark.parametrize("block", [41, 300, 4096, 1 << 22])
def test_runs_cut_at_any_block_size(block, tmp_path, monkeypatch):
    monkeypatch.setattr(rawcut, "BLOCK", block)
    python, native, _ = cut_twice(tmp_path, _mixed(60), monkeypatch)  # Python's runs, mostly
    assert python == native


T = 17378283666853208238  # a tid as MXNet writes it (past 2**53)
#: A metadata event as MXNet writes one between operators (a new pid's name).
META = ('        {\n            "ph": "M",\n            "args": {\n                "name": "MXNET_C_API"\n'
        '            },\n            "pid": 849786139768988538,\n            "name": "process_name"\n        }')
#: Events the C code hands to Python (the run holding one), each beside a plain pair: the window
#: is the same bytes either way.
ODD = {
    "a name past ASCII": event("na\u00efve", "B", 1) + ",\n" + event("na\u00efve", "E", 2),
    "a back slash": event("C:\\\\tmp", "B", 1) + ",\n" + event("C:\\\\tmp", "E", 2),
    "a raw quote": event('a"b', "B", 1) + ",\n" + event('a"b', "E", 2),
    "a float": event("c", "C", 3, extra='"args": { "v": 1.5 }'),
    "an exponent": event("c", "C", 3, extra='"args": { "v": 1e3 }'),
    "an integer past 64 bits": event("c", "C", 3, extra=f'"args": {{ "v": {2**64} }}'),
    "a string tid": event("s", "i", 3, tid='"main"', extra='"s": "t"'),
    "a negative pid": event("s", "i", 3, pid=-1, extra='"s": "t"'),
    "id2": event("f", "s", 3, extra='"id2": { "local": 5 }'),
    "bind_id": event("f", "s", 3, extra='"bind_id": 9'),
    "a float time": event("x", "B", 1) + ",\n" + event("x", "E", 2).replace('"ts": 2', '"ts": 2.5'),
    "an X slice": event("x", "X", 1, extra='"dur": 3'),
    "a begin without its end": event("x", "B", 1),
    "an end before its begin": event("x", "B", 5) + ",\n" + event("x", "E", 2),
    "a pair of two names": event("x", "B", 1) + ",\n" + event("y", "E", 2),
    "nameless slices": event("x", "B", 1).replace('"name": "x",', "") + ",\n"
                       + event("x", "E", 2).replace('"name": "x",', ""),
    "a repeated key": event("x", "i", 1, extra='"s": "t",\n        "s": "p"'),
    "an empty object": "    {}\n",
    "objects in a list": event("c", "C", 3, extra='"args": { "v": [ {"a": 1}, {"b": [true, null, false]} ] }'),
    "ids at the limit": event("s", "i", 3, tid=2**53 - 1, pid=2**53, extra='"s": "t"') + ",\n"
                        + event("s", "i", 4, tid=2**64 - 1, pid=0, extra='"s": "t"'),
    "id before pid": event("a", "b", 3, extra=f'"id": {T}') + ",\n" + event("a", "e", 4, extra=f'"id": {T}'),
    "a time before 1970": event("x", "B", -5) + ",\n" + event("x", "E", -2),
    "metadata mid-run, twice": META + ",\n" + event("x", "B", 1) + ",\n" + event("x", "E", 2) + ",\n" + META,
}


@pytest.mark.parametrize("about", sorted(ODD))
def test_what_the_c_code_hands_to_python(about, tmp_path, monkeypatch):
    plain = event("dot", "B", 10) + ",\n" + event("dot", "E", 12)
    text = raw(plain, ODD[about], plain, header=True)
    r = cut_twice(tmp_path, text, monkeypatch)
    assert r == "refused" or r[0] == r[1]
    if r != "refused":
        orjson.loads(r[1])  # valid JSON


def test_a_later_range_and_its_ids_numbered_across_runs(tmp_path, monkeypatch):
    # the numbering and the threads' slices carry from run to run and across the C code and
    # Python: runs of 300 bytes alternate between plain pairs and Python's (a raw quote)
    monkeypatch.setattr(rawcut, "BLOCK", 300)
    events = []
    for i in range(40):
        name = 'q"q' if i % 3 == 0 else "dot"
        events += [event(name, "B", 100 * i, tid=T - 7 * (i % 4)), event(name, "E", 100 * i + 5, tid=T - 7 * (i % 4))]
    text = HEADER + ",\n".join(events)
    start = len(text[:text.index(events[6])].encode()) - 2  # at the comma before the 7th event
    python, native, took = cut_twice(tmp_path, text, monkeypatch, start=start)
    assert python == native and took > 0
    # four threads past 2**53, numbered after the step mark's tid 1 (two passes)
    assert sorted({e["tid"] for e in orjson.loads(native)["traceEvents"]}) == [1, 2, 3, 4, 5]


def test_ids_numbered_in_order_of_first_use_within_a_run(tmp_path, monkeypatch):
    # one run the C code takes, its threads first used in descending order of their ids
    events = []
    for i in range(12):
        tid = T - 7 * (i % 4)
        events += [event("dot", "B", 100 * i, tid=tid), event("dot", "E", 100 * i + 5, tid=tid)]
    python, native, took = cut_twice(tmp_path, HEADER + ",\n".join(events), monkeypatch)
    assert python == native and took == 3  # written, safe ids reserved, written again
    tids = [e["tid"] for e in orjson.loads(native)["traceEvents"] if e.get("name") == "dot"]
    assert tids[:8:2] == [2, 3, 4, 5]  # the step mark's tid 1 is safe: numbered around it


def test_metadata_the_window_knows_is_written_once(tmp_path, monkeypatch):
    # the store's metadata goes first; the same event in the range is left out, a new one kept
    path = tmp_path / "raw.json"
    path.write_text(raw(event("dot", "B", 1), META, event("dot", "E", 2).replace('"E"', '"B"'),
                        event("dot", "E", 3), META.replace("MXNET_C_API", "other"), header=True))
    known = orjson.loads("{" + META.split("{", 1)[1])
    outs = []
    for mode in ("python", "native"):
        monkeypatch.setenv(cutter.ENV, mode)
        store = {rawcut.metadata_key(known): known}
        rawcut.cut(str(path), 0, None, store, str(tmp_path / f"{mode}.json"), [MARK])
        outs.append(((tmp_path / f"{mode}.json").read_bytes(), sorted(store)))
    assert outs[0] == outs[1]
    names = [e["args"]["name"] for e in orjson.loads(outs[1][0])["traceEvents"] if e["ph"] == "M"]
    assert names == ["MXNET_C_API", "other"]


def test_a_session_cut_begun_during_mxnets_last_append_writes_the_cut_of_the_range(tmp_path):
    # a session's stop cuts its window on a thread while MXNet appends the window's last events
    # (rawcut.Tail, in runs of 16 KiB here): the window, as written and as held for the
    # annotation, is the cut of its range made after the append, byte for byte
    r = run_scenario("""
import mxnet as mx, pyprof
from pyprof.process import rawfile as _rawfile
from pyprof.session import raw as rawfile  # its read_range: the raw-file function it calls
from pyprof.trace import rawcut
rawcut.TAIL_RUN = 1 << 14
_rawfile.FOLLOW = "always"  # whatever the machine's load
seen = []
real = rawfile.read_range
def read_range(raw, start, end, metadata, out, scratch=None, extra=(), keep=None, tail=None):
    known = dict(metadata)
    count = real(raw, start, end, metadata, out, scratch, extra, keep, tail)
    if tail is None:
        return count
    if keep is not None and keep.held:
        keep.write("held.json")  # as the cut writes it; the annotation then writes it again
        keep.held = True
        got = open("held.json", "rb").read()
    else:
        got = open(out, "rb").read()
    again = rawcut.read_range(raw, start, end, known, "again.json", scratch, extra)
    seen.append([got == open("again.json", "rb").read(), count == again, sorted(known) == sorted(metadata),
                 tail._result is not None, keep is not None and keep.held, len(got)])
    return count
rawfile.read_range = read_range
a = mx.nd.ones((4, 4)); mx.nd.waitall()
for options in ({}, {"record_shapes": True, "with_flops": True}):
    with pyprof.profile(path="w.json", **options):
        for i in range(1500):
            b = mx.nd.dot(a + i, a)
        mx.nd.waitall()
result = seen
""", tmp_path)
    assert len(r) == 2, r
    for same, count, metadata, taken, _, size in r:
        assert same and count and metadata and taken and size > 1 << 18, r
    assert [w[4] for w in r] == [False, True]  # the second held for its annotation


@pytest.mark.parametrize("others, load, begun", [
    ("0", 9.0, True), ("0 1 0", 9.0, True), ("1", 0.2, False), ("1 2 1", 0.2, False),
    ("3", 0.2, False), (None, 0.2, True), (None, 1.4, True), (None, 1.6, False)])
def test_the_cut_follows_mxnets_append_only_with_a_core_free(others, load, begun, tmp_path,
                                                            monkeypatch):
    # FOLLOW "auto" on 2 CPUs: a second thread only when no other thread is runnable now (the
    # fewest of three reads of the kernel's count; else MXNet's append and the cut share one
    # core's time), whatever the load average after the program's own busy steps; without the
    # kernel's count, below a load average of 1.5; "never" and "always" as they say
    from pyprof.process import rawfile

    reads = iter(others.split() if others else [])

    def loadavg(path, mode="r"):
        assert path == "/proc/loadavg"
        if others is None:
            raise FileNotFoundError(path)
        return io.BytesIO(b"0.50 0.40 0.30 %d/120 4242\n" % (int(next(reads, others[-1])) + 1))
    monkeypatch.setattr(rawfile, "open", loadavg, raising=False)
    monkeypatch.setattr(rawfile.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(rawfile.os, "getloadavg", lambda: (load, 0.0, 0.0))
    (tmp_path / "raw.json").write_bytes(b"")
    got = {}
    for mode in ("auto", "never", "always"):
        monkeypatch.setattr(rawfile, "FOLLOW", mode)
        tail = rawfile.follow(str(tmp_path / "raw.json"), 0, str(tmp_path / "w.json"))
        got[mode] = tail is not None
        if tail is not None:
            tail.cancel()
    assert got == {"auto": begun, "never": False, "always": True}
    deadline = time.monotonic() + 10
    while list(tmp_path.glob(".pyprof-*")) and time.monotonic() < deadline:
        time.sleep(0.01)  # a cancelled cut deletes its file
    assert not list(tmp_path.glob(".pyprof-*"))


def test_objects_in_a_list_in_a_run_the_c_code_takes(tmp_path, monkeypatch):
    # the C code's separator puts the events on lines, the writer's replace of },{" the objects
    # of a list inside one: the bytes of Python's reading
    plain = event("dot", "B", 10) + ",\n" + event("dot", "E", 12)
    listed = event("c", "C", 3, extra='"args": {\n "v": [\n {"a": 1},\n {"b": 2}\n ]\n }')  # a key a line
    python, native, took = cut_twice(tmp_path, raw(plain, listed, plain, header=True), monkeypatch)
    assert took > 0 and python == native
    assert b'[{"a":1},\n{"b":2}]' in native


def test_a_stop_that_fails_after_the_cut_began_leaves_no_file_of_it(tmp_path):
    # the cut begun before MXNet's last append is cancelled when the stop fails before the
    # window ends: its thread ends and its temporary file beside the window is deleted
    r = run_scenario("""
import glob, os, time, mxnet as mx, pyprof
from pyprof.attribution import capture
from pyprof.process import rawfile
rawfile.FOLLOW = "always"
os.makedirs("out")
def take(self):
    raise RuntimeError("planted")
capture.Recorder.take = take
p = pyprof.profile(path="out/w.json", record_shapes=True)
p.start()
a = mx.nd.ones((4, 4))
for i in range(200):
    b = mx.nd.dot(a + i, a)
mx.nd.waitall()
try:
    p.stop()
    raised = False
except RuntimeError:
    raised = True
deadline = time.monotonic() + 10
while glob.glob("out/.pyprof-*") and time.monotonic() < deadline:
    time.sleep(0.01)
result = [raised, sorted(os.listdir("out"))]
""", tmp_path)
    assert r[0] is True and not [f for f in r[1] if f.startswith(".pyprof-")], r


@pytest.mark.parametrize("ahead", [None, (b'"name":"c"', frozenset("B"))])
@pytest.mark.parametrize("run", ["plain", "listed", "empty"])
def test_a_held_window_written_with_changed_events_is_the_writers_bytes(run, ahead, tmp_path):
    # Kept.write puts its runs on lines as held (no copy of the window); the bytes are those of
    # the window read back, its events replaced, written by TraceWriter.write_all: lists of
    # objects inside events, in changed events, and an empty event {} (no line for it)
    from pyprof.trace.writer import TraceWriter

    plain = event("dot", "B", 10) + ",\n" + event("dot", "E", 12)
    listed = event("c", "C", 3, extra='"args": {\n "v": [\n {"a": 1},\n {"b": 2}\n ]\n }')
    body = [plain, {"plain": plain, "listed": listed, "empty": "{\n}"}[run], plain]
    path = tmp_path / "raw.json"
    path.write_text(raw(*body, header=True))
    known = orjson.loads("{" + META.split("{", 1)[1])  # a part of dicts before the run
    keep = rawcut.Kept(ahead=ahead)  # read ahead: whether a run needs lining is known then
    rawcut.cut(str(path), 0, None, {b"m": known}, str(tmp_path / "unused.json"), [MARK], keep=keep)
    assert keep.held
    n = keep.size
    # the run's first event (after the metadata event) and one near the end changed
    changed = {1: {"name": "first", "args": {"v": [{"x": 1}, {"y": 2}]}}, n - 2: {"name": "late"}}
    keep.write(str(tmp_path / "held.json"), changed)
    rawcut.cut(str(path), 0, None, {b"m": known}, str(tmp_path / "plain.json"), [MARK])
    events = orjson.loads((tmp_path / "plain.json").read_bytes())["traceEvents"]
    for k, ev in changed.items():
        events[k] = ev
    with TraceWriter(str(tmp_path / "written.json"), gzip=False) as w:
        w.write_all(events)
    held = (tmp_path / "held.json").read_bytes()
    assert held == (tmp_path / "written.json").read_bytes()
    assert b'[{"x":1},\n{"y":2}]' in held and (b",{}," in held) == (run == "empty")


@pytest.mark.parametrize("text", ["two_passes", "samples"])
def test_events_read_ahead_are_the_events_held(text, tmp_path):
    # Kept(ahead=...) reads the needle's and the phases' events as each run is added (on the
    # cut's thread): what read() and find() give is what the held window holds, also after a
    # second pass renumbered the ids (a tid past 2**53, then the step mark's safe tid 1)
    sample = event("Memory: cpu/0", "C", 3, cat="Device Storage", extra='"args": { "Memory: cpu/0": 64 }')
    body = {"two_passes": raw(event("a", "B", 1, tid=2**53 + 1), event("a", "E", 2, tid=2**53 + 1),
                              sample, header=True),
            "samples": raw(*[e for i in range(60) for e in (
                event("dot", "B", 10 * i), event("dot", "E", 10 * i + 4),
                event("Memory: cpu/0", "C", 10 * i + 7, cat="Device Storage",
                      extra=f'"args": {{ "Memory: cpu/0": {i * 64} }}'))], header=True)}[text]
    path = tmp_path / "raw.json"
    path.write_text(body)
    needle = b'"name":"Memory: '
    keeps = [rawcut.Kept(), rawcut.Kept(ahead=(needle, frozenset("B")))]
    for keep in keeps:
        rawcut.cut(str(path), 0, None, {}, str(tmp_path / "unused.json"), [MARK], keep=keep)
        assert keep.held
    plain, ahead = keeps
    every = list(range(plain.size))
    assert ahead.read(every) == plain.events(every)
    found = [i for i, e in enumerate(plain.events(every)) if e["name"].startswith("Memory: ")]
    assert ahead.find(needle) == plain.find(needle) == found
    assert len(found) == {"two_passes": 1, "samples": 60}[text]
    if text == "two_passes":
        assert [e.get("tid") for e in ahead.read(every)][:2] == [2, 2]
