"""Windows cut out of bytes MXNet wrote, streamed: a byte range of a raw trace as a valid trace.

A session window is bytes ``[start, end)`` of the raw trace MXNet appends to
(:mod:`pyprof.session`), in MXNet's own layout (trace.json ``mxnet_layout``, read by
:mod:`pyprof.trace.mxnet_layout`). :func:`read_range` writes them as a valid trace: every known
metadata event first, each metadata event once, the range's events, then the extra events (a
window's step marks), slices made valid and unsafe ids renumbered as every writer does
(:mod:`pyprof.trace.slices`, trace.json ``ids``). How, fastest first:

1. **Streamed, one pass** (:func:`cut`): the range is read in blocks of :data:`BLOCK` bytes, each
   cut after its last event separator (a line holding only ``,``: a name holds no line break),
   so that every run is whole events. A run is read by pyprof's C code
   (:mod:`pyprof.native.cutter`: written compact, ids and slices as columns; its metadata
   events parsed here, each kept once), or, where that refuses it or did not build, parsed as
   one array (:func:`~pyprof.trace.mxnet_layout.parse_run`: escaped only when a line may need
   it); either way written with one write, the same bytes. Unsafe ids are numbered as they come; the slices are checked as they
   pass (every end closes its thread's innermost open begin, and the slices of a thread nest, in
   whatever order they end: :class:`~pyprof.trace.slices.Nesting`), holding each thread's open
   begins and its latest outer slices. Memory: a run and its events, and that.
2. A number given to an unsafe id that a safe id found later holds (the numbering skips every
   safe id of the trace, and that one came late): the same, the ids scanned first (two passes).
3. Slices the writers would move or leave out (a partial overlap, an end without a begin, a
   begin never closed, a negative duration, a slice without a numeric time): the writers' plan,
   streamed (two passes over the runs; memory: three numbers a slice), today's rules exactly.
4. Bytes the streaming reader does not read (an event cut short by a crash, no such layout):
   :class:`Refused`; :func:`read_range` then reads the whole range the tolerant way
   (:func:`~pyprof.trace.mxnet_layout.parse_raw`, which drops a last event cut short).

Each gives the same events (``tests/trace/test_rawcut.py``); the JVM's
``pyprof.jvm.WindowCutter`` is step 1 and 2. Package-internal (:mod:`pyprof.session.windows`).
"""

from __future__ import annotations

import bisect
import contextlib
import os
import re
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import compress, repeat

import numpy as np
from operator import setitem
from typing import IO, Any

import orjson

from .. import rules
from ..native import cutter as _cutter
from .ids import ID_LIMIT, KINDS, IdMap, id_key, id_values, is_safe_id
from .jsonscan import no_gc
from .mxnet_layout import parse_raw, parse_run
from .slices import SLICE_PHASES, NeedsPlan, Nesting, Rewriter, plan_slices
from .writer import TraceWriter


#: Bytes read at a time (a run of whole events is at most this plus one event).
BLOCK = 1 << 22
_MAX_RUN = 1 << 26  # bytes without an event separator: no such layout
_WHOLE = 1 << 26  # a range read at once
#: Bytes appended that make a run while a :class:`Tail` follows MXNet's append.
TAIL_RUN = 1 << 20
_TAIL_POLL = 0.0005  # seconds between looks at the raw file's size
_EDGE = 1 << 16  # bytes at each end searched for the header, the footer and their commas
_LAYOUT = rules.spec("trace.json")["mxnet_layout"]
_HEADER = re.compile(_LAYOUT["header"].encode())  # bytes: \s is ASCII white space only
_FOOTER = re.compile(_LAYOUT["footer"].encode())
_SPACE_OR_COMMA = frozenset(b" \t\n\r\f\v,")
_SEPARATOR = b"\n,\n"
_ABSENT = object()
_ID_KINDS: dict[str, list[str]] = rules.spec("trace.json")["ids"]["kinds"]
#: (kind, field) of each kind's first field, and the other fields (bind_id, id2): without them
#: each kind has one field, and its values may be numbered column by column.
_FIRST_FIELDS = tuple((kind, fields[0]) for kind, fields in _ID_KINDS.items())
_OTHER_FIELDS = tuple(f for fields in _ID_KINDS.values() for f in fields[1:])
_PLAIN = frozenset({int, str, type(_ABSENT)})
#: The kinds of the C code's id columns (pyprof.native.cutter: pid, tid, id).
_RUN_KINDS = ("pid", "tid", "id")
_B, _E = ord("B"), ord("E")
_SLICE_CODES = np.array([ord(p) for p in sorted(SLICE_PHASES)], np.uint8)


class Refused(Exception):
    """Bytes the streaming cut does not read: read them the tolerant way (never a user's
    message: the tolerant reader says what is wrong, with its fix)."""


def metadata_key(event: dict[str, Any]) -> bytes:
    """The identity of a metadata event (its canonical JSON)."""
    return orjson.dumps(event, option=orjson.OPT_SORT_KEYS)


# ---------------------------------------------------------------------------------- reading

def _body(path: str, start: int, end: int | None) -> tuple[int, int]:
    """``(from, to)``: the events of bytes ``[start, end)``, without a leading header, a trailing
    footer and the white space and commas at either end (as parse_raw removes them)."""
    try:
        f = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return start, start  # nothing was ever flushed
    with f:
        size = os.fstat(f.fileno()).st_size
        end = size if end is None else min(end, size)
        n = min(max(0, end - start), _EDGE)
        if n == 0:
            return start, start
        f.seek(start)
        head = f.read(n)
        f.seek(end - n)
        tail = f.read(n)
    m = _HEADER.match(head)
    s = m.end() if m else 0
    while s < len(head) and head[s] in _SPACE_OR_COMMA:
        s += 1
    m = _FOOTER.search(tail)
    e = m.start() if m else len(tail)
    while e > 0 and tail[e - 1] in _SPACE_OR_COMMA:
        e -= 1
    lo = start + s
    return lo, max(lo, end - len(tail) + e)


def _runs(path: str, lo: int, hi: int) -> Iterator[bytes]:
    """Bytes ``[lo, hi)`` of ``path`` as runs of whole events, cut at event separators: the
    block read last (:data:`BLOCK` bytes) cut after its last separator, the rest carried to
    the next. A range of at most :data:`_WHOLE` bytes is read at once (the same runs, fewer
    copies)."""
    if hi <= lo:
        return
    with open(path, "rb") as f:
        f.seek(lo)
        if hi - lo <= _WHOLE:
            yield from _cut_runs(f.read(hi - lo), hi - lo)
            return
        left, carry = hi - lo, b""
        while left > 0:
            block = f.read(min(BLOCK, left))
            if not block:
                break  # the file is shorter than the range said
            left -= len(block)
            buf = carry + block if carry else block
            at = buf.rfind(_SEPARATOR) if left > 0 else -1
            if at < 0:
                carry = buf
                if len(carry) > _MAX_RUN:
                    raise Refused  # no event separator
                continue
            at = _with_end(buf, 0, at)
            yield buf[:at]
            carry = buf[at + len(_SEPARATOR):]
        if carry.strip():
            yield carry


def _cut_runs(data: bytes, total: int) -> Iterator[bytes]:
    """:func:`_runs` of ``data`` read at once (``total``: the bytes the range said)."""
    pos = read = 0
    left = total
    while left > 0:
        got = min(BLOCK, left, len(data) - read)
        if got <= 0:
            break  # the file is shorter than the range said
        read += got
        left -= got
        at = data.rfind(_SEPARATOR, pos, read) if left > 0 else -1
        if at < 0:
            if read - pos > _MAX_RUN:
                raise Refused  # no event separator
            continue
        at = _with_end(data, pos, at)
        yield data[pos:at]
        pos = at + len(_SEPARATOR)
    carry = data[pos:read]
    if carry.strip():
        yield carry


def _with_end(buf: bytes, pos: int, at: int) -> int:
    """The cut at separator ``at`` of ``buf[pos:]`` moved before a last begin, whose end
    follows (MXNet writes a begin, then its end: keep them in one run; an optimisation:
    slices.Nesting), at most 4 separators back."""
    for _ in range(4):
        ph = buf.rfind(b'"ph": "', pos, at)
        prev = buf.rfind(_SEPARATOR, pos, at)
        if ph < 0 or buf[ph + 7:ph + 8] != b"B" or prev < 0:
            break
        at = prev
    return at


def _events(run: bytes) -> list[dict[str, Any]]:
    try:
        return parse_run(run)
    except ValueError as e:
        raise Refused(str(e)) from None


# ---------------------------------------------------------------------------------- the ids

class _Ids:
    """trace.json ``ids`` as :class:`~pyprof.trace.ids.IdMap` (``renumber_all=False``) numbers
    them, as events come: each unsafe value gets the next integer from 1 of its kind that no safe
    id seen so far holds. That is the final numbering unless a safe id seen later is a number
    given (:attr:`collided`); with every safe id :meth:`reserve`\\ d first it is exact."""

    def __init__(self) -> None:
        self.numbers: dict[str, dict[Any, int]] = {k: {} for k in KINDS}
        self.taken: dict[str, set[int]] = {k: set() for k in KINDS}
        self.given: dict[str, set[int]] = {k: set() for k in KINDS}
        self.next = dict.fromkeys(KINDS, 1)
        self.collided = False

    def reserve(self, events: Iterable[dict[str, Any]]) -> None:
        """Take the safe integer ids of ``events`` (the first pass of two)."""
        for ev in events:
            for kind, _field, value in id_values(ev):
                if type(value) is int and -ID_LIMIT < value < ID_LIMIT:
                    self.taken[kind].add(value)

    def _number(self, kind: str, value: Any) -> Any:
        """What ``value`` of ``kind`` is written as; a safe integer is taken."""
        if is_safe_id(value):
            if type(value) is int and value not in self.taken[kind]:
                self.taken[kind].add(value)
                if value in self.given[kind]:
                    self.collided = True
            return value
        key = id_key(value)
        numbers = self.numbers[kind]
        n = numbers.get(key)
        if n is None:
            taken, n = self.taken[kind], self.next[kind]
            while n in taken:
                n += 1
            self.next[kind] = n + 1
            self.given[kind].add(n)
            numbers[key] = n
        return n

    def reserve_run(self, run: _cutter.Run) -> None:
        """:meth:`reserve` for a run the C code read (its ids are integers, none negative)."""
        for k, kind in enumerate(_RUN_KINDS):
            values = run.ids[:, k][run.has[:, k] & ~run.skip]
            self.taken[kind].update(np.unique(values[values < ID_LIMIT]).tolist())

    def apply_run(self, run: _cutter.Run) -> list[dict[int, int]]:
        """:meth:`apply` for a run the C code read: per kind (pid, tid, id), the values it
        writes as other numbers, each value numbered in order of first use as :meth:`apply`
        numbers it (its ids are integers, none negative; no bind_id or id2)."""
        changed: list[dict[int, int]] = []
        for k, kind in enumerate(_RUN_KINDS):
            values = run.ids[:, k][run.has[:, k] & ~run.skip]  # (a skipped event is not written)
            distinct, first = np.unique(values, return_index=True)
            new = {}
            for value in distinct[np.argsort(first, kind="stable")].tolist():
                number = self._number(kind, value)
                if number != value:
                    new[value] = number
            changed.append(new)
        return changed

    def apply(self, events: list[dict[str, Any]]) -> None:
        """Renumber ``events`` (the cut's own) in place, in order."""
        if any(any(map(dict.__contains__, events, repeat(f))) for f in _OTHER_FIELDS):
            for ev in events:  # bind_id or id2: several fields share a numbering
                for kind, field, value in list(id_values(ev)):
                    new = self._number(kind, value)
                    if new is not value:
                        if field.startswith("id2."):
                            ev["id2"] = id2 = dict(ev["id2"])
                            id2[field[4:]] = new
                        else:
                            ev[field] = new
            return
        for kind, field in _FIRST_FIELDS:  # one field a kind: column by column
            column = list(map(dict.get, events, repeat(field), repeat(_ABSENT)))
            distinct = dict.fromkeys(column)  # in order of first use
            if not _PLAIN.issuperset(map(type, distinct)):  # 1, 1.0 and True are one key here
                for ev in events:
                    if field in ev:
                        ev[field] = self._number(kind, ev[field])
                continue
            changed = {}
            for value in distinct:
                if value is not _ABSENT:
                    new = self._number(kind, value)
                    if new is not value:
                        changed[value] = new
            if not changed:
                continue
            if _ABSENT in distinct:  # only some events hold the field
                hit = list(map(changed.__contains__, column))
                targets: Iterable[dict[str, Any]] = compress(events, hit)
                values: Iterable[Any] = map(changed.__getitem__, compress(column, hit))
            else:
                targets, values = events, map(changed.get, column, column)
            deque(map(setitem, targets, repeat(field), values), maxlen=0)  # at C speed


# ---------------------------------------------------------------------------------- held

def _lined(data: bytes) -> bytes:
    """``data`` (events as ``orjson.dumps`` joins them) on lines as the writer puts them."""
    return data.replace(b'},{"', b'},\n{"')


class Kept:
    """A window :func:`cut` held in memory instead of writing it (``keep``), for an annotation
    that reads its events and writes it once (:mod:`pyprof.attribution.matching`): the batches
    of its last pass, each the events of a run the C code read (their bytes as written, where
    each starts, their columns, ids as written) or events as dicts (the known metadata, the
    extra events; a run read in Python makes it not :attr:`clean`: written at once then).
    :attr:`held`: the cut ended held (else the window was written). Events are numbered as in
    the window written, metadata first. ``limit``: a range of more raw bytes is written, not
    held (its window is not read into memory)."""

    def __init__(self, limit: int | None = None, ahead: tuple[bytes, frozenset] | None = None) -> None:
        self.held = False
        self.limit = limit
        #: ``(needle, phases)``: each run's events whose bytes hold ``needle`` (:meth:`find`)
        #: and those of ``phases`` are read as the run is added (:meth:`read`), on the thread
        #: that cuts (while MXNet appends, when the cut follows it)
        self.ahead = ahead
        self._codes = None if ahead is None else np.array(sorted(map(ord, ahead[1])), np.uint8)
        self.reset()

    def reset(self) -> None:
        self.clean = True
        self.count = 0  # events as the streamed pass counts them (a run's skipped included)
        self.size = 0  # events written
        # (first event, Run, bytes, where, written ids, order) or (first event, dicts)
        self.batches: list[tuple] = []
        self._read: dict[int, dict[str, Any]] = {}  # events read ahead (not to be changed)
        self._found: list[int] = []  # the numbers of events holding the needle read ahead
        self._plain: dict[int, bool] = {}  # by a run's first event: no },{" inside its events

    def add_run(self, run: _cutter.Run, data: bytes, where: np.ndarray,
                changed: list[dict[int, int]], sep: int = 1) -> None:
        """A run the C code read: ``data``, its events written joined by a separator of
        ``sep`` bytes, ``where`` each starts."""
        order = np.flatnonzero(~run.skip)
        ids = run.ids.astype(np.int64)  # as written: every id that stays is below ID_LIMIT
        for k, m in enumerate(changed):
            if m:
                old = np.fromiter(sorted(m), np.uint64, len(m))
                new = np.fromiter((m[int(v)] for v in old), np.int64, len(m))
                at = np.searchsorted(old, run.ids[:, k])
                at[at == len(old)] = 0
                hit = (old[at] == run.ids[:, k]) & run.has[:, k]
                ids[hit, k] = new[at[hit]]
        ids[~run.has] = -1
        run.release()  # its raw bytes: not read again
        self.batches.append((self.size, run, data, where[order], ids[order], order, sep))
        self.count += run.n
        self.size += len(order)
        if self.ahead is not None:
            b = self.batches[-1]
            found = self._find_in(b, self.ahead[0])
            self._found += found
            wanted = np.union1d(found, np.flatnonzero(np.isin(run.ph[order], self._codes)) + b[0])
            numbers = wanted.astype(np.int64).tolist()
            self._read.update(zip(numbers, self.events(numbers)))
            self._plain[b[0]] = data.find(b'},{"') < 0  # for write(): nothing to line inside

    def add_events(self, events: list[dict[str, Any]]) -> None:
        self.batches.append((self.size, events))
        self.count += len(events)
        self.size += len(events)

    def write(self, out: str, events: dict[int, dict[str, Any]] | None = None) -> None:
        """Write the window at ``out``: without ``events``, as the streamed pass writes it; with,
        as a writer writes the window read back with the events at those numbers replaced
        (:meth:`pyprof.trace.writer.TraceWriter.write_all` of every event at once). Then it
        holds the window no more."""
        self.held = False
        if events is None:
            with TraceWriter(out, gzip=False) as w:
                for b in self.batches:
                    if len(b) == 2:
                        w.write_all(b[1])
                    else:
                        w.write_serialized(b[2], b[1].n)
            return
        # on lines here (runs joined by Run.lines()): the window's bytes written as held
        parts = []
        numbers = sorted(events)
        for b in self.batches:
            first, n = b[0], (len(b[1]) if len(b) == 2 else len(b[5]))
            if len(b) == 2:
                got = [events.get(first + i, ev) for i, ev in enumerate(b[1])]
                if got:
                    parts.append([_lined(orjson.dumps(got)[1:-1])])
                continue
            data, where = b[2], b[3]
            # views of the held bytes where they are on lines (nothing in them to replace)
            plain = self._plain.get(first)
            if plain is None:
                plain = data.find(b'},{"') < 0
            view = memoryview(data) if b[6] > 1 and plain else data
            at, pieces = 0, []
            for g in numbers[bisect.bisect_left(numbers, first):bisect.bisect_left(numbers, first + n)]:
                j = g - first
                pieces += [view[at:where[j]], _lined(orjson.dumps(events[g]))]
                at = where[j + 1] - b[6] if j + 1 < n else len(data)  # less the separator
            if n:
                pieces.append(view[at:])
                parts.append(pieces if view is not data else [_lined(b"".join(pieces))])
        chunks = parts[0] if parts else []
        for p in parts[1:]:
            head = next(c for c in p if len(c))[:2]  # a part's first chunk may be empty
            chunks += [b",\n" if head == b'{"' else b",", *p]
        with TraceWriter(out, gzip=False) as w:
            w.write_serialized(chunks, self.size, lined=True)

    def size_bound(self) -> int:
        """At least the bytes of the window the streamed pass writes (its runs' bytes, a line
        break at most every 4 bytes, the dicts' JSON, the head and the tail)."""
        runs = sum(len(b[2]) for b in self.batches if len(b) != 2)
        dicts = sum(len(orjson.dumps(b[1])) for b in self.batches if len(b) == 2)
        return (runs + dicts) * 5 // 4 + 4 * len(self.batches) + 64

    def events(self, numbers: Sequence[int]) -> list[dict[str, Any]]:
        """The events at ``numbers`` (ascending), read from the bytes written (as a reader of
        the window gets them: fresh dicts)."""
        out: list[dict[str, Any]] = []
        k = 0
        for b in self.batches:
            first = b[0]
            n = len(b[1]) if len(b) == 2 else len(b[5])
            lo = k
            while k < len(numbers) and numbers[k] < first + n:
                k += 1
            if lo == k:
                continue
            if len(b) == 2:
                out += [orjson.loads(orjson.dumps(b[1][g - first])) for g in numbers[lo:k]]
                continue
            data, where = b[2], b[3]
            js = [g - first for g in numbers[lo:k]]
            out += orjson.loads(b"[" + b",".join(
                [data[where[j]:(where[j + 1] - b[6] if j + 1 < n else len(data))] for j in js]) + b"]")
        return out

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Columns of every event written, by number: ``ph`` (uint8: its one-letter phase, else
        0), ``ts`` (int64) with ``ts_ok`` (a plain integer), ``ids`` (int64, n x 3: pid, tid, id
        as written, -1 where absent) and ``run`` (read by the C code); an event of
        :meth:`dicts` has a row of 0, False, -1, False."""
        n = self.size
        ph, ts = np.zeros(n, np.uint8), np.zeros(n, np.int64)
        ok, run = np.zeros(n, bool), np.zeros(n, bool)
        ids = np.full((n, 3), -1, np.int64)
        for b in self.batches:
            if len(b) == 2:
                continue
            first, r, _, _, i, order, _ = b
            to = first + len(order)
            ph[first:to], ts[first:to], ok[first:to] = r.ph[order], r.ts[order], r.ts_ok[order]
            ids[first:to], run[first:to] = i, True
        return ph, ts, ok, ids, run

    def dicts(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(number, event)`` of the events held as dicts (as written: not to be changed)."""
        for b in self.batches:
            if len(b) == 2:
                yield from enumerate(b[1], b[0])

    def read(self, numbers: Sequence[int]) -> list[dict[str, Any]]:
        """:meth:`events`, those read ahead as read then (the same dicts each time: change
        them only once done reading them, then :meth:`forget_read`)."""
        got = self._read
        missing = [g for g in numbers if g not in got]
        if missing:
            got = {**got, **dict(zip(missing, self.events(missing)))}
        return [got[g] for g in numbers]

    def forget_read(self) -> None:
        """Let go of the events read ahead (:meth:`read` reads them again)."""
        self._read, self._found, self.ahead = {}, [], None  # _plain stays: write() reads it

    def find(self, needle: bytes) -> list[int]:
        """The numbers of the events of runs whose bytes hold ``needle``, ascending."""
        if self.ahead is not None and needle == self.ahead[0]:
            return list(self._found)
        got: list[int] = []
        for b in self.batches:
            if len(b) != 2:
                got += self._find_in(b, needle)
        return got

    @staticmethod
    def _find_in(b: tuple, needle: bytes) -> list[int]:
        data, where = b[2], b[3]
        at = [m.start() for m in re.finditer(re.escape(needle), data)]
        if not at:
            return []
        k = np.unique(np.searchsorted(where, np.array(at, np.int64), "right") - 1)
        return (k + b[0]).tolist()

# ---------------------------------------------------------------------------------- the cut

def _pass(raw: str, lo: int, hi: int, known: list[dict[str, Any]],
          extra: Sequence[dict[str, Any]], out: str | None, ids: _Ids, keep: Kept | None = None,
          runs: Iterable[bytes] | None = None) -> tuple[int, list[tuple[bytes, dict[str, Any]]]]:
    """One streaming pass over the range: with ``out``, the window written (with ``keep``: held
    there instead, :class:`Kept`); without, the safe ids reserved. Returns events written and
    the metadata events found ``(key, event)``. A run the C code reads
    (:mod:`pyprof.native.cutter`) and whose slices are pairs is written from its columns; any
    other run is read in Python (both write the same bytes). ``runs``: the range's runs, when
    not read here (:class:`Tail`)."""
    written = {metadata_key(ev) for ev in known}
    found: list[tuple[bytes, dict[str, Any]]] = []
    nesting = Nesting()
    native = _cutter.available()

    def python_run(run: bytes) -> list[dict[str, Any]]:
        events = _events(run)
        try:
            phases = list(map(dict.get, events, repeat("ph")))
        except TypeError:
            raise Refused from None  # an element that is no event object
        if "M" in phases:
            kept = []
            for ev, ph in zip(events, phases):
                if ph == "M":
                    key = metadata_key(ev)
                    if key in written:
                        continue
                    written.add(key)
                    found.append((key, ev))
                    ev = dict(ev)  # the store keeps the event as read
                kept.append(ev)
            events = kept
            phases = list(map(dict.get, events, repeat("ph")))
        if not SLICE_PHASES.isdisjoint(phases):
            nesting.feed(list(compress(events, map(SLICE_PHASES.__contains__, phases))))
        return events

    def batches() -> Iterator[list[dict[str, Any]] | _cutter.Run]:
        yield [dict(ev) for ev in known]
        for run in _runs(raw, lo, hi) if runs is None else runs:
            read = _cutter.read(run) if native else None
            if read is not None and _pairs_fed(nesting, read):
                for i, text in read.metadata():  # each metadata event once, as python_run
                    ev = orjson.loads(text)
                    key = metadata_key(ev)
                    if key in written:
                        read.skip[i] = True
                    else:
                        written.add(key)
                        found.append((key, ev))
                yield read
            else:
                if keep is not None:
                    keep.clean = False  # read in Python: the annotation reads the file back
                yield python_run(run)
        tail = [dict(ev) for ev in extra]
        nesting.feed([ev for ev in tail if ev.get("ph") in SLICE_PHASES])
        nesting.finish()
        yield tail

    if out is None:
        for batch in batches():
            ids.reserve_run(batch) if isinstance(batch, _cutter.Run) else ids.reserve(batch)
        return 0, found
    if keep is not None:
        keep.reset()
        for batch in batches():
            if isinstance(batch, _cutter.Run):
                changed, sep = ids.apply_run(batch), batch.lines()
                keep.add_run(batch, *batch.patched_at(changed, sep), changed, len(sep))
            else:
                ids.apply(batch)
                keep.add_events(batch)
        return keep.count, found
    with TraceWriter(out, gzip=False) as w:
        for batch in batches():
            if isinstance(batch, _cutter.Run):
                # on lines already (where that is the same bytes): the writer's replace finds nothing
                w.write_serialized(batch.patched(ids.apply_run(batch), batch.lines()), batch.n)
            else:
                ids.apply(batch)
                w.write_all(batch)
    return w.count, found


def _pairs_fed(nesting: Nesting, run: _cutter.Run) -> bool:
    """Whether the slices of ``run`` are pairs (each begin followed at once by its end of the
    same string name, pid and tid, integer times), then fed to ``nesting``
    (:meth:`~pyprof.trace.slices.Nesting.feed_pairs`, else one by one as ``feed`` would:
    NeedsPlan raised where it would); False, nothing changed, otherwise."""
    at = np.flatnonzero(np.isin(run.ph, _SLICE_CODES))
    if not len(at):
        return True
    if len(at) % 2:
        return False
    b, e = at[0::2], at[1::2]
    if not ((run.ph[b] == _B).all() and (run.ph[e] == _E).all() and run.same[e].all()
            and run.ts_ok[at].all() and run.has[at, :2].all()
            and (run.ids[b, :2] == run.ids[e, :2]).all()):
        return False
    keys = list(zip(run.ids[b, 0].tolist(), run.ids[b, 1].tolist()))
    if not nesting.feed_pairs(keys, run.ts[b], run.ts[e]):  # nested (or NeedsPlan, raised)
        nesting.close_pairs(keys, run.ts[b].tolist(), run.ts[e].tolist())
    return True


def cut(raw: str, start: int, end: int | None, metadata: dict[bytes, dict[str, Any]], out: str,
        extra: Sequence[dict[str, Any]] = (), keep: Kept | None = None) -> int:
    """Write bytes ``[start, end)`` of ``raw`` (``end`` None: to its end) as a valid trace at
    ``out``, streamed (steps 1 to 3 of the module's list); new metadata events are added to
    ``metadata``. Returns the events written. With ``keep``, a window whose runs the C code all
    read is held there, not written (:class:`Kept`: ``keep.held``); any other is written.

    Raises:
        Refused: bytes the streaming reader does not read (``out`` is not written).
    """
    lo, hi = _body(raw, start, end)
    known = list(metadata.values())
    if keep is not None and keep.limit is not None and hi - lo > keep.limit:
        keep = None  # too large to hold: written, streamed
    with no_gc():
        return _cut(raw, lo, hi, known, metadata, out, extra, keep)


def _cut(raw: str, lo: int, hi: int | Callable[[], int], known: list[dict[str, Any]],
         metadata: dict[bytes, dict[str, Any]], out: str, extra: Sequence[dict[str, Any]],
         keep: Kept | None = None, runs: Iterable[bytes] | None = None) -> int:
    """:func:`cut` of ``[lo, hi)`` (``hi`` may be a function giving it, once ``runs``, the
    first pass's runs, are read)."""
    end = hi if callable(hi) else lambda: hi
    try:
        ids = _Ids()
        count, found = _pass(raw, lo, None if runs is not None else end(), known, extra, out, ids,
                             keep, runs)
        if ids.collided:  # the ids of the whole trace first, then the same pass again
            ids = _Ids()
            _pass(raw, lo, end(), known, extra, None, ids)
            count, found = _pass(raw, lo, end(), known, extra, out, ids, keep)
        if keep is not None:
            if keep.clean:
                keep.held = True
            else:
                keep.write(out)  # as the streamed pass writes it
    except NeedsPlan:  # the runs twice, by the plan; the store changed only when written
        if keep is not None:
            keep.reset()
        store = dict(metadata)
        count = write_events(lambda: (ev for run in _runs(raw, lo, end()) for ev in _events(run)),
                             store, out, extra)
        found = list(store.items())
    for key, ev in found:
        metadata.setdefault(key, ev)
    return count


class Tail:
    """The cut of a window begun before MXNet's last append to it (a session's stop: the dump
    that makes the raw file's size the window's end), on a thread of its own: the runs of what
    MXNet appends are cut as they come (a run once :data:`TAIL_RUN` bytes hold a separator),
    the rest once :meth:`end_at` gives the window's end and its extra events. :meth:`result`
    waits for it: the window :func:`cut` writes (or holds in ``keep``), the same bytes (the same
    events in other runs), or None where it may not be (the metadata events known changed
    since the start, bytes the streamed cut refuses, an error): the caller cuts then. The
    metadata store is read at the start and added to by :meth:`result` only; the thread writes
    a temporary file beside ``out`` (named as the writers name theirs), moved to ``out`` by
    :meth:`result`, deleted when it is not taken or :meth:`cancel` is called."""

    def __init__(self, raw: str, start: int, metadata: dict[bytes, dict[str, Any]], out: str,
                 keep: Kept | None = None) -> None:
        self.raw, self.start, self.out, self.keep = raw, start, out, keep
        fd, self._target = tempfile.mkstemp(prefix=f".pyprof-{os.getpid()}-", suffix=".tmp",
                                            dir=os.path.dirname(out) or ".")
        os.close(fd)
        self._cancelled = False
        self._known = dict(metadata)
        self._end: int | None = None
        self._extra: list[dict[str, Any]] = []
        self._bounds: tuple[int, int] | None = None
        self._cond = threading.Condition()
        self._done = threading.Event()
        self._result: tuple[int, dict[bytes, dict[str, Any]]] | None = None
        threading.Thread(target=self._work, name="pyprof-window-cut", daemon=True).start()

    def end_at(self, end: int, extra: Sequence[dict[str, Any]] = ()) -> None:
        """The window ends at byte ``end`` of the raw file (nothing appended before it is
        missing), its ``extra`` events written after its own."""
        with self._cond:
            self._extra[:] = extra
            self._end = end
            self._cond.notify_all()

    def cancel(self) -> None:
        """The window will not be taken: the thread ends, its file deleted."""
        with self._cond:
            self._cancelled = True
            if self._end is None:
                self._end = self.start
                self._cond.notify_all()
        if self._done.is_set():
            self._drop()

    def _drop(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self._target)

    def result(self, metadata: dict[bytes, dict[str, Any]]) -> int | None:
        """Wait for the cut: the events written at ``out`` or held (new metadata events added
        to ``metadata``), or None when it may not stand for the cut of now (nothing written,
        nothing added)."""
        self._done.wait()
        if self._result is None or list(metadata) != list(self._known):
            if self.keep is not None:
                self.keep.held = False
            self._drop()
            return None
        if self.keep is not None and self.keep.held:
            self._drop()
        else:
            os.replace(self._target, self.out)
        count, store = self._result
        for key, ev in store.items():
            metadata.setdefault(key, ev)
        return count

    def _hi(self) -> int:
        with self._cond:
            while self._end is None:
                self._cond.wait()
        if self._bounds is None:
            self._bounds = _body(self.raw, self.start, self._end)
        return self._bounds[1]

    def _work(self) -> None:
        try:
            with no_gc():
                lo = self._lo()
                store = dict(self._known)
                count = _cut(self.raw, lo, self._hi, list(store.values()), store, self._target,
                             self._extra, self.keep, self._growing(lo))
            self._hi()
            assert self._bounds is not None
            if self._bounds[0] == lo:
                self._result = (count, store)
        except Exception:  # noqa: BLE001 - the caller cuts again, and says what is wrong
            self._result = None
        finally:
            with self._cond:
                self._done.set()
                if self._cancelled:
                    self._drop()

    def _size(self) -> int:
        try:
            return os.path.getsize(self.raw)
        except FileNotFoundError:
            return 0

    def _lo(self) -> int:
        """Where the window's events begin, as :func:`_body` finds it (from as many bytes)."""
        while True:
            with self._cond:
                end = self._end
                if end is None and self._size() < self.start + _EDGE:
                    self._cond.wait(_TAIL_POLL)
                    continue
            return _body(self.raw, self.start, self.start + _EDGE if end is None else end)[0]

    def _growing(self, lo: int) -> Iterator[bytes]:
        """The runs of ``[lo, hi)``: while MXNet appends, each time at least :data:`TAIL_RUN`
        bytes hold a separator, those to the last; then the rest as :func:`_runs` cuts it."""
        pos, buf = lo, bytearray()
        try:
            f = open(self.raw, "rb")  # noqa: SIM115
        except FileNotFoundError:
            yield from _runs(self.raw, lo, self._hi())
            return
        with f:
            waiting = True
            while True:
                with self._cond:
                    if self._end is None and waiting:
                        self._cond.wait(_TAIL_POLL)
                    if self._end is not None:
                        break
                have = pos + len(buf)
                size = os.fstat(f.fileno()).st_size
                waiting = size - have <= TAIL_RUN  # else more to read at once: a run at a time
                if size > have:
                    f.seek(have)
                    buf += f.read(min(size - have, TAIL_RUN))
                if len(buf) > _MAX_RUN:
                    raise Refused  # no event separator
                if len(buf) >= TAIL_RUN and (at := buf.rfind(_SEPARATOR)) > 0:
                    at = _with_end(buf, 0, at)
                    if at > 0:
                        with memoryview(buf) as view:
                            run = view[:at].tobytes()  # one copy (bytes(buf[:at]) made two)
                        yield run
                        pos += at + len(_SEPARATOR)
                        del buf[:at + len(_SEPARATOR)]
        yield from _runs(self.raw, pos, max(pos, self._hi()))


def harvest(raw: str, start: int, end: int | None, metadata: dict[bytes, dict[str, Any]]) -> None:
    """Add the new metadata events of bytes ``[start, end)`` to ``metadata``, streamed: only runs
    that hold ``"M"`` are parsed.

    Raises:
        Refused: such a run does not parse.
    """
    lo, hi = _body(raw, start, end)
    for run in _runs(raw, lo, hi):
        if b'"M"' in run:
            for ev in _events(run):
                if type(ev) is dict and ev.get("ph") == "M":
                    metadata.setdefault(metadata_key(ev), ev)


# ---------------------------------------------------------------------------------- the plan

def write_events(source: Callable[[], Iterable[dict[str, Any]]],
                 metadata: dict[bytes, dict[str, Any]], out: str | None,
                 extra: Sequence[dict[str, Any]] = (), *, once: bool = False) -> int:
    """Write the events ``source()`` gives (called once per pass; ``once``: the first call's
    events are kept for the second pass) as one valid trace at ``out`` by the writers' plan
    (:mod:`pyprof.trace.slices`, two passes): every known metadata event first, each metadata
    event once, then ``extra``. New metadata events are added to ``metadata``; without ``out``
    only that. Returns the events written."""
    kept: list[dict[str, Any]] | None = None

    def read(phases: set[str] | None = None) -> Iterator[dict[str, Any]]:
        nonlocal kept
        events: Iterable[dict[str, Any]] = kept if kept is not None else source()
        if once and kept is None:
            kept = events = list(events)
        for ev in events:
            if phases is None or ev.get("ph") in phases:
                yield ev

    if out is None:
        for ev in read({"M"}):
            metadata.setdefault(metadata_key(ev), ev)
        return 0
    known = dict(metadata)

    def events(record: bool) -> Iterator[dict[str, Any]]:
        """The window's events: known metadata first, then the source's, each once."""
        written = set(known)
        yield from known.values()
        for ev in read():
            if ev.get("ph") == "M":
                key = metadata_key(ev)
                if key in written:
                    continue
                written.add(key)
                if record:
                    metadata[key] = ev
            yield ev
        yield from (dict(ev) for ev in extra)

    ids = IdMap(renumber_all=False)
    rewriter = Rewriter(plan_slices(events(record=True), ids), ids, keep_pairs=True)
    with TraceWriter(out, gzip=False) as w:
        for ev in rewriter.rewrite(events(record=False)):
            w.write(ev)
    return w.count


def _tolerant(paths: list[str]) -> Callable[[], Iterator[dict[str, Any]]]:
    def source() -> Iterator[dict[str, Any]]:
        for path in paths:
            # newline="": a raw CR in a name is no line break (universal newlines made it one)
            with open(path, encoding="utf-8", errors="replace", newline="") as f:
                yield from parse_raw(f.read(), path)
    return source


def read_range(raw: str, start: int, end: int | None, metadata: dict[bytes, dict[str, Any]],
               out: str | None, scratch: str | None = None,
               extra: Sequence[dict[str, Any]] = (), *, streamed: bool = True,
               keep: Kept | None = None, tail: Tail | None = None) -> int:
    """Read the events in bytes ``[start, end)`` of ``raw`` (``end`` None: to the end).

    New metadata events are added to ``metadata``. With ``out``, a valid trace is written there:
    all known metadata events first, then the range's other events, then ``extra``; returns
    events written. The window is valid as every trace pyprof writes (docs/trace-format.md).
    Streamed (:func:`cut`, :func:`harvest`); bytes that refuses (or all, without ``streamed``)
    are read whole, the tolerant way, from a copy in ``scratch`` (default: beside ``out``, else
    ``raw``), named ``.pyprof-<pid>-segment-*.json`` so that a dead process's copy is recognised
    and deleted. With ``keep`` (and ``out``), a window the C code read whole is held there, not
    written (:class:`Kept`). ``tail``: the cut of this range begun before its last append
    (:class:`Tail`), taken when it may be.
    """
    if tail is not None and out is not None:
        count = tail.result(metadata)
        if count is not None:
            if tail.keep is not None and tail.keep.held and keep is not tail.keep:
                tail.keep.write(out)  # held for an annotation that is not made
            return count
    try:
        if not streamed:
            pass
        elif out is None:
            harvest(raw, start, end, metadata)
            return 0
        else:
            return cut(raw, start, end, metadata, out, extra, keep)
    except Refused:
        pass
    fd, segment = tempfile.mkstemp(prefix=f".pyprof-{os.getpid()}-segment-", suffix=".json",
                                   dir=scratch or os.path.dirname(out or raw) or ".")
    try:
        with os.fdopen(fd, "wb") as dst:
            _copy_range(raw, start, end, dst)
        present = [segment] if os.path.getsize(segment) > 0 else []
        return write_events(_tolerant(present), metadata, out, extra, once=True)
    finally:
        os.unlink(segment)


def join(sources: list[str], out: str, metadata: dict[bytes, dict[str, Any]]) -> int:
    """:func:`write_events` over whole files (MXNet traces, finished or not, with or without
    their header), in order, read the tolerant way; a missing or empty one adds nothing."""
    present = [s for s in sources if os.path.exists(s) and os.path.getsize(s) > 0]
    return write_events(_tolerant(present), metadata, out, once=len(present) == 1)


def _copy_range(path: str, start: int, end: int | None, dst: IO[bytes]) -> None:
    try:
        src = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return  # nothing was ever flushed
    with src:
        src.seek(start)
        left = None if end is None else max(0, end - start)
        while left is None or left > 0:
            chunk = src.read(1 << 20 if left is None else min(1 << 20, left))
            if not chunk:
                break
            dst.write(chunk)
            if left is not None:
                left -= len(chunk)
