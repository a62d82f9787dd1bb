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
NumPy over a window's samples (a device's, in time order); no C function is called.
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
#: Phases whose stamp a thread takes itself, in program order with its counter samples.
_STAMPED = frozenset("BEXbeCin")
_STAMPED_CODES = np.array(sorted(map(ord, _STAMPED)), np.uint8)
_EXACT = 2.0 ** 53
_NONE = np.empty(0)


def _columns(columns: list) -> list[np.ndarray]:
    """``columns`` (sequences of numbers) as float64 arrays where each number is exactly one
    below 2**53 in size (stamps in microseconds are), else all as arrays of Python objects,
    compared as Python compares them."""
    try:
        out = [np.asarray(c, np.float64) for c in columns]
    except OverflowError:  # an integer past any float64: compared as Python compares it
        out = [np.full(1, np.inf)]
    if any(len(a) and not np.abs(a).max() < _EXACT for a in out):
        out = [np.array(c.tolist() if isinstance(c, np.ndarray) else list(c), object)
               for c in columns]
    return out


def _by_key(keys: np.ndarray, *columns: np.ndarray) -> dict[Any, tuple[np.ndarray, ...]]:
    """key -> its rows of ``columns``, in their order; the key -1 as None."""
    if not len(keys):
        return {}
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    cut = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    starts, ends = [0, *cut.tolist()], [*cut.tolist(), len(keys)]
    cols = [c[order] for c in columns]
    return {(None if k == -1 else k): tuple(c[a:b] for c in cols)
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


#: what the bytes of a counter sample's event hold (its name's beginning)
SAMPLE_NEEDLE = b'"name":' + orjson.dumps(_PREFIX)[:-1]


class CounterSamples:
    """The memory counter samples of a window, per device, with each one's certain rise (None
    when the trace cannot tell it). ``events``: the window's trace events; ``paired``:
    ``closed_slices(events)`` when already made."""

    def __init__(self, events: Sequence[dict[str, Any]] = (), paired: Sequence | None = None, *,
                 parts: tuple[dict, dict, dict] | None = None) -> None:
        bounds, slices, raw = self.collect(events, paired) if parts is None else parts
        for v in raw.values():
            v.sort(key=lambda x: (x[0], x[1]))
        b_tids, s_tids, devices = list(bounds), list(slices), list(raw)
        cols = _columns([*bounds.values(), *(x for v in slices.values() for x in v),
                         *([x[0] for x in v] for v in raw.values())])
        #: tid -> the stamps of its events, sorted
        self._bounds = {tid: np.sort(c) for tid, c in zip(b_tids, cols)}
        #: tid -> (begins, ends) of its slices in (begin, end) order, and its ends sorted: who
        #: else holds a boundary's stamp
        self._slices: dict[Any, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for k, tid in enumerate(s_tids):
            b, e = cols[len(b_tids) + 2 * k], cols[len(b_tids) + 2 * k + 1]
            order = np.lexsort((e, b))
            self._slices[tid] = (b[order], e[order], np.sort(e))
        #: device -> (stamps, tids, certain rises or None), in time order
        self.series: dict[str, tuple[list, list, list]] = {}
        #: device -> tid -> (stamps, numbers in the series) of its samples, in time order
        self._threads: dict[str, dict[Any, tuple[list, list]]] = {}
        for d, c in zip(devices, cols[len(b_tids) + 2 * len(s_tids):]):
            self.series[d] = self._rises(raw[d], c, self._threads.setdefault(d, {}))

    @staticmethod
    def collect(events: Sequence[dict[str, Any]], paired: Sequence | None = None
                ) -> tuple[dict, dict, dict]:
        """What the samples are made of (``parts``): tid -> the stamps of its events, tid ->
        (begins, ends) of its B/E and X slices, device -> its samples ``(ts, event index, tid,
        value)``; each in any order."""
        bounds: dict[Any, list] = {}
        slices: dict[Any, tuple[list, list]] = {}
        raw: dict[str, list] = {}
        for i, ev, closed in (closed_slices(events) if paired is None else paired):
            if closed is not None:
                b, bev, dur = closed
                got = slices.setdefault(bev.get("tid"), ([], []))
                got[0].append(bev["ts"])
                got[1].append(bev["ts"] + dur)
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
        plain = stamped & ok
        bounds: dict[Any, Any] = {k: v[0] for k, v in _by_key(tid[plain], ts[plain]).items()}
        slices = _by_key(tid[begins], ts[begins], ts[ends])
        more: dict[Any, list] = {}  # stamps read one by one
        raw: dict[str, list] = {}
        odd = np.flatnonzero(stamped & ~ok).tolist()  # a time that is no plain integer
        for i, ev in zip(odd, kept.events(odd)):
            CounterSamples.stamp(i, ev, more, raw)
        samples = [i for i in kept.find(SAMPLE_NEEDLE) if ok[i]]
        for i, ev in zip(samples, kept.read(samples)):
            ph_, name, t = ev.get("ph"), ev.get("name"), ev.get("ts")
            if ph_ == "C" and isinstance(name, str) and name.startswith(_PREFIX) and ph_ in _STAMPED \
                    and isinstance(t, (int, float)):
                value = (ev.get("args") or {}).get(name)
                if isinstance(value, (int, float)):
                    raw.setdefault(name[len(_PREFIX):], []).append((t, i, ev.get("tid"), value))
        for i, ev in kept.dicts():
            CounterSamples.stamp(i, ev, more, raw)
        for k, v in more.items():
            bounds[k] = [*bounds[k].tolist(), *v] if k in bounds else v
        return bounds, slices, raw

    def _rises(self, s: list, ts: np.ndarray, threads: dict) -> tuple[list, list, list]:
        # s: a device's samples (ts, event index, tid, value) in time order; ts: their stamps;
        # threads: filled with each tid's stamps and numbers
        n = len(s)
        stamps, tids, values = [x[0] for x in s], [x[2] for x in s], [x[3] for x in s]
        if not n:
            return stamps, tids, []
        codes: dict[Any, int] = {}
        code = np.array([codes.setdefault(t, len(codes)) for t in tids], np.int64)
        lo = np.full(n, -np.inf, ts.dtype)  # the stamp after which k's update certainly came
        for tid, c in codes.items():
            at = np.flatnonzero(code == c)
            numbers = at.tolist()
            threads[tid] = ([stamps[k] for k in numbers], numbers)
            t = ts[at]
            low = np.full(len(at), -np.inf, ts.dtype)
            b = self._bounds.get(tid)
            if b is not None and len(b):  # its thread's last event stamped strictly before
                k = np.searchsorted(b, t, "left")
                low = np.where(k > 0, b[np.maximum(k - 1, 0)], low)
            low[1:] = np.where(t[:-1] > low[1:], t[:-1], low[1:])  # its thread's last sample
            if tid in self._slices:
                begin, end, ends = self._slices[tid]
                k = np.searchsorted(begin, t, "right")  # the latest slice begun by then
                vb, ve = begin[np.maximum(k - 1, 0)], end[np.maximum(k - 1, 0)]
                e = np.minimum(np.searchsorted(ends, t, "left"), len(ends) - 1)
                # inside it (the check's own premise): after its begin; unless another slice
                # ends in the begin's microsecond, whose sample it may be
                inside = (k > 0) & (ve >= t) & ((vb < t) | (ends[e] != t)) & (vb > low)
                low = np.where(inside, vb, low)
            lo[at] = low
        idx = np.arange(n)
        # later[k] > 0: a later sample of another thread may have been updated before k (its
        # lo is not after k's stamp): each sample q marks the samples k < q with ts >= lo[q],
        # less those of q's thread stamped at lo[q] (program order)
        a = np.minimum(np.searchsorted(ts, lo, "left"), idx)
        r = np.minimum(np.searchsorted(ts, lo, "right"), idx)
        diff = np.zeros(n + 1, np.int64)
        np.add.at(diff, a, 1)
        np.add.at(diff, idx, -1)
        later = np.cumsum(diff[:n])
        w = r - a
        if w.any():
            qs = np.repeat(idx, w)
            ks = np.arange(len(qs)) - np.repeat(np.cumsum(w) - w, w) + np.repeat(a, w)
            np.add.at(later, ks[code[ks] == code[qs]], -1)
        # the first sample of the run of one thread's samples that ends at p
        change = np.flatnonzero(code[1:] != code[:-1]) + 1
        start = np.zeros(n, np.int64)
        start[change] = change
        start = np.maximum.accumulate(start)
        p = idx[:-1]
        # p = k - 1's update certainly came before k's (program order, or stamped before k's
        # lo), and every sample stamped at or after p's lo is of p's thread
        ok = (later[1:] == 0) & ((code[p] == code[1:]) | (ts[p] < lo[1:]).astype(bool)) \
            & (a[p] >= start[p])
        rises: list = [None] * n
        for k in (np.flatnonzero(ok) + 1).tolist():
            rises[k] = values[k] - values[k - 1]
        return stamps, tids, rises

    def _edge_shared(self, tid: Any, start: Any, end: Any, first: Any, last: Any) -> bool:
        # stamps are whole microseconds: a sample stamped at the event's begin (end) where
        # another slice of the thread ends (begins) in that microsecond may be that slice's
        begins, _, ends = self._slices.get(tid, (_NONE, _NONE, _NONE))
        own = 1 if start == end else 0  # a zero-length slice ends at its own begin

        def count(xs: np.ndarray, x: Any) -> int:
            return int(np.searchsorted(xs, x, "right") - np.searchsorted(xs, x, "left"))
        return (first == start and count(ends, start) > own
                or last == end and count(begins, end) > own)

    def rise(self, device: str, tid: Any, start: Any, end: Any) -> tuple[int | None, str | None]:
        """The counter's rise on ``tid`` inside ``[start, end]`` on ``device``: ``(bytes,
        None)``, or ``(None, reason)`` with a key of :data:`UNCHECKED` when the trace cannot
        tell it."""
        series = self.series.get(device)
        if not series:
            return None, "no_samples"
        stamps, _, rises = series
        own, numbers = self._threads[device].get(tid, ((), ()))
        inside = numbers[bisect.bisect_left(own, start):bisect.bisect_right(own, end)]
        if inside and inside[0] == 0:
            return None, "first_sample"  # the value before it is not in the window
        if any(rises[k] is None for k in inside):
            return None, "interleaved"
        if inside and self._edge_shared(tid, start, end, stamps[inside[0]], stamps[inside[-1]]):
            return None, "shared_stamp"
        return sum(rises[k] for k in inside), None
