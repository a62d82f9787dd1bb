"""The nodes of hybridized Gluon blocks (CachedOp), for :mod:`pyprof.attribution.capture`.

A hybridized block runs as one ``MXInvokeCachedOpEx`` (``MXInvokeCachedOp``) call whose
operators MXNet pushes itself, so ``MXImperativeInvokeEx`` never sees them. While a recorder
is installed, :class:`Graphs` keeps, per live CachedOp handle, the block's symbol as JSON
(``MXSymbolSaveToJSON`` at ``MXCreateCachedOpEx``/``MXCreateCachedOp``) and the Gluon block
prefixes of the block that built it (read from the caller's frames: ``HybridBlock._build_cache``);
``MXFreeCachedOp`` evicts the handle (addresses are reused). Per (handle, input signature: the
inputs' shapes and dtypes) one shape and one type inference of the symbol's internals
(``mx.sym.Symbol.infer_shape``/``infer_type``, C: ``MXSymbolInferShapeEx``,
``MXSymbolInferType``) gives every node's input and output shapes and dtypes; each invocation
then becomes one :class:`Node` per operator node, in graph order. No NDArray is kept: a
graph holds JSON, names and shapes, and one ``mx.sym.Symbol`` loaded from the JSON.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from .. import rules
from .autograd import AUTOGRAD, TABLE, choose, workspace
from .calls import CODES, HANDLES, UNKNOWN_WRITER, Call
from .segments import note_parent


_SOURCES: dict[str, str] = rules.spec("attribution.json")["capture"]["sources"]


class Node:
    """One operator node of a CachedOp's graph: its operator name, the Gluon block (``conv0``;
    None when no block prefix matches), its attributes as bytes (as ``MXImperativeInvokeEx``
    gets them), and its inputs as (operator node index, output index), ``(-1, i)`` for graph
    input i."""

    __slots__ = ("op", "name", "block", "keys", "vals", "inputs", "_entries")

    def __init__(self, op: str, name: str, block: str | None, attrs: dict[str, str],
                 inputs: list[tuple[int, int]], entries: list[tuple[int, int]]) -> None:
        self.op, self.name, self.block = op, name, block
        self.keys = [k.encode() for k in attrs]
        self.vals = [str(v).encode() for v in attrs.values()]
        self.inputs, self._entries = inputs, entries  # entries: the JSON's (node id, output)


def block_of(node_name: str, prefixes: list[str]) -> str | None:
    """The Gluon block a node belongs to: the longest block prefix of its name, without the
    trailing ``_`` (``conv0_relu_fwd`` with prefixes ``conv0_``, ``pool0_`` -> ``conv0``);
    without prefixes, the name less its last ``_`` part (``conv0_fwd`` -> ``conv0``)."""
    best = max((p for p in prefixes if node_name.startswith(p) and p), key=len, default=None)
    if best is not None:
        return best.rstrip("_") or None
    return node_name.rsplit("_", 1)[0] if "_" in node_name else None


class Graph:
    """One CachedOp's symbol: its JSON and block prefixes; its operator nodes in graph order
    (:attr:`nodes`, read from the JSON without a C call) and, per input signature, each node's
    input and output (shape, dtype code) (:meth:`meta`, one inference per signature). A bound
    executor's symbol (:mod:`pyprof.attribution.executor`) is a Graph too: ``prefixes`` None
    (its nodes have no Gluon block), ``source`` ``"executor"`` (a key of
    ``attribution.json capture.sources``)."""

    __slots__ = ("json", "prefixes", "nodes", "heads", "signatures", "_sym", "_json_nodes", "failed",
                 "plan", "outputs", "source")

    def __init__(self, sym_json: str, prefixes: list[str] | None, source: str = "node") -> None:
        self.json, self.prefixes, self.source = sym_json, prefixes, source
        self.signatures: dict[tuple, list | None] = {}
        self._sym = None
        self.failed = 0  # signatures whose inference failed
        self.plan: dict[tuple | None, list] = {}  # needs -> backward_plan, made at a backward
        self.outputs: dict[tuple, list] = {}  # signature -> the invocation's outputs' metas
        graph = json.loads(sym_json)
        self._json_nodes = nodes_json = graph["nodes"]
        var = {nid: i for i, nid in enumerate(n for n, nd in enumerate(nodes_json) if nd["op"] == "null")}
        index: dict[int, int] = {}  # json node id -> position among operator nodes
        self.nodes: list[Node] = []
        for nid, nd in enumerate(nodes_json):
            if nd["op"] == "null":
                continue
            ins = [(index[e[0]], e[1]) if e[0] in index else (-1, var[e[0]]) for e in nd["inputs"]]
            index[nid] = len(self.nodes)
            block = block_of(nd["name"], prefixes) if prefixes is not None else None
            self.nodes.append(Node(nd["op"], nd["name"], block,
                                   nd.get("attrs") or {}, ins, [(e[0], e[1]) for e in nd["inputs"]]))
        self.heads = [(index[h[0]], h[1]) if h[0] in index else (-1, var[h[0]]) for h in graph["heads"]]

    def meta(self, signature: tuple, codes: dict[str, int]) -> list | None:
        """Per operator node, (inputs' (shape, dtype code) list, outputs' list), at ``signature``
        (one (shape, dtype code) per CachedOp input, in ``list_inputs`` order): inferred once per
        signature; None when the inference fails (counted in :attr:`failed`). Call it outside
        MXNet calls: the inference reuses the thread's C API return buffers (MXNet's
        ``MXAPIThreadLocalEntry``), which the caller of an MXInvokeCachedOpEx still reads."""
        if signature not in self.signatures:
            got = self.signatures[signature] = self._infer(signature, codes)
            self.failed += got is None
        return self.signatures[signature]

    def _infer(self, signature: tuple, codes: dict[str, int]) -> list | None:
        import mxnet as mx

        if self._sym is None:
            self._sym = mx.sym.load_json(self.json)
        sym = self._sym
        names = sym.list_inputs()
        internals = sym.get_internals()
        slots = _slots(self._json_nodes, internals.list_outputs())
        if len(names) != len(signature) or slots is None:
            return None
        args = set(sym.list_arguments())
        shapes = {n: s for n, (s, _) in zip(names, signature) if n in args and s is not None}
        types = {n: _dtype_name(d, codes) for n, (_, d) in zip(names, signature) if n in args}
        try:
            _, oshapes, _ = internals.infer_shape(**shapes)
            _, otypes, _ = internals.infer_type(**types)
        except Exception:  # noqa: BLE001 - MXNetError or a partial graph: left unrecorded
            return None
        if oshapes is None or otypes is None:
            return None
        meta = [(tuple(s) if s is not None else None, codes.get(_np_name(t), -1))
                for s, t in zip(oshapes, otypes)]
        out = []
        op_ids = [nid for nid, nd in enumerate(self._json_nodes) if nd["op"] != "null"]
        for node, nid in zip(self.nodes, op_ids):
            first, count = slots[nid]
            out.append(([meta[slots[j][0] + i] for j, i in node._entries], meta[first:first + count]))
        return out


def _slots(nodes_json: list[dict], outs: list[str]) -> dict[int, tuple[int, int]] | None:
    """json node id -> (first internal output, number of outputs), from MXNet's internals
    names, which list every node's outputs in node order: a variable's is its name, an
    operator's ``<name>_<output>``; None when the names do not fit the nodes."""
    slots, k = {}, 0
    for nid, nd in enumerate(nodes_json):
        name = nd["name"]
        if nd["op"] == "null":
            if k >= len(outs) or outs[k] != name:
                return None
            slots[nid], k = (k, 1), k + 1
            continue
        nxt = nodes_json[nid + 1] if nid + 1 < len(nodes_json) else None
        stop = None if nxt is None else (nxt["name"] if nxt["op"] == "null" else nxt["name"] + "_")
        first = k
        while k < len(outs) and outs[k].startswith(name + "_") and (
                k == first or stop is None or not outs[k].startswith(stop)):
            k += 1
        if k == first:
            return None
        slots[nid] = (first, k - first)
    return slots if k == len(outs) else None


class Entry:
    """One backward node of a CachedOp's plan (:func:`backward_plan`), in MXNet's run order:
    ``k`` the forward node it derives from, ``op`` its operator, ``refs`` its inputs by
    :func:`backward_io`'s refs, ``exact`` whether its inputs are all MXNet's, ``after`` per
    gradient it reads, in input order (plan position of its writer, that writer's output; or
    :data:`UNKNOWN`, the output; or :data:`HEAD`, the graph output whose gradient it is),
    ``sum``: for a gradient sum, the (consumer node, input position) whose input meta is the
    summed gradient's and the number of gradients summed (None otherwise)."""

    __slots__ = ("k", "op", "refs", "exact", "after", "sum")

    def __init__(self, k: int, op: str, refs: list[str], exact: bool, after: list,
                 sum_of: tuple[int, int, int] | None = None) -> None:
        self.k, self.op, self.refs, self.exact, self.after, self.sum = k, op, refs, exact, after, sum_of

    def __iter__(self):  # (k, op, refs, exact, after), as the plan's tuples were
        return iter((self.k, self.op, self.refs, self.exact, self.after))


#: An ``after`` position: the gradient's writer is a backward node no entry stands for (an
#: operator capture.backward does not know), so a call reading it is not proven.
UNKNOWN = -1
SKIPPED = -3  # a node MXNet does not run (no output taken): not an entry, not a dependency
#: An ``after`` position: the gradient of one of the graph's outputs, from outside the graph
#: (``after``'s second item is the head's index): its writer is the backward's
#: (:attr:`Invocation.heads`), the loss's backward node that wrote it
HEAD = -4


class _B:
    """A node of the gradient graph while :func:`backward_plan` builds it: its plan entry (None
    for a node no call stands for: an unknown operator's backward) and the gradients it reads,
    each (node or None for a head gradient, output)."""

    __slots__ = ("entry", "reads", "outputs")

    def __init__(self, entry: Entry | None, reads: list, outputs: int = 1) -> None:
        self.entry, self.reads, self.outputs = entry, reads, outputs


def backward_plan(graph: Graph, table: dict[str, dict], needs: tuple | None = None) -> list[Entry]:
    """The backward nodes of ``graph`` in the order MXNet 1.9.1's CachedOp runs them, as
    ``MXGradient`` (src/nnvm/gradient.cc) builds them: per forward node, in reverse graph order,
    the gradients of each output summed (``AggregateGradient``: one gradient as it is, two to
    ``sum_cap`` - 1 by one ``ElementWiseSum``, the trace's ``add_n``, more by a ``_grad_add``
    chain), its backward node from ``table`` (attribution.json ``capture.backward``) reading
    them, and its gradients given to its inputs (an ``elemwise_add`` passes its output's on:
    CloneGradient). The run order is the full graph's indexed order: depth first, post order,
    each node's gradient inputs in order, from the gradients of the graph's inputs in turn.
    A forward operator the table does not know gets a node no entry stands for: the entries
    reading its gradients list it as :data:`UNKNOWN`, a sum of them is ``exact`` False (how many
    gradients MXNet sums is not known). ``needs``: per graph input, whether its gradient is
    taken (autograd recorded a path from it: a variable, or an array a taped call wrote); None:
    every input's. A node none of whose outputs is read or taken is not run (left out)."""
    nodes = graph.nodes
    consumer: dict[tuple[int, int], tuple[int, int]] = {}  # entry -> a (node, input position) reading it
    for m, n in enumerate(nodes):
        for x, e in enumerate(n.inputs):
            consumer.setdefault(e, (m, x))
    grads: dict[tuple[int, int], list] = {}
    for k, h in enumerate(graph.heads):
        grads.setdefault(h, []).append((None, k))  # head k's gradient, from outside the graph

    summed: dict[tuple[int, int], tuple | None] = {}

    def aggregate(e: tuple[int, int]) -> tuple | None:
        if e not in summed:
            summed[e] = _aggregate(e)
        return summed[e]

    def _aggregate(e: tuple[int, int]) -> tuple | None:
        v = grads.get(e, [])
        if len(v) <= 1:
            return v[0] if v else None
        known = all(b is None or b.entry is not None for b, _ in v)
        where = consumer.get(e, (-1, -1))
        k = e[0] if e[0] >= 0 else where[0]
        if len(v) < AUTOGRAD["sum_cap"]:
            return (_B(Entry(k, AUTOGRAD["sum"], [], known, [], (*where, len(v))), list(v)), 0)
        ret = v[0]
        for x in v[1:]:
            ret = (_B(Entry(k, AUTOGRAD["chain_op"], [], known, [], (*where, 2)), [ret, x]), 0)
        return (_B(Entry(k, AUTOGRAD["chain_end"], [], known, [], (*where, 1)), [ret]), 0)

    made: list[_B] = []
    for k in range(len(nodes) - 1, -1, -1):
        n = nodes[k]
        spec = table.get(n.op)
        outs = sorted({i for j, i in grads if j == k})
        if spec is not None and spec.get("clone"):  # CloneGradient: each input gets the gradient
            g = aggregate((k, 0))
            if g is not None:
                for e in n.inputs:
                    grads.setdefault(e, []).append(g)
            continue
        if spec is None or "op" not in spec:  # unknown: a backward no entry stands for
            b = _B(None, [g for i in outs if (g := aggregate((k, i))) is not None], len(n.inputs))
            for slot, e in enumerate(n.inputs):
                grads.setdefault(e, []).append((b, slot))
            continue
        attrs = {x.decode(): y.decode() for x, y in zip(n.keys, n.vals)}
        spec = choose(spec, attrs)
        reads = []
        for r in spec["inputs"]:
            if r == "gw":  # the hidden workspace's zero gradient: nothing reads the workspace
                reads.append((_B(Entry(k, AUTOGRAD["zeros"], ["->w"], True, []), []), 0))
            elif r[0] == "g" and (g := aggregate((k, int(r[1:])))) is not None:
                reads.append(g)
        want = spec.get("outputs", ["i*"])
        idx = list(range(len(n.inputs))) if want == ["i*"] else [int(r[1:]) for r in want]
        b = _B(Entry(k, spec["op"], spec["inputs"], bool(spec["exact"]), []), reads, len(idx))
        made.append(b)
        for slot, i in enumerate(idx):
            if i < len(n.inputs):
                grads.setdefault(n.inputs[i], []).append((b, slot))
    # the run order: depth first, post order, from the gradients of the graph's inputs
    order: list[_B] = []
    seen: set[int] = set()

    def emit(root: _B) -> None:
        stack = [(root, 0)]
        while stack:
            b, i = stack.pop()
            if i == 0 and id(b) in seen:
                continue
            if i < len(b.reads):
                stack.append((b, i + 1))
                r = b.reads[i][0]
                if r is not None and id(r) not in seen:
                    stack.append((r, 0))
                continue
            if id(b) not in seen:
                seen.add(id(b))
                order.append(b)

    inputs = sorted({i for m in nodes for j, i in m.inputs if j < 0})
    taken: set[tuple[int, int]] = set()  # (node, output) whose gradient something takes
    for i in inputs:
        g = aggregate((-1, i))
        if g is not None and g[0] is not None:
            emit(g[0])
            if needs is None or (i < len(needs) and needs[i]):
                taken.add((id(g[0]), g[1]))
    for b in made:  # (none: every backward node writes some input's gradient)
        emit(b)
    # MXNet runs a node only when one of its outputs is read by a node of the graph or is the
    # gradient of an input that needs one (CachedOp's backward reqs: kNullOp where no node and
    # no output takes it; a node of only kNullOp outputs is skipped: a first BatchNorm on data)
    for b in order:
        taken.update((id(r), s) for r, s in b.reads if r is not None)
    plan: list[Entry] = []
    at: dict[int, int] = {}
    for b in order:
        runs = any((id(b), s) in taken for s in range(b.outputs))
        if b.entry is None or not runs:
            at[id(b)] = UNKNOWN if b.entry is None else SKIPPED
            continue
        at[id(b)] = len(plan)
        e = b.entry
        plan.append(Entry(e.k, e.op, e.refs, e.exact,
                          [(HEAD, s) if r is None else (at[id(r)], s) for r, s in b.reads
                           if r is None or at[id(r)] != SKIPPED],
                          e.sum))
    return plan


def backward_meta(refs: list[str], in_meta: list, out_meta: list) -> list:
    """A backward node's inputs' (shape, dtype code) from its forward node's, by ``refs``
    (``g0``: forward output 0's gradient, ``i1``: forward input 1, ``i*``: every forward
    input, ``o0``: forward output 0, ``w``/``gw``: the hidden workspace and its gradient)."""
    return backward_io(refs, in_meta, out_meta)[0]


def backward_io(refs: list[str], in_meta: list, out_meta: list) -> tuple[list, list]:
    """(inputs, outputs) of a backward plan entry: inputs by :func:`backward_meta`'s refs, the
    outputs the forward inputs' gradients; a zeros entry (refs ``["->w"]``) has no inputs and
    the workspace as its output."""
    if refs == ["->w"]:
        return [], [workspace(out_meta)]
    out = []
    for r in refs:
        if r == "i*":
            out.extend(in_meta)
        elif r in ("w", "gw"):
            out.append(workspace(out_meta))
        else:
            out.append((out_meta if r[0] in "go" else in_meta)[int(r[1:])])
    return out, in_meta


def _with_hidden(n: Node, in_meta: list, out_meta: list) -> tuple[list, list]:
    """A forward node's (inputs, outputs) metas, its hidden outputs (attribution.json
    matching.hidden_outputs) after its outputs, which its backward node may read (``o1``)."""
    from .memory import hidden

    attrs = {x.decode(): y.decode() for x, y in zip(n.keys, n.vals)}
    extra = hidden(n.op, in_meta, out_meta, attrs, True)
    return in_meta, out_meta if not extra else [*out_meta, *extra]


def _np_name(t: Any) -> str:
    import numpy as np

    return np.dtype(t).name


def _dtype_name(code: int, codes: dict[str, int]) -> str:
    for name, c in codes.items():
        if c == code:
            return name
    return "float32"


def self_on_stack(function: str) -> Any:
    """The ``self`` of the nearest frame running ``function`` (a HybridBlock or Executor method),
    or None."""
    f = sys._getframe(1)
    for _ in range(16):
        if f is None:
            return None
        if f.f_code.co_name == function:
            return f.f_locals.get("self")
        f = f.f_back
    return None


def _prefixes(blk: Any) -> list[str]:
    """The prefixes of a Gluon block and of all its children (``hybridsequential0_``, ``conv0_``);
    each child's block name is noted with its parent's (:func:`pyprof.attribution.segments.note_parent`)."""
    out: list[str] = []
    todo: list[tuple[Any, str | None]] = [(blk, None)] if blk is not None else []
    while todo:
        b, parent = todo.pop()
        p = getattr(b, "prefix", None)
        name = parent
        if isinstance(p, str):
            out.append(p)
            if p.rstrip("_"):
                name = p.rstrip("_")
                note_parent(name, parent)
        children = getattr(b, "_children", None)
        if isinstance(children, dict):
            todo.extend((x, name) for x in children.values())
    return out


def symbol_json() -> str | None:
    """The JSON of the symbol a CachedOp is being made of: the ``sym`` of mxnet's
    ``CachedOp.__init__`` on the stack (mxnet's Python front end makes every CachedOp of
    ``mxnet.base._LIB``); None when it is not there. C: MXSymbolSaveToJSON (by mxnet)."""
    f = sys._getframe(1)
    for _ in range(8):
        if f is None:
            return None
        sym = f.f_locals.get("sym") if f.f_code.co_name == "__init__" else None
        if sym is not None and hasattr(sym, "tojson"):
            return sym.tojson()
        f = f.f_back
    return None


def invoke_io(a: tuple) -> tuple[int, list, list]:
    """(CachedOp handle, input handles, output handles) of MXInvokeCachedOp(Ex)'s ctypes args."""
    h = getattr(a[0], "value", a[0])
    return h, list(a[2][:a[1].value]), list(a[4]._obj[:a[3]._obj.value])


def autograd_recording() -> bool:
    """Whether autograd records on this thread. C: MXAutogradIsRecording."""
    ag = sys.modules.get("mxnet.autograd")
    return bool(ag is not None and ag.is_recording())


class Invocation:
    """A recorded CachedOp invocation (its seqs start at ``first``) until the recorder's
    ``take`` makes its node calls; a backward one has its forward Invocation as ``inputs``."""

    __slots__ = ("first", "t_us", "pushed_us", "graph", "inputs", "in_meta", "thread", "stack", "plan",
                 "heads")

    def __init__(self, first: int, t_us: int, pushed_us: int, graph: Graph, inputs: Any,
                 in_meta: list | None, thread: int, stack: tuple | None, plan: list | None = None,
                 heads: list | None = None) -> None:
        self.first, self.t_us, self.pushed_us, self.graph = first, t_us, pushed_us, graph
        self.inputs, self.in_meta, self.thread, self.stack = inputs, in_meta, thread, stack
        self.plan = plan  # a backward's: its plan entries (backward_plan)
        #: a backward's: per graph output, the (seq, output) of the call that wrote its gradient
        #: (the loss's backward node; (-1, -1): no recorded call)
        self.heads = heads


class Graphs:
    """CachedOp handle -> :class:`Graph`, filled at creation, evicted at ``MXFreeCachedOp``."""

    def __init__(self) -> None:
        self.by_handle: dict[int, Graph] = {}

    def created(self, handle: int) -> None:
        """A CachedOp was made (by mxnet's ``CachedOp.__init__``; its block, if Gluon's, is in
        ``_build_cache`` on the stack); a handle whose symbol is not found is left out."""
        self.by_handle.pop(handle, None)
        sym_json = symbol_json()
        if sym_json is not None:
            self.by_handle[handle] = Graph(sym_json, _prefixes(self_on_stack("_build_cache")))

    def from_stack(self, handle: int) -> Graph | None:
        """A CachedOp made before the recorder was installed: its symbol from the Gluon block
        running it (``HybridBlock._call_cached_op`` on the stack); None when there is none."""
        blk = self_on_stack("_call_cached_op")
        op, graph = getattr(blk, "_cached_op", None), getattr(blk, "_cached_graph", None)
        if op is None or not graph or getattr(op.handle, "value", None) != handle:
            return None
        g = self.by_handle[handle] = Graph(graph[1].tojson(), _prefixes(blk))
        return g

    def freed(self, handle: int) -> None:
        self.by_handle.pop(handle, None)

    def get(self, handle: int) -> Graph | None:
        return self.by_handle.get(handle)

    def clear(self) -> None:
        self.by_handle.clear()

    def hook_create(self, raw: Callable[..., int], out_arg: int) -> Callable[..., int]:
        """``MXCreateCachedOpEx``/``MXCreateCachedOp`` (CachedOpHandle* at ``out_arg``) that
        keeps the new CachedOp's graph (:meth:`created`)."""
        def create(*a: Any) -> int:
            rc = raw(*a)
            if rc == 0:
                try:
                    self.created(a[out_arg]._obj.value)
                except Exception:  # noqa: BLE001 - its invocations fall back to the Gluon block
                    pass
            return rc
        return create

    def hook_free(self, raw: Callable[..., int]) -> Callable[..., int]:
        """``MXFreeCachedOp`` that forgets the graph first (the address may be reused at once)."""
        def free(h: Any) -> int:
            self.freed(getattr(h, "value", h))
            return raw(h)
        return free


def expand(inv: Invocation, shapes: bool) -> list[Call]:
    """The node calls of one recorded invocation, in graph order (their shapes with ``shapes``);
    of a backward, in the order of its plan (the invocation's ``inputs`` is then the forward
    invocation)."""
    g = inv.graph
    if isinstance(inv.inputs, Invocation):
        return _expand_backward(inv, inv.inputs, shapes)
    metas = g.meta(tuple((e[0], e[1]) for e in inv.in_meta), CODES) if shapes else None
    out = []
    for k, n in enumerate(g.nodes):
        producers = tuple(inv.in_meta[i][2] if j < 0 else inv.first + j for j, i in n.inputs)
        slots = tuple(inv.in_meta[i][3] if j < 0 else i for j, i in n.inputs)
        m = metas[k] if metas is not None else (None, None)
        out.append(Call(inv.first + k, inv.t_us, inv.pushed_us, HANDLES.get(n.op, -1),
                        [inv.inputs[i] for j, i in n.inputs if j < 0], [], m[0], m[1], n.keys,
                        n.vals, producers, inv.thread, inv.stack, slots, n.block, _SOURCES[g.source],
                        inv.first))
    return out


def _expand_backward(bwd: Invocation, fwd: Invocation, shapes: bool) -> list[Call]:
    g = fwd.graph
    metas = g.meta(tuple((e[0], e[1]) for e in fwd.in_meta), CODES) if shapes else None
    out = []
    for p, e in enumerate(bwd.plan or ()):
        ins = outs = None
        n = g.nodes[e.k] if e.k >= 0 else None
        keys, vals = (n.keys, n.vals) if n is not None and e.sum is None else ([], [])
        if e.sum is not None:  # a gradient sum: each input, and the output, the summed array's
            m, x, count = e.sum
            keys, vals = [b"num_args"], [str(count).encode()]
            if metas is not None and m >= 0:
                meta = metas[m][0][x]
                ins, outs = [meta] * count, [meta]
        elif metas is not None:
            ins, outs = backward_io(e.refs, *_with_hidden(n, *metas[e.k]))
            want = TABLE.get(n.op, {}).get("outputs") if e.op != AUTOGRAD["zeros"] else None
            if want and want != ["i*"] and outs is not None:  # the gradients it makes
                outs = [outs[int(r[1:])] for r in want]
        out.append(Call(bwd.first + p, bwd.t_us, bwd.pushed_us, HANDLES.get(e.op, -1), [], [], ins, outs,
                        keys, vals,
                        tuple(_writer(bwd, q, x)[0] for q, x in e.after),
                        bwd.thread, fwd.stack, tuple(_writer(bwd, q, x)[1] for q, x in e.after),
                        n.block if n is not None else None,
                        _SOURCES["backward" if e.exact else "backward_partial"], bwd.first))
    return out


def _writer(bwd: Invocation, q: int, x: int) -> tuple[int, int]:
    """(producer seq, output) of a gradient a backward plan entry reads: ``after``'s (plan
    position or :data:`UNKNOWN` or :data:`HEAD`, output)."""
    if q == HEAD:
        heads = bwd.heads or ()
        return heads[x] if x < len(heads) else (-1, -1)
    return (UNKNOWN_WRITER, x) if q == UNKNOWN else (bwd.first + q, x)


def plan_for(graph: Graph, needs: tuple | None) -> list[Entry]:
    """The backward plan of ``graph`` when ``needs`` (per input, whether its gradient is taken)
    holds: made once per graph and ``needs``."""
    if needs not in graph.plan:
        graph.plan[needs] = backward_plan(graph, TABLE, needs)
    return graph.plan[needs]
