"""The ``Memory: <device>`` counter inside an operator event, and when a trace can tell it.

MXNet 1.9.1 (``src/profiler/storage_profiler.h``) adjusts one atomic counter per device at
every ``Storage::Alloc``/``Free`` (by the requested bytes; on the CPU the storage manager is
unpooled) and emits a sample with the new value, the emitting thread's ``tid`` and a
timestamp taken just *after* the update. Operators allocate their outputs on the worker
thread, inside their event; the engine's ``DeleteVariable`` frees on the worker or, when it is
ready at once, on the thread that freed the NDArray (the calling thread): two threads' samples
interleave.

The rise of a sample is its value minus the value just before its update, which is the value of
the sample updated last before it. The trace orders updates only partly: a sample's update lies
after the last event of its own thread stamped strictly before it (an operator's begin, an API
call's, another counter's sample: nothing runs between the update and the stamp), and after the
begin of the slice of its thread it is stamped inside (the premise of the check: a sample
inside an operator's event is that operator's); that bound is ``lo``. It lies no later than its
own stamp (``ts``). The rise is *certain* when its predecessor in time order is
certainly updated before it and every other sample is certainly before that predecessor or
after it (same thread: program order; other threads: disjoint intervals). Otherwise the check
cannot be made from the trace, and says why (``attribution.json matching.memory_unchecked``).
Pure Python over a window's events; no C function is called.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from .. import rules
from ..errors import PyprofError
from ..trace.slices import closed_slices
from . import flops as _flops
from .calls import CODES, HANDLES, holds


_M: dict[str, Any] = rules.spec("attribution.json")["matching"]
#: attribution.json matching.hidden_outputs less its about: operator -> its hidden outputs.
HIDDEN: dict[str, dict] = {k: v for k, v in _M["hidden_outputs"].items() if k != "about"}
_BY_HANDLE: dict[int, str] = {}
#: Why a match's memory check could not be made: reason key -> its words.
UNCHECKED: dict[str, str] = {k: v for k, v in _M["memory_unchecked"].items() if k != "about"}
_PREFIX = _M["memory_counter"].split("{")[0]
_NEG = float("-inf")
#: Phases whose stamp a thread takes itself, in program order with its counter samples.
_STAMPED = frozenset("BEXbeCin")
_STAMPED_CODES = np.array(sorted(map(ord, _STAMPED)), np.uint8)


def _groups(keys: np.ndarray, values: np.ndarray, width: int = 1) -> dict[Any, list]:
    """key -> its ``width`` values a key (flat, sorted by key then values), the key -1 as None."""
    if not len(keys):
        return {}
    rows = values.reshape(len(keys), width)
    order = np.lexsort(tuple(rows[:, w] for w in range(width - 1, -1, -1)) + (keys,))
    keys, rows = keys[order], rows[order]
    cut = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    starts = [0, *cut.tolist()]
    ends = [*cut.tolist(), len(keys)]
    flat = rows.ravel().tolist()
    return {(None if k == -1 else k): flat[a * width:b * width]
            for k, a, b in zip(keys[starts].tolist(), starts, ends)}


def hidden(op: str, in_meta: Sequence | None, out_meta: Sequence | None, attrs: dict[str, str],
           training: bool = True) -> list[tuple] | None:
    """The outputs a call of operator ``op`` allocates beyond the ``out_meta`` it got back
    (``matching.hidden_outputs``: BatchNorm's mean and var, Dropout's mask, oneDNN max
    Pooling's workspace when ``training``, ...), each as (shape, dtype code); ``[]`` for an
    operator without any; None when a shape cannot be told (no shapes recorded, an expression
    the shapes or attributes do not fit). ``in_meta``/``out_meta``: (shape, dtype code, ...)
    per input, per output returned; ``attrs``: MXNet's strings."""
    spec = HIDDEN.get(op)
    if spec is None:
        return []
    if in_meta is None or out_meta is None or any(m is None or m[0] is None for m in in_meta):
        return None
    ins = [m[0] for m in in_meta]
    outs = [None if m is None else m[0] for m in out_meta]
    got = []
    for i, o in enumerate(spec["outputs"], start=1):
        if i < len(out_meta) or o.get("training") and not training or not holds(o, attrs):
            continue  # returned to the call, or not allocated under these conditions
        try:
            shape = _flops.evaluate(op, o["shape"], ins, attrs, outs, o.get("let", ()))
        except (PyprofError, TypeError, IndexError):
            return None
        if shape is None:
            return None
        d = o["dtype"]
        got.append((tuple(shape), in_meta[d][1] if isinstance(d, int) else CODES[d]))
    return got


def hidden_of(c: Any, training: bool | None = None) -> list[tuple] | None:
    """:func:`hidden` of a recorded call (:class:`pyprof.attribution.calls.Call`), by its
    operator's handle (aliases share it), at its ``training`` state unless given."""
    if not _BY_HANDLE and HANDLES:
        _BY_HANDLE.update({HANDLES[k]: k for k in HIDDEN if k in HANDLES})
    op = _BY_HANDLE.get(c.op)
    if op is None:
        return []
    return hidden(op, c.in_meta, c.out_meta, c.attrs(), c.training if training is None else training)


def _holds(xs: Sequence, x: Any) -> bool:
    """Whether the sorted ``xs`` holds ``x``."""
    k = bisect.bisect_left(xs, x)
    return k < len(xs) and xs[k] == x


#: what the bytes of a counter sample's event hold (its name's beginning)
SAMPLE_NEEDLE = b'"name":' + orjson.dumps(_PREFIX)[:-1]


class CounterSamples:
    """The memory counter samples of a window, per device, with each one's certain rise (None
    when the trace cannot tell it). ``events``: the window's trace events; ``paired``:
    ``closed_slices(events)`` when already made."""

    def __init__(self, events: Sequence[dict[str, Any]] = (), paired: Sequence | None = None, *,
                 parts: tuple[dict, dict, dict] | None = None) -> None:
        bounds, slices, raw = self.collect(events, paired) if parts is None else parts
        for b in bounds.values():
            b.sort()
        for v in slices.values():
            v.sort()
        #: tid -> (begins, ends) of its slices, sorted: who else holds a boundary's stamp
        self._edges: dict[Any, tuple[list, list]] = {
            tid: ([b for b, _ in v], sorted(e for _, e in v)) for tid, v in slices.items()}
        #: device -> (stamps, tids, certain rises or None), in time order
        self.series: dict[str, tuple[list, list, list]] = {}
        for device, s in raw.items():
            s.sort(key=lambda x: (x[0], x[1]))
            self.series[device] = self._rises(s, bounds, slices)

    @staticmethod
    def collect(events: Sequence[dict[str, Any]], paired: Sequence | None = None
                ) -> tuple[dict, dict, dict]:
        """What the samples are made of (``parts``): tid -> the stamps of its events (program
        order), tid -> (begin, end) of its B/E and X slices, device -> its samples
        ``(ts, event index, tid, value)``."""
        bounds: dict[Any, list] = {}
        slices: dict[Any, list] = {}
        raw: dict[str, list] = {}
        for i, ev, closed in (closed_slices(events) if paired is None else paired):
            if closed is not None:
                b, bev, dur = closed
                slices.setdefault(bev.get("tid"), []).append((bev["ts"], bev["ts"] + dur))
            ph, name, ts = ev.get("ph"), ev.get("name"), ev.get("ts")
            if not isinstance(ts, (int, float)) or ph not in _STAMPED:
                continue
            bounds.setdefault(ev.get("tid"), []).append(ts)
            if ph == "C" and isinstance(name, str) and name.startswith(_PREFIX):
                value = (ev.get("args") or {}).get(name)
                if isinstance(value, (int, float)):
                    raw.setdefault(name[len(_PREFIX):], []).append((ts, i, ev.get("tid"), value))
        return bounds, slices, raw

    @staticmethod
    def stamp(i: int, ev: dict[str, Any], bounds: dict[Any, list], raw: dict[str, list]) -> None:
        """Event ``i`` into ``bounds`` (a stamp of its thread) and ``raw`` (a sample)."""
        ph, name, ts = ev.get("ph"), ev.get("name"), ev.get("ts")
        if not isinstance(ts, (int, float)) or ph not in _STAMPED:
            return
        bounds.setdefault(ev.get("tid"), []).append(ts)
        if ph == "C" and isinstance(name, str) and name.startswith(_PREFIX):
            value = (ev.get("args") or {}).get(name)
            if isinstance(value, (int, float)):
                raw.setdefault(name[len(_PREFIX):], []).append((ts, i, ev.get("tid"), value))

    @staticmethod
    def held_parts(kept: Any, flat: tuple, begins: np.ndarray, ends: np.ndarray
                   ) -> tuple[dict, dict, dict]:
        """:meth:`collect` of a window held in memory (:class:`pyprof.trace.rawcut.Kept`, its
        ``flat()`` columns; ``begins``/``ends``: the numbers of its slices' events, each a
        begin and its end), from the columns where they tell it; the events they do not (the
        dicts, an event stamped without a plain integer time, the samples) read one by one."""
        ph, ts, ok, ids, run = flat
        tid = ids[:, 1]
        stamped = np.isin(ph, _STAMPED_CODES) & run
        bounds = _groups(tid[stamped & ok], ts[stamped & ok])
        slices = {k: list(zip(v[0::2], v[1::2])) for k, v in _groups(
            tid[begins], np.stack((ts[begins], ts[ends]), 1).ravel(), 2).items()}
        raw: dict[str, list] = {}
        odd = np.flatnonzero(stamped & ~ok).tolist()  # a time that is no plain integer
        for i, ev in zip(odd, kept.events(odd)):
            CounterSamples.stamp(i, ev, bounds, raw)
        samples = [i for i in kept.find(SAMPLE_NEEDLE) if ok[i]]
        for i, ev in zip(samples, kept.read(samples)):
            ph_, name, t = ev.get("ph"), ev.get("name"), ev.get("ts")
            if ph_ == "C" and isinstance(name, str) and name.startswith(_PREFIX) and ph_ in _STAMPED \
                    and isinstance(t, (int, float)):
                value = (ev.get("args") or {}).get(name)
                if isinstance(value, (int, float)):
                    raw.setdefault(name[len(_PREFIX):], []).append((t, i, ev.get("tid"), value))
        for i, ev in kept.dicts():
            CounterSamples.stamp(i, ev, bounds, raw)
        return bounds, slices, raw

    def _rises(self, s: list, bounds: dict[Any, list], slices: dict[Any, list]) -> tuple[list, list, list]:
        n = len(s)
        lo, last = [], {}  # lo: the stamp after which the sample's update certainly came
        left, right, inf = bisect.bisect_left, bisect.bisect_right, float("inf")
        tid_of = None
        for ts, _, tid, _ in s:
            if tid != tid_of:  # a device's samples come in runs of one thread
                tid_of, b, v = tid, bounds.get(tid, ()), slices.get(tid, ())
            k = left(b, ts)  # events stamped strictly before this sample
            low = b[k - 1] if k else _NEG
            prev = last.get(tid, _NEG)
            if prev > low:
                low = prev
            k = right(v, (ts, inf))  # the latest slice begun by then
            if k:
                begin, end = v[k - 1]
                if end >= ts and (begin < ts or not _holds(self._edges[tid][1], ts)):
                    # inside it (the check's own premise): after its begin; unless another
                    # slice ends in the begin's microsecond, whose sample it may be
                    if begin > low:
                        low = begin
            lo.append(low)
            last[tid] = ts
        stamps = [x[0] for x in s]
        tids = [x[2] for x in s]
        values = [x[3] for x in s]
        # later[k] > 0: a later sample of another thread may have been updated before k (its
        # lo is not after k's stamp): each sample q marks the samples k < q with ts >= lo[q]
        diff = [0] * (n + 1)
        later = [0] * n
        for q in range(n):
            a = left(stamps, lo[q], 0, q)
            if a < q:
                diff[a] += 1
                diff[q] -= 1
                for k in range(a, right(stamps, lo[q], 0, q)):
                    later[k] -= tids[k] == tids[q]  # its own thread's: program order
        run = 0
        for k in range(n):
            run += diff[k]
            later[k] += run
        rises: list = [None] * n
        for k in range(1, n):
            p = k - 1
            # p's update certainly came before k's (program order, or stamped before k's lo)
            ok = later[k] == 0 and (tids[p] == tids[k] or stamps[p] < lo[k])
            q = p - 1
            while ok and q >= 0 and stamps[q] >= lo[p]:  # an earlier sample not surely before p
                ok = tids[q] == tids[p]
                q -= 1
            if ok:
                rises[k] = values[k] - values[p]
        return stamps, tids, rises

    def _edge_shared(self, tid: Any, start: Any, end: Any, first: Any, last: Any) -> bool:
        # stamps are whole microseconds: a sample stamped at the event's begin (end) where
        # another slice of the thread ends (begins) in that microsecond may be that slice's
        begins, ends = self._edges.get(tid, ((), ()))
        own = 1 if start == end else 0  # a zero-length slice ends at its own begin

        def count(xs: list, x: Any) -> int:
            return bisect.bisect_right(xs, x) - bisect.bisect_left(xs, x)
        return (first == start and count(ends, start) > own
                or last == end and count(begins, end) > own)

    def rise(self, device: str, tid: Any, start: Any, end: Any) -> tuple[int | None, str | None]:
        """The counter's rise on ``tid`` inside ``[start, end]`` on ``device``: ``(bytes,
        None)``, or ``(None, reason)`` with a key of :data:`UNCHECKED` when the trace cannot
        tell it."""
        series = self.series.get(device)
        if not series:
            return None, "no_samples"
        stamps, tids, rises = series
        lo, hi = bisect.bisect_left(stamps, start), bisect.bisect_right(stamps, end)
        inside = [k for k in range(lo, hi) if tids[k] == tid]
        if inside and inside[0] == 0:
            return None, "first_sample"  # the value before it is not in the window
        if any(rises[k] is None for k in inside):
            return None, "interleaved"
        if inside and self._edge_shared(tid, start, end, stamps[inside[0]], stamps[inside[-1]]):
            return None, "shared_stamp"
        return sum(rises[k] for k in inside), None
