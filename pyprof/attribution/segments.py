"""Bulk segments of graph nodes, for :mod:`pyprof.attribution.matching`.

A bound executor runs its symbol's operators as bulk segments, one trace event each, named by
their operators in graph order: ``[dot]``, ``[dot,relu]`` (a hybridized block with
``static_alloc`` writes ``Activation,Pooling``). Such an event is matched to a run of node calls
of one recorded invocation (:attr:`pyprof.attribution.calls.Call.invocation`): consecutive seqs
whose operators are the segment's, in order. Its args are the segment's: the inputs it reads
from outside the segment, the outputs no node of the segment reads, and FLOPs and bytes as the
sum of its nodes' (``None`` when a node has none). A fused operator of MXNet's oneDNN subgraph
backend (``[_sg_mkldnn_conv,Pooling]``; ``attribution.json matching.subgraphs``) takes its base
node (``Convolution``) and the post nodes it may have fused after it (``BatchNorm``,
``Activation``, ``elemwise_add``), up to a node of the next listed name.

MXNet's engine bulk writes ``ImperativeBulk``, a name that lists no operators: its calls are
the runs :func:`bulk_runs` cuts, as the engine cuts them (``attribution.json
matching.engine_bulk``). Pure Python; no C function is called.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import rules
from .calls import HANDLES, Call
from .flops import OPERATORS


#: oneDNN subgraph operator -> {"base": operator, "post": operators it may fuse after the base}.
SUBGRAPHS: dict[str, dict[str, Any]] = {
    k: v for k, v in rules.spec("attribution.json")["matching"]["subgraphs"].items() if k != "about"}
_SPEC: dict[str, Any] = rules.spec("attribution.json")
_BULK: dict[str, Any] = _SPEC["matching"]["engine_bulk"]
#: The name of the engine bulk's events, which lists no operators.
ENGINE_BULK: str = _BULK["name"]
_SOURCES: dict[str, str] = _SPEC["capture"]["sources"]
_FORWARD = frozenset(_SOURCES[k] for k in _BULK["forward_sources"])
_BACKWARD = frozenset(_SOURCES[k] for k in _BULK["backward_sources"])
#: How a segment whose nodes' shapes came in several ways joins those ways (``capture``
#: ``segment_sources``).
_JOIN: str = _SPEC["capture"]["segment_sources"]["joiner"]

#: Gluon block name -> the name of the block holding it (None: a hybridized block's root), as
#: the CachedOps' Gluon blocks were seen (:func:`pyprof.attribution.cachedop.Graph`); a name
#: seen under two parents maps to :data:`_CLASH` (no common parent is then proven through it).
PARENTS: dict[str, str | None] = {}
_CLASH = "\0"


def note_parent(block: str, parent: str | None) -> None:
    """Record that Gluon block ``block`` is a child of ``parent`` (None: a root)."""
    if PARENTS.setdefault(block, parent) != parent:
        PARENTS[block] = _CLASH


def _lineage(block: str) -> list[str] | None:
    """``block`` and the blocks holding it, innermost first; None where a parent is not known
    for certain (a name seen under two parents, a cycle)."""
    out = [block]
    while (p := PARENTS.get(out[-1], _CLASH)) is not None:
        if p == _CLASH or p in out:
            return None
        out.append(p)
    return out


def segment_block(group: Sequence[Call]) -> str | None:
    """The Gluon block that holds every node of the segment ``group``: their block when they
    have one, else the innermost block holding all of theirs (a hybridized Sequential holding
    ``dense0`` and ``dense1``); None when a node has no block (an imperative call's autograd
    backward, an executor's node) or no common holder is known."""
    blocks = list(dict.fromkeys(x.block for x in group))
    if len(blocks) == 1 or None in blocks:
        return blocks[0] if len(blocks) == 1 else None
    lines = [_lineage(b) for b in blocks]  # type: ignore[arg-type]
    if any(x is None for x in lines):
        return None
    common = set(lines[0]).intersection(*map(set, lines[1:]))  # type: ignore[arg-type]
    return next((b for b in lines[0] if b in common), None)  # type: ignore[union-attr]


def node_blocks(group: Sequence[Call]) -> list[str | None] | None:
    """Per node of a segment, in run order, its Gluon block (None for a call of no block);
    None when every node has the same one."""
    out = [x.block for x in group]
    return None if len(set(out)) <= 1 else out


def segment_source(group: Sequence[Call]) -> str:
    """How the shapes of a segment's nodes were obtained: the one ``capture.sources`` name
    they share, or those of its nodes, each once in run order, joined (``derived, autograd;
    derived``: the loss's autograd backward, then a hybridized block's backward)."""
    return _JOIN.join(dict.fromkeys(x.source for x in group))


def bulk_sizes(env: dict[str, str] | None = None) -> tuple[int, int]:
    """(forward, backward) bulk size of the engine bulk, from ``env`` (``os.environ`` when
    None) as MXNet reads them when libmxnet loads (``matching.engine_bulk``)."""
    import os

    env = os.environ if env is None else env

    def size(names: list[str]) -> int:
        for n in names:
            v = env.get(n)
            if v is not None and v.strip().lstrip("-").isdigit():
                return int(v)
        return int(_BULK["default"])
    return size(_BULK["forward"]), size(_BULK["backward"])


def bulk_runs(calls: Sequence[Call], inside: set[int], env: dict[str, str] | None = None,
              ) -> list[tuple[Call, ...]]:
    """The engine bulks the calls with seqs in ``inside`` (those without an event of their own)
    ran in: per thread in seq order, a hybridized block's forward nodes per invocation, backward
    nodes per backward (one ``MXAutogradBackwardEx``: their call time), a run ending at any other
    call of the thread, cut every forward or backward bulk size (:func:`bulk_sizes`) calls.
    Other calls (imperative ones in ``mx.engine.bulk`` scopes, executors' nodes) make no run."""
    fwd, bwd = bulk_sizes(env)
    out: list[tuple[Call, ...]] = []
    threads: dict[int, list[Call]] = {}
    for c in sorted(calls, key=lambda c: c.seq):
        threads.setdefault(c.thread, []).append(c)
    for seq in threads.values():
        run: list[Call] = []
        key: tuple | None = None
        for c in seq:
            size = fwd if c.source in _FORWARD else bwd if c.source in _BACKWARD else 0
            k = None
            if c.seq in inside and size > 0:
                k = ("f", c.invocation) if c.source in _FORWARD else ("b", c.thread, c.t_us)
            if run and (k != key or len(run) >= (fwd if key[0] == "f" else bwd)):
                out.append(tuple(run))
                run = []
            if k is not None:
                run.append(c)
            key = k
        if run:
            out.append(tuple(run))
    return out


def segment_ops(name: str) -> list[str] | None:
    """The operator names of the event ``name``: ``[dot,relu]`` -> ``["dot", "relu"]``,
    ``Activation,Pooling`` -> ``["Activation", "Pooling"]``, ``relu`` -> ``["relu"]``; None for
    a segment name MXNet cut at 127 characters (``[dot,re``: its last nodes are not known)."""
    if name.startswith("["):
        return name[1:-1].split(",") if name.endswith("]") and len(name) > 2 else None
    return name.split(",") if "," in name else [name]


def node_ops(names: Sequence[str]) -> list[tuple[int, frozenset[int]]]:
    """Per name of a segment, (the handle of the node it starts with, the handles of the post
    nodes it may take after it: empty but for a oneDNN subgraph operator); -1 for an unknown
    operator."""
    out = []
    for x in names:
        sg = SUBGRAPHS.get(x)
        out.append((HANDLES.get(x, -1), frozenset()) if sg is None else
                   (HANDLES.get(sg["base"], -1), frozenset(HANDLES.get(p, -1) for p in sg["post"])))
    return out


def node_names(names: Sequence[str], group: Sequence[Call]) -> list[str]:
    """The operator name of each node of ``group``, a segment listing ``names``, as flops.json
    knows it: the listed name, or the subgraph's base or post operator, or the call's own."""
    known = {HANDLES[x]: x for x in names if x in HANDLES}
    for x in names:
        for op in (SUBGRAPHS[x]["base"], *SUBGRAPHS[x]["post"]) if x in SUBGRAPHS else ():
            known.setdefault(HANDLES.get(op, -1), op)
    return [known.get(c.op) or _counted_alias(c) for c in group]


_ALIASES: dict[int, str] = {}
_ALIASES_OF: list[int] = [0]  # len(HANDLES) when _ALIASES was made


def _counted_alias(c: Call) -> str:
    """The call's operator name, as flops.json lists it where one of its aliases is listed
    (``_Plus`` -> ``elemwise_add``: a graph node's handle is named by any of its aliases)."""
    name = c.name
    if name in OPERATORS:
        return name
    if _ALIASES_OF[0] != len(HANDLES):
        _ALIASES.clear()
        _ALIASES.update({h: n for n, h in sorted(HANDLES.items()) if n in OPERATORS})
        _ALIASES_OF[0] = len(HANDLES)
    return _ALIASES.get(c.op, name)


def group_of(c: Call, ops: Sequence[tuple[int, frozenset[int]]], by_seq: dict[int, Call],
             done: set[int]) -> tuple[Call, ...] | None:
    """``c`` and the node calls after it in its invocation that make the segment ``ops``
    (:func:`node_ops`; ``ops[0]`` starts with ``c``'s operator), none of them matched yet
    (``done``); None when they do not fit."""
    if c.invocation < 0:
        return None  # an imperative call never runs inside a segment

    def node(seq: int) -> Call | None:
        x = by_seq.get(seq)
        return x if x is not None and x.invocation == c.invocation and x.seq not in done else None

    out = [c]
    for k, (op, post) in enumerate(ops):
        if k:
            x = node(out[-1].seq + 1)
            if x is None or x.op != op:
                return None
            out.append(x)
        stop = ops[k + 1][0] if k + 1 < len(ops) else None
        while post and (x := node(out[-1].seq + 1)) is not None and x.op in post and x.op != stop:
            out.append(x)  # a post node the subgraph operator fused
    return tuple(out)


def external_deps(group: Sequence[Call], deps: dict[int, list]) -> list:
    """The dependencies (producer seq, engine variable) of a segment: its nodes', less those on
    a node of the segment."""
    inside = {x.seq for x in group}
    return [d for x in group for d in deps[x.seq] if d[0] not in inside]


def merged(group: Sequence[Call]) -> Call:
    """A call standing for the segment ``group``: the first node's seq, times, thread and
    stack; the block holding all its nodes (:func:`segment_block`) and their sources
    (:func:`segment_source`); as inputs the (shape, dtype) of every node input produced outside
    the segment, in node order; as outputs those of every node output no node of the segment
    reads; the first node's attributes when the segment has one node, none otherwise.

    A backward node's producers are the gradients it reads, its first inputs (``capture.backward``
    lists them first); its other inputs (the forward inputs and outputs it keeps: data, weights,
    saved activations) were written before the backward, outside any backward segment."""
    c = group[0]
    if len(group) == 1:
        return c
    inside = {x.seq for x in group}
    read = {(p, s) for x in group for p, s in zip(x.producers, x.slots) if p in inside}
    ins = outs = None
    if all(x.in_meta is not None and x.out_meta is not None for x in group):
        ins = [m for x in group for i, m in enumerate(x.in_meta)
               if i >= len(x.producers) or x.producers[i] not in inside]
        outs = [m for x in group for j, m in enumerate(x.out_meta) if (x.seq, j) not in read]
    return Call(c.seq, c.t_us, c.pushed_us, c.op, [], [], ins, outs, [], [], (), c.thread, c.stack,
                (), segment_block(group), segment_source(group), c.invocation)
