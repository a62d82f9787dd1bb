"""Streaming state of :func:`pyprof.trace.stats`: pairing events and pooling their numbers.

An :class:`Accumulator` takes one file at a time, in file order, as parsed events (``dict``, the
reference loop :meth:`~Accumulator.add_events`) or as fast-path chunks
(:class:`~pyprof.trace.fastpath.FastChunk`, :meth:`~Accumulator.add_chunk`), in any mix; both
update the same :class:`FileState` with the same results (``tests/trace/test_fast_path.py``).
:meth:`~Accumulator.end_file` resolves the file's pids to device names and pools its durations
with those of earlier files; :meth:`~Accumulator.result` builds the
:class:`~pyprof.trace.records.TraceStats`. Nothing here reads files: :mod:`pyprof.trace.stats`
does, and describes how calls are counted.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from .fastpath import FastChunk, pair_stack
from .naming import ASYNC_COPY_CATEGORIES, MEMORY_PREFIX
from .readreport import ReadReport
from .records import CounterStats, MemoryStats, OpStats, TraceStats

__all__ = ["Accumulator", "FileState"]

_INT64 = (-(2 ** 63), 2 ** 63 - 1)


class FileState:
    """Per-file state shared by the dict loop and the fast path (pids are per file).

    Attributes:
        by_pid: durations per ``(category, name, pid)``, file order.
        open_sync, open_async: begin ``ts`` stacks of unmatched ``B``/``(`` and ``b`` events.
        pid_names: process names from the file's metadata events.
        unmatched_end: end events without a begin.
    """

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


class Accumulator:
    """Streaming state of :func:`~pyprof.trace.stats` across files; see the module docstring.

    Args:
        categories: keep only pairs of these categories; ``None``: all.
        excluded: categories whose events are skipped (the reader's bytes prefilter drops most of
            them before parsing; :meth:`add_events` drops any it missed).
    """

    def __init__(self, categories: frozenset[str] | None, excluded: frozenset[str] = frozenset()):
        self.categories = categories
        self.excluded = excluded
        self.durations: dict[tuple[str, str, str], array] = {}
        self.memory: dict[str, tuple[array, array]] = {}
        self.counters: dict[tuple[str, str], list[float]] = {}
        self.phases: Counter[str] = Counter()
        self.unmatched_begin = 0
        self.unmatched_end = 0

    def add_events(self, events: Iterable[dict[str, Any]], st: FileState) -> None:
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
                    if cname.startswith(MEMORY_PREFIX):
                        series = memory.get(cname[len(MEMORY_PREFIX):])
                        if series is None:
                            series = memory[cname[len(MEMORY_PREFIX):]] = (array("q"), array("q"))
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

    def add_chunk(self, ch: FastChunk, st: FileState) -> None:
        """The fast path's counterpart of :meth:`add_events` for one chunk (see :mod:`~pyprof.trace.fastpath`)."""
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
            if cname.startswith(MEMORY_PREFIX):
                devices.setdefault(cname[len(MEMORY_PREFIX):], []).append(j)
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
              st: FileState, out_key: Any) -> None:
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

    def end_file(self, st: FileState) -> None:
        """Close one file: count its unmatched events, pool its durations by device name."""
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
        """The statistics of every file added so far (``reports``: the readers' reports)."""
        ops = [OpStats.from_durations(c, n, d, np.frombuffer(a, dtype=np.int64))
               for (c, n, d), a in self.durations.items() if len(a)]
        ops.sort(key=lambda o: (-o.total_us, o.category, o.name, o.device))
        mem = [MemoryStats.from_samples(dev, ts, vals) for dev, (ts, vals) in sorted(self.memory.items())]
        ctr = [CounterStats(c, n, int(s[0]), s[1], s[2], s[3] / s[0], s[5])
               for (c, n), s in sorted(self.counters.items())]
        return TraceStats(ops, mem, ctr, reports, self.unmatched_begin, self.unmatched_end,
                          dict(self.phases))

