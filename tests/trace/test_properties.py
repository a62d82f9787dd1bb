"""Property-based tests of the trace tools on generated traces (tracegen.py, tracetext.py).

(a) No tool (stats, summarize, compact, merge, repair to a new file, diff of a file with itself)
    raises anything but a :class:`pyprof.trace.TraceError` on any input, damaged or not.
(b) What compact, merge and repair write passes :func:`pyprof.trace.validate`.
(c) On undamaged inputs, :func:`pyprof.trace.stats` equals :func:`reference`, written here from
    docs/trace-format.md alone (``json.loads`` of the file, exact arithmetic), whatever the read
    size (``_CHUNK_BYTES`` down to 1 byte puts chunk boundaries inside events) and with the fast
    path on or off.

Budget: the default run is derandomized (the same cases every run, about 20 s on two cores).
``PYPROF_LONG=1`` runs ``PYPROF_LONG_EXAMPLES`` (default 20000) random cases per property and
writes how many were tried, and how fast, to ``build/properties-long.json``.
``PYPROF_PROPERTIES_SHRINK=1`` shrinks failures to minimal inputs (always on in the long mode; off
by default, so that a failing run stays short). ``PYPROF_PROPERTIES_SAVE=DIR`` writes the input of
each failure to DIR, one file per failure site (the last one written is hypothesis's minimal
example), with the read size and the traceback beside it. ``PYPROF_PROPERTIES_OFF`` leaves
features out of the generated traces (see tracegen.py). Minimal inputs found so far are committed
in ``fixtures/properties/`` (``README.md`` there says what each one checks) and go through the
same checks in :func:`test_fixture`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import tracetext

import pyprof.trace as trace

S = sys.modules["pyprof.trace.statistics"]
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "properties"
SPEC = json.loads((ROOT / "pyprof" / "spec" / "trace.json").read_text())
LONG = os.environ.get("PYPROF_LONG", "") not in ("", "0")
EXAMPLES = int(os.environ.get("PYPROF_LONG_EXAMPLES", "20000")) if LONG else None
SAVE = os.environ.get("PYPROF_PROPERTIES_SAVE")
SHRINK = LONG or os.environ.get("PYPROF_PROPERTIES_SHRINK", "") not in ("", "0")
CHUNKS = (None, 1, 7, 64, 1000, 4096)  # None: the default read size
HAS_VALIDATE = hasattr(trace, "validate")

TRIED: Counter = Counter()  # calls of each property's body (cases tried, shrinking included)
SPAN: dict = {}  # first and latest call of each property (time.perf_counter)


def budget(default: int):
    """Settings of one property: ``default`` derandomized cases, or the long mode's."""
    phases = [Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if SHRINK else [])
    return settings(max_examples=EXAMPLES or default, deadline=None, derandomize=not LONG,
                    database=None, print_blob=True, phases=phases,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


@contextlib.contextmanager
def counted(test: str):
    SPAN.setdefault(test, [time.perf_counter(), 0.0])
    try:
        yield
    finally:
        TRIED[test] += 1
        SPAN[test][1] = time.perf_counter()


@pytest.fixture(scope="module", autouse=True)
def long_report():
    """In the long mode, write the cases tried per test to build/properties-long.json."""
    t0 = time.perf_counter()
    yield
    if not LONG or not TRIED:
        return
    out = ROOT / "build" / "properties-long.json"
    out.parent.mkdir(exist_ok=True)
    report = {}
    for name in sorted(TRIED):
        seconds = SPAN[name][1] - SPAN[name][0]  # generation included
        report[name] = {"cases": TRIED[name], "seconds": round(seconds, 1),
                        "cases_per_second": round(TRIED[name] / seconds, 1) if seconds else None}
    report["total"] = {"cases": sum(TRIED.values()),
                       "wall_seconds": round(time.perf_counter() - t0, 1)}
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\n{json.dumps(report)} -> {out}", file=sys.stderr)


@contextlib.contextmanager
def saved_on_failure(test: str, data: bytes, **options):
    """Write ``data`` to $PYPROF_PROPERTIES_SAVE when the block fails (one file per failure site,
    with a ``.txt`` beside it: the options and the traceback)."""
    try:
        yield
    except BaseException as exc:
        if SAVE:
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            where = re.sub(r"[^\w.-]+", "_",
                           f"{test}-{type(exc).__name__}-{Path(tb.filename).stem}-{tb.lineno}")
            Path(SAVE).mkdir(parents=True, exist_ok=True)
            (Path(SAVE) / f"{where}.json").write_bytes(data)
            (Path(SAVE) / f"{where}.txt").write_text(
                f"{options}\n" + "".join(traceback.format_exception(exc)))
        raise


@contextlib.contextmanager
def read_size(chunk: int | None, fast: bool):
    """stats() with this read size (``_CHUNK_BYTES``) and with the fast path on or off."""
    with pytest.MonkeyPatch.context() as mp:
        if chunk is not None:
            mp.setattr(S, "_CHUNK_BYTES", chunk)
        mp.setattr(S, "FAST_PATH", fast)
        yield


# -- the reference, from docs/trace-format.md ---------------------------------------------------

PHASES = SPEC["phases"]
BEGINS = {p["begin"]: name for name, p in SPEC["pairs"].items()}
ENDS = {p["end"]: name for name, p in SPEC["pairs"].items()}
THREAD_SCOPED = {name for name, p in SPEC["pairs"].items() if p["scope"] == ["pid", "tid"]}
COPIES = {"operator", "Custom Operator"}
#: TraceStats attribute of each note of the spec, where the names differ.
NOTE_ATTRS = {"negative_duration": "negative_durations", "unknown_phase": "unknown_phases",
              "non_numeric_counter": "bad_counter_values"}


def _json_int(text: str):
    """Integers as the doc says they are read: exact within 64 bits, else floats (as orjson)."""
    v = int(text)
    return v if -2 ** 63 <= v <= 2 ** 64 - 1 else float(text)


def number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def reference(data: bytes):
    """``(operators, notes)`` of an undamaged trace: ``{(category, name, device): [durations]}``
    and ``{note: count}`` (note names as in pyprof/spec/trace.json; ``unknown_phase`` gives the
    count per phase); None when it holds no event."""
    doc = json.loads(data, parse_int=_json_int)
    evs = doc["traceEvents"] if isinstance(doc, dict) else doc
    evs = [e for e in evs if isinstance(e, dict) and "ph" in e]
    if not evs:
        return None
    notes = Counter()
    unknown = Counter()  # events per unknown phase
    open_: dict = {}  # scope -> [(name, ts, cat)], oldest first
    by_pid: dict = {}  # (cat, name, pid or absent) -> [durations] in file order
    pid_names = {}
    absent = object()

    def record(cat, name, pid, dur):
        if dur < 0:
            notes["negative_duration"] += 1
        else:
            by_pid.setdefault((cat, name, pid), []).append(dur)

    for ev in evs:
        ph = ev["ph"]
        if ph not in PHASES:
            unknown[str(ph)] += 1
            continue
        kind = BEGINS.get(ph) or ENDS.get(ph)
        if kind == "async" and ev.get("cat") in COPIES:
            continue  # MXNet's async copies of operators: never counted
        if ph == "M" and ev.get("name") == "process_name":
            pid_names[ev.get("pid")] = str((ev.get("args") or {}).get("name", ""))
        elif ph == "C":
            if not number(ev.get("ts")):
                notes["no_timestamp"] += 1
                continue
            args = ev.get("args")
            if not isinstance(args, dict):
                notes["non_numeric_counter"] += 1
                continue
            notes["non_numeric_counter"] += sum(not number(v) for v in args.values())
            if not -2 ** 63 <= int(ev["ts"]) < 2 ** 63 and any(
                    number(v) and k.startswith("Memory: ") for k, v in args.items()):
                notes["no_timestamp"] += 1  # a memory sample time beyond 64 bits
        elif ph == "X":
            if not number(ev.get("ts")) or not number(ev.get("dur")):
                notes["no_timestamp"] += 1
            else:
                record(ev.get("cat", ""), ev.get("name"), ev.get("pid", absent), ev["dur"])
        elif kind:
            if not number(ev.get("ts")):
                notes["no_timestamp"] += 1
                continue
            if kind in THREAD_SCOPED:
                scope = (kind, ev.get("pid"), ev.get("tid"))
            else:
                ident = (("id", ev["id"]) if "id" in ev
                         else ("id2", json.dumps(ev.get("id2"), sort_keys=True)))
                scope = (kind, ev.get("pid"), ev.get("cat"), ident)
            stack = open_.setdefault(scope, [])
            if ph in BEGINS:
                stack.append((ev.get("name"), ev["ts"], ev.get("cat", "")))
                continue
            # An end with a name closes the latest open begin of that name; without, the latest.
            at = next((i for i in range(len(stack) - 1, -1, -1)
                       if "name" not in ev or stack[i][0] == ev["name"]), None)
            if at is None:
                notes["unmatched_end"] += 1
                continue
            name, ts, cat = stack.pop(at)
            record(cat, name, ev.get("pid", absent), ev["ts"] - ts)
    notes["unmatched_begin"] = sum(len(s) for s in open_.values())
    notes["unknown_phase"] = dict(unknown)
    ops: dict = {}
    for (cat, name, pid), durs in by_pid.items():
        device = pid_names.get(pid) if pid is not absent else ""
        if device is None:
            device = f"pid {pid}"
        if device == cat:
            device = ""  # a category pid (API calls, tasks), not a device
        ops.setdefault((cat, str(name), device), []).extend(durs)
    return ops, notes


def check_reference(path: Path, chunk: int | None = None, fast: bool = True) -> None:
    """(c): stats() of an undamaged trace equals the reference."""
    want = reference(path.read_bytes())
    with read_size(chunk, fast):
        if want is None:
            with pytest.raises(trace.TraceFormatError):
                trace.stats(path)
            return
        got = trace.stats(path)
    want_ops, want_notes = want
    have = {(o.category, o.name, o.device): o for o in got.operators}
    assert sorted(have) == sorted(want_ops), "operators (category, name, device)"
    for key, durs in want_ops.items():
        o = have[key]
        exact = all(type(d) is int for d in durs)
        assert (o.count, o.min_us, o.max_us) == (len(durs), min(durs), max(durs)), key
        if exact:
            assert o.total_us == sum(durs), key
        else:
            assert math.isclose(o.total_us, sum(durs), rel_tol=1e-9, abs_tol=1e-9), key
        assert sorted(o.durations_us.tolist()) == sorted(durs), key
    for note in SPEC["notes"]:
        attr = NOTE_ATTRS.get(note, note)
        if not hasattr(got, attr):
            continue  # not in TraceStats yet
        value, want = getattr(got, attr), want_notes.get(note, 0)
        if isinstance(want, dict) and not isinstance(value, dict):
            want = sum(want.values())
        assert value == want, note


# -- the tools ------------------------------------------------------------------------------------

def check_tools(path: Path, out: Path, chunk: int | None = None, fast: bool = True) -> list[Path]:
    """(a): every tool on ``path`` raises nothing but a TraceError; returns the traces written."""
    written = []
    with read_size(chunk, fast):
        for name, call in [
            ("stats", lambda: trace.stats(path)),
            ("summarize", lambda: trace.summarize(path)),
            ("compact", lambda: trace.compact(path, out / "compact.json")),
            ("merge", lambda: trace.merge([path], out / "merge.json")),
            ("repair", lambda: trace.repair(path, out / "repair.json")),
            ("diff", lambda: trace.diff(path, path, n_boot=50)),
        ]:
            try:
                call()
            except trace.TraceError:
                continue
            if name in ("compact", "merge", "repair"):
                written.append(out / f"{name}.json")
    return written


def check_valid(paths: list[Path]) -> None:
    """(b): each written trace passes pyprof.trace.validate."""
    for p in paths:
        result = trace.validate(p)
        assert result.ok, (p.name, result.problems)


def write_case(directory: str, data: bytes) -> Path:
    path = Path(directory) / "trace.json"
    path.write_bytes(data)
    return path


# -- properties -------------------------------------------------------------------------------------

read_options = dict(chunk=st.sampled_from(CHUNKS), fast=st.booleans())


@budget(150)
@given(case=tracetext.cases(), **read_options)
def test_tools_raise_only_trace_errors(case, chunk, fast):
    data, _damage = case
    with counted("tools"), tempfile.TemporaryDirectory() as d, \
            saved_on_failure("tools", data, chunk=chunk, fast=fast):
        check_tools(write_case(d, data), Path(d), chunk, fast)


@pytest.mark.skipif(not HAS_VALIDATE, reason="pyprof.trace.validate does not exist yet")
@budget(60)
@given(case=tracetext.cases())
def test_written_traces_validate(case):
    data, _damage = case
    with counted("validate"), tempfile.TemporaryDirectory() as d, \
            saved_on_failure("validate", data):
        path = write_case(d, data)
        check_valid(check_tools(path, Path(d)))


@budget(400)
@given(case=tracetext.cases(damage=False), **read_options)
def test_stats_equal_reference(case, chunk, fast):
    data, _ = case
    with counted("reference"), tempfile.TemporaryDirectory() as d, \
            saved_on_failure("reference", data, chunk=chunk, fast=fast):
        check_reference(write_case(d, data), chunk, fast)


# -- committed corner cases ----------------------------------------------------------------------

def fixture_files():
    """The minimal inputs (not the ``.stats.json`` files tests/fixtures/make_expected_stats.py
    writes beside them)."""
    return sorted(p for p in FIXTURES.glob("*.json") if not p.name.endswith(".stats.json"))


def undamaged(data: bytes) -> bool:
    try:
        doc = json.loads(data)
    except ValueError:
        return False
    return isinstance(doc, list) or isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list)


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name)
def test_fixture(path, tmp_path):
    """Each committed minimal input, through (a), (b) and, when it is valid JSON, (c), with the
    fast path on and off, and at every read size of the properties when it is larger than the
    4 KiB the reader takes before it looks for the first event (smaller ones are read whole)."""
    valid_json = undamaged(path.read_bytes())
    for chunk in CHUNKS if path.stat().st_size > 4096 else (None,):
        for fast in (True, False):
            written = check_tools(path, tmp_path, chunk, fast)
            if HAS_VALIDATE:
                check_valid(written)
            if valid_json:
                check_reference(path, chunk, fast)


def test_fixture_names_are_stable():
    """Fixture files are named by content, so the same case is never committed twice."""
    for p in fixture_files():
        digest = hashlib.sha256(p.read_bytes()).hexdigest()[:10]
        assert p.stem.endswith(digest), f"rename {p.name} to end in -{digest}.json"
