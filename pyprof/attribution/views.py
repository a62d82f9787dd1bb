"""The views a backward may read, for :mod:`pyprof.attribution.capture` and
:func:`pyprof.attribution.autograd.derive`.

A view (``x.reshape(...)``, ``x[a:b]``, ``x[i]``, ``x.detach()``: ``attribution.json
capture.views``) is a new NDArray handle on its source's chunk. For matching it is its source
(one engine variable: it inherits the source's producer). For autograd it is not: made while
autograd records, MXNet tapes it as a ``Reshape`` or ``slice`` node that pushes no operator
(``NDArray::ReshapeWithRecord``, ``SliceWithRecord``, ``AtWithRecord``), whose backward node
(``_backward_reshape``, ``_backward_slice``) runs at the backward and gives the nodes before it
the source's shape; made otherwise, or detached, it is off the tape (a leaf), where its
source's producer would link it into the gradient graph. So is an array marked a variable
(``attach_grad``: ``MXAutogradMarkVariables``) after a call wrote it: reads after the mark read
the variable, not the call's output.

:class:`Views` keeps, per thread until its next backward, each view by (handle, producer,
slot): the taped ones as the forward calls of those nodes (seqs from :data:`SEQ_BASE`, never a
call's), the others as leaves. A call reading a view recorded the view's (producer, slot), so
a backward finds the view it read by its handle and those, made before the call. A view of an
array no recorded call wrote has producer -1 and its cache entry carries a tag as slot
(:meth:`Views.tag`; -1 tells matching nothing else), so a later array at a freed view's
address, also without producer, is not taken for it."""

from __future__ import annotations

import threading
from typing import Any

from .. import rules
from .calls import HANDLES, Call

_SPEC = rules.spec("attribution.json")["capture"]
#: attribution.json capture.views: C function -> what autograd tapes for a view it makes while
#: recording ("Reshape", "slice", "at": slice then Reshape; None: nothing, Detach).
TAPES: dict[str, str | None] = _SPEC["views"]
#: The seqs of taped views' forward calls: above every recorded call's.
SEQ_BASE = 1 << 60
_SOURCE: str = _SPEC["sources"]["backward"]
_TAGS = 1 << 30  # tags cycle within int32 slots (the C recorder's), -3 down
#: The first tag (:meth:`Views.tag`): a slot at or below it is a view's tag.
FIRST_TAG = -3


def _shape_text(shape: tuple) -> bytes:
    """A shape as MXNet prints a TShape into an attribute (``[3,5]``; include/mxnet/tuple.h)."""
    return ("[" + ",".join(str(d) for d in shape) + "]").encode()


class Views:
    """The views of each thread since its last backward (see the module docstring); at most
    ``cap`` at once: a thread whose view was not kept has its next backward unproven."""

    def __init__(self, cap: int) -> None:
        self._lock = threading.Lock()  # view hooks run outside the recorder's lock
        self._by: dict[tuple[int, int, int], list[tuple[int, int, Call | None]]] = {}
        self._nodes: dict[int, Call] = {}  # seq -> a taped view's forward call
        self._count = self._seq = self._tag = 0
        self.cap = cap
        self._overflow: set[int] = set()

    def tag(self) -> int:
        """A slot for the cache entry of a new view without producer: unique among live views."""
        with self._lock:
            self._tag = (self._tag + 1) % _TAGS
            return FIRST_TAG - self._tag

    def add(self, kind: str | None, h: int, key: tuple[int, int], made: int, thread: int,
            src: int, src_meta: tuple, meta: tuple, a: tuple, stack: tuple | None = None) -> None:
        """Keep view ``h`` (its cache entry's (producer, slot) ``key``), made at seq ``made`` by
        ``thread``: off the tape when ``kind`` is None, else taped as ``kind``'s nodes
        (:data:`TAPES`) from source ``src`` (producer and slot in ``src_meta``: (shape, dtype,
        producer, slot)), ``meta`` the view's (shape, dtype), ``a`` the C call's arguments,
        ``stack`` the call's (:data:`pyprof.attribution.calls.RECORD`), its nodes' call site."""
        with self._lock:
            if self._count >= self.cap:
                self._overflow.add(thread)
                return
            node = None
            if kind is not None:
                node = self._taped(kind, h, src, src_meta, meta, a, thread, stack)
            self._by.setdefault((h, *key), []).append((made, thread, node))
            self._count += 1

    def _taped(self, kind: str, h: int, src: int, src_meta: tuple, meta: tuple, a: tuple,
               thread: int, stack: tuple | None) -> Call:
        shape, dtype = meta
        prev = (src_meta[2], src_meta[3])  # the source's producer: a call, or a view's node
        if (src, *prev) in self._by:
            n = self._by[(src, *prev)][-1][2]  # the latest, made before this one
            prev = (n.seq, 0) if n is not None else (-1, -1)  # a view off the tape: a leaf
        steps: list[tuple[str, tuple, list, list]] = []
        src_shape = src_meta[0]
        if kind == "Reshape":
            steps.append(("Reshape", shape, [b"shape"], [_shape_text(shape)]))
        else:  # slice (begin, end) or at (idx): the arguments after the source handle
            lo = int(getattr(a[1], "value", a[1]))
            hi = lo + 1 if kind == "at" else int(getattr(a[2], "value", a[2]))
            sliced = (hi - lo, *src_shape[1:]) if src_shape else shape
            steps.append(("slice", sliced, [b"begin", b"end"], [str(lo).encode(), str(hi).encode()]))
            if kind == "at" and tuple(shape) != tuple(sliced):  # AtWithRecord's Reshape
                steps.append(("Reshape", shape, [b"shape"], [_shape_text(shape)]))
        in_meta = (src_shape, dtype, *prev)
        ins, node = [src], None
        for op, out_shape, keys, vals in steps:
            self._seq += 1
            seq = SEQ_BASE + self._seq
            node = Call(seq, 0, 0, HANDLES.get(op, -1), ins, [h], [in_meta], [(out_shape, dtype, seq, 0)],
                        keys, vals, (in_meta[2],), thread, stack, (in_meta[3],), source=_SOURCE)
            self._nodes[seq] = node
            ins, in_meta = [h], (out_shape, dtype, seq, 0)
        assert node is not None
        return node

    def nodes(self) -> dict[int, Call]:
        """seq -> the forward call of every taped view kept."""
        with self._lock:
            return dict(self._nodes)

    def resolve(self, h: int, seq: int, producer: int, slot: int) -> Any:
        """What input handle ``h`` of the call ``seq``, read with (``producer``, ``slot``), is
        to the gradient graph: (a taped view's forward call, 0), ``("v", h)`` for a view off
        the tape (a leaf), None when it is no view kept (then its producer's output)."""
        with self._lock:
            kept = self._by.get((h, producer, slot))
            if not kept:
                return None
            for made, _, node in reversed(kept):
                if made <= seq:
                    return ("v", h) if node is None else (node, 0)
            return None

    def consume(self, thread: int) -> bool:
        """Forget ``thread``'s views (its backward consumed its tape); True when one of them
        was not kept (past the cap)."""
        with self._lock:
            for k in list(self._by):
                v = [x for x in self._by[k] if x[1] != thread]
                self._count -= len(self._by[k]) - len(v)
                if v:
                    self._by[k] = v
                else:
                    del self._by[k]
            self._nodes = {s: n for s, n in self._nodes.items() if n.thread != thread}
            missed = thread in self._overflow
            self._overflow.discard(thread)
            return missed

    def overflowed(self, thread: int) -> bool:
        """Whether one of ``thread``'s views was not kept (past the cap), nothing forgotten."""
        with self._lock:
            return thread in self._overflow

    def clear(self) -> None:
        """Forget every view (a window taken: its forwards get no backward calls later)."""
        with self._lock:
            self._by.clear()
            self._nodes.clear()
            self._count = 0
            self._overflow.clear()
