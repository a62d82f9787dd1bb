"""The slices of a trace made valid for viewers: the shared planning step of every writer.

Every trace pyprof writes (:func:`~pyprof.trace.compact`, :func:`~pyprof.trace.merge`,
:func:`~pyprof.trace.repair`, session windows) reads its input twice:

1. :func:`plan_slices` pairs ``B``/``E`` events (docs/trace-format.md, "Pairing": a named ``E``
   closes the latest open ``B`` of the same name on its ``(pid, tid)``, a nameless one the
   innermost open ``B``), takes ``X`` events as they are, and finds what a viewer cannot show:
   slices without a numeric ``ts`` (or ``dur``), negative durations, unmatched begins and ends,
   and partial overlaps. Per thread, slices are sorted by (begin ascending, end descending) and
   placed greedily: a slice that partially overlaps the open slices of a track goes to the next
   track (the thread's overlap track 1, 2, ...) where the same test applies. Touching slices
   and equal intervals nest.
2. :class:`Rewriter` writes the events again: every kept slice as one ``X`` event (begin ``ts``,
   ``dur`` = end - begin in microseconds, the ``args`` of both ends merged), the unusable ones
   left out, moved slices on a new thread named ``"<thread name or tid> (overlap N)"``, ids
   renumbered by an :class:`~pyprof.trace.ids.IdMap`; every other event (metadata included)
   is written with its ids renumbered.

Memory: per thread, three numbers per slice (begin, end, ordinal) in arrays, plus the open
begins; the moved and dropped slices are kept by key.

:class:`Nesting` tells in one pass, holding little, that the plan would change nothing (every
slice nests, every pair closes): a writer may then write the events as they come
(:mod:`pyprof.trace.rawcut`).
"""

from __future__ import annotations

import dataclasses
import math
from array import array
from bisect import bisect_left
from itertools import repeat
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from .ids import IdMap, id_key


#: The phases that make thread slices.
SLICE_PHASES = frozenset({"B", "E", "X"})

_NONE = object()
#: Outer slices a thread keeps for :class:`Nesting`'s check.
KEPT_SLICES = 1024
_KEYS = frozenset({int, str})  # ids that are their own track key (track_of)
_NAMES = frozenset({str, type(None)})  # names that are their own pairing key (_name)


def is_number(v: Any) -> bool:
    """True for a finite int or float (not a bool): a usable ``ts`` or ``dur``."""
    t = type(v)
    return t is int or (t is float and math.isfinite(v))


class Pairing:
    """Open ``B`` events per thread, paired with ``E`` events by the rules of docs/trace-format.md.

    A track is any hashable key (a ``(pid, tid)``); names are hashable keys, ``None`` for a
    nameless event. Each operation is amortised O(1).
    """

    def __init__(self) -> None:
        self._threads: dict[Any, list[list[Any]]] = {}
        self._named: dict[tuple[Any, Any], list[list[Any]]] = {}

    def begin(self, track: Any, name: Any, payload: Any) -> None:
        """Open a slice named ``name`` on ``track``, carrying ``payload``."""
        entry = [payload, True, name]
        self._threads.setdefault(track, []).append(entry)
        self._named.setdefault((track, name), []).append(entry)

    def end(self, track: Any, name: Any) -> Any:
        """Close a slice: the payload of the ``B`` it closes, or ``None`` when none is open."""
        if name is None:
            stack = self._threads.get(track)
            while stack and not stack[-1][1]:
                stack.pop()
            if not stack:
                return None
            entry = stack.pop()
            named = self._named[(track, entry[2])]
            named.pop()  # the innermost open begin is also the latest of its name
        else:
            named = self._named.get((track, name))
            if not named:
                return None
            entry = named.pop()
        if not named:
            del self._named[(track, entry[2])]
        entry[1] = False
        return entry[0]

    def still_open(self) -> Iterator[tuple[Any, Any]]:
        """``(track, payload)`` of every begin never closed, in the order they were opened."""
        for track, stack in self._threads.items():
            for payload, is_open, _name in stack:
                if is_open:
                    yield track, payload


@dataclasses.dataclass(frozen=True)
class SliceCounts:
    """What a writer did to the slices (``B``/``E`` pairs and ``X`` events) of its input.

    Attributes:
        complete: ``B``/``E`` pairs written as one ``X`` event.
        moved: slices moved to an overlap track (they partially overlapped another slice of
            their thread).
        overlap_tracks: overlap tracks (threads) added.
        negative: slices left out for a negative duration (an ``E`` before its ``B``, or
            ``dur < 0``).
        unmatched_begin: ``B`` events without an end, left out.
        unmatched_end: ``E`` events without a begin, left out.
        untimed: ``B``/``E``/``X`` events without a numeric ``ts`` (or ``X`` without a numeric
            ``dur``), left out.
    """

    complete: int = 0
    moved: int = 0
    overlap_tracks: int = 0
    negative: int = 0
    unmatched_begin: int = 0
    unmatched_end: int = 0
    untimed: int = 0

    def __add__(self, other: SliceCounts) -> SliceCounts:
        return SliceCounts(*(a + b for a, b in zip(dataclasses.astuple(self),
                                                    dataclasses.astuple(other))))

    @property
    def dropped(self) -> int:
        """Slice events left out, all reasons together."""
        return self.negative + self.unmatched_begin + self.unmatched_end + self.untimed

    def notes(self) -> list[str]:
        """One short line per thing moved or left out (empty when nothing was)."""
        out = []
        if self.moved:
            out.append(f"{self.moved} overlapping slice(s) moved to {self.overlap_tracks} "
                       "overlap track(s)")
        for n, what in ((self.negative, "slice(s) with a negative duration"),
                        (self.unmatched_begin, "begin(s) without an end"),
                        (self.unmatched_end, "end(s) without a begin"),
                        (self.untimed, "slice event(s) without a numeric ts/dur")):
            if n:
                out.append(f"{n} {what} left out")
        return out


class _Intervals:
    """Begin/end/ordinal of one thread's slices: int64 arrays, float64 once a float appears."""

    __slots__ = ("begin", "end", "ordinal")

    def __init__(self) -> None:
        self.begin, self.end, self.ordinal = array("q"), array("q"), array("q")

    def add(self, begin: Any, end: Any, ordinal: int) -> None:
        if self.begin.typecode == "q":
            try:
                self.begin.append(begin)
                try:
                    self.end.append(end)
                except (TypeError, OverflowError):
                    self.begin.pop()
                    raise
            except (TypeError, OverflowError):
                self.begin, self.end = array("d", self.begin), array("d", self.end)
            else:
                self.ordinal.append(ordinal)
                return
        self.begin.append(float(begin))
        self.end.append(float(end))
        self.ordinal.append(ordinal)

    def levels(self) -> Iterator[tuple[int, int]]:
        """``(ordinal, track level)`` of each slice that cannot stay on its thread (level >= 1)."""
        begin = np.frombuffer(self.begin, dtype=np.int64 if self.begin.typecode == "q" else np.float64)
        end = np.frombuffer(self.end, dtype=begin.dtype)
        ordinal = np.frombuffer(self.ordinal, dtype=np.int64)
        order = np.lexsort((ordinal, -end, begin))  # begin asc, end desc, file order
        stacks: list[list[Any]] = [[]]
        for b, e, o in zip(begin[order].tolist(), end[order].tolist(), ordinal[order].tolist()):
            level = 0
            while True:
                if level == len(stacks):
                    stacks.append([])
                stack = stacks[level]
                while stack and stack[-1] <= b:
                    stack.pop()
                if not stack or e <= stack[-1]:
                    stack.append(e)
                    break
                level += 1
            if level:
                yield o, level


@dataclasses.dataclass
class SlicePlan:
    """The result of :func:`plan_slices`. Slices are keyed ``(track, ordinal)``: the thread key
    ``(pid, tid)`` and the place of the ``B``/``X`` event among that thread's ``B``/``X`` events.

    Attributes:
        counts: :class:`SliceCounts` (``complete`` is filled by the :class:`Rewriter`).
        moved: ``{(track, ordinal): overlap level}`` of the moved slices (level 1, 2, ...).
        unmatched: keys of the begins never closed.
        negative: keys of the ``B`` events of pairs with a negative duration.
        thread_names: ``{track: name}`` from ``thread_name`` metadata events.
        first_ts: the smallest numeric ``ts`` of a non-metadata event (None when none).
    """

    counts: SliceCounts
    moved: dict[tuple[Any, int], int]
    unmatched: set[tuple[Any, int]]
    negative: set[tuple[Any, int]]
    thread_names: dict[Any, Any]
    first_ts: Any = None


def track_of(ev: dict[str, Any]) -> tuple[Any, Any]:
    """The thread key of an event: ``(pid, tid)`` with JSON types kept apart."""
    pid, tid = ev.get("pid"), ev.get("tid")
    tp, tt = type(pid), type(tid)
    return (pid if tp is int or tp is str else id_key(pid),
            tid if tt is int or tt is str else id_key(tid))


def closed_slices(events: Iterable[dict[str, Any]]) -> Iterator[
        tuple[int, dict[str, Any], tuple[int, dict[str, Any], Any] | None]]:
    """Every event as ``(index, event, closed)``, one pass: ``closed`` is ``(begin index,
    begin event, duration in us)`` when the event completes a slice (an ``X`` with a numeric
    ``dur`` >= 0, or an ``E`` that closes an open ``B`` by :class:`Pairing`'s rules, not before
    it), else None. Slice events without a numeric ``ts`` open and close nothing. For readers
    that need only durations (statistics by shape, flame graphs, matching calls to events)."""
    pairing = Pairing()
    for i, ev in enumerate(events):
        closed = None
        ph = ev.get("ph")
        if ph in SLICE_PHASES and is_number(ts := ev.get("ts")):
            if ph == "X":
                dur = ev.get("dur")
                if is_number(dur) and dur >= 0:
                    closed = (i, ev, dur)
            elif ph == "B":
                pairing.begin(track_of(ev), _name(ev), (i, ev))
            else:
                began = pairing.end(track_of(ev), _name(ev))
                if began is not None and ts >= began[1]["ts"]:
                    closed = (began[0], began[1], ts - began[1]["ts"])
        yield i, ev, closed


def plan_slices(events: Iterable[dict[str, Any]], ids: IdMap | None = None) -> SlicePlan:
    """First pass of a writer: pair, check and place the slices of ``events``.

    Args:
        events: the input events, exactly as the second pass will see them.
        ids: when given, :meth:`IdMap.reserve` is called with every event.

    Returns:
        :class:`SlicePlan`.
    """
    pairing = Pairing()
    intervals: dict[Any, _Intervals] = {}
    ordinals: dict[Any, int] = {}
    thread_names: dict[Any, Any] = {}
    negative_keys: set[tuple[Any, int]] = set()
    first_ts = None
    untimed = negative = unmatched_end = 0
    for ev in events:
        if ids is not None:
            ids.reserve(ev)
        ph = ev.get("ph")
        if ph == "M":
            args = ev.get("args")
            if ev.get("name") == "thread_name" and isinstance(args, dict) and "name" in args:
                thread_names[track_of(ev)] = args["name"]
            continue
        ts = ev.get("ts")
        if is_number(ts) and (first_ts is None or ts < first_ts):
            first_ts = ts
        if ph not in SLICE_PHASES:
            continue
        track = track_of(ev)
        if ph != "E":
            ordinal = ordinals.get(track, 0)
            ordinals[track] = ordinal + 1
        if not is_number(ts):
            untimed += 1
            continue
        if ph == "X":
            dur = ev.get("dur")
            if not is_number(dur):
                untimed += 1
            elif dur < 0:
                negative += 1
            else:
                _add(intervals, track, ts, ts + dur, ordinal)
        elif ph == "B":
            pairing.begin(track, _name(ev), (ordinal, ts))
        else:
            got = pairing.end(track, _name(ev))
            if got is None:
                unmatched_end += 1
                continue
            ordinal, begin = got
            if ts - begin < 0:
                negative += 1
                negative_keys.add((track, ordinal))
            else:
                _add(intervals, track, begin, ts, ordinal)
    unmatched = {(track, payload[0]) for track, payload in pairing.still_open()}
    moved: dict[tuple[Any, int], int] = {}
    tracks: set[tuple[Any, int]] = set()
    for track, iv in intervals.items():
        for ordinal, level in iv.levels():
            moved[(track, ordinal)] = level
            tracks.add((track, level))
    counts = SliceCounts(moved=len(moved), overlap_tracks=len(tracks), negative=negative,
                         unmatched_begin=len(unmatched), unmatched_end=unmatched_end,
                         untimed=untimed)
    return SlicePlan(counts, moved, unmatched, negative_keys, thread_names, first_ts)


def _add(intervals: dict[Any, _Intervals], track: Any, begin: Any, end: Any, ordinal: int) -> None:
    iv = intervals.get(track)
    if iv is None:
        iv = intervals[track] = _Intervals()
    iv.add(begin, end, ordinal)


def _name(ev: dict[str, Any]) -> Any:
    name = ev.get("name")
    return name if name is None or type(name) is str else id_key(name)


class Rewriter:
    """Second pass of a writer: the events to write, following a :class:`SlicePlan`.

    Args:
        plan: the first pass over the same events.
        ids: the renumbering to apply (its ``scope`` as during this pass).
        keep_pairs: write the ``B``/``E`` pairs that stay on their thread as they are (session
            windows: MXNet's own form); moved pairs still become ``X`` events. Default: every
            kept slice is an ``X`` event.

    Attributes:
        complete: ``B``/``E`` pairs written as ``X`` so far.
    """

    def __init__(self, plan: SlicePlan, ids: IdMap, *, keep_pairs: bool = False) -> None:
        self.plan = plan
        self.ids = ids
        self.keep_pairs = keep_pairs
        self.complete = 0
        self._pairing = Pairing()
        self._ordinals: dict[Any, int] = {}
        self._overlap: dict[tuple[Any, int], int] = {}

    def counts(self) -> SliceCounts:
        """The plan's counts with :attr:`complete` filled in."""
        return dataclasses.replace(self.plan.counts, complete=self.complete)

    def rewrite(self, events: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Yield the output events for ``events`` (the same sequence the plan was made from)."""
        plan, ids = self.plan, self.ids
        for ev in events:
            ph = ev.get("ph")
            if ph not in SLICE_PHASES:
                yield ids.apply(ev)
                continue
            track = track_of(ev)
            if ph != "E":
                ordinal = self._ordinals.get(track, 0)
                self._ordinals[track] = ordinal + 1
            if not is_number(ev.get("ts")):
                continue
            if ph == "X":
                dur = ev.get("dur")
                if is_number(dur) and dur >= 0:
                    yield from self._place(ids.apply(ev), track, ordinal)
            elif ph == "B":
                key = (track, ordinal)
                if key in plan.unmatched:
                    continue
                self._pairing.begin(track, _name(ev), (ordinal, ev))
                if self.keep_pairs and key not in plan.negative and key not in plan.moved:
                    yield ids.apply(ev)
            else:
                got = self._pairing.end(track, _name(ev))
                if got is None:
                    continue
                ordinal, begin = got
                key = (track, ordinal)
                if key in plan.negative:
                    continue
                if self.keep_pairs and key not in plan.moved:
                    yield ids.apply(ev)
                    continue
                self.complete += 1
                yield from self._place(ids.apply(_complete(begin, ev)), track, ordinal)

    def _place(self, out: dict[str, Any], track: Any, ordinal: int) -> Iterator[dict[str, Any]]:
        level = self.plan.moved.get((track, ordinal))
        if level:
            tid = self._overlap.get((track, level))
            if tid is None:
                tid = self._overlap[(track, level)] = self.ids.fresh("tid")
                name = self.plan.thread_names.get(track, out.get("tid"))
                meta = {"ph": "M", "name": "thread_name", "tid": tid,
                        "args": {"name": f"{name} (overlap {level})"}}
                if "pid" in out:
                    meta["pid"] = out["pid"]
                yield meta
            out["tid"] = tid
        yield out


def _complete(begin: dict[str, Any], end: dict[str, Any]) -> dict[str, Any]:
    """One ``X`` event for a ``B``/``E`` pair: the begin's fields, ``dur`` in microseconds, and
    the ``args`` of both (the end's win on equal keys)."""
    x = {k: v for k, v in begin.items() if k != "ph"}
    x["ph"] = "X"
    x["dur"] = end["ts"] - begin["ts"]
    end_args = end.get("args")
    if isinstance(end_args, dict) and end_args:
        begin_args = begin.get("args")
        x["args"] = {**(begin_args if isinstance(begin_args, dict) else {}), **end_args}
    return x


# ---------------------------------------------------------------------------------- as written

class NeedsPlan(Exception):
    """Slices :class:`Nesting` cannot pass as written: the plan's two passes decide."""


class _Thread:
    """What :class:`Nesting` holds of one thread: its open begins ``(name, time)``, and the
    latest (at most :data:`KEPT_SLICES`) of its slices that lie in no other, disjoint, in time
    order (``begins``, ``ends``); ``floor``: the last end of those let go (a slice that begins
    before it is not checked: the plan then)."""

    __slots__ = ("opened", "begins", "ends", "floor")

    def __init__(self) -> None:
        self.opened: list[tuple[Any, int]] = []
        self.begins: list[int] = []
        self.ends: list[int] = []
        self.floor: int | None = None

    def last(self) -> int | None:
        """The latest end of its slices so far (None: none yet)."""
        return self.ends[-1] if self.ends else self.floor

    def close(self, b: int, e: int) -> None:
        """A slice ``[b, e]`` ended: it nests with every slice before it, or raise NeedsPlan."""
        if e < b or (self.floor is not None and b < self.floor):
            raise NeedsPlan
        if e == b:
            return  # a point nests in whatever holds it, and holds nothing
        begins, ends = self.begins, self.ends
        k = bisect_left(begins, b)
        if k and ends[k - 1] > b:
            raise NeedsPlan  # one before it reaches into it (the plan takes a parent first)
        m = bisect_left(begins, e, k)
        if m > k:  # those beginning inside it are its children, or overlap it
            if max(ends[k:m]) > e:
                raise NeedsPlan
            del begins[k:m], ends[k:m]
        begins.insert(k, b)
        ends.insert(k, e)
        self.keep()

    def keep(self) -> None:
        cut = len(self.begins) - KEPT_SLICES
        if cut > 0:
            self.floor = self.ends[cut - 1]
            del self.begins[:cut], self.ends[:cut]


class Nesting:
    """Whether the writers' plan (:func:`~pyprof.trace.slices.plan_slices` with ``keep_pairs``)
    writes the slices seen so far as they are: every end closes the innermost open begin of its
    thread (by the pairing's rule: of its name, or nameless), no duration is negative, and the
    slices of a thread nest (the plan moves a slice only when two overlap without nesting), in
    whatever order they end (MXNet writes an operator when it ends: one run inside another comes
    first). What is left open at :meth:`finish` would be left out. Anything else raises
    :class:`NeedsPlan`. Holds per thread its open begins and its latest outer slices."""

    def __init__(self) -> None:
        self.threads: dict[Any, _Thread] = {}

    def feed(self, slices: list[dict[str, Any]]) -> None:
        if not self._pairs(slices):
            self._each(slices)

    def _pairs(self, slices: list[dict[str, Any]]) -> bool:
        """The check on columns, for what MXNet writes most: each begin followed at once by its
        end, integer times, int or str ids, the pairs of each thread one after another in time
        after all its slices so far. False (and nothing changed) when the slices are not such."""
        n = len(slices) // 2
        if not n or len(slices) % 2:
            return False
        ph = list(map(dict.get, slices, repeat("ph")))
        if ph[0::2].count("B") != n or ph[1::2].count("E") != n:
            return False
        name = list(map(dict.get, slices, repeat("name")))
        pid = list(map(dict.get, slices, repeat("pid")))
        tid = list(map(dict.get, slices, repeat("tid")))
        ts = list(map(dict.get, slices, repeat("ts")))
        if name[0::2] != name[1::2] or pid[0::2] != pid[1::2] or tid[0::2] != tid[1::2] \
                or set(map(type, ts)) != {int} or not _KEYS.issuperset(map(type, pid)) \
                or not _KEYS.issuperset(map(type, tid)) or not _NAMES.issuperset(map(type, name)):
            return False
        try:
            t = np.array(ts, dtype=np.int64)
        except OverflowError:
            return False
        return self.feed_pairs(list(zip(pid[0::2], tid[0::2])), t[0::2], t[1::2])

    def feed_pairs(self, keys: list[Any], begin: np.ndarray, end: np.ndarray) -> bool:
        """The check of :meth:`feed` for slices that are pairs, each begin followed at once by
        its end of the same name (one ``keys`` entry, ``(pid, tid)``, and one ``begin`` and
        ``end`` time, int64, per pair): False (and nothing changed) unless the pairs of each
        thread come one after another in time after all its slices so far."""
        n = len(keys)
        tracks = list(dict.fromkeys(keys))
        threads = self.threads
        if any(threads[k].opened for k in tracks if k in threads):
            return False  # a begin open before these
        if (end < begin).any():
            return False
        index = {k: i for i, k in enumerate(tracks)}
        code = np.fromiter(map(index.__getitem__, keys), np.int64, n)
        order = np.argsort(code, kind="stable")
        code, begin, end = code[order], begin[order], end[order]
        same = code[1:] == code[:-1]
        if (begin[1:][same] < end[:-1][same]).any():
            return False
        first = np.flatnonzero(np.concatenate(([True], ~same)))
        spans = list(zip(code[first].tolist(), begin[first].tolist(), first.tolist(),
                         np.concatenate((first[1:], [n])).tolist()))
        for c, b, _, _ in spans:
            th = threads.get(tracks[c])
            if th is not None and (last := th.last()) is not None and b < last:
                return False
        for c, _, lo, hi in spans:
            th = threads.get(tracks[c])
            if th is None:
                th = threads[tracks[c]] = _Thread()
            lo = max(lo, hi - KEPT_SLICES - 1)  # the one before the kept ones: the floor
            th.begins += begin[lo:hi].tolist()
            th.ends += end[lo:hi].tolist()
            th.keep()
        return True

    def close_pairs(self, keys: list[Any], begin: list[int], end: list[int]) -> None:
        """:meth:`feed` for pairs (as :meth:`feed_pairs` takes them) in any order of time: each
        pair, a begin its end closes at once, is one slice of its thread (what :meth:`_each`
        does with them), checked to nest with the slices before it; raises NeedsPlan if not."""
        threads = self.threads
        for key, b, e in zip(keys, begin, end):
            th = threads.get(key)
            if th is None:
                th = threads[key] = _Thread()
            th.close(b, e)

    def _each(self, slices: Iterable[dict[str, Any]]) -> None:
        threads = self.threads
        for ev in slices:
            ts = ev.get("ts")
            if type(ts) is not int:  # floats too: the plan may compare them rounded
                raise NeedsPlan
            pid, tid = ev.get("pid"), ev.get("tid")
            key = (pid, tid) if type(pid) is int and type(tid) is int else track_of(ev)
            th = threads.get(key)
            if th is None:
                th = threads[key] = _Thread()
            ph = ev["ph"]
            if ph == "B":
                th.opened.append((_name(ev), ts))
            elif ph == "E":
                opened = th.opened
                name = _name(ev)
                if not opened or (name is not None and name != opened[-1][0]):
                    raise NeedsPlan
                th.close(opened.pop()[1], ts)
            else:
                dur = ev.get("dur")
                if type(dur) is not int:
                    raise NeedsPlan
                th.close(ts, ts + dur)

    def finish(self) -> None:
        if any(th.opened for th in self.threads.values()):
            raise NeedsPlan  # a begin never closed
