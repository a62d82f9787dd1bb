"""Autograd's backward of imperative calls (issue 22), for :mod:`pyprof.attribution.capture`.

An imperative call (``MXImperativeInvokeEx``) that autograd records gets, at the next
``MXAutogradBackwardEx``, the backward node MXNet 1.9.1 makes of it (``attribution.json
capture.backward``: the operator and its inputs in MXNet's order, from the forward operator's
``FGradient``), with shapes derived from the forward call's arrays; a head passed without a
gradient gets the ones-filled head gradient MXNet makes (``SetValueOp``, the head's shape and
dtype). The order is MXNet's: :func:`derive` rebuilds the gradient graph as
``Imperative::Backward`` does (``MXGradient``: reverse topological order of the forward nodes
reachable from the heads, gradients of one array summed by ``ElementWiseSum``, an unread
output's gradient ``_zeros_without_dtype``), then runs its nodes in the indexed graph's order:
depth first, post order, from the gradients of the variables. A hybridized block's invocation
on the tape is one node there, whose backward nodes are the CachedOp's
(:func:`pyprof.attribution.cachedop.backward_plan`).

A call is on MXNet's tape when one of its inputs is (``Imperative::RecordOp``): written by a
call on the tape, or a variable (``attach_grad``: asked by ``MXNDArrayGetGrad`` at the
backward, once per input no recorded call wrote). No NDArray is kept: handles are ints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import rules
from ..native import capi
from .calls import CODES, HANDLES, Call, as_call, holds, seq_of
from .views import SEQ_BASE


_SPEC = rules.spec("attribution.json")["capture"]
#: attribution.json capture.autograd: the head gradient, sum and zeros operators.
AUTOGRAD: dict[str, Any] = _SPEC["autograd"]
#: The backward operators that allocate nothing for an output MXNet leaves uncomputed.
_UNREAD = frozenset(AUTOGRAD["unread_not_allocated"])
#: attribution.json capture.backward less its about: forward operator -> its backward node.
TABLE: dict[str, dict] = {k: v for k, v in _SPEC["backward"].items() if k != "about"}


def choose(spec: dict, attrs: dict[str, str]) -> dict:
    """The ``capture.backward`` entry ``spec`` for a forward node with ``attrs`` (MXNet's
    strings): its first variant whose conditions hold (its inputs and exact), else itself."""
    for v in spec.get("variants", ()):
        if holds(v, attrs):
            return {**spec, "inputs": v["inputs"], "exact": v.get("exact", spec.get("exact", True))}
    return spec


def inputs_for(spec: dict, attrs: dict[str, str]) -> list[str]:
    """The input refs of ``spec`` for a forward node with ``attrs`` (:func:`choose`)."""
    return choose(spec, attrs)["inputs"]


def workspace(out_meta: list) -> tuple:
    """oneDNN max Pooling's hidden workspace output: the output's shape, int32 (PoolingShape,
    PoolingType in src/operator/nn/pooling.cc)."""
    return (out_meta[0][0], CODES["int32"])


class Tape:
    """Per thread, the spans of recorded seqs during which autograd recorded (set at
    ``MXAutogradSetIsRecording``): ``[lo, hi)``, the open one up to now."""

    def __init__(self) -> None:
        self.open: dict[int, int] = {}  # thread -> first seq of the span recording now
        self.spans: dict[int, list[tuple[int, int]]] = {}

    def set(self, thread: int, on: bool, seq: int) -> None:
        if on:
            self.open.setdefault(thread, seq)
        else:  # a span opened before the recorder knew (recording at install) starts at 0
            self.spans.setdefault(thread, []).append((self.open.pop(thread, 0), seq))

    def taken(self, thread: int, seq: int, keep: bool = False) -> list[tuple[int, int]]:
        """The thread's spans up to ``seq``, forgotten (a backward consumes its tape) unless
        ``keep`` (``retain_graph``)."""
        spans = list(self.spans.get(thread, [])) if keep else self.spans.pop(thread, [])
        if thread in self.open:
            spans.append((self.open[thread], seq))
            if not keep:
                self.open[thread] = seq
        return spans

    def holds(self) -> bool:
        """Whether a thread records now or recorded since its last backward."""
        return bool(self.open or self.spans)

    def all_spans(self, seq: int) -> dict[int, list[tuple[int, int]]]:
        """Every thread's spans up to ``seq`` (the open ones too), nothing forgotten."""
        out = {t: list(v) for t, v in self.spans.items()}
        for t, lo in self.open.items():
            out.setdefault(t, []).append((lo, seq))
        return out

    def clear(self) -> None:
        self.spans.clear()
        self.open = {t: 0 for t in self.open}


def is_training() -> bool:
    """Whether MXNet's is_train is set on this thread. C: MXAutogradIsTraining."""
    import sys

    ag = sys.modules.get("mxnet.autograd")
    return bool(ag is not None and ag.is_training())


def mark_training(calls: list, spans: dict[int, list[tuple[int, int]]]) -> None:
    """Set :attr:`Call.training` of the imperative ``calls`` their thread made in ``spans``
    (thread -> [lo, hi) seqs during which MXNet's is_train was set)."""
    if not spans:
        return
    import bisect

    for t, v in spans.items():
        v.sort()
    starts = {t: [lo for lo, _ in v] for t, v in spans.items()}
    for c in calls:
        v = spans.get(c.thread)
        if v and c.source == _CALL:
            k = bisect.bisect_right(starts[c.thread], c.seq) - 1
            c.training = k >= 0 and c.seq < v[k][1]


_RAW: list[Any] = []  # the raw MXNDArrayGetGrad and MXNDArrayFree


def grad_chunk(h: int, chunk: Callable[[int], int | None]) -> int | None:
    """The engine variable (``Chunk*``, read by ``chunk``) of variable ``h``'s gradient array:
    every handle of that gradient (Gluon's, ``.grad``'s) shares it. None when it cannot be
    read. C: MXNDArrayGetGrad, MXNDArrayFree (of the gradient's new handle)."""
    if not _RAW:
        _RAW[:] = [capi.fn("MXNDArrayGetGrad").__wrapped__, capi.fn("MXNDArrayFree").__wrapped__]
    out = capi.Handle()
    if _RAW[0](h, out) != 0 or not out.value:
        return None
    try:
        return chunk(out.value)
    finally:
        _RAW[1](out)


def has_grad(h: int) -> bool:
    """Whether NDArray ``h`` is a variable with a gradient (``attach_grad``), through the raw
    functions: inside a gated call only; a refused query is False. C: MXNDArrayGetGrad,
    MXNDArrayFree (of the gradient's new handle)."""
    if not _RAW:
        _RAW[:] = [capi.fn("MXNDArrayGetGrad").__wrapped__, capi.fn("MXNDArrayFree").__wrapped__]
    out = capi.Handle()
    if _RAW[0](h, out) != 0 or not out.value:
        return False
    _RAW[1](out)
    return True


class BackwardNode:
    """One node of the gradient graph: ``op`` its operator name (None for a CachedOp
    invocation's backward, ``fwd`` then the Invocation), its inputs' and outputs' metas, the
    gradient entries it reads (``reads``: (node, output) pairs, in input order), the forward
    call it is the backward of (``fwd``), and per output whether it is written into a
    variable's gradient (``to_var``: MXNet allocated it before, not inside the node)."""

    __slots__ = ("op", "in_meta", "out_meta", "reads", "fwd", "to_var", "unread", "seq", "needs",
                 "ograds")

    def __init__(self, op: str | None, in_meta: list | None, out_meta: list | None,
                 reads: list, fwd: Any) -> None:
        self.op, self.in_meta, self.out_meta, self.reads, self.fwd = op, in_meta, out_meta, reads, fwd
        self.to_var = [False] * (len(out_meta) if out_meta is not None else 1)
        #: per output, whether MXNet leaves it uncomputed (a gradient no one takes: kNullOp)
        self.unread = [False] * len(self.to_var)
        self.seq = -1
        #: a CachedOp invocation's: per input, whether its gradient is taken (it is on the
        #: tape: a variable, or written by a taped call); None: not known (every input's)
        self.needs: tuple | None = None
        #: a CachedOp invocation's: per graph output, its gradient entry (node, output, meta) or
        #: ("head", k, meta): what its plan's first nodes read (:func:`head_writers`)
        self.ograds: list = []


def _meta_of(refs: list[str], ins: list | None, outs: list | None, ograds: list) -> list | None:
    if ins is None or outs is None:
        return None
    out: list = []
    for r in refs:
        if r == "i*":
            out.extend(ins)
        elif r in ("w", "gw"):
            out.append(workspace(outs))
        elif r[0] == "g":
            out.append(ograds[int(r[1:])][2])
        else:
            out.append((outs if r[0] == "o" else ins)[int(r[1:])])
    return out


def with_hidden(f: Call) -> list | None:
    """The outputs of forward call ``f`` and, after them, the hidden ones it allocated
    (attribution.json matching.hidden_outputs; autograd recorded it: training), which a
    backward node may read (``o1``: BatchNorm's mean); its outputs alone when they cannot be
    told."""
    from .memory import hidden_of

    extra = hidden_of(f, True) if f.out_meta is not None else None
    outs = f.out_meta
    return outs if not extra else [*outs, *extra]


def derive(heads: list[int], head_grads: list, calls: list, invocations: list, cache: dict,
           by_handle: dict[int, dict], grad: Callable[[int], bool],
           writers: dict | None = None, views: Any = None) -> tuple[list, list[BackwardNode]]:
    """The gradient graph of one backward, in MXNet's run order.

    Args:
        heads: the head NDArray handles; head_grads: per head its gradient's handle or None.
        calls: the imperative calls autograd recorded (seq order; ``Call`` objects, their
            ``in_meta``/``out_meta`` None without shapes); invocations: the CachedOp
            invocations it recorded (``cachedop.Invocation``, ``graph.heads`` names their outputs).
        cache: the recorder's handle -> (shape, dtype, producer seq, output slot).
        by_handle: operator handle -> its ``capture.backward`` entry.
        grad: whether an input handle no recorded call wrote is a variable with a gradient.

        writers: filled, when given, with each variable's handle -> (the node writing its
            gradient, that node's output), or None where no node of a known operator does (a
            hybridized block's backward, a head's own gradient).
        views: the views the calls may read (:class:`pyprof.attribution.views.Views`): a taped
            one is its forward node (``Reshape``, ``slice``), one off the tape a leaf.

    Returns: (the head gradients MXNet makes: per head without one, its (shape, dtype) meta;
    the backward nodes in run order). Nodes whose operator the table does not know are left
    out (their gradients still flow, so their consumers' nodes are made)."""
    by_seq = {c.seq: c for c in calls}
    if views is not None:
        by_seq.update(views.nodes())
    outs_of: dict[tuple[int, int], tuple[Any, int]] = {}  # (producer seq, slot) -> (inv, output)
    for inv in invocations:
        for k, (j, i) in enumerate(inv.graph.heads):
            if j >= 0:
                outs_of[(inv.first + j, i)] = (inv, k)

    def source(e: tuple | None, h: int) -> Any:
        """A forward entry: (call or invocation, output) or ('v', handle) for a leaf."""
        if e is not None and e[2] >= 0:
            if e[2] in by_seq:
                return (by_seq[e[2]], e[3])
            if (e[2], e[3]) in outs_of:
                return outs_of[(e[2], e[3])]
        return ("v", h)

    def read(h: int, seq: int, e: tuple | None) -> Any:
        """The entry handle ``h`` is to a reader at ``seq`` that read it as cache entry ``e``:
        a view kept (:meth:`pyprof.attribution.views.Views.resolve`), else its producer's."""
        if views is not None and e is not None:
            v = views.resolve(h, seq, e[2], e[3])
            if v is not None:
                return v
        return source(e, h)

    def inputs(f: Any) -> list:
        if f in inv_set:
            return [read(h, f.first, e) for h, e in zip(f.inputs, f.in_meta)]
        if f.seq >= SEQ_BASE:  # a view's node: its source resolved when it was made
            return [source((None, None, p, s), h) for h, p, s in zip(f.inputs, f.producers, f.slots)]
        return [read(h, f.seq, (None, None, p, s)) for h, p, s in zip(f.inputs, f.producers, f.slots)]

    inv_set = set(invocations)
    # forward topological order: depth first, post order, from the heads (DFSVisit)
    order: list = []
    seen: set = set()
    variables: list[int] = []  # leaves with a gradient, in visit order (ListInputs)
    leaf_grad: dict[int, bool] = {}
    fin: dict[Any, list] = {}
    needs: dict[Any, tuple] = {}  # invocation -> per input, whether it is on the tape

    def visit(s: Any) -> bool:
        """Visit an entry's node; True when it is on the tape."""
        f = s[0]
        if f == "v":
            h = s[1]
            if h not in leaf_grad:
                leaf_grad[h] = grad(h)
                if leaf_grad[h]:
                    variables.append(h)
            return leaf_grad[h]
        if f in seen:
            return f in fin
        seen.add(f)
        ins = inputs(f)
        tracked = [visit(x) for x in ins]
        if f in inv_set:
            needs[f] = tuple(tracked)
        if f in inv_set or any(tracked):
            fin[f] = ins
            order.append(f)
            return True
        return False

    head_src = [read(h, SEQ_BASE - 1, cache.get(h)) for h in heads]  # (after every view)
    for s in head_src:
        visit(s)
    grads: dict[Any, list] = {}  # forward entry (key) -> gradient entries (node, output)
    made: list = []
    for k, (s, hg) in enumerate(zip(head_src, head_grads)):
        e = cache.get(heads[k])
        meta = (e[0], e[1]) if e is not None else (None, -1)
        grads[_key(s)] = [("head", k, meta)]
        if hg is None:
            made.append(meta)

    def out_meta(f: Any, i: int) -> Any:
        if f in inv_set:
            return None
        return f.out_meta[i] if f.out_meta is not None else None

    def aggregate(v: list, meta: Any) -> tuple:
        if not v:
            return (BackwardNode(AUTOGRAD["zeros"], [], [meta], [], None), 0, meta)
        if len(v) == 1:
            return v[0]
        if len(v) < AUTOGRAD["sum_cap"]:
            n = BackwardNode(AUTOGRAD["sum"], [x[2] for x in v], [meta], list(v), None)
            return (n, 0, meta)
        ret = v[0]
        for x in v[1:]:
            ret = (BackwardNode(AUTOGRAD["chain_op"], [ret[2], x[2]], [meta], [ret, x], None), 0, meta)
        return (BackwardNode(AUTOGRAD["chain_end"], [meta], [meta], [ret], None), 0, meta)

    for f in reversed(order):
        ins = fin[f]
        n_out = len(f.graph.heads) if f in inv_set else len(f.outputs)
        ograds = [aggregate(grads.get(_key((f, i)), []), out_meta(f, i)) for i in range(n_out)]
        if f in inv_set:
            node = BackwardNode(None, None, None, [g for g in ograds if isinstance(g[0], BackwardNode)], f)
            node.needs, node.ograds = needs.get(f), ograds
            for p, x in enumerate(ins):
                grads.setdefault(_key(x), []).append((node, p, (f.in_meta[p][0], f.in_meta[p][1])))
            continue
        spec = by_handle.get(f.op)
        in_meta = f.in_meta
        if spec is not None and spec.get("clone"):
            for x in ins:
                grads.setdefault(_key(x), []).append(ograds[0])
            continue
        if spec is not None and "nodes" in spec:  # its own nodes, one per gradient (batch_dot)
            chosen = next((v for v in spec.get("variants", ()) if holds(v, f.attrs())), spec)
            for n in chosen["nodes"]:
                i = int(n["output"][1:])
                m = in_meta[i] if in_meta is not None else None
                node = BackwardNode(n["op"], _meta_of(n["inputs"], in_meta, f.out_meta, ograds),
                                    [m] if in_meta is not None else None,
                                    [ograds[int(r[1:])] for r in n["inputs"] if r[0] == "g"], f)
                grads.setdefault(_key(ins[i]), []).append((node, 0, m))
            continue
        if spec is not None and spec.get("per_input"):  # one node per input (add_n's identity)
            for i, x in enumerate(ins):
                m = in_meta[i] if in_meta is not None else None
                node = BackwardNode(spec["op"], [ograds[0][2]] if in_meta is not None else None,
                                    [m] if in_meta is not None else None, [ograds[0]], f)
                grads.setdefault(_key(x), []).append((node, 0, m))
            continue
        outs = spec.get("outputs", ["i*"]) if spec is not None else ["i*"]
        idx = list(range(len(ins))) if outs == ["i*"] else [int(r[1:]) for r in outs]
        attrs = f.attrs()
        refs = inputs_for(spec, attrs) if spec is not None else []
        reads = ograds
        if spec is not None:  # an unread workspace's gradient: a zeros node (gw)
            w = workspace(f.out_meta) if "gw" in refs and f.out_meta is not None else None
            zero = (BackwardNode(AUTOGRAD["zeros"], [], [w], [], None), 0, w)
            reads = [zero if r == "gw" else ograds[int(r[1:])] for r in refs if r[0] == "g"]
        fouts = with_hidden(f) if spec is not None else f.out_meta
        node = BackwardNode(spec["op"] if spec is not None else None,
                            _meta_of(refs, in_meta, fouts, ograds),
                            [in_meta[i] for i in idx] if in_meta is not None else None, reads, f)
        for slot, i in enumerate(idx):
            m = in_meta[i] if in_meta is not None else None
            grads.setdefault(_key(ins[i]), []).append((node, slot, m))
            # a gradient nothing reads and no variable takes (a leaf without attach_grad: the
            # first convolution's data) is not computed: MXNet's kNullOp, allocated or not by
            # the operator (capture.autograd unread_not_allocated)
            if slot < len(node.unread) and node.op in _UNREAD:  # (without shapes: one flag)
                node.unread[slot] = ins[i][0] == "v" and not leaf_grad.get(ins[i][1], False)
        none = {int(r[1:]) for r in spec.get("no_gradient", ())} if spec is not None else set()
        for i in set(range(len(ins))) - set(idx) - none:  # an FGradient's zeros_like (pick's index)
            m = in_meta[i] if in_meta is not None else None
            z = BackwardNode(AUTOGRAD["zeros_like"], [m], [m], [], f)
            grads.setdefault(_key(ins[i]), []).append((z, 0, m))
    # the variables' gradients, then the run order: depth first, post order, from them
    run: list[BackwardNode] = []
    done: set = set()

    def emit(n: BackwardNode) -> None:
        stack = [(n, 0)]
        while stack:
            x, k = stack.pop()
            if k == 0 and id(x) in done:
                continue
            if k < len(x.reads):
                stack.append((x, k + 1))
                r = x.reads[k][0]
                if isinstance(r, BackwardNode) and id(r) not in done:
                    stack.append((r, 0))
                continue
            if id(x) not in done:
                done.add(id(x))
                run.append(x)

    for h in variables:
        v = grads.get(("v", h), [])  # its gradient has the variable's shape and dtype
        e = cache.get(h)
        g = aggregate(v, v[0][2] if v else (e[0], e[1]) if e is not None else None)
        w = None
        if isinstance(g[0], BackwardNode):
            if g[0].op is not None and g[1] < len(g[0].to_var):
                g[0].to_var[g[1]] = True
                w = (g[0], g[1])
            emit(g[0])
        if writers is not None:
            writers[h] = w
    return made, [n for n in run if n.op is not None or n.fwd in inv_set]


def _key(s: Any) -> Any:
    return ("v", s[1]) if s[0] == "v" else (id(s[0]), s[1])


_SOURCE: str = _SPEC["sources"]["autograd"]
_BY: dict[int, dict] = {}


def by_handle() -> dict[int, dict]:
    """Operator handle -> its ``capture.backward`` entry (aliases share a handle; filled once,
    after :func:`pyprof.attribution.calls.load_handles`)."""
    if not _BY and HANDLES:
        _BY.update({HANDLES[k]: v for k, v in TABLE.items() if k in HANDLES})
    return _BY


def backward_heads(a: tuple) -> tuple[list[int], list]:
    """(head handles, per head its gradient's handle or None) of MXAutogradBackwardEx's ctypes
    args (num_output, output_handles, ograd_handles, ...)."""
    n = getattr(a[0], "value", a[0])
    heads = [int(h) for h in a[1][:n]]
    og = a[2]
    grads = [None] * n if not og else [(int(h) if h else None) for h in og[:n]]
    return heads, grads


def taped_calls(calls: list, spans: list[tuple[int, int]], thread: int) -> list:
    """The imperative calls of ``calls`` (the recorder's, in seq order) that ``thread`` made in
    ``spans`` ([lo, hi) seqs autograd recorded in)."""
    import bisect

    out = []
    for lo, hi in spans:
        k = bisect.bisect_left(calls, lo, key=seq_of)
        while k < len(calls) and seq_of(calls[k]) < hi:
            c = as_call(calls[k])  # a record (calls.RECORD) is an imperative call
            if type(c) is Call and c.thread == thread and c.invocation < 0 and c.source == _CALL:
                out.append(c)
            k += 1
    return out


_CALL: str = _SPEC["sources"]["call"]


def head_call(seq: int, t_us: int, pushed_us: int, meta: tuple, thread: int,
              shapes: bool = True) -> Call:
    """The ones-filled head gradient MXNet makes for a head without one (``SetValueOp``);
    without ``shapes`` (record_shapes off) it carries none."""
    h = AUTOGRAD["head_gradient_handle"]
    return Call(seq, t_us, pushed_us, h, [], [], [] if shapes else None, [meta] if shapes else None,
                [], [], (), thread, None, (), None, _SOURCE)


def head_writers(n: BackwardNode, heads: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Per output of the CachedOp invocation whose backward is ``n``, the (seq, output) of the
    call that wrote its gradient (as :func:`node_call` reads a gradient), (-1, -1) where no
    call stands for the writer (another invocation's backward, an unknown operator's)."""
    out = []
    for r in n.ograds:
        if isinstance(r[0], BackwardNode):
            out.append((r[0].seq, r[1]) if r[0].op is not None and r[0].seq >= 0 else (-1, -1))
        else:  # ("head", k, meta)
            out.append(heads[r[1]] if r[1] < len(heads) else (-1, -1))
    return out


def node_call(n: BackwardNode, t_us: int, pushed_us: int, thread: int, heads: list[tuple[int, int]],
              shapes: bool = True) -> Call:
    """The call of backward node ``n`` (its seq set): the forward call's attributes and stack,
    its producers the backward nodes (or head gradients) whose outputs it reads; ``heads``:
    per head, the (seq, output) of its gradient's writer (the ``SetValueOp`` MXNet makes, or
    the given gradient's producer); without ``shapes`` (record_shapes off) no shapes."""
    prod, slots = [], []
    for r in n.reads:
        if isinstance(r[0], BackwardNode):
            prod.append(r[0].seq if r[0].op is not None else -1)
            slots.append(r[1] if r[0].op is not None else -1)
        else:  # ("head", k, meta)
            p, k = heads[r[1]] if r[1] < len(heads) else (-1, -1)
            prod.append(p)
            slots.append(k)
    f = n.fwd if isinstance(n.fwd, Call) else None
    fresh = None if not any(n.to_var) and not any(n.unread) else tuple(
        not (v or u) for v, u in zip(n.to_var, n.unread))
    return Call(n.seq, t_us, pushed_us, HANDLES.get(n.op, -1), [], [], n.in_meta if shapes else None,
                n.out_meta if shapes else None,
                f.keys if f is not None else [], f.vals if f is not None else [], tuple(prod), thread,
                f.stack if f is not None else None, tuple(slots), None, _SOURCE, -1, fresh)
