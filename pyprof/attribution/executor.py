"""Bound executors (``mx.sym`` ... ``bind``/``simple_bind``, then ``forward``), for
:mod:`pyprof.attribution.capture`.

A bound executor runs its symbol's operators as bulk segments that MXNet pushes itself
(``[dot]``, ``[dot,relu]``; one event per operator in per-operator mode), so no
``MXImperativeInvokeEx`` sees them. While a recorder is installed, ``MXExecutorForward`` is
hooked: at an executor's first forward recorded, :class:`Executors` reads the bound symbol, its
bound arrays (arguments and auxiliary states, put in ``list_inputs`` order) from mxnet's
``Executor`` running the call (``Executor.forward`` on the stack; that covers executors
bound before the session as well as inside it), and keeps them per executor handle until
``MXExecutorFree`` (addresses are reused). The symbol is a :class:`~pyprof.attribution.cachedop.Graph`:
each forward then becomes one call per operator node, in graph order, and the nodes' shapes come
from one shape and one type inference of the symbol at the bound arrays' shapes (an executor's
shapes are fixed when it is bound), made when the window is cut. ``MXExecutorOutputs`` (which
mxnet calls after each forward, for new output handles) is hooked too: the handles it returns
are cached as written by the head nodes of the executor's last recorded forward, so that the
imperative calls reading them have those nodes as producers. C functions, once per executor,
after its ``MXExecutorForward`` returned (which hands nothing back through MXNet's per-thread
buffers): ``MXSymbolSaveToJSON``, ``MXSymbolListArguments``, ``MXSymbolListAuxiliaryStates``,
``MXSymbolListInputs``. Nothing is kept alive: handles are integers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .cachedop import Graph, self_on_stack


class Bound:
    """One bound executor: its symbol's :class:`Graph`, its bound input handles in the symbol's
    ``list_inputs`` order, and ``last``: the first seq of its last recorded forward (-1: none)."""

    __slots__ = ("graph", "inputs", "last")

    def __init__(self, graph: Graph, inputs: list[int]) -> None:
        self.graph, self.inputs, self.last = graph, inputs, -1


class Executors:
    """Executor handle -> :class:`Bound`, filled at the first recorded forward, evicted at
    ``MXExecutorFree``."""

    def __init__(self) -> None:
        self.by_handle: dict[int, Bound] = {}

    def resolve(self, a: tuple) -> Bound | None:
        """The executor of ``MXExecutorForward(handle, is_train)``'s ctypes args, or None."""
        handle = getattr(a[0], "value", a[0])
        return self.by_handle.get(handle) or self.from_stack(handle)

    def from_stack(self, handle: int) -> Bound | None:
        """The executor ``handle`` from mxnet's ``Executor.forward`` running it; None when no
        such frame is on the stack, or its arrays do not fit its symbol."""
        exe = self_on_stack("forward")
        if type(exe).__name__ != "Executor" or getattr(getattr(exe, "handle", None), "value", None) != handle:
            return None
        sym = exe._symbol
        bound = dict(zip(sym.list_arguments(), exe.arg_arrays))
        aux = sym.list_auxiliary_states()
        if len(bound) != len(exe.arg_arrays) or len(aux) != len(exe.aux_arrays):
            return None
        bound.update(zip(aux, exe.aux_arrays))
        names = sym.list_inputs()
        if any(n not in bound for n in names):
            return None
        b = self.by_handle[handle] = Bound(Graph(sym.tojson(), None, "executor"),
                                           [bound[n].handle.value for n in names])
        return b

    def clear(self) -> None:
        self.by_handle.clear()

    def hook_outputs(self, raw: Callable[..., int], cache: dict) -> Callable[..., int]:
        """``MXExecutorOutputs(handle, uint* size, NDArrayHandle** out)`` that caches the handles
        it returns (a handle -> (shape, dtype code, producer seq, output slot) ``cache``, the
        recorder's) as written by the executor's last recorded forward; no C call."""
        def outputs(*a: Any) -> int:
            rc = raw(*a)
            b = self.by_handle.get(getattr(a[0], "value", a[0])) if rc == 0 else None
            if b is not None and b.last >= 0:
                hs = a[2]._obj
                for i, (j, k) in zip(range(a[1]._obj.value), b.graph.heads):
                    e = (None, -1, b.last + j, k) if j >= 0 else cache.get(b.inputs[k])
                    if e is not None:
                        cache[hs[i]] = e
            return rc
        return outputs

    def hook_free(self, raw: Callable[..., int]) -> Callable[..., int]:
        """``MXExecutorFree`` that forgets the executor first (the address may be reused at once)."""
        def free(h: Any) -> int:
            self.by_handle.pop(getattr(h, "value", h), None)
            return raw(h)
        return free
