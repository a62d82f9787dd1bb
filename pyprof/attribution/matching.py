"""Matching recorded calls (:mod:`pyprof.attribution.capture`) to their operator events in a
window, checking each match against the memory counter, and writing the args into the trace.

The rule (``attribution.json matching``): operator events are taken in order of their start;
an event is matched to the unmatched recorded call of its operator (by handle: aliases are one
operator), made before the event started, whose input producers have all ended by then, with
the earliest *ready time* (the call's time, or its producers' last end when later; ties: the
earlier call). A producer whose operator has no event in the window (a hybridized block's
node inside an ``ImperativeBulk``) counts as ended. A device with one FIFO worker (MXNet's CPU
default) runs its operators in the order they became ready, so the match is exact there; with
several workers per device (the GPU default, ``MXNET_CPU_WORKER_NTHREADS`` > 1) an event with
more than one ready candidate is labelled ``ambiguous`` instead of being claimed exact.

The memory check: the rise of the device's ``Memory: <device>`` counter inside the event, on
the event's thread, equals the bytes of the call's outputs (their shapes and dtypes). It needs
the previous sample of the counter, so an allocation that is the window's first sample is not
checked. Pure Python over the window's file; no C function is called.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import orjson

from .. import rules
from ..errors import PyprofError
from ..trace.slices import closed_slices
from ..trace.writer import TraceWriter
from . import flops as _flops
from .capture import HANDLES, Call

__all__ = ["ARGS", "BOOKKEEPING", "MAX_ANNOTATE_BYTES", "MatchReport", "annotate",
           "annotate_window", "match", "workers_per_device"]

_SPEC: dict[str, Any] = rules.spec("attribution.json")
#: The trace args' names (attribution.json ``trace_args``).
ARGS: dict[str, str] = {k: v for k, v in _SPEC["trace_args"].items() if k != "about"}
_M: dict[str, Any] = _SPEC["matching"]
#: Operator events that are the engine's own work, never a recorded call.
BOOKKEEPING = frozenset(_M["bookkeeping"])
_CATEGORIES = frozenset(_M["categories"])
_LABELS: dict[str, str] = _M["match_labels"]
_CALL: str = _SPEC["capture"]["sources"]["call"]
#: A window file larger than this (bytes) is kept as cut, without args: annotating reads the
#: whole window into memory (attribution.json capture.max_annotate_bytes; tests lower it).
MAX_ANNOTATE_BYTES: int = _SPEC["capture"]["max_annotate_bytes"]


@dataclasses.dataclass(frozen=True)
class MatchReport:
    """What matching one window found.

    Attributes:
        calls: recorded calls; events: operator events that are not bookkeeping.
        matched: events given a call (``exact`` + ``ambiguous`` of them).
        unmatched_calls: calls no event took; unmatched_events: non-bookkeeping operator
            events with no call, by name -> count.
        memory_checked / memory_passed: matches whose counter rise could be checked / equalled
            the outputs' bytes.
    """

    calls: int
    events: int
    matched: int
    exact: int
    ambiguous: int
    unmatched_calls: int
    unmatched_events: dict[str, int]
    memory_checked: int
    memory_passed: int

    @property
    def memory_share(self) -> float | None:
        """The share of checked matches that pass the memory check (None when none was)."""
        return self.memory_passed / self.memory_checked if self.memory_checked else None

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "memory_share": self.memory_share}


def workers_per_device(device: str, env: dict[str, str] | None = None) -> int:
    """Worker threads MXNet's engine runs per device (``cpu/0`` -> ``MXNET_CPU_WORKER_NTHREADS``,
    default 1); 1 under an engine that runs operators inside the call (NaiveEngine)."""
    env = os.environ if env is None else env
    if env.get(_M["engine"]["variable"], "") in _M["engine"]["inline"]:
        return 1
    kind = device.split("/")[0].split(" ")[0]
    var, default = _M["workers"].get(kind, (None, 1))
    try:
        return max(1, int(env.get(var, default))) if var else 1
    except ValueError:
        return default


class _Event:
    __slots__ = ("index", "name", "pid", "tid", "start", "end", "device")

    def __init__(self, index: int, name: str, pid: Any, tid: Any, start: Any, end: Any,
                 device: str) -> None:
        self.index, self.name, self.pid, self.tid = index, name, pid, tid
        self.start, self.end, self.device = start, end, device


def _operator_events(events: Sequence[dict[str, Any]]) -> list[_Event]:
    """Operator slices (paired as every trace reader pairs them), in order of their start; the
    index is the B (or X) event's."""
    devices: dict[Any, str] = {}
    out = []
    for _, ev, closed in closed_slices(events):
        if ev.get("ph") == "M" and ev.get("name") == "process_name":
            devices[ev.get("pid")] = str((ev.get("args") or {}).get("name"))
        elif closed is not None and closed[1].get("cat", ev.get("cat")) in _CATEGORIES:
            b, bev, dur = closed
            out.append(_Event(b, str(bev.get("name")), bev.get("pid"), bev.get("tid"), bev["ts"],
                              bev["ts"] + dur, devices.get(bev.get("pid"), "")))
    out.sort(key=lambda e: (e.start, e.index))
    return out


def match(calls: Sequence[Call], events: Sequence[dict[str, Any]], *,
          env: dict[str, str] | None = None) -> tuple[dict[int, tuple[Call, str]], list[_Event]]:
    """Match ``calls`` to the operator events of ``events`` (a window's trace events):
    ``{event index: (call, label)}`` and the operator events, by the module's rule."""
    ops = _operator_events(events)
    pending: dict[int, list[Call]] = {}
    for c in calls:
        pending.setdefault(c.op, []).append(c)
    first = min((c.seq for c in calls), default=0)
    # calls whose operator has no event in the window (a hybridized block's nodes inside an
    # ImperativeBulk): they never end here, so they hold nothing back
    present = {HANDLES.get(ev.name, -1) for ev in ops}
    unseen = {c.seq for c in calls if c.op not in present}
    ended: dict[int, Any] = {}  # call seq -> its event's end
    out: dict[int, tuple[Call, str]] = {}
    workers: dict[str, int] = {}
    for ev in ops:
        if ev.name in BOOKKEEPING:
            continue
        todo = pending.get(HANDLES.get(ev.name, -1))
        if not todo:
            continue
        n = workers.get(ev.device)
        if n is None:
            n = workers[ev.device] = workers_per_device(ev.device, env)
        best, ready_n, earliest = None, 0, None
        for c in todo:
            if c.t_us > ev.start:
                break  # calls are in call order, so in time order
            if n == 1 and best is not None and c.pushed_us >= best[0]:
                break  # no later call can be ready earlier (ready >= returned, in call order)
            earliest = earliest or c
            ready = c.pushed_us
            for p in c.producers:
                if p < first or p < 0 or p in unseen:
                    continue  # made before the window, never recorded, or with no event: ended
                end = ended.get(p)
                if end is None or end > ev.start:
                    ready = None
                    break
                ready = max(ready, end)
            if ready is None:
                continue
            ready_n += 1
            if best is None or ready < best[0]:
                best = (ready, c)
        if best is None and earliest is None:
            continue
        # no candidate ready: a dependency the rule does not see (an earlier match was wrong,
        # or the engine held the call back); the earliest call, labelled, so nothing cascades
        c = best[1] if best is not None else earliest
        todo.remove(c)
        ended[c.seq] = ev.end
        exact = best is not None and (n == 1 or ready_n == 1)
        out[ev.index] = (c, _LABELS["exact"] if exact else _LABELS["ambiguous"])
    return out, ops


def _memory_rises(events: Sequence[dict[str, Any]]) -> dict[str, list[tuple[Any, Any, Any]]]:
    """Per device: (ts, tid, rise) of every ``Memory: <device>`` sample, in time order; the
    first sample's rise is None (the value before it is not in the window)."""
    prefix = _M["memory_counter"].split("{")[0]
    samples: dict[str, list[tuple[Any, int, Any, Any]]] = {}
    for i, ev in enumerate(events):
        name = ev.get("name")
        if ev.get("ph") == "C" and isinstance(name, str) and name.startswith(prefix):
            value = (ev.get("args") or {}).get(name)
            if isinstance(value, (int, float)):
                samples.setdefault(name[len(prefix):], []).append((ev.get("ts"), i, ev.get("tid"), value))
    out = {}
    for device, s in samples.items():
        s.sort(key=lambda x: (x[0], x[1]))
        out[device] = [(s[k][0], s[k][2], s[k][3] - s[k - 1][3] if k else None)
                       for k in range(len(s))]
    return out


def _nbytes(shapes: list | None, dtypes: list | None) -> int | None:
    if shapes is None or any(s is None for s in shapes):
        return None
    try:
        return _flops.bytes_moved("_copy", [], output_shapes_=shapes, output_dtypes=dtypes)
    except PyprofError:
        return None


def _args(c: Call, label: str, opts: dict[str, bool], name: str, threads: dict[int, str]) -> dict:
    a: dict[str, Any] = {}
    ins, outs = c.shapes("in"), c.shapes("out")
    if ins is not None:
        a[ARGS["input_dims"]] = [s if s is not None else [] for s in ins]
        a[ARGS["input_type"]] = c.dtypes("in")
        a[ARGS["output_dims"]] = [s if s is not None else [] for s in outs]
        a[ARGS["output_type"]] = c.dtypes("out")
        a[ARGS["attrs"]] = c.attrs()
    a[ARGS["thread"]] = threads.get(c.thread, f"thread {c.thread}")
    if c.block is not None:
        a[ARGS["block"]] = c.block
    a[ARGS["source"]] = c.source
    if c.stack is not None:
        a[ARGS["call_site"]] = c.call_site()
        a[ARGS["stack"]] = c.frames()
    if opts.get("with_flops") and ins is not None and None not in ins and None not in outs:
        try:
            f = _flops.flops(name, ins, c.attrs())
        except PyprofError:
            f = None
        if f is not None:
            a[ARGS["flops"]] = f
        try:
            a[ARGS["bytes"]] = _flops.bytes_moved(name, ins, c.attrs(), dtypes=c.dtypes("in") or None,
                                                  output_shapes_=outs, output_dtypes=c.dtypes("out"))
        except PyprofError:
            pass
    a[ARGS["match"]] = label
    return a


def annotate(path: str | os.PathLike[str], calls: Sequence[Call], options: dict[str, bool], *,
             threads: dict[int, str] | None = None,
             env: dict[str, str] | None = None) -> MatchReport:
    """Match ``calls`` to the operator events of the window trace at ``path`` and write their
    args there (the file is rewritten, atomically; events keep their order). ``options``: the
    session's ``record_shapes``/``with_stack``/``with_flops``; ``threads``: thread ident -> name.

    Raises TraceError when the file cannot be rewritten."""
    with open(path, "rb") as f:
        doc = orjson.loads(f.read())
    events = doc["traceEvents"]
    found, ops = match(calls, events, env=env)
    rises = _memory_rises(events)
    checked = passed = 0
    threads = threads or {}
    by_index = {o.index: o for o in ops}
    starts = {d: [t for t, _, _ in series] for d, series in rises.items()}
    for index, (c, label) in found.items():
        ev = events[index]
        args = _args(c, label, options, ev.get("name"), threads)
        want = _nbytes(c.shapes("out"), c.dtypes("out"))
        op = by_index[index]
        series = rises.get(op.device, ())
        lo = bisect.bisect_left(starts.get(op.device, ()), op.start)
        hi = bisect.bisect_right(starts.get(op.device, ()), op.end)
        inside = [r for t, tid, r in series[lo:hi] if tid == op.tid]
        # a CachedOp allocates its graph's arrays by its memory plan, not inside each node's
        # event: the check is for imperative calls only
        if want is not None and c.source == _CALL and rises.get(op.device) and None not in inside:
            ok = sum(inside) == want
            checked += 1
            passed += ok
            args[ARGS["memory_check"]] = ok
        ev["args"] = {**(ev.get("args") or {}), **args}
    with TraceWriter(path, gzip=False, display_time_unit=doc.get("displayTimeUnit", "ms"),
                     top_level={k: v for k, v in doc.items() if k != "traceEvents"}) as w:
        for ev in events:
            w.write(ev)
    counted = [o for o in ops if o.name not in BOOKKEEPING]
    unmatched: dict[str, int] = {}
    for o in counted:
        if o.index not in found:
            unmatched[o.name] = unmatched.get(o.name, 0) + 1
    labels = [label for _, label in found.values()]
    return MatchReport(len(calls), len(counted), len(found), labels.count(_LABELS["exact"]),
                       labels.count(_LABELS["ambiguous"]), len(calls) - len(found), unmatched,
                       checked, passed)


def annotate_window(index: int, path: str, calls: Sequence[Call], options: dict[str, bool], *,
                    threads: dict[int, str] | None = None) -> MatchReport | None:
    """:func:`annotate` for a session's window ``index`` just cut at ``path``; the window stays
    as cut, and one line on stderr (``capture.annotate_note``) says why, when it is larger than
    :data:`MAX_ANNOTATE_BYTES` or cannot be read or rewritten: None then."""
    import sys

    if (size := os.path.getsize(path)) > MAX_ANNOTATE_BYTES:
        why = f"it holds {size} bytes, past max_annotate_bytes {MAX_ANNOTATE_BYTES}"
    else:
        try:
            return annotate(path, calls, options, threads=threads)
        except (PyprofError, OSError, ValueError, MemoryError) as e:
            why = f"{type(e).__name__}: {e}"
    print(rules.render(_SPEC["capture"]["annotate_note"], {"index": index, "path": path,
                                                          "why": why}), file=sys.stderr)
    return None
