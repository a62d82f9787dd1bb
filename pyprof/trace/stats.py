"""Exact per-operator statistics from MXNet traces, streamed in bounded memory.

Units: every time field is in **microseconds** (``*_us``); ``ts`` in MXNet traces is integer
microseconds since the epoch, so counts, totals, minima and maxima are exact integers. Memory
fields are in **bytes** (``*_bytes``); MXNet's aggregate table prints them in kB = 1000 bytes
(``*_kb`` properties do the same).

How calls are counted:

* ``B``/``E`` pairs (``ph`` "B" then "E") are matched per ``(pid, tid, name)`` with a stack, so
  nested and interleaved events pair correctly. One pair is one call.
* ``X`` (complete) events count as one call of ``dur`` microseconds (traces written by
  :func:`pyprof.trace.compact`).
* Async ``b``/``e`` pairs are matched per ``(pid, cat, id, name)``; they are the only record of
  C API calls (category ``MXNET_C_API``) and of domain tasks. MXNet also writes every operator a
  second time as an async pair in category ``operator`` (or ``Custom Operator``); those copies,
  the categories in :data:`ASYNC_COPY_CATEGORIES`, are skipped, never counted twice.
* Frames ``(``/``)`` are matched like ``B``/``E``.
* ``C`` counters named ``Memory: <device>`` are memory samples in bytes; other counters are
  summarised as plain value series.

Percentiles: every call's duration is kept in a compact ``array('q')`` (8 bytes a call, per
``(category, name, device)``), so p50/p90/p99 are exact — numpy's default linear interpolation
between order statistics. Memory therefore grows with the number of *calls*, never with the file
size or the number of other events: 10 million calls take 80 MB.

Large plain files (64 MiB and more) are parsed by ``min(2, cpu_count)`` forked worker processes
(``PYPROF_TRACE_WORKERS=N`` sets the number, ``1`` reads sequentially); the parent applies their
results in file order with the sequential code, so the statistics are identical (see ``_parallel``).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import gc
import io
import math
import os
import re
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from . import _parallel
from ._fast import FastChunk, event_pattern, pair_stack, parse_body
from .errors import AggregateFormatError, TraceError
from .reader import ReadReport, TraceReader, is_gzip

__all__ = [
    "API_CATEGORY", "ASYNC_COPY_CATEGORIES", "BULK_NOTE", "OpStats", "MemoryStats", "CounterStats", "TraceStats",
    "stats", "cross_check", "CrossCheck", "Mismatch", "is_bulk_name", "load_aggregate",
]

#: Category of MXNet's C API call events: included by :func:`stats`, excluded by default by
#: :func:`~pyprof.trace.summarize` and :func:`~pyprof.trace.diff` (``include_api=True`` keeps them).
API_CATEGORY = "MXNET_C_API"

#: Async (``b``/``e``) categories that duplicate a ``B``/``E`` pair; never counted.
ASYNC_COPY_CATEGORIES = frozenset({"operator", "Custom Operator"})

BULK_NOTE = ("names like 'A,B' or '[op]' are operators MXNet ran as one bulk segment; for "
             "per-operator numbers set MXNET_EXEC_BULK_EXEC_INFERENCE=0 and "
             "MXNET_EXEC_BULK_EXEC_TRAIN=0 in the environment before MXNet's engine starts "
             "(before `import mxnet`)")

_BULK = re.compile(r"^\[.*\]$|,")
_MEMORY_PREFIX = "Memory: "
_PCTS = (50.0, 90.0, 99.0)
_INT64 = (-(2 ** 63), 2 ** 63 - 1)
_CHUNK_BYTES = 16 << 20  # read size of stats(); memory use is a small multiple of it

#: Use the fast path for chunks in MXNet's layout (``PYPROF_TRACE_FAST=0`` turns it off; results
#: are the same either way, only slower).
FAST_PATH = os.environ.get("PYPROF_TRACE_FAST", "1") not in ("0", "false", "no", "off")



def is_bulk_name(name: str) -> bool:
    """True for names of MXNet bulk segments: ``Activation,Convolution`` or ``[dot]``."""
    return bool(_BULK.search(name))


@dataclasses.dataclass(frozen=True)
class OpStats:
    """Statistics of one operator (or API call, task, frame) on one device.

    Attributes:
        category: trace category, e.g. ``operator``, ``MXNET_C_API`` or a domain name.
        name: operator name as written by MXNet (bulk segments keep their merged name).
        device: process name of the event's pid, e.g. ``cpu/0``; empty for events that live on a
            category pid (API calls, tasks).
        count: calls (matched pairs).
        total_us, min_us, max_us: integer microseconds.
        mean_us, p50_us, p90_us, p99_us: microseconds (float); percentiles are exact.
        durations_us: every call's duration, int64 array of shape ``(count,)`` in file order.
    """

    category: str
    name: str
    device: str
    count: int
    total_us: int
    min_us: int
    max_us: int
    mean_us: float
    p50_us: float
    p90_us: float
    p99_us: float
    durations_us: np.ndarray = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_durations(cls, category: str, name: str, device: str,
                       durations_us: np.ndarray) -> OpStats:
        """Build the record from an int64 array of per-call durations (microseconds, ``n >= 1``)."""
        d = np.asarray(durations_us, dtype=np.int64)
        p50, p90, p99 = (float(x) for x in np.percentile(d, _PCTS))
        total = int(d.sum())
        return cls(category, name, device, int(d.size), total, int(d.min()), int(d.max()),
                   total / d.size, p50, p90, p99, d)

    @property
    def total_ms(self) -> float:
        """Total time in milliseconds."""
        return self.total_us / 1000.0

    @property
    def mean_ms(self) -> float:
        """Mean time per call in milliseconds."""
        return self.mean_us / 1000.0

    @property
    def bulk(self) -> bool:
        """True when the name is a bulk segment (see :data:`BULK_NOTE`)."""
        return is_bulk_name(self.name)

    def as_dict(self) -> dict[str, Any]:
        """The record as a flat dict (no per-call durations), units in the keys."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
             if f.name != "durations_us"}
        d["bulk"] = self.bulk
        return d


@dataclasses.dataclass(frozen=True)
class MemoryStats:
    """Memory counter (``Memory: <device>``) of one device, in bytes.

    Attributes:
        device: e.g. ``cpu/0``.
        samples: number of counter samples.
        min_bytes, max_bytes: smallest and largest value; ``max_bytes`` is the high-water mark.
        mean_bytes: arithmetic mean over samples.
        time_weighted_mean_bytes: mean over time, each value held until the next sample (samples
            sorted by ``ts``); equals ``mean_bytes`` when all samples share one timestamp.
        last_bytes: value of the latest sample (by ``ts``).
        first_ts_us, last_ts_us: time span of the samples, epoch microseconds.
    """

    device: str
    samples: int
    min_bytes: int
    max_bytes: int
    mean_bytes: float
    time_weighted_mean_bytes: float
    last_bytes: int
    first_ts_us: int
    last_ts_us: int

    @property
    def high_water_bytes(self) -> int:
        """Peak value (same as ``max_bytes``)."""
        return self.max_bytes

    @property
    def max_kb(self) -> float:
        """High-water mark in kB (1000 bytes), MXNet's aggregate unit."""
        return self.max_bytes / 1000.0

    def as_dict(self) -> dict[str, Any]:
        """The record as a flat dict, units in the keys."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class CounterStats:
    """A non-memory counter (``C`` events), e.g. ``MXNet C API Calls``; values unitless."""

    category: str
    name: str
    count: int
    min: float
    max: float
    mean: float
    last: float

    def as_dict(self) -> dict[str, Any]:
        """The record as a flat dict."""
        return dataclasses.asdict(self)


_OP_COLUMNS = ("category", "name", "device", "count", "total_us", "min_us", "max_us", "mean_us",
               "p50_us", "p90_us", "p99_us", "bulk")


@dataclasses.dataclass
class TraceStats:
    """Result of :func:`stats`.

    Attributes:
        operators: one :class:`OpStats` per ``(category, name, device)``, by ``total_us`` descending.
        memory: one :class:`MemoryStats` per device.
        counters: other counters.
        reports: one :class:`~pyprof.trace.reader.ReadReport` per file read.
        unmatched_begin: begin events with no end (a trace cut short).
        unmatched_end: end events with no begin.
        phase_counts: events parsed per ``ph`` (async operator copies and excluded categories
            are skipped before parsing and not counted).
    """

    operators: list[OpStats]
    memory: list[MemoryStats]
    counters: list[CounterStats]
    reports: list[ReadReport]
    unmatched_begin: int = 0
    unmatched_end: int = 0
    phase_counts: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def bulk_names(self) -> list[str]:
        """Operator names that are bulk segments (``A,B`` or ``[op]``)."""
        return sorted({o.name for o in self.operators if o.bulk})

    @property
    def notes(self) -> list[str]:
        """Warnings worth showing the user: damage repaired, unmatched events, bulk names."""
        out = []
        for r in self.reports:
            out.extend(f"{os.path.basename(r.path)}: {p}" for p in r.problems())
        if self.unmatched_begin:
            out.append(f"{self.unmatched_begin} begin event(s) without an end were ignored "
                       "(trace cut short?)")
        if self.unmatched_end:
            out.append(f"{self.unmatched_end} end event(s) without a begin were ignored")
        if self.bulk_names:
            out.append(f"{len(self.bulk_names)} bulk-merged name(s) ({', '.join(self.bulk_names[:3])}"
                       f"{', ...' if len(self.bulk_names) > 3 else ''}): {BULK_NOTE}")
        return out

    def find(self, name: str, *, category: str | None = None,
             device: str | None = None) -> list[OpStats]:
        """All records with this name (optionally restricted to a category and device)."""
        return [o for o in self.operators if o.name == name
                and (category is None or o.category == category)
                and (device is None or o.device == device)]

    def records(self) -> list[dict[str, Any]]:
        """Operator records as flat dicts (keys as in :class:`OpStats`, units in the keys)."""
        return [o.as_dict() for o in self.operators]

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain JSON-able data: ``operators``, ``memory``, ``counters``, ``notes``."""
        return {
            "units": {"time": "us", "memory": "bytes"},
            "operators": self.records(),
            "memory": [m.as_dict() for m in self.memory],
            "counters": [c.as_dict() for c in self.counters],
            "notes": self.notes,
        }

    def to_json(self, path: str | os.PathLike[str] | None = None) -> str:
        """Serialise :meth:`to_dict` (indented); also write it to ``path`` when given."""
        text = orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2).decode()
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        return text

    def to_csv(self, path: str | os.PathLike[str] | None = None) -> str:
        """Operator records as CSV (header row, ``*_us`` columns); also written to ``path``."""
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=_OP_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(self.records())
        if path is not None:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(buf.getvalue())
        return buf.getvalue()

    def to_markdown(self, path: str | os.PathLike[str] | None = None) -> str:
        """Operator records as a GitHub Markdown table; also written to ``path``."""
        from tabulate import tabulate
        text = tabulate([[r[c] for c in _OP_COLUMNS] for r in self.records()],
                        headers=list(_OP_COLUMNS), tablefmt="github")
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        return text

    def to_dataframe(self):
        """Operator records as a ``pandas.DataFrame``.

        Raises:
            TraceError: pandas is not installed.
        """
        try:
            import pandas as pd
        except ImportError as exc:
            raise TraceError("to_dataframe() needs pandas; install it: pip install pandas") from exc
        return pd.DataFrame(self.records(), columns=list(_OP_COLUMNS))


class _FileState:
    """Per-file state shared by the dict loop and the fast path."""

    __slots__ = ("by_pid", "open_sync", "open_async", "pid_names", "unmatched_end")

    def __init__(self) -> None:
        self.by_pid: dict[tuple[str, Any, Any], array] = {}
        self.open_sync: dict[tuple[Any, ...], list[int]] = {}
        self.open_async: dict[tuple[Any, ...], list[int]] = {}
        self.pid_names: dict[Any, str] = {}
        self.unmatched_end = 0

    def carry_ok(self) -> bool:
        """True when every open begin has an int64 ``ts`` (what the fast path's arrays hold)."""
        lo, hi = _INT64
        return all(type(t) is int and lo <= t <= hi
                   for d in (self.open_sync, self.open_async) for stack in d.values() for t in stack)


@contextlib.contextmanager
def _no_gc():
    """Pause the cyclic GC: parsing creates millions of short-lived tuples/dicts and no cycles."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Accumulator:
    """Streaming state of :func:`stats` across files; see the module docstring."""

    def __init__(self, categories: frozenset[str] | None, excluded: frozenset[str] = frozenset(),
                 workers: int | None = None):
        self.categories = categories
        self.excluded = excluded
        self.workers = workers  # None: by file size and PYPROF_TRACE_WORKERS
        self.durations: dict[tuple[str, str, str], array] = {}
        self.memory: dict[str, tuple[array, array]] = {}
        self.counters: dict[tuple[str, str], list[float]] = {}
        self.phases: Counter[str] = Counter()
        self.unmatched_begin = 0
        self.unmatched_end = 0

    def add_file(self, events: Iterable[dict[str, Any]] | TraceReader) -> None:
        """Consume one file's events (pids are per file, so names are resolved per file).

        A :class:`TraceReader` is read chunk by chunk: chunks in MXNet's own layout go through the
        fast path (:mod:`pyprof.trace._fast`, no dict per event), any other chunk is parsed by the
        reader with orjson and goes through the loop below. Both update the same state, with the
        same results (``tests/trace/test_fast_path.py``).
        """
        st = _FileState()
        if isinstance(events, TraceReader) and events.phases is None:
            reader = events
            fast = FAST_PATH
            copies = ASYNC_COPY_CATEGORIES if reader._copies else frozenset()
            pattern = event_pattern(self.excluded, copies) if fast else None
            workers = self._workers_for(reader) if fast else 1
            if workers > 1:
                self._add_file_parallel(reader, st, workers, pattern, copies)
            else:
                for body in reader._bodies():
                    chunk = (parse_body(body, pattern, self.excluded, copies)
                             if fast and st.carry_ok() else None)
                    self._add_body(reader, st, body, chunk)
        else:
            self._add_events(events, st)
        self._end_file(st)

    def _add_body(self, reader: TraceReader, st: _FileState, body: bytes | None,
                  chunk: FastChunk | None, span: tuple[int, int] | None = None,
                  fd: int | None = None) -> None:
        """One reader body: its fast-path result, or (``chunk`` None) the orjson loop. The body
        text may instead be given as a ``span`` of the file open as ``fd``."""
        if chunk is None:
            if body is None:
                body = _parallel.pread(fd, span[1], span[0])
            evs = reader._parse_body(body)
            reader.report.events += len(evs)
            self._add_events(evs, st)
        else:
            # A fast chunk holds at least one trace event (perhaps only ones skipped on purpose).
            reader._saw_event = True
            reader.report.events += chunk.events
            self._add_chunk(chunk, st)

    def _workers_for(self, reader: TraceReader) -> int:
        """Worker processes for this file: 1 (sequential) unless it is a large plain file."""
        if reader.chunk_bytes <= 0 or not _parallel.available():
            return 1
        try:
            if is_gzip(reader.path):
                return 1
            size = os.path.getsize(reader.path)
        except (OSError, TraceError):
            return 1  # the sequential reader reports the problem
        if self.workers is not None:
            return max(1, self.workers)
        return _parallel.default_workers(size)

    def _add_file_parallel(self, reader: TraceReader, st: _FileState, workers: int,
                           pattern: re.Pattern[bytes], copies: frozenset[str]) -> None:
        """The fast path with bodies parsed by worker processes (see ``_parallel``), results
        applied here in file order exactly as in the sequential loop."""
        fd = os.open(reader.path, os.O_RDONLY)
        try:
            with _parallel.ChunkPool(reader.path, workers, pattern, self.excluded, copies) as pool:
                for span, chunk in pool.map(reader._body_spans(), fd):
                    if chunk is not None and not st.carry_ok():
                        chunk = None
                    self._add_body(reader, st, None, chunk, span, fd)
        finally:
            os.close(fd)
        reader._check_events()

    def _add_events(self, events: Iterable[dict[str, Any]], st: _FileState) -> None:
        """The reference loop: one parsed event (dict) at a time."""
        by_pid = st.by_pid
        open_sync = st.open_sync
        open_async = st.open_async
        pid_names = st.pid_names
        phases = self.phases
        counters = self.counters
        memory = self.memory
        copies = ASYNC_COPY_CATEGORIES
        cats = self.categories
        unmatched_end = 0

        excluded = self.excluded
        for ev in events:
            if excluded and ev.get("cat") in excluded:
                continue  # the reader's bytes prefilter missed it (unusual formatting)
            ph = ev.get("ph")
            phases[ph] += 1
            if ph == "B" or ph == "(":
                key = (ph, ev.get("pid"), ev.get("tid"), ev.get("name"))
                stack = open_sync.get(key)
                if stack is None:
                    open_sync[key] = [ev["ts"]]
                else:
                    stack.append(ev["ts"])
            elif ph == "E" or ph == ")":
                key = ("B" if ph == "E" else "(", ev.get("pid"), ev.get("tid"), ev.get("name"))
                stack = open_sync.get(key)
                if not stack:
                    unmatched_end += 1
                    continue
                begin = stack.pop()
                cat = ev.get("cat", "")
                if cats is not None and cat not in cats:
                    continue
                k = (cat, key[3], key[1])
                arr = by_pid.get(k)
                if arr is None:
                    arr = by_pid[k] = array("q")
                arr.append(ev["ts"] - begin)
            elif ph == "b" or ph == "e":
                cat = ev.get("cat", "")
                if cat in copies:
                    continue
                key = (ev.get("pid"), cat, ev.get("id", ev.get("id2")), ev.get("name"))
                if ph == "b":
                    stack = open_async.get(key)
                    if stack is None:
                        open_async[key] = [ev["ts"]]
                    else:
                        stack.append(ev["ts"])
                    continue
                stack = open_async.get(key)
                if not stack:
                    unmatched_end += 1
                    continue
                begin = stack.pop()
                if cats is not None and cat not in cats:
                    continue
                k = (cat, key[3], key[0])
                arr = by_pid.get(k)
                if arr is None:
                    arr = by_pid[k] = array("q")
                arr.append(ev["ts"] - begin)
            elif ph == "C":
                args = ev.get("args") or {}
                ts = ev.get("ts", 0)
                for cname, value in args.items():
                    if cname.startswith(_MEMORY_PREFIX):
                        series = memory.get(cname[len(_MEMORY_PREFIX):])
                        if series is None:
                            series = memory[cname[len(_MEMORY_PREFIX):]] = (array("q"), array("q"))
                        series[0].append(ts)
                        series[1].append(int(value))
                    else:
                        s = counters.get((ev.get("cat", ""), cname))
                        if s is None:
                            counters[(ev.get("cat", ""), cname)] = [1, value, value, value, ts, value]
                        else:
                            s[0] += 1
                            s[1] = min(s[1], value)
                            s[2] = max(s[2], value)
                            s[3] += value
                            if ts >= s[4]:
                                s[4], s[5] = ts, value
            elif ph == "X":
                cat = ev.get("cat", "")
                if cats is not None and cat not in cats:
                    continue
                k = (cat, ev.get("name"), ev.get("pid"))
                arr = by_pid.get(k)
                if arr is None:
                    arr = by_pid[k] = array("q")
                arr.append(int(ev.get("dur", 0)))
            elif ph == "M":
                if ev.get("name") == "process_name":
                    pid_names[ev.get("pid")] = str((ev.get("args") or {}).get("name", ""))

        st.unmatched_end += unmatched_end

    def _add_chunk(self, ch: FastChunk, st: _FileState) -> None:
        """The fast path's counterpart of :meth:`_add_events` for one chunk (see ``_fast``)."""
        for ph, n in ch.phases.items():
            self.phases[ph] += n
        for pid, name in ch.meta:
            st.pid_names[pid] = name
        self._pair(ch.sync_keys, ch.sync_key, ch.sync_begin, ch.sync_ts, ch.sync_cat, ch.cats,
                   st.open_sync, st, lambda key, cat: (cat, key[3], key[1]))
        self._pair(ch.async_keys, ch.async_key, ch.async_begin, ch.async_ts, ch.async_cat, ch.cats,
                   st.open_async, st, lambda key, cat: (cat, key[3], key[0]))
        if not ch.ctr_keys:
            return
        devices: dict[str, list[int]] = {}
        for j, (cat, cname) in enumerate(ch.ctr_keys):
            if cname.startswith(_MEMORY_PREFIX):
                devices.setdefault(cname[len(_MEMORY_PREFIX):], []).append(j)
                continue
            sel = ch.ctr_key == j
            v, t = ch.ctr_val[sel], ch.ctr_ts[sel]
            lo, hi = int(v.min()), int(v.max())
            total = (int(v.sum()) if v.size * max(abs(lo), abs(hi)) < 2 ** 62
                     else sum(v.tolist()))
            tmax = int(t.max())
            last = int(v[np.flatnonzero(t == tmax)[-1]])
            c = self.counters.get((cat, cname))
            if c is None:
                self.counters[(cat, cname)] = [int(v.size), lo, hi, total, tmax, last]
            else:
                c[0] += int(v.size)
                c[1] = min(c[1], lo)
                c[2] = max(c[2], hi)
                c[3] += total
                if tmax >= c[4]:
                    c[4], c[5] = tmax, last
        for dev, js in devices.items():
            sel = np.isin(ch.ctr_key, js)  # file order across categories
            series = self.memory.get(dev)
            if series is None:
                series = self.memory[dev] = (array("q"), array("q"))
            series[0].frombytes(ch.ctr_ts[sel].tobytes())
            series[1].frombytes(ch.ctr_val[sel].tobytes())

    def _pair(self, keys: list[tuple[Any, ...]], key: np.ndarray, begin: np.ndarray, ts: np.ndarray,
              catidx: np.ndarray, cats: list[str], open_: dict[tuple[Any, ...], list[int]],
              st: _FileState, out_key: Any) -> None:
        """Match one chunk's begin/end events, after the begins still open from earlier chunks."""
        carried = [(k, t) for k, stack in open_.items() for t in stack]
        if not carried and not key.size:
            return
        allkeys = list(keys)
        if carried:
            index = {k: i for i, k in enumerate(allkeys)}
            ck = []
            for k, _t in carried:
                i = index.get(k)
                if i is None:
                    i = index[k] = len(allkeys)
                    allkeys.append(k)
                ck.append(i)
            nc = len(carried)
            key = np.concatenate([np.array(ck, np.int64), key])
            begin = np.concatenate([np.ones(nc, bool), begin])
            ts = np.concatenate([np.array([t for _k, t in carried], np.int64), ts])
            catidx = np.concatenate([np.zeros(nc, np.int64), catidx])
        end_pos, begin_pos, unmatched, open_pos = pair_stack(key, begin)
        st.unmatched_end += unmatched
        if end_pos.size:
            dur = ts[end_pos] - ts[begin_pos]
            # Group by output key (several stack keys, e.g. tids or ids, feed one), keeping file order.
            ncat = max(len(cats), 1)
            pair = key[end_pos] * ncat + catidx[end_pos]
            upair, inv = np.unique(pair, return_inverse=True)
            out_ids: dict[tuple[Any, ...], int] = {}
            out_keys: list[tuple[Any, ...] | None] = []
            remap = np.empty(upair.size, np.int64)
            for j, pc in enumerate(upair.tolist()):
                k, c = divmod(pc, ncat)
                cat = cats[c]
                if self.categories is not None and cat not in self.categories:
                    ok = None
                else:
                    ok = out_key(allkeys[k], cat)
                if ok not in out_ids:
                    out_ids[ok] = len(out_keys)
                    out_keys.append(ok)
                remap[j] = out_ids[ok]
            combo = remap[inv.reshape(-1)]
            order = np.argsort(combo, kind="stable")
            combo, dur = combo[order], dur[order]
            bounds = np.flatnonzero(np.diff(combo)) + 1
            starts = [0, *bounds.tolist()]
            stops = [*bounds.tolist(), int(combo.size)]
            for a, b in zip(starts, stops):
                ok = out_keys[int(combo[a])]
                if ok is None:
                    continue
                arr = st.by_pid.get(ok)
                if arr is None:
                    arr = st.by_pid[ok] = array("q")
                arr.frombytes(dur[a:b].tobytes())
        open_.clear()
        if open_pos.size:
            for p, t in zip(key[open_pos].tolist(), ts[open_pos].tolist()):
                stack = open_.get(allkeys[p])
                if stack is None:
                    open_[allkeys[p]] = [t]
                else:
                    stack.append(t)

    def _end_file(self, st: _FileState) -> None:
        by_pid = st.by_pid
        pid_names = st.pid_names
        self.unmatched_end += st.unmatched_end
        self.unmatched_begin += sum(len(s) for s in st.open_sync.values())
        self.unmatched_begin += sum(len(s) for s in st.open_async.values())
        for (cat, name, pid), arr in by_pid.items():
            pname = pid_names.get(pid)
            device = "" if pname is None and pid is None else (pname if pname is not None else f"pid {pid}")
            if device == cat:
                device = ""  # a category pid (API calls, tasks), not a device
            k = (cat, str(name), device)
            if k in self.durations:
                self.durations[k].extend(arr)
            else:
                self.durations[k] = arr

    def result(self, reports: list[ReadReport]) -> TraceStats:
        ops = [OpStats.from_durations(c, n, d, np.frombuffer(a, dtype=np.int64))
               for (c, n, d), a in self.durations.items() if len(a)]
        ops.sort(key=lambda o: (-o.total_us, o.category, o.name, o.device))
        mem = [_memory_stats(dev, ts, vals) for dev, (ts, vals) in sorted(self.memory.items())]
        ctr = [CounterStats(c, n, int(s[0]), s[1], s[2], s[3] / s[0], s[5])
               for (c, n), s in sorted(self.counters.items())]
        return TraceStats(ops, mem, ctr, reports, self.unmatched_begin, self.unmatched_end,
                          dict(self.phases))


def _memory_stats(device: str, ts: array, values: array) -> MemoryStats:
    t = np.frombuffer(ts, dtype=np.int64)
    v = np.frombuffer(values, dtype=np.int64)
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    span = int(t[-1] - t[0])
    if span > 0:
        twm = float(np.dot(v[:-1].astype(np.float64), np.diff(t).astype(np.float64)) / span)
    else:
        twm = float(v.mean())
    return MemoryStats(device, int(v.size), int(v.min()), int(v.max()), float(v.mean()), twm,
                       int(v[-1]), int(t[0]), int(t[-1]))


def _as_paths(trace_or_paths: Any) -> list[str]:
    if isinstance(trace_or_paths, (str, os.PathLike)):
        return [os.fspath(trace_or_paths)]
    paths = [os.fspath(p) for p in trace_or_paths]
    if not paths:
        raise TraceError("no trace files given; pass at least one path")
    return paths


def stats(trace_or_paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
          categories: Iterable[str] | None = None, exclude_categories: Iterable[str] = (),
          progress: bool | None = None, _workers: int | None = None) -> TraceStats:
    """Exact per-operator and memory statistics of one or more trace files.

    Several files are combined: records with the same ``(category, name, device)`` are pooled
    (device names, not pids, identify a device across files).

    Every category is included by default, C API calls (:data:`API_CATEGORY`, ``MXNET_C_API``)
    too; :func:`~pyprof.trace.summarize` and :func:`~pyprof.trace.diff` leave those out unless
    ``include_api=True`` (pass ``exclude_categories={"MXNET_C_API"}`` here for the same records).

    Args:
        trace_or_paths: a path or a sequence of paths (plain or gzip; damaged files are read as far
            as possible and the damage is listed in ``TraceStats.notes``).
        categories: keep only these categories (e.g. ``{"operator"}``); default all.
        exclude_categories: categories skipped before parsing (faster), e.g. ``{"MXNET_C_API"}``
            (C API calls and their counters are a large share of a trace).
        progress: tqdm bar per file (see :class:`~pyprof.trace.reader.TraceReader`).
        _workers: private, for tests: worker processes for every plain file, whatever its size
            (default: 1 below 64 MiB, else ``PYPROF_TRACE_WORKERS`` or ``min(2, cpu_count)``).

    Returns:
        :class:`TraceStats`; times in integer/float microseconds, memory in bytes.

    Raises:
        TraceNotFoundError: a file cannot be opened.
        TraceFormatError: a file holds no trace events (empty, or JSON that is not a trace).
        TraceError: no paths given.
    """
    excluded = frozenset(exclude_categories)
    acc = _Accumulator(frozenset(categories) if categories is not None else None, excluded,
                       _workers)
    reports = []
    for path in _as_paths(trace_or_paths):
        reader = TraceReader(path, progress=progress, drop_async_copies=True,
                             exclude_categories=exclude_categories, chunk_bytes=_CHUNK_BYTES)
        with _no_gc():
            acc.add_file(reader)
        reports.append(reader.report)
    return acc.result(reports)


# --- cross-check against MXNet's own aggregate statistics ------------------------------------

@dataclasses.dataclass(frozen=True)
class Mismatch:
    """One disagreement between :func:`stats` and MXNet's aggregate table.

    ``ours`` and ``theirs`` are in MXNet's units (ms for times, kB for memory, calls for counts);
    ``None`` when the entry is missing on that side.
    """

    category: str
    name: str
    field: str
    ours: float | None
    theirs: float | None
    tolerance: float


@dataclasses.dataclass(frozen=True)
class CrossCheck:
    """Result of :func:`cross_check`: ``ok`` when nothing disagrees; ``checked`` entries compared."""

    checked: int
    mismatches: list[Mismatch]

    @property
    def ok(self) -> bool:
        return not self.mismatches


def load_aggregate(aggregate: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    """Read MXNet's aggregate statistics JSON (``profiler.dumps(format='json')``).

    Args:
        aggregate: the JSON text, a path to a file holding it, or the already parsed dict.
            Unescaped quotes in names (MXNet does not escape them) are repaired.

    Raises:
        AggregateFormatError: the text is not MXNet's aggregate JSON.
    """
    if isinstance(aggregate, Mapping):
        return dict(aggregate)
    text = os.fspath(aggregate)
    if not text.lstrip().startswith("{"):
        try:
            with open(text, "rb") as f:
                raw = f.read()
        except OSError as exc:
            raise AggregateFormatError(f"cannot read aggregate stats {text!r}: {exc.strerror}; pass "
                                       "the text of profiler.dumps(format='json') or its file") from exc
    else:
        raw = text.encode()
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        fixed = re.sub(rb'^(\s*")(.*)("\s*:\s*\{?\s*)$', lambda m: m.group(1) + m.group(2)
                       .replace(b"\\", b"\\\\").replace(b'"', b'\\"') + m.group(3), raw, flags=re.M)
        try:
            data = orjson.loads(fixed)
        except orjson.JSONDecodeError as exc:
            raise AggregateFormatError("aggregate stats are not JSON; produce them with "
                                       "profiler.dumps(format='json')") from exc
    if not isinstance(data, dict) or "Time" not in data:
        raise AggregateFormatError("aggregate stats lack a 'Time' section; produce them with "
                                   "profiler.dumps(format='json') and aggregate_stats=True")
    return data


def _tolerance(theirs: float) -> float:
    """Half a unit in the 4th significant digit MXNet prints (plus float slack)."""
    if theirs == 0:
        return 5e-4
    return 0.5 * 10 ** (math.floor(math.log10(abs(theirs))) - 3) * (1 + 1e-9) + 1e-12


def cross_check(result: TraceStats, aggregate: str | os.PathLike[str] | Mapping[str, Any]) -> CrossCheck:
    """Compare :func:`stats` with MXNet's aggregate statistics of the same run.

    Counts must match exactly; ``Total``/``Min``/``Max`` (ms) and memory ``Min``/``Max`` (kB) must
    agree within MXNet's 4-significant-digit rounding. ``Avg`` is not compared (for counters
    MXNet prints ``(max-min)/2``). Entries are pooled over devices, as MXNet's table is.
    Counters in the time table (``MXNet C API Calls``, user counters) are checked by count.

    Args:
        result: statistics of the trace file(s) of that run.
        aggregate: see :func:`load_aggregate`.

    Returns:
        :class:`CrossCheck`.
    """
    agg = load_aggregate(aggregate)
    pooled: dict[tuple[str, str], list[OpStats]] = {}
    for o in result.operators:
        pooled.setdefault((o.category, o.name), []).append(o)
    counters = {(c.category, c.name): c for c in result.counters}
    mism: list[Mismatch] = []
    checked = 0
    seen = set()
    for cat, entries in (agg.get("Time") or {}).items():
        for name, row in entries.items():
            checked += 1
            seen.add((cat, name))
            ops = pooled.get((cat, name))
            if ops is None and (cat, name) in counters:
                c = counters[(cat, name)]
                if c.count != row.get("Count"):
                    mism.append(Mismatch(cat, name, "Count", c.count, row.get("Count"), 0))
                continue
            if ops is None:
                mism.append(Mismatch(cat, name, "Count", None, row.get("Count"), 0))
                continue
            d = np.concatenate([o.durations_us for o in ops])
            ours = {"Count": int(d.size), "Total": d.sum() / 1000.0, "Min": d.min() / 1000.0,
                    "Max": d.max() / 1000.0}
            for fld, val in ours.items():
                theirs = row.get(fld)
                tol = 0 if fld == "Count" else _tolerance(float(theirs or 0))
                if theirs is None or abs(val - theirs) > tol:
                    mism.append(Mismatch(cat, name, fld, float(val), theirs, tol))
    for (cat, name) in pooled:
        if (cat, name) not in seen:
            mism.append(Mismatch(cat, name, "Count", float(sum(o.count for o in pooled[(cat, name)])),
                                 None, 0))
    mem = {m.device: m for m in result.memory}
    for _section, entries in (agg.get("Memory") or {}).items():
        for name, row in entries.items():
            checked += 1
            dev = name[len(_MEMORY_PREFIX):] if name.startswith(_MEMORY_PREFIX) else name
            m = mem.get(dev)
            if m is None:
                mism.append(Mismatch("Memory", name, "Count", None, row.get("Count"), 0))
                continue
            for fld, val in (("Count", m.samples), ("Min", m.min_bytes / 1000.0),
                             ("Max", m.max_bytes / 1000.0)):
                theirs = row.get(fld)
                tol = 0 if fld == "Count" else _tolerance(float(theirs or 0))
                if theirs is None or abs(val - theirs) > tol:
                    mism.append(Mismatch("Memory", name, fld, float(val), theirs, tol))
    return CrossCheck(checked, mism)


