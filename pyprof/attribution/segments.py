"""Bulk segments of graph nodes, for :mod:`pyprof.attribution.matching`.

A bound executor runs its symbol's operators as bulk segments, one trace event each, named by
their operators in graph order: ``[dot]``, ``[dot,relu]`` (a hybridized block with
``static_alloc`` writes ``Activation,Pooling``). Such an event is matched to a run of node calls
of one recorded invocation (:attr:`pyprof.attribution.calls.Call.invocation`): consecutive seqs
whose operators are the segment's, in order. Its args are the segment's: the inputs it reads
from outside the segment, the outputs no node of the segment reads, and FLOPs and bytes as the
sum of its nodes' (``None`` when a node has none). Pure Python; no C function is called.
"""

from __future__ import annotations

from collections.abc import Sequence

from .calls import Call

__all__ = ["segment_ops", "group_of", "external_deps", "merged"]


def segment_ops(name: str) -> list[str] | None:
    """The operator names of the event ``name``: ``[dot,relu]`` -> ``["dot", "relu"]``,
    ``Activation,Pooling`` -> ``["Activation", "Pooling"]``, ``relu`` -> ``["relu"]``; None for
    a segment name MXNet cut at 127 characters (``[dot,re``: its last nodes are not known)."""
    if name.startswith("["):
        return name[1:-1].split(",") if name.endswith("]") and len(name) > 2 else None
    return name.split(",") if "," in name else [name]


def group_of(c: Call, ops: Sequence[int], by_seq: dict[int, Call], done: set[int]) -> tuple[Call, ...] | None:
    """``c`` and the node calls after it in its invocation whose operator handles are ``ops``
    (``ops[0]`` is ``c``'s), none of them matched yet (``done``); None when they do not fit."""
    if c.invocation < 0:
        return None  # an imperative call never runs inside a segment
    out = [c]
    for k, op in enumerate(ops[1:], 1):
        x = by_seq.get(c.seq + k)
        if x is None or x.invocation != c.invocation or x.op != op or x.seq in done:
            return None
        out.append(x)
    return tuple(out)


def external_deps(group: Sequence[Call], deps: dict[int, list]) -> list:
    """The dependencies (producer seq, engine variable) of a segment: its nodes', less those on
    a node of the segment."""
    inside = {x.seq for x in group}
    return [d for x in group for d in deps[x.seq] if d[0] not in inside]


def merged(group: Sequence[Call]) -> Call:
    """A call standing for the segment ``group``: the first node's seq, times, thread, stack,
    block and source; as inputs the (shape, dtype) of every node input produced outside the
    segment, in node order; as outputs those of every node output no node of the segment reads;
    the first node's attributes when the segment has one node, none otherwise."""
    c = group[0]
    if len(group) == 1:
        return c
    inside = {x.seq for x in group}
    read = {(p, s) for x in group for p, s in zip(x.producers, x.slots) if p in inside}
    ins = outs = None
    if all(x.in_meta is not None and x.out_meta is not None for x in group):
        ins = [m for x in group for m, p in zip(x.in_meta, x.producers) if p not in inside]
        outs = [m for x in group for j, m in enumerate(x.out_meta) if (x.seq, j) not in read]
    return Call(c.seq, c.t_us, c.pushed_us, c.op, [], [], ins, outs, [], [], (), c.thread, c.stack,
                (), c.block, c.source, c.invocation)
