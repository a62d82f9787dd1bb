"""Matching recorded calls (:mod:`pyprof.attribution.capture`) to their operator events in a
window, checking each match against the memory counter, and writing the args into the trace.

The rule (``attribution.json matching``): operator events are taken in order of their start;
an event is matched to the unmatched recorded call of its operator (by handle: aliases are one
operator), made before the event started, whose producers have all ended by then, with the
earliest *ready time* (the call's return, or its producers' last end when later; ties: the
earlier call). A call's producers are its inputs' (views inherit their source's: one engine
variable) and, for an operator that requests temp space, the call that took the same one of
the calling thread's round-robin copies before it (``matching.resources``); a call writing
the caller's arrays (``out=``) that earlier calls read or wrote, and calls taking the random
resource, have no known ready moment (they tie with the other ready calls); a producer whose operator
has no event in the window (a hybridized block's node inside an ``ImperativeBulk``) counts as
ended. A device with one FIFO
worker (MXNet's CPU default) runs its operators in the order they became ready, so the match
is exact there when the trace orders the chosen call's readiness before every other ready
candidate's; when it cannot (one completion released both through different variables, or a
push raced a completion) the memory counter decides if it tells them apart (label ``memory``),
else the event is labelled ``ambiguous``. With several workers per device (the GPU default,
``MXNET_CPU_WORKER_NTHREADS`` > 1) an event with more than one ready candidate is labelled
``ambiguous`` instead of being claimed exact.

The memory check: the rise of the device's ``Memory: <device>`` counter inside the event, on
the event's thread, equals the bytes of the call's outputs; made only where the trace tells the
rise (:mod:`pyprof.attribution.memory`), and counted as unchecked with a reason otherwise
(``matching.memory_unchecked``). Pure Python over the window's file; no C function is called.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson

from .. import rules
from ..errors import PyprofError
from ..trace.jsonscan import no_gc
from ..trace.naming import BOOKKEEPING as _BOOKKEEPING
from ..trace.naming import is_bulk_name, is_one_operator_segment
from ..trace.slices import SLICE_PHASES, closed_slices
from ..trace.writer import TraceWriter
from . import flops as _flops
from .calls import HANDLES, Call, dtype_name
from .engine import temp_chain, workers_per_device
from .memory import SAMPLE_NEEDLE, CounterSamples, hidden_of
from .segments import (ENGINE_BULK, SUBGRAPHS, bulk_runs, external_deps, group_of, merged,
                       node_blocks, node_names, node_ops, segment_ops)


_SPEC: dict[str, Any] = rules.spec("attribution.json")
#: The trace args' names (attribution.json ``trace_args``).
ARGS: dict[str, str] = {k: v for k, v in _SPEC["trace_args"].items() if k != "about"}
_M: dict[str, Any] = _SPEC["matching"]
#: Operator events that are the engine's own work, never a recorded call (trace.json
#: ``bookkeeping``, the rule the summaries read too).
BOOKKEEPING = _BOOKKEEPING
_CATEGORIES = frozenset(_M["categories"])
_LABELS: dict[str, str] = _M["match_labels"]
_CALL: str = _SPEC["capture"]["sources"]["call"]
# calls whose outputs are allocated inside their events: the counter checks them
_ALLOCATING = (_CALL, _SPEC["capture"]["sources"]["autograd"])
_EXECUTOR: str = _SPEC["capture"]["sources"]["executor"]
_AUTOGRAD: str = _SPEC["capture"]["sources"]["autograd"]
#: A window file larger than this (bytes) is kept as cut, without args: annotating reads the
#: whole window into memory (attribution.json capture.max_annotate_bytes; tests lower it).
MAX_ANNOTATE_BYTES: int = _SPEC["capture"]["max_annotate_bytes"]
_SLICE_CODES = np.array(sorted(map(ord, SLICE_PHASES)), np.uint8)
_CODE = type((lambda: 0).__code__)  # types.CodeType


@dataclasses.dataclass(frozen=True)
class MatchReport:
    """What matching one window found.

    Attributes:
        calls: recorded calls; events: operator events that are not bookkeeping.
        matched: events given a call (``exact`` + ``ambiguous`` + ``by_memory`` of them).
        unmatched_calls: calls no event took; unmatched_events: non-bookkeeping operator
            events with no call, by name -> count.
        memory_checked / memory_passed: matches whose counter rise could be checked / equalled
            the outputs' bytes.
        by_memory: matches labelled ``memory`` (a tie the rule could not order, decided by the
            counter's rise: not checked).
        memory_unchecked: matches not checked, by reason (a key of ``attribution.json
            matching.memory_unchecked``) -> count; with memory_checked they make ``matched``.
        recorder: which recorder ran the imperative calls (``Recorder.kind``: native, python).
        bulk_segments: the window's events of bulk segments of several operators
            (``ImperativeBulk``, ``[dot,relu]``, ...), by name -> count.
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
    by_memory: int = 0
    memory_unchecked: dict[str, int] = dataclasses.field(default_factory=dict)
    recorder: str = ""
    bulk_segments: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def memory_share(self) -> float | None:
        """The share of checked matches that pass the memory check (None when none was)."""
        return self.memory_passed / self.memory_checked if self.memory_checked else None

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "memory_share": self.memory_share}


class _Event:
    __slots__ = ("index", "name", "pid", "tid", "start", "end", "device")

    def __init__(self, index: int, name: str, pid: Any, tid: Any, start: Any, end: Any,
                 device: str) -> None:
        self.index, self.name, self.pid, self.tid = index, name, pid, tid
        self.start, self.end, self.device = start, end, device


def _operator_events(events: Sequence[dict[str, Any]], paired: Sequence | None = None) -> list[_Event]:
    """Operator slices (paired as every trace reader pairs them), in order of their start; the
    index is the B (or X) event's. ``paired``: ``closed_slices(events)`` already made."""
    devices: dict[Any, str] = {}
    out = []
    for _, ev, closed in (closed_slices(events) if paired is None else paired):
        if ev.get("ph") == "M" and ev.get("name") == "process_name":
            devices[ev.get("pid")] = str((ev.get("args") or {}).get("name"))
        elif closed is not None and closed[1].get("cat", ev.get("cat")) in _CATEGORIES:
            b, bev, dur = closed
            out.append(_Event(b, str(bev.get("name")), bev.get("pid"), bev.get("tid"), bev["ts"],
                              bev["ts"] + dur, devices.get(bev.get("pid"), "")))
    out.sort(key=lambda e: (e.start, e.index))
    return out


class _Ready:
    """When a candidate call reached the worker's queue: ``point`` the rule's time (the call's
    return, or its last producer's end), ``lo``/``hi`` the bounds of the real moment, ``bind``
    what made it ready (``("push", thread)`` or ``(producer seq, engine variable)``; None when
    two things did at the same stamp)."""

    __slots__ = ("call", "point", "lo", "hi", "bind")

    def __init__(self, call: Call, point: Any, lo: Any, hi: Any, bind: Any) -> None:
        self.call, self.point, self.lo, self.hi, self.bind = call, point, lo, hi, bind

    def surely_before(self, other: _Ready) -> bool:
        """This call certainly reached the queue of one FIFO worker before ``other``: its moment
        ends before the other's begins, or both were made ready by one thing that releases
        them in call order (one thread's pushes; one variable's waiting readers)."""
        return self.hi < other.lo or (self.bind is not None and self.bind == other.bind)


def _ready(c: Call, deps: list, ended: dict, after: dict, first: int, start: Any,
           unsure: bool = False) -> _Ready | None:
    """``unsure``: a producer of ``c`` has no event in the window (inside an ``ImperativeBulk``):
    it counts as ended, but when ``c`` became ready is not known (no order is proven)."""
    point, lo, hi, bind = c.pushed_us, c.t_us, c.pushed_us, ("push", c.thread)
    for p, var in deps:
        if p < first or p < 0:
            continue  # made before the window (or never recorded): ended
        end = ended.get(p)
        if end is None or end > start:
            return None
        # released in the producer's completion: after its end, before its worker's next event
        lo, hi = max(lo, end), max(hi, after[p])
        if end > point:
            point, bind = end, (p, var)
        elif end == point and bind != (p, var):
            bind = None
    if unsure:
        hi, bind = float("inf"), None
    return _Ready(c, point, lo, hi, bind)


def _dependencies(calls: Sequence[Call], chain: dict[int, int]) -> dict[int, list]:
    """call seq -> [(producer seq, engine variable)]: its inputs' and its temp-space copy's."""
    deps: dict[int, list] = {}
    for c in calls:
        slots = getattr(c, "slots", ()) or ()
        d = [(p, ("out", p, slots[i] if i < len(slots) else -1)) for i, p in enumerate(c.producers)]
        if c.seq in chain:
            d.append((chain[c.seq], ("temp", chain[c.seq])))
        deps[c.seq] = d
    return deps


def _writes_after_reads(calls: Sequence[Call]) -> set[int]:
    """The calls writing the caller's arrays (``out=``, in place: :attr:`Call.fresh` False)
    that calls before them read since their last write, or wrote: MXNet's engine runs such a
    write after those reads and that write, which the rule cannot take as producers (a freed
    array's address may be a new array's), so when the call became ready is not known."""
    if not any(c.fresh is not None and c.outputs for c in calls):
        return set()
    out: set[int] = set()
    readers: dict[Any, set[int]] = {}  # handle -> the calls reading it since its last write
    written: set[Any] = set()
    for c in sorted(calls, key=lambda c: c.seq):
        if c.fresh is not None and any(
                not new and (readers.get(h, set()) - {c.seq} or h in written)
                for h, new in zip(c.outputs or (), c.fresh)):
            out.add(c.seq)
        for h in c.inputs or ():
            readers.setdefault(h, set()).add(c.seq)
        for h in c.outputs or ():
            readers[h] = set()
            written.add(h)
    return out


_RANDOM: dict[str, list[str]] = _M["resources"]["random"]


def _takes_random(name: str) -> bool:
    """The operator takes one of MXNet's random resources (``matching.resources.random``)."""
    return name in _RANDOM["names"] or name.startswith(tuple(_RANDOM["prefixes"]))


def match(calls: Sequence[Call], events: Sequence[dict[str, Any]], *,
          env: dict[str, str] | None = None, rise: Callable[[_Event], int | None] | None = None,
          nbytes: Callable[[Call], int | None] | None = None, paired: Sequence | None = None,
          ops: list[_Event] | None = None,
          ) -> tuple[dict[int, tuple[Call, str, tuple[Call, ...]]], list[_Event]]:
    """Match ``calls`` to the operator events of ``events`` (a window's trace events):
    ``{event index: (call, label, the calls of the event)}`` and the operator events, by the
    module's rule; a bulk segment's event (``[dot,relu]``) takes a run of node calls of one
    invocation (:mod:`pyprof.attribution.segments`), whose first is the call. ``rise``
    (the memory counter's certain rise inside an event, or None) and ``nbytes`` (a call's
    outputs' bytes, or None) let memory decide a tie the rule cannot order. ``paired``:
    ``closed_slices(events)`` when already made; ``ops``: the operator events when already
    made (``events`` is not read then)."""
    if ops is None:
        ops = _operator_events(events, paired)
    deps = _dependencies(calls, temp_chain(calls, (o.device for o in ops), env))
    # calls whose operator has no event in the window (a hybridized block's nodes inside an
    # ImperativeBulk) never end here: they hold nothing back
    names = {ev.name: segment_ops(ev.name) for ev in ops}
    present = {h for v in names.values() for op, post in node_ops(v or ()) for h in (op, *post)}
    by_seq = {c.seq: c for c in calls}
    # an executor's nodes run in its bracket segments when the window holds such (bulk mode)
    bulked = {h for n, v in names.items() if n.startswith("[") for op, post in node_ops(v or ())
              for h in (op, *post)}
    unseen = {c.seq for c in calls if c.op not in present}
    unsure: set[int] = set()  # calls reading a gradient such a backward node wrote: when they
    if unseen:  # became ready is not known (a hybridized block's forward nodes count as ended)
        grads = {c.seq for c in calls if c.seq in unseen and c.source == _AUTOGRAD}
        unsure = {k for k, v in deps.items() if any(d[0] in grads for d in v)}
        deps = {k: [d for d in v if d[0] not in unseen] for k, v in deps.items()}
    randoms = {c.seq for c in calls if _takes_random(c.name)}
    if len(randoms) > 1:  # they wait for each other in an order the calls do not tell
        unsure |= randoms
    unsure |= _writes_after_reads(calls)
    # the engine bulk's events list no operators: their candidates are the runs MXNet's engine
    # cut of the calls without an event of their own (segments.bulk_runs), in call order
    runs = {r[0].seq: r for r in bulk_runs(calls, unseen, env)} if ENGINE_BULK in names else {}
    run_heads = sorted((r[0] for r in runs.values()), key=lambda c: (c.t_us, c.seq))
    pending: dict[int, list[Call]] = {}
    # in call-time order: seqs are taken after the call returns, so another thread's later seq
    # may be an earlier call, and the scan below stops at the first call after the event
    for c in sorted(calls, key=lambda c: (c.t_us, c.seq)):
        pending.setdefault(c.op, []).append(c)
    starts: dict[Any, list] = {}
    for o in ops:
        starts.setdefault(o.tid, []).append(o.start)
    first = min((c.seq for c in calls), default=0)
    ended: dict[int, Any] = {}  # call seq -> its event's end
    after: dict[int, Any] = {}  # call seq -> the next event start on its event's thread
    tainted: set[int] = set()  # calls of a tie guessed at: their own match is a guess too
    out: dict[int, tuple[Call, str, tuple[Call, ...]]] = {}
    workers: dict[str, int] = {}
    done: set[int] = set()  # matched calls
    # a call's own event (not a segment's) sees only the calls whose producers have all been
    # matched: once they are, its readiness is fixed but for its producers' last end (``gate``)
    # against the event's start. ``pool``: op -> those calls, in call-time order, with it
    missing: dict[int, int] = {}  # call seq -> its producers in the window not matched yet
    waiting: dict[int, list[Call]] = {}  # producer seq -> the calls it holds back
    pool: dict[int, tuple[list[tuple], list[tuple[_Ready, Any]]]] = {}  # (keys, entries)

    def release(c: Call) -> None:
        d = deps[c.seq]
        r = _ready(c, d, ended, after, first, float("inf"), c.seq in unsure)
        assert r is not None
        gate = max((ended[p] for p, _ in d if p >= first and p >= 0), default=float("-inf"))
        keys, got = pool.setdefault(c.op, ([], []))
        k = bisect.bisect_left(keys, (c.t_us, c.seq))
        keys.insert(k, (c.t_us, c.seq))
        got.insert(k, (r, gate))

    for c in calls:
        k = 0
        for p, _ in deps[c.seq]:
            if p >= first and p >= 0:
                k += 1
                waiting.setdefault(p, []).append(c)
        missing[c.seq] = k
    for c in calls:
        if not missing[c.seq]:
            release(c)
    for ev in ops:
        seg = names[ev.name]
        if ev.name in BOOKKEEPING or seg is None:
            continue
        engine_bulk = ev.name == ENGINE_BULK
        heads = node_ops(seg)
        todo = run_heads if engine_bulk else pending.get(heads[0][0])
        if not todo or todo[0].t_us > ev.start:
            continue
        # a segment: its calls are a run of nodes
        bulk = engine_bulk or seg != [ev.name] or ev.name in SUBGRAPHS
        groups: dict[int, tuple[Call, ...]] = {}
        n = workers.get(ev.device)
        if n is None:
            n = workers[ev.device] = workers_per_device(ev.device, env)
        best: _Ready | None = None
        ready: list[_Ready] = []
        for r, gate in () if bulk else pool.get(heads[0][0], ((), ()))[1]:
            c = r.call
            if c.t_us > ev.start:
                break  # the rest were called later still
            if n == 1 and best is not None and c.t_us > best.hi:
                break  # no later call was ready before the best (ready >= called, in call order)
            if gate > ev.start or c.source == _EXECUTOR and c.op in bulked:
                continue
            groups[c.seq] = (c,)
            ready.append(r)
            if best is None or (r.point, r.call.seq) < (best.point, best.call.seq):
                best = r
        if best is None and not bulk:
            # none ready: every call made before the event is a candidate of the fallback below
            for c in todo:
                if c.t_us > ev.start:
                    break
                if not (c.source == _EXECUTOR and c.op in bulked):
                    groups[c.seq] = (c,)
        for c in todo if bulk else ():
            if c.t_us > ev.start:
                break  # the rest were called later still
            if n == 1 and best is not None and c.t_us > best.hi:
                break  # no later call was ready before the best (ready >= called, in call order)
            g = runs[c.seq] if engine_bulk else group_of(c, heads, by_seq, done) if bulk else (c,)
            if g is None or not bulk and c.source == _EXECUTOR and c.op in bulked:
                continue
            groups[c.seq] = g
            r = _ready(c, external_deps(g, deps) if bulk else deps[c.seq], ended, after, first, ev.start,
                       any(x.seq in unsure for x in g))
            if r is not None:
                ready.append(r)
                if best is None or (r.point, r.call.seq) < (best.point, best.call.seq):
                    best = r
        if best is None:
            # no candidate ready: a dependency the rule does not see (an earlier match was
            # wrong, or the engine held the call back); the earliest call, labelled, so
            # nothing cascades
            if not groups:
                continue  # no run of nodes fits the segment
            c, label = by_seq[min(groups)], _LABELS["ambiguous"]
        elif n > 1:
            c, label = best.call, _LABELS["exact" if len(ready) == 1 else "ambiguous"]
        else:
            c, label = best.call, _LABELS["exact"]
            tie = [r for r in ready if r is not best and not best.surely_before(r)]
            if tie:
                tie.append(best)
                want = rise(ev) if rise is not None and nbytes is not None else None
                fits = [r.call for r in tie if want is not None and nbytes(r.call) == want]
                if len(fits) == 1:
                    c, label = fits[0], _LABELS["memory"]
                else:
                    label = _LABELS["ambiguous"]
                    tainted.update(r.call.seq for r in tie)
        if (c.seq in tainted or c.unproven) and label == _LABELS["exact"]:
            label = _LABELS["ambiguous"]  # a label is a proof: not where a writer is unknown
        s = starts[ev.tid]
        k = bisect.bisect_right(s, ev.end)
        if engine_bulk:
            run_heads.remove(c)
        for x in groups[c.seq]:
            pending[x.op].remove(x)
            done.add(x.seq)
            ended[x.seq] = ev.end
            after[x.seq] = s[k] if k < len(s) else ev.end
            if not missing[x.seq]:  # in the pool: leave it
                keys, got = pool[x.op]
                j = bisect.bisect_left(keys, (x.t_us, x.seq))
                del keys[j], got[j]
        for x in groups[c.seq]:
            for y in waiting.get(x.seq, ()):
                missing[y.seq] -= 1
                if not missing[y.seq] and y.seq not in done:
                    release(y)
        out[ev.index] = (c, label, groups[c.seq])
    return out, ops


def _nbytes(shapes: list | None, dtypes: list | None) -> int | None:
    if shapes is None or any(s is None for s in shapes):
        return None
    try:
        return _flops.bytes_moved("_copy", [], output_shapes_=shapes, output_dtypes=dtypes)
    except PyprofError:
        return None


def _counts(name: str, c: Call, memo: dict | None = None) -> tuple[int | None, int | None]:
    """(FLOPs, bytes) of call ``c`` of operator ``name`` (None where unknown); ``memo`` keeps
    them by operator, shapes, dtypes and attributes (a model's forwards repeat the same calls)."""
    if memo is not None:
        ck = call_key(c)
        if ck is None:  # something unhashable: computed each time
            return _counts(name, c)
        key = (name, ck)
        got = memo.get(key)
        if got is None:
            got = memo[key] = _counts(name, c)
        return got
    ins, outs, attrs = c.shapes("in"), c.shapes("out"), c.attrs()
    if ins is None or None in ins or None in outs:
        return None, None
    try:
        f = _flops.flops(name, ins, attrs)
    except PyprofError:
        f = None
    try:
        b = _flops.bytes_moved(name, ins, attrs, dtypes=c.dtypes("in") or None,
                               output_shapes_=outs, output_dtypes=c.dtypes("out"))
    except PyprofError:
        b = None
    return f, b


def _meta_key(meta: list | None) -> tuple | None:
    return None if meta is None else tuple(None if m is None else (m[0], m[1]) for m in meta)


def _args_key(c: Call, label: str, names: list[str]) -> tuple | None:
    """What :func:`_args` reads of one call ``c`` (code objects by identity: equal code of
    two files would name one file), or None when something in it cannot be a key."""
    ck = call_key(c)
    if ck is None:
        return None
    try:
        stack = None if c.stack is None else tuple(
            id(x) if type(x) is _CODE else x for x in c.stack)
        key = (label, tuple(names), c.thread, c.block, c.source, stack, ck)
        hash(key)
    except TypeError:
        return None
    return key


def _args(group: Sequence[Call], label: str, opts: dict[str, bool], names: list[str],
          threads: dict[int, str], memo: dict | None = None) -> dict:
    """The args of an event whose calls are ``group`` (one, or a segment's nodes), of operators
    ``names`` (the event's name for one call)."""
    a: dict[str, Any] = {}
    c = merged(group)
    ins, outs = c.shapes("in"), c.shapes("out")
    if ins is not None:
        a[ARGS["input_dims"]] = [s if s is not None else [] for s in ins]
        a[ARGS["input_type"]] = c.dtypes("in")
        a[ARGS["output_dims"]] = [s if s is not None else [] for s in outs]
        a[ARGS["output_type"]] = c.dtypes("out")
        if len(group) == 1:
            a[ARGS["attrs"]] = c.attrs()
        elif all(x.in_meta is not None for x in group):  # a segment's nodes and their inputs
            a[ARGS["segment"]] = [[n, [s if s is not None else [] for s in x.shapes("in")]]
                                  for n, x in zip(names, group)]
    a[ARGS["thread"]] = threads.get(c.thread, f"thread {c.thread}")
    if c.block is not None:
        a[ARGS["block"]] = c.block
    if len(group) > 1 and (blocks := node_blocks(group)) is not None:
        a[ARGS["blocks"]] = blocks
    a[ARGS["source"]] = c.source
    if c.stack is not None:
        a[ARGS["call_site"]] = c.call_site()
        a[ARGS["stack"]] = c.frames()
    if opts.get("with_flops"):
        # a segment's: the sums over its nodes with a formula; uncounted names the others
        counts = [_counts(n, x, memo) for n, x in zip(names, group)]
        for key, k in (("flops", 0), ("bytes", 1)):
            if any(x[k] is not None for x in counts):
                a[ARGS[key]] = sum(x[k] for x in counts if x[k] is not None)
        if len(group) > 1 and ARGS["flops"] in a and any(x[0] is None for x in counts):
            a[ARGS["uncounted"]] = [n for n, x in zip(names, counts) if x[0] is None]
    a[ARGS["match"]] = label
    return a


def annotate(path: str | os.PathLike[str], calls: Sequence[Call], options: dict[str, bool], *,
             threads: dict[int, str] | None = None, env: dict[str, str] | None = None,
             kept: Any = None) -> MatchReport:
    """Match ``calls`` to the operator events of the window trace at ``path`` and write their
    args there (the file is rewritten, atomically; events keep their order). ``options``: the
    session's ``record_shapes``/``with_stack``/``with_flops``; ``threads``: thread ident -> name.
    ``kept``: the cut's :class:`pyprof.trace.rawcut.Kept`; when it holds the window (not written
    yet), the window is annotated from its columns and written once, the same bytes.

    Raises TraceError when the file cannot be rewritten."""
    with no_gc():  # the window's events and what is made of them: no cycle, no garbage
        if kept is not None and kept.held:
            report = _annotate_held(kept, os.fspath(path), calls, options, threads, env)
            if report is not None:
                return report
            kept.write(os.fspath(path))  # as cut, read back below
        return _annotate(path, calls, options, threads, env)


def _annotate(path: str | os.PathLike[str], calls: Sequence[Call], options: dict[str, bool],
              threads: dict[int, str] | None, env: dict[str, str] | None) -> MatchReport:
    with open(path, "rb") as f:
        doc = orjson.loads(f.read())
    events = doc["traceEvents"]
    paired = list(closed_slices(events))  # once, for the counter and the matching
    report, changed = _match_args(calls, options, threads, env, _operator_events(events, paired),
                                  CounterSamples(events, paired), events.__getitem__)
    with TraceWriter(path, gzip=False, display_time_unit=doc.get("displayTimeUnit", "ms"),
                     top_level={k: v for k, v in doc.items() if k != "traceEvents"}) as w:
        w.write_all(events)
    return report


def _held_operator_events(kept: Any, flat: tuple, begins: Any, ends: Any) -> list[_Event]:
    """:func:`_operator_events` of a window held in memory (:class:`pyprof.trace.rawcut.Kept`):
    its slices are pairs (``begins``/``ends``: their events' numbers), the begins read."""
    ts = flat[1]
    b, e = begins.tolist(), ends.tolist()
    bevs = kept.read(b)
    no_cat = [k for k, bev in enumerate(bevs) if "cat" not in bev]
    ecat = dict(zip(no_cat, (ev.get("cat") for ev in kept.read([e[k] for k in no_cat]))))
    # the devices, as a reader in order sees them: process_name events before the slice's end
    meta = [(i, ev) for i, ev in kept.dicts() if ev.get("ph") == "M"]
    m = np.flatnonzero((flat[0] == ord("M")) & flat[4]).tolist()
    meta = sorted(meta + list(zip(m, kept.events(m))), key=lambda x: x[0])
    meta = [(i, ev) for i, ev in meta if ev.get("name") == "process_name"]
    devices: dict[Any, str] = {}
    at = 0
    out = []
    for k, (bev, end) in enumerate(zip(bevs, ts[ends].tolist())):
        while at < len(meta) and meta[at][0] < e[k]:
            ev = meta[at][1]
            devices[ev.get("pid")] = str((ev.get("args") or {}).get("name"))
            at += 1
        if bev.get("cat", ecat.get(k)) in _CATEGORIES:
            out.append(_Event(b[k], str(bev.get("name")), bev.get("pid"), bev.get("tid"), bev["ts"],
                              end, devices.get(bev.get("pid"), "")))
    out.sort(key=lambda e: (e.start, e.index))
    return out


def _annotate_held(kept: Any, path: str, calls: Sequence[Call], options: dict[str, bool],
                   threads: dict[int, str] | None, env: dict[str, str] | None) -> MatchReport | None:
    """:func:`annotate` of a window held in memory, written at ``path`` once (as :func:`annotate`
    writes it); None (nothing written) where the held columns do not tell the slices (a slice
    among its dicts): read the file then."""
    flat = kept.flat()
    if any(ev.get("ph") in SLICE_PHASES for _, ev in kept.dicts()):
        return None
    at = np.flatnonzero(np.isin(flat[0], _SLICE_CODES) & flat[4])
    begins, ends = at[0::2], at[1::2]
    ops = _held_operator_events(kept, flat, begins, ends)
    samples = CounterSamples(parts=CounterSamples.held_parts(kept, flat, begins, ends))
    wanted: dict[int, dict] = {}

    def event(index: int) -> dict:
        got = wanted.get(index)
        if got is None:
            got = wanted[index] = kept.events([index])[0]
        return got

    def prefetch(found: Any) -> None:
        numbers = sorted(found)
        wanted.update(zip(numbers, kept.read(numbers)))  # the begins read ahead, changed now
        kept.forget_read()

    report, changed = _match_args(calls, options, threads, env, ops, samples, event, prefetch)
    kept.write(path, changed)
    return report


def expected_bytes(calls: Sequence[Call]) -> None:
    """Set each call's :attr:`Call.nbytes` (what the memory counter should rise by): done by the
    matching where not done before, by a session while MXNet appends the window's last events."""
    sizes: dict = {}
    for c in calls:
        if c.nbytes == -1:
            c.nbytes = _nbytes_of(c, sizes)


def call_key(c: Call) -> tuple | None:
    """Call ``c``'s shapes, dtypes and attributes as one hashable value (made once, kept on
    the call), or None when something in them cannot be a key."""
    got = c.key
    if got == -1:
        try:
            got = (_meta_key(c.in_meta), _meta_key(c.out_meta), tuple(c.keys), tuple(c.vals))
            hash(got)
        except TypeError:
            got = None
        c.key = got
    return got


def _nbytes_of(c: Call, sizes: dict) -> int | None:
    # by what it reads of the call: a model's forwards repeat the same calls
    try:
        ck = call_key(c)
        if ck is None:
            raise TypeError
        key = (c.source, c.op, ck, c.fresh, c.training)
        got = sizes.get(key, sizes)
    except TypeError:  # something unhashable: computed each time
        return _call_bytes(c)
    if got is sizes:
        got = sizes[key] = _call_bytes(c)
    return got


def _call_bytes(c: Call) -> int | None:
    # a CachedOp allocates its graph's arrays by its memory plan, ahead of its nodes: the
    # counter neither checks nor chooses a node's match
    if c.source not in _ALLOCATING:
        return None
    s, d = c.shapes("out"), c.dtypes("out")
    if c.fresh is not None and s is not None:
        keep = [k for k, f in enumerate(c.fresh) if f]
        s, d = [s[k] for k in keep], [d[k] for k in keep]
    got = _nbytes(s, d)
    if got is None or c.source != _CALL:
        return got
    # what the operator allocates beyond the outputs it returns (matching.hidden_outputs)
    extra = hidden_of(c)
    if extra is None:
        return None
    return got + (_nbytes([list(x[0]) for x in extra], [dtype_name(x[1]) for x in extra]) or 0)


def _match_args(calls: Sequence[Call], options: dict[str, bool], threads: dict[int, str] | None,
                env: dict[str, str] | None, ops: list[_Event], samples: CounterSamples,
                event: Callable[[int], dict], prefetch: Callable[[Any], None] | None = None,
                ) -> tuple[MatchReport, dict[int, dict]]:
    """Match ``calls`` to ``ops`` and set the args of each event matched (``event(index)``: the
    window's event, changed in place): the report, and the events changed by index."""

    rises: dict[int, tuple] = {}  # by event: the matching asks, then the memory check

    def checked_rise(op: _Event) -> tuple:
        got = rises.get(op.index)
        if got is None:
            got = rises[op.index] = samples.rise(op.device, op.tid, op.start, op.end)
        return got

    def rise(op: _Event) -> int | None:
        return checked_rise(op)[0]

    sizes: dict = {}

    def nbytes(c: Call) -> int | None:
        got = c.nbytes
        if got == -1:
            got = c.nbytes = _nbytes_of(c, sizes)
        return got

    found, ops = match(calls, None, env=env, rise=rise, nbytes=nbytes, ops=ops)
    if prefetch is not None:
        prefetch(found)
    changed: dict[int, dict] = {}
    checked = passed = 0
    unchecked: dict[str, int] = {}
    threads = threads or {}
    by_index = {o.index: o for o in ops}
    memo: dict = {}
    made: dict = {}  # a call's args by what _args reads of it: a model's forwards repeat them
    for index, (c, label, group) in found.items():
        ev = changed[index] = event(index)
        names = node_names(segment_ops(ev["name"]) or [], group)
        key = _args_key(c, label, names) if len(group) == 1 else None
        args = None if key is None else made.get(key)  # never changed: shared
        if args is None:
            args = _args(group, label, options, names, threads, memo)
            if key is not None:
                made[key] = args
        extra: dict[str, Any] = {}  # the memory check's, after args' own keys
        op = by_index[index]
        want = nbytes(c)
        got, why = checked_rise(op)
        if ev["name"] == ENGINE_BULK:
            why = "engine_bulk"
        elif c.source not in _ALLOCATING:
            why = "executor_node" if c.source == _EXECUTOR else "cached_op_node"
        elif want is None:
            why = "no_shapes"
        elif label == _LABELS["memory"]:
            why = "matched_by_memory"
        if why is None:
            ok = got == want
            checked += 1
            passed += ok
            extra[ARGS["memory_check"]] = ok
            if not ok and label == _LABELS["exact"]:  # the counter contradicts it: not proven
                label = extra[ARGS["match"]] = _LABELS["ambiguous"]
                found[index] = (c, label, group)
        else:
            unchecked[why] = unchecked.get(why, 0) + 1
        ev["args"] = {**(ev.get("args") or {}), **args, **extra}
    counted = [o for o in ops if o.name not in BOOKKEEPING]
    unmatched: dict[str, int] = {}
    for o in counted:
        if o.index not in found:
            unmatched[o.name] = unmatched.get(o.name, 0) + 1
    labels = [x[1] for x in found.values()]
    taken = sum(len(x[2]) for x in found.values())
    bulk: dict[str, int] = {}
    for o in counted:
        if is_bulk_name(o.name) and not is_one_operator_segment(o.name):
            bulk[o.name] = bulk.get(o.name, 0) + 1
    return MatchReport(len(calls), len(counted), len(found), labels.count(_LABELS["exact"]),
                       labels.count(_LABELS["ambiguous"]), len(calls) - taken, unmatched,
                       checked, passed, labels.count(_LABELS["memory"]), unchecked,
                       bulk_segments=bulk), changed


def bulk_note(index: int, path: str, report: MatchReport | None) -> str | None:
    """The line saying that window ``index`` holds bulk segments, which carry their operators'
    shapes and summed FLOPs and bytes but no per-operator times, and how to get those
    (``capture.bulk_note``); None when it holds none."""
    if report is None or not report.bulk_segments:
        return None
    ranked = sorted(report.bulk_segments.items(), key=lambda kv: (-kv[1], kv[0]))
    names = ", ".join(n for n, _ in ranked[:3]) + (", ..." if len(ranked) > 3 else "")
    return rules.render(_SPEC["capture"]["bulk_note"], {
        "index": index, "path": path, "events": sum(report.bulk_segments.values()), "names": names})


def held_cut() -> Any:
    """What a session's cut holds a window to annotate in (:class:`pyprof.trace.rawcut.Kept`):
    a raw range past :data:`MAX_ANNOTATE_BYTES` is written, streamed, as before."""
    from ..trace.rawcut import Kept

    # read as the cut goes: the slices' begins (_held_operator_events), the counter samples
    return Kept(MAX_ANNOTATE_BYTES, ahead=(SAMPLE_NEEDLE, frozenset("BX")))


def annotate_window(index: int, path: str, calls: Sequence[Call], options: dict[str, bool], *,
                    recorder: str, kept: Any = None) -> MatchReport | None:
    """:func:`annotate` for a session's window ``index`` just cut at ``path`` (thread names: the
    threads alive now), its report naming the ``recorder`` kind; the window stays as cut, and one
    line on stderr (``capture.annotate_note``) says why, when it is larger than
    :data:`MAX_ANNOTATE_BYTES` or cannot be read or rewritten: None then. ``kept``: the cut's
    :class:`pyprof.trace.rawcut.Kept`, written here (annotated, or as cut) when it holds the
    window."""
    import sys
    import threading

    if kept is not None and kept.held and kept.size_bound() > MAX_ANNOTATE_BYTES:
        kept.write(path)  # as cut: its size decides
    if not (kept is not None and kept.held) and (size := os.path.getsize(path)) > MAX_ANNOTATE_BYTES:
        why = f"it holds {size} bytes, past max_annotate_bytes {MAX_ANNOTATE_BYTES}"
    else:
        try:
            threads = {t.ident: t.name for t in threading.enumerate()}
            return dataclasses.replace(annotate(path, calls, options, threads=threads, kept=kept),
                                       recorder=recorder)
        except Exception as e:  # noqa: BLE001 - a fault here must not cost the host its window
            why = f"{type(e).__name__}: {e}"
            if kept is not None and kept.held:
                kept.write(path)  # as cut
    print(rules.render(_SPEC["capture"]["annotate_note"], {"index": index, "path": path,
                                                          "why": why}), file=sys.stderr)
    return None
