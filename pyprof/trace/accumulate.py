"""Streaming state of :func:`pyprof.trace.stats`: pairing events and pooling their numbers.

An :class:`Accumulator` takes one file at a time, in file order, as parsed events (``dict``, the
reference loop :meth:`~Accumulator.add_events`) or as fast-path chunks
(:class:`~pyprof.trace.fastpath.FastChunk`, :meth:`~Accumulator.add_chunk`), in any mix; both
update the same :class:`FileState` with the same results (``tests/trace/test_fast_path.py``).
:meth:`~Accumulator.end_file` resolves the file's pids to device names and pools its durations
with those of earlier files; :meth:`~Accumulator.result` builds the
:class:`~pyprof.trace.records.TraceStats`. Nothing here reads files: :mod:`pyprof.trace.statistics`
does, and describes how calls are counted.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

import orjson

from .fastpath import FastChunk, pair_stack
from .filestate import INT64, FileState, in_opened_order
from .naming import ASYNC_COPY_CATEGORIES, MEMORY_PREFIX, category_text
from .phases import COUNTED_ONLY_ROLES, END_PHASES, PAIRS, PHASES, THREAD_ROLES, async_id, hashable
from .readreport import ReadReport
from .records import CounterStats, MemoryStats, OpStats, TraceStats


def _number(v: Any) -> bool:
    t = type(v)
    return t is int or t is float


def _append(by_pid: dict[tuple[str, Any, Any], array], k: tuple[str, Any, Any], dur: Any) -> None:
    arr = by_pid.get(k)
    if arr is None:
        arr = by_pid[k] = array("q")
    if arr.typecode == "q":
        if type(dur) is int and INT64[0] <= dur <= INT64[1]:
            arr.append(dur)
            return
        arr = by_pid[k] = array("d", arr)
    arr.append(float(dur))


def _key(v: Any) -> Any:
    t = type(v)
    return v if t is str or t is int or v is None else hashable(v)


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
        self.counters: dict[tuple[str, str], list[Any]] = {}
        self.phases: Counter[str] = Counter()
        self.unmatched_begin = 0
        self.unmatched_end = 0
        self.negative = 0
        self.no_ts = 0
        self.bad_counter = 0

    def add_events(self, events: Iterable[dict[str, Any]], st: FileState) -> None:
        """The reference loop: one parsed event (dict) at a time (rules: docs/trace-format.md)."""
        by_pid = st.by_pid
        open_sync = st.open_sync
        open_async = st.open_async
        order_sync, order_async = st.order_sync, st.order_async
        push, pop, pop_innermost = st.push, st.pop, st.pop_innermost
        cat_of = st.cat_of
        phases = self.phases
        copies = ASYNC_COPY_CATEGORIES
        cats = self.categories
        excluded = self.excluded
        for ev in events:
            cat = ev.get("cat", "")
            if type(cat) is not str:
                cat = category_text(cat)
            if excluded and cat in excluded:
                continue  # the reader's bytes prefilter missed it (unusual formatting)
            ph = ev.get("ph")
            if type(ph) is not str:
                ph = _key(ph)
            phases[ph] += 1
            role = PHASES.get(ph)
            if role is None or role in COUNTED_ONLY_ROLES:
                continue
            if role == "metadata":
                args = ev.get("args")
                if ev.get("name") == "process_name" and isinstance(args, dict) and "name" in args:
                    pid_name = args["name"]
                    st.pid_names[_key(ev.get("pid"))] = (pid_name if type(pid_name) is str
                                                         else orjson.dumps(pid_name).decode())
                continue
            ts = ev.get("ts")
            if not _number(ts):
                st.no_ts += 1
                continue
            if role == "complete":
                dur = ev.get("dur")
                if not _number(dur):
                    st.no_ts += 1
                elif dur < 0:
                    st.negative += 1
                elif cats is None or cat in cats:
                    _append(by_pid, (cat, _key(ev.get("name")), _key(ev.get("pid"))), dur)
                continue
            if role == "counter":
                self._counter(ev, cat, ts, st)
                continue
            name = _key(ev.get("name"))
            pid = _key(ev.get("pid"))
            if role in THREAD_ROLES:  # slice or context: per thread
                begin_ph = ph if role == "slice_begin" or role == "context_begin" else END_PHASES[ph]
                scope: tuple[Any, ...] = (begin_ph, pid, _key(ev.get("tid")))
                open_, order = open_sync, order_sync
            else:  # async: per (begin phase, pid, cat, id)
                if cat in copies and (ph == "b" or ph == "e"):
                    continue
                scope = (ph if ph in PAIRS else END_PHASES[ph], pid, cat, async_id(ev))
                open_, order = open_async, order_async
            if ph in PAIRS:
                key = (*scope, name)
                push(open_, order, key, ts)
                if open_ is open_sync:
                    cat_of[key] = cat
                continue
            if name is None:
                key, begin = pop_innermost(open_, order, scope)
            else:
                key = (*scope, name)
                begin = pop(open_, order, key)
            if key is None or begin is None:
                st.unmatched_end += 1
                continue
            if "cat" not in ev and open_ is open_sync:
                cat = cat_of.get(key, cat)  # an end may leave its category to the begin
            dur = ts - begin
            if dur < 0:
                st.negative += 1
            elif cats is None or cat in cats:
                _append(by_pid, (cat, key[-1], pid), dur)

    def _counter(self, ev: dict[str, Any], cat: Any, ts: Any, st: FileState) -> None:
        """One ``C`` event: memory samples (bytes) or plain value series."""
        args = ev.get("args")
        if not isinstance(args, dict):
            st.bad_counter += 1
            return
        bad_ts = False
        for cname, value in args.items():
            if not _number(value):
                st.bad_counter += 1
                continue
            if cname.startswith(MEMORY_PREFIX):
                v, t = int(value), int(ts)  # bytes and us: whole numbers, as MXNet writes
                if not INT64[0] <= t <= INT64[1]:
                    if not bad_ts:
                        st.no_ts += 1  # a sample time beyond 64 bits: not a usable ts
                        bad_ts = True
                    continue
                if not INT64[0] <= v <= INT64[1]:
                    st.bad_counter += 1
                    continue
                dev = cname[len(MEMORY_PREFIX):]
                series = self.memory.get(dev)
                if series is None:
                    series = self.memory[dev] = (array("q"), array("q"))
                series[0].append(t)
                series[1].append(v)
                continue
            s = self.counters.get((cat, cname))
            if s is None:
                self.counters[(cat, cname)] = [1, value, value, value, ts, value]
            else:
                s[0] += 1
                s[1] = min(s[1], value)
                s[2] = max(s[2], value)
                s[3] += value
                if ts >= s[4]:
                    s[4], s[5] = ts, value

    def add_chunk(self, ch: FastChunk, st: FileState) -> None:
        """The fast path's counterpart of :meth:`add_events` for one chunk (see :mod:`~pyprof.trace.fastpath`)."""
        for ph, n in ch.phases.items():
            self.phases[ph] += n
        for pid, name in ch.meta:
            st.pid_names[pid] = name
        self._pair(ch.sync_keys, ch.sync_key, ch.sync_begin, ch.sync_ts, ch.sync_cat, ch.cats,
                   st.open_sync, st.order_sync, st, lambda key, cat: (cat, key[3], key[1]))
        self._pair(ch.async_keys, ch.async_key, ch.async_begin, ch.async_ts, ch.async_cat, ch.cats,
                   st.open_async, st.order_async, st, lambda key, cat: (cat, key[4], key[1]))
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
              opened: dict[tuple[Any, ...], list[Any]], st: FileState, out_key: Any) -> None:
        """Match one chunk's begin/end events, after the begins still open from earlier chunks.

        The carried begins go first in the order they were opened (per scope, from ``opened``),
        so that the begins left open afterwards are rebuilt in file order.
        """
        carried = in_opened_order(open_, opened)
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
            keep = dur >= 0
            if not keep.all():
                st.negative += int(keep.size - np.count_nonzero(keep))
                end_pos, dur = end_pos[keep], dur[keep]
        if end_pos.size:
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
                if arr.typecode == "q":
                    arr.frombytes(dur[a:b].tobytes())
                else:  # an X event of this record made it float64
                    arr.frombytes(dur[a:b].astype(np.float64).tobytes())
        open_.clear()
        opened.clear()
        if open_pos.size:
            open_pos = np.sort(open_pos)
            nc = len(carried)
            for pos, p, t in zip(open_pos.tolist(), key[open_pos].tolist(), ts[open_pos].tolist()):
                k = allkeys[p]
                st.push(open_, opened, k, t)
                if pos >= nc and cats and open_ is st.open_sync:  # ends may need it (sync only)
                    st.cat_of[k] = cats[int(catidx[pos])]

    def end_file(self, st: FileState) -> None:
        """Close one file: count its unmatched events, pool its durations by device name."""
        by_pid = st.by_pid
        pid_names = st.pid_names
        self.unmatched_end += st.unmatched_end
        self.negative += st.negative
        self.no_ts += st.no_ts
        self.bad_counter += st.bad_counter
        self.unmatched_begin += sum(len(s) for s in st.open_sync.values())
        self.unmatched_begin += sum(len(s) for s in st.open_async.values())
        for (cat, name, pid), arr in by_pid.items():
            pname = pid_names.get(pid)
            device = "" if pname is None and pid is None else (pname if pname is not None else f"pid {pid}")
            if device == cat:
                device = ""  # a category pid (API calls, tasks), not a device
            k = (cat, "" if name is None else str(name), device)
            pooled = self.durations.get(k)
            if pooled is None:
                self.durations[k] = arr
            elif pooled.typecode == arr.typecode:
                pooled.extend(arr)
            else:  # integer and float durations pool as floats
                self.durations[k] = array("d", [*pooled, *arr])

    def result(self, reports: list[ReadReport]) -> TraceStats:
        """The statistics of every file added so far (``reports``: the readers' reports)."""
        ops = [OpStats.from_durations(
                   c, n, d, np.frombuffer(a, dtype=np.int64 if a.typecode == "q" else np.float64))
               for (c, n, d), a in self.durations.items() if len(a)]
        ops.sort(key=lambda o: (-o.total_us, o.category, o.name, o.device))
        mem = [MemoryStats.from_samples(dev, ts, vals) for dev, (ts, vals) in sorted(self.memory.items())]
        ctr = [CounterStats(c, n, int(s[0]), s[1], s[2], s[3] / s[0], s[5])
               for (c, n), s in sorted(self.counters.items())]
        return TraceStats(ops, mem, ctr, reports, self.unmatched_begin, self.unmatched_end,
                          dict(self.phases), self.negative, self.no_ts, self.bad_counter)
