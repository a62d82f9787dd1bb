"""The timeline data of an HTML report: slices per track, counters, instant marks, as columns.

One pass of :class:`~pyprof.trace.reader.TraceReader` over a trace (the reading path of
:func:`~pyprof.trace.summarize`, so the same repairs): ``B``/``E`` pairs (matched per ``(pid,
tid, name)``, the innermost open one first, as MXNet nests them) and ``X`` events become slices;
``C`` events counters (``Memory: <device>`` in bytes); ``i``/``I``/``R`` events marks; ``M``
events name the tracks. MXNet's async duplicates of operators and, by default, C API calls are
left out, as the operator table leaves them out.

oneDNN primitives merged by ``pyprof dnnl --trace`` (category ``dnnl``) sit on a track of their
own named ``oneDNN (<thread>)``; they are moved onto the track of ``<thread>`` in the same
process, where they nest under the operator that ran them (the merge keeps each primitive inside
its operator).

A slice's args are the event's, with the FLOPs and bytes derived from its shapes and
attributes where it carries none (:func:`pyprof.attribution.flops.counted`, as ``summarize --by
shape`` and the roofline read them).

Times are microseconds from the trace's first timed event (``t0``, absolute, in the result).
Unlike the statistics, this holds every slice in memory (a few hundred bytes each while it is
built): it is meant for traces a browser can show, up to some million slices.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np
import orjson

from ...attribution.flops import counted
from ..naming import API_CATEGORY
from ..reader import TraceReader
from ..slices import is_number


#: Category of the oneDNN primitives ``pyprof dnnl --trace`` merges into a trace.
DNNL_CATEGORY = "dnnl"

_PHASES = frozenset({"B", "E", "X", "M", "C", "i", "I", "R"})


class _Interner:
    __slots__ = ("index", "values")

    def __init__(self) -> None:
        self.index: dict[Any, int] = {}
        self.values: list[Any] = []

    def __call__(self, value: Any) -> int:
        i = self.index.get(value)
        if i is None:
            i = self.index[value] = len(self.values)
            self.values.append(value)
        return i


def timeline(path: str | os.PathLike[str], *, exclude_categories: Iterable[str] = (API_CATEGORY,),
             progress: bool | None = None) -> dict[str, Any]:
    """The slices, counters and marks of one trace, as plain columns for the report's page.

    Returns:
        ``{"t0": us, "span": us, "tracks": [{"pid", "tid", "process", "thread"}], "names": [...],
        "cats": [...], "args": [...], "slices": {"track", "start", "dur", "name", "cat",
        "depth", "args"}, "counters": [{"name", "ts", "value"}], "marks": [{"name", "ts",
        "track", "cat"?, "args"?}], "unmatched": n}``; slices sorted by track, then start (longer first on
        ties); ``start`` delta-encoded (each the difference to the previous one, the first from
        0: it compresses far better); ``args`` is -1 or an index into ``args``; pid and tid as
        strings (64-bit ids do not fit a JavaScript number).

    Raises:
        TraceNotFoundError / TraceFormatError: as :class:`~pyprof.trace.reader.TraceReader`.
    """
    reader = TraceReader(path, progress=progress, phases=_PHASES, drop_async_copies=True,
                         exclude_categories=tuple(exclude_categories))
    pnames: dict[Any, str] = {}
    tnames: dict[tuple[Any, Any], str] = {}
    raw: list[tuple[Any, Any, float, float, str, str, Any]] = []  # pid, tid, ts, dur, name, cat, args
    opened: dict[tuple[Any, Any, Any], list[dict[str, Any]]] = {}
    counters: dict[str, tuple[list[float], list[float]]] = {}
    marks: list[tuple[Any, Any, float, str, str, Any]] = []  # pid, tid, ts, name, cat, args
    unmatched = 0
    for ev in reader:
        ph = ev.get("ph")
        pid, tid = ev.get("pid"), ev.get("tid")
        if ph == "M":
            args = ev.get("args") or {}
            if ev.get("name") == "process_name" and isinstance(args, dict):
                pnames[pid] = str(args.get("name", ""))
            elif ev.get("name") == "thread_name" and isinstance(args, dict):
                tnames[(pid, tid)] = str(args.get("name", ""))
            continue
        ts = ev.get("ts")
        if not is_number(ts):
            continue
        if ph == "X":
            dur = ev.get("dur", 0)
            raw.append((pid, tid, float(ts), float(dur) if is_number(dur) and dur > 0 else 0.0,
                        str(ev.get("name", "")), str(ev.get("cat", "")), ev.get("args")))
        elif ph == "B":
            opened.setdefault((pid, tid, ev.get("name")), []).append(ev)
        elif ph == "E":
            stack = opened.get((pid, tid, ev.get("name")))
            if not stack:
                unmatched += 1
                continue
            b = stack.pop()
            args = b.get("args") or ev.get("args")
            raw.append((pid, tid, float(b["ts"]), max(float(ts) - float(b["ts"]), 0.0),
                        str(b.get("name", "")), str(b.get("cat", "")), args))
        elif ph == "C":
            for key, value in (ev.get("args") or {}).items():
                if is_number(value):
                    name = str(ev.get("name", "")) if len(ev["args"]) == 1 else f"{ev.get('name', '')} {key}"
                    col = counters.setdefault(name, ([], []))
                    col[0].append(float(ts))
                    col[1].append(float(value))
        else:
            marks.append((pid, tid, float(ts), str(ev.get("name", "")), str(ev.get("cat", "")),
                          ev.get("args")))
    unmatched += sum(len(s) for s in opened.values())
    return _columns(raw, counters, marks, pnames, tnames, unmatched)


def _dnnl_home(pid: Any, tid: Any, tnames: dict[tuple[Any, Any], str]) -> tuple[Any, Any]:
    """The track a oneDNN track's primitives nest in: ``oneDNN (<thread>)`` names it."""
    label = tnames.get((pid, tid), "")
    if not (label.startswith("oneDNN (") and label.endswith(")")):
        return pid, tid
    inner = label[len("oneDNN ("):-1]
    for (p, t), name in tnames.items():
        if p == pid and name == inner:
            return p, t
    if inner.startswith("thread "):
        return pid, _same_id(inner[len("thread "):])
    return pid, tid


def _same_id(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return text


def _columns(raw: list[tuple[Any, Any, float, float, str, str, Any]],
             counters: dict[str, tuple[list[float], list[float]]],
             marks: list[tuple[Any, Any, float, str, str, Any]], pnames: dict[Any, str],
             tnames: dict[tuple[Any, Any], str], unmatched: int) -> dict[str, Any]:
    homes: dict[tuple[Any, Any], tuple[Any, Any]] = {}
    for pid, tid, _, _, _, cat, _ in raw:
        if cat == DNNL_CATEGORY and (pid, tid) not in homes:
            homes[(pid, tid)] = _dnnl_home(pid, tid, tnames)
    times = [r[2] for r in raw] + [m[2] for m in marks] + [t for ts, _ in counters.values() for t in ts]
    t0 = min(times) if times else 0.0
    end = max([r[2] + r[3] for r in raw] + times) if times else 0.0

    track_ix: dict[tuple[Any, Any], int] = {}
    keys: list[tuple[Any, Any]] = []
    names, cats, args = _Interner(), _Interner(), _Interner()
    prov, name_ix, cat_ix = [], [], []
    for pid, tid, _, _, name, cat, _ in raw:
        k = homes.get((pid, tid), (pid, tid)) if cat == DNNL_CATEGORY else (pid, tid)
        i = track_ix.get(k)
        if i is None:
            i = track_ix[k] = len(keys)
            keys.append(k)
        prov.append(i)
        name_ix.append(names(name))
        cat_ix.append(cats(cat))
    # Tracks by pid, then tid; slices by track, then start, the longer first on a tie.
    by_key = sorted(range(len(keys)), key=lambda i: (_order(keys[i][0]), _order(keys[i][1])))
    rank = np.empty(len(keys), dtype=np.int64)
    rank[by_key] = np.arange(len(keys))
    ts = np.fromiter((r[2] for r in raw), dtype=np.float64, count=len(raw))
    dur = np.fromiter((r[3] for r in raw), dtype=np.float64, count=len(raw))
    track = rank[np.asarray(prov, dtype=np.int64)] if raw else np.zeros(0, dtype=np.int64)
    order = np.lexsort((-dur, ts, track))
    track, ts, dur = track[order], ts[order], dur[order]
    start = np.round(ts - t0, 3)
    depth = _depths(track.tolist(), start.tolist(), (start + dur).tolist())
    arg_ix: list[int] = []
    arg_values: list[Any] = []
    for j in order.tolist():
        a = raw[j][6]
        if not a:
            arg_ix.append(-1)
            continue
        a = _js_safe(counted(raw[j][4], a))
        before = len(args.values)
        arg_ix.append(args(orjson.dumps(a, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)))
        if len(args.values) > before:
            arg_values.append(a)
    tracks = [{"pid": str(pid), "tid": str(tid),
               "process": pnames.get(pid, "" if pid is None else f"pid {pid}"),
               "thread": tnames.get((pid, tid), "" if tid is None else f"thread {tid}")}
              for pid, tid in (keys[i] for i in by_key)]
    cols = {"track": track.tolist(), "start": _column(np.diff(start, prepend=0.0)),
            "dur": _column(dur), "name": np.asarray(name_ix, dtype=np.int64)[order].tolist(),
            "cat": np.asarray(cat_ix, dtype=np.int64)[order].tolist(), "depth": depth, "args": arg_ix}
    track_of = {k: int(rank[i]) for k, i in track_ix.items()}
    return {
        "t0": t0, "span": end - t0, "tracks": tracks, "names": names.values, "cats": cats.values,
        "args": arg_values, "slices": cols,
        "counters": [{"name": n, "ts": [_num(t - t0) for t in ts], "value": [_num(v) for v in vs]}
                     for n, (ts, vs) in sorted(counters.items())],
        "marks": [_mark(name, _num(ts - t0), track_of.get((pid, tid), -1), cat, a)
                  for pid, tid, ts, name, cat, a in sorted(marks, key=lambda m: m[2])],
        "unmatched": unmatched,
    }


def _mark(name: str, ts: float | int, track: int, cat: str, args: Any) -> dict[str, Any]:
    """One instant mark; its category and arguments when it has them (a session's step marks,
    schedule.json ``step_marks``, carry step, window and step_us)."""
    out: dict[str, Any] = {"name": name, "ts": ts, "track": track}
    if cat:
        out["cat"] = cat
    if isinstance(args, dict) and args:
        out["args"] = _js_safe(args)
    return out


def _js_safe(v: Any) -> Any:
    """``v`` with every integer a JavaScript number cannot hold exactly (beyond 2**53, e.g. MXNet's
    64-bit ids) as its decimal text, and non-finite floats as text (JSON has no NaN)."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return v if -(1 << 53) <= v <= 1 << 53 else str(v)
    if isinstance(v, float):
        return v if v == v and v not in (float("inf"), float("-inf")) else str(v)
    if isinstance(v, dict):
        return {str(k): _js_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_js_safe(x) for x in v]
    return str(v)


def _depths(track: list[int], start: list[float], end: list[float]) -> list[int]:
    """Nesting depth of each slice (sorted by track, then start): how many slices of its track
    that start before it are still open when it starts."""
    out = [0] * len(track)
    stack: list[float] = []
    current = None
    for j, t in enumerate(track):
        if t != current:
            stack, current = [], t
        s = start[j]
        while stack and stack[-1] <= s:
            stack.pop()
        out[j] = len(stack)
        stack.append(end[j])
    return out


def _column(values: np.ndarray) -> list[float] | list[int]:
    """Microseconds rounded to nanoseconds; ints when all are whole (shorter JSON)."""
    r = np.round(values, 3)
    if r.size and np.all(r == np.rint(r)) and np.all(np.abs(r) < float(1 << 53)):
        return r.astype(np.int64).tolist()
    return r.tolist()


def _order(v: Any) -> tuple[int, Any]:
    """Sort key for pids/tids of any JSON type (ints first, then the rest as text)."""
    return (0, v) if isinstance(v, int) and not isinstance(v, bool) else (1, str(v))


def _num(v: float) -> float | int:
    """Whole numbers as ints (shorter JSON), others rounded to nanoseconds."""
    r = round(v, 3)
    return int(r) if r == int(r) and abs(r) < 1 << 53 else r
