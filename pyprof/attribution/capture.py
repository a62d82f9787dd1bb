"""Recording imperative calls at the gated ``MXImperativeInvokeEx`` (issue 22, opt-in).

``pyprof.profile(record_shapes=..., with_stack=..., with_flops=...)`` (torch's names) makes a
:class:`Recorder`. While a session holds one, :func:`pyprof.native.capi.hook_mxnet` routes
mxnet's ``MXImperativeInvokeEx`` and ``MXNDArrayFree`` through it, inside the API gate; with
every option off no recorder exists and the gate's functions are exactly as before.

Per call, while a window records (:meth:`Recorder.resume` .. :meth:`Recorder.pause`): the
operator (its handle, named once per process by ``NNGetOpHandle``), the input and output
NDArray handles (ints: nothing is kept alive), with ``record_shapes`` their shapes and dtypes
(``MXNDArrayGetShapeEx64``/``MXNDArrayGetDType``; an input's come from a cache filled when it was
an output or first seen, evicted at ``MXNDArrayFree`` since addresses are reused), the
attributes (keys and vals as passed), the calling thread, the call's time (the trace's clock,
microseconds) and, with ``with_stack``, the call stack up to the call site: the first frame
whose module is not one of ``attribution.json capture.skip_modules``. Each input also names its
producer: the last recorded call that wrote the handle (forgotten at the free), and which of
that call's outputs it is (its engine variable), which is what :mod:`pyprof.attribution.matching`
needs. A view (``reshape``, ``x[i]``, ``x[a:b]``, ``detach``: ``attribution.json capture.views``)
is a new handle on the same engine variable, so it inherits its source's producer; without that
an operator reading a view looked ready before the source's producer had run.

Hybridized Gluon blocks (:mod:`pyprof.attribution.cachedop`): ``MXInvokeCachedOpEx`` and
``MXInvokeCachedOp`` record one call per operator node of the block's graph, in graph order,
with its Gluon block (``Call.block``); the graph comes from ``MXCreateCachedOpEx``/
``MXCreateCachedOp`` (or, for a CachedOp made before the recorder was installed, from the
Gluon block running it) and is forgotten at ``MXFreeCachedOp``; the nodes' shapes come from
one inference per input signature, made at :meth:`Recorder.take` (outside MXNet's calls). An
invocation autograd records (tracked at ``MXAutogradSetIsRecording``) also gets, at the next
``MXAutogradBackwardEx``, one call per backward node that ``attribution.json
capture.backward`` knows, with shapes derived from its forward node's. Bound executors
(:mod:`pyprof.attribution.executor`): ``MXExecutorForward`` records one call per operator node
of the bound symbol in the same way (the symbol and bound arrays read once per executor,
forgotten at ``MXExecutorFree``), and ``MXExecutorOutputs`` gives its outputs their producers.

The Python recorder's shape queries are C API calls: with ``profile_api`` they show in the trace
as ``MXNDArrayGetShapeEx64``/``MXNDArrayGetDType`` calls (one pair per output and per input not
seen before); the native one reads shapes from the NDArray (:data:`pyprof.native.shim.LAYOUT`).

Two recorders run the imperative calls (:attr:`Recorder.kind`): with shapes and without stacks,
the native one (``pyprof/native/recorder.c`` through :mod:`pyprof.native.shim`: mxnet's ctypes
calls go straight into C, which logs the same records; they are parsed at :meth:`Recorder.take`),
else, or where it does not build, or with ``PYPROF_RECORDER=python``, this module's Python
hooks. The hooks that stay in Python (views, CachedOp, executors, autograd) share the recorder's
handle cache and seq counter through one :mod:`pyprof.attribution.store` either way.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from .. import rules
from ..native import capi, shim
from . import autograd, cachedop, executor, store, views
from .calls import HANDLES, UNKNOWN_WRITER as _UNKNOWN_WRITER, Call, as_call, dtype_name, load_handles, seq_of


_SPEC: dict[str, Any] = rules.spec("attribution.json")["capture"]
#: The session options, each with what it records.
OPTIONS: dict[str, str] = _SPEC["options"]
_SKIP = tuple(_SPEC["skip_modules"])
# The CachedOp functions hooked with the imperative ones (module cachedop): invocations, and
# creations with the index of their CachedOpHandle* argument.
_CACHED_INVOKE = ("MXInvokeCachedOpEx", "MXInvokeCachedOp")
_CACHED_CREATE = {"MXCreateCachedOpEx": 4, "MXCreateCachedOp": 1}
_EXECUTOR = ("MXExecutorForward", "MXExecutorOutputs", "MXExecutorFree")  # module executor
#: Calls one window records at most (attribution.json capture.max_calls; tests lower it):
#: past it the recorder stops until the next window, so memory stays bounded.
MAX_CALLS: int = _SPEC["max_calls"]
_MAX_SHAPES = 65536  # distinct shapes kept interned; past it the table starts afresh
#: The C functions that make a view: a new handle on its source's engine variable
#: (attribution.json capture.views; each takes the source first and the new handle's out last).
VIEWS: tuple[str, ...] = tuple(_SPEC["views"])

class Recorder:
    """The calls of one session's windows (see the module docstring).

    Args:
        shapes: query and record shapes and dtypes (``record_shapes`` or ``with_flops``).
        stack: record the call site and stack (``with_stack``).
    """

    def __init__(self, *, shapes: bool, stack: bool) -> None:
        self.shapes, self.stack = shapes, stack
        self.calls: list[Call] = []  # the Python hooks' records (the C recorder logs its own)
        self._use(store.PyStore(0, MAX_CALLS))  # the store's seqs go on every window: unique
        self._shapes: dict[tuple, tuple] = {}  # each shape once (calls.RECORD); cleared past _MAX_SHAPES
        self._lock = threading.Lock()
        self.hooked = False  # mxnet's functions go through this recorder (install .. uninstall)
        self._skip: dict[Any, bool] = {}  # code object -> not a call site
        self._graphs = cachedop.Graphs()  # CachedOp handle -> its symbol, while it lives
        self._executors = executor.Executors()  # executor handle -> its bound symbol, while it lives
        self._taped: list[cachedop.Invocation] = []  # autograd recorded them; not backwarded yet
        self._recording: dict[int, bool] = {}  # thread ident -> autograd records (as last set)
        self._tape = autograd.Tape()  # the seq spans autograd recorded imperative calls in
        self._views = views.Views(MAX_CALLS)  # the views a backward may read
        self._training = autograd.Tape()  # the seq spans MXNet's is_train was set in
        self._blind: list[int] = []  # first seqs of backwards whose gradients were not linked
        self._unrecorded = 0  # the Python hooks' calls whose recording failed (see unrecorded)
        _RECORDERS.add(self)

    # -- the session's side ---------------------------------------------------------------------
    @property
    def kind(self) -> str:
        """Which recorder runs the imperative calls: ``"native"`` (pyprof/native/recorder.c)
        or ``"python"`` (this module's hooks: with stacks, without a C compiler, or forced)."""
        return self._store.kind

    @property
    def unrecorded(self) -> int:
        """Calls whose recording failed (they ran; their events carry no args)."""
        return self._unrecorded + self._store.unrecorded

    def _use(self, st: Any) -> None:
        self._store, self._active, self._cache = st, st.active, st.cache

    def install(self) -> bool:
        """Route mxnet's ``MXImperativeInvokeEx`` and ``MXNDArrayFree`` through this recorder
        (once mxnet is imported); True when installed. C: NNGetOpHandle (first use)."""
        if self.hooked:
            return True
        if "mxnet.base" not in sys.modules:
            return False
        load_handles()
        shim.layout_checked()  # (once a process, outside MXNet's calls: gradients' engine variables)
        self._use(store.choose(self, self.shapes, self.stack, MAX_CALLS, self._store.seq()))
        native = self._store.kind == "native"
        if not capi.hook_mxnet("MXImperativeInvokeEx", self._store.make_invoke if native else self._make_invoke):
            return False
        capi.hook_mxnet("MXNDArrayFree", self._store.make_free if native else self._make_free)
        for name in VIEWS:
            capi.hook_mxnet(name, lambda raw, n=name: self._make_view(raw, n))
        for name in _CACHED_INVOKE:
            capi.hook_mxnet(name, lambda raw: self._make_invoke(raw, self._resolve_cached))
        capi.hook_mxnet("MXExecutorForward", lambda raw: self._make_invoke(raw, self._executors.resolve))
        capi.hook_mxnet("MXExecutorOutputs", lambda raw: self._executors.hook_outputs(raw, self._cache))
        capi.hook_mxnet("MXExecutorFree", self._executors.hook_free)
        for name, out_arg in _CACHED_CREATE.items():
            capi.hook_mxnet(name, lambda raw, i=out_arg: self._graphs.hook_create(raw, i))
        capi.hook_mxnet("MXFreeCachedOp", self._graphs.hook_free)
        capi.hook_mxnet("MXAutogradBackwardEx", self._make_backward)
        capi.hook_mxnet("MXAutogradSetIsRecording", self._make_set_recording)
        capi.hook_mxnet("MXAutogradSetIsTraining", self._make_set_training)
        capi.hook_mxnet("MXAutogradMarkVariables", self._make_mark_variables)
        if autograd.is_training():  # set before the recorder knew (a session inside train_mode)
            self._training.set(threading.get_ident(), True, self._store.seq())
        self.hooked = True
        return True

    def uninstall(self) -> None:
        """Give mxnet its plain gated functions back and forget every handle."""
        if self.hooked:
            capi.hook_mxnet("MXImperativeInvokeEx")
            capi.hook_mxnet("MXNDArrayFree")
            for name in (*VIEWS, *_CACHED_INVOKE, *_CACHED_CREATE, "MXFreeCachedOp", *_EXECUTOR,
                         "MXAutogradBackwardEx", "MXAutogradSetIsRecording", "MXAutogradSetIsTraining",
                         "MXAutogradMarkVariables"):
                capi.hook_mxnet(name)
            self.hooked = False
        self._active[0] = False
        self._cache.clear()
        getattr(self._store, "links", {}).clear()
        self._shapes.clear()
        self._graphs.clear()
        self._executors.clear()
        self._recording.clear()
        self._views.clear()
        self._training = autograd.Tape()

    def resume(self) -> None:
        """A window starts recording: record calls from now on."""
        self.install()
        self._store.configure(MAX_CALLS)
        self._active[0] = True

    def pause(self) -> None:
        """The window stopped recording."""
        self._active[0] = False

    def take(self) -> tuple[list[Call], bool]:
        """The calls recorded since the last take (the window's), in call order, and whether
        recording stopped at ``capture.max_calls`` (the next window records again)."""
        calls, log, full, blind, training = self._cut()
        # outside the lock (the hot path waits), the collector paused: nothing made here is garbage
        collecting = gc.isenabled()
        gc.disable()
        try:
            logged = self._store.records(log)
            if logged:  # the C recorder's, merged by seq with the Python hooks'
                calls = sorted(calls + logged, key=seq_of) if calls else logged
            calls = [as_call(c) for c in calls]
            if any(type(c) is cachedop.Invocation for c in calls):
                calls = [x for c in calls
                         for x in (cachedop.expand(c, self.shapes) if type(c) is cachedop.Invocation else (c,))]
        finally:
            if collecting:
                gc.enable()
        _unproven(calls, blind)
        autograd.mark_training(calls, training)
        return calls, full

    def discard(self) -> None:
        """Forget the calls recorded since the last take, unread (a warm-up's: no window)."""
        self._cut()

    def _cut(self) -> tuple[list, Any, bool, list[int], dict]:
        with self._lock:
            log, full = self._store.drain(True)
            # a forward of this window backwarded in the next gets no backward calls
            calls, self.calls, self._taped = self.calls, [], []
            self._tape.clear()
            self._views.clear()
            blind, self._blind = self._blind, []
            training = self._training.all_spans(self._store.seq())
            self._training.clear()
        return calls, log, full, blind, training

    # -- the hot path ---------------------------------------------------------------------------
    def _make_invoke(self, raw: Callable[..., int], resolve: Callable | None = None) -> Callable[..., int]:
        """``MXImperativeInvokeEx`` recording; with ``resolve`` (ctypes args -> the graph's
        holder, or None), ``MXInvokeCachedOp(Ex)``'s or ``MXExecutorForward``'s."""
        active, now = self._active, time.time_ns
        record = self._record if resolve is None else (lambda t, p, a: self._record_cached(t, p, a, resolve))

        def invoke(*a: Any) -> int:
            t = now()
            given = resolve is None and bool(a[4]._obj)  # out=: the caller's arrays (made before)
            rc = raw(*a)
            if rc == 0 and active[0]:
                try:
                    if given:
                        self._record(t // 1000, now() // 1000, a, True)
                    else:
                        record(t // 1000, now() // 1000, a)
                except Exception:  # noqa: BLE001 - the call succeeded: never the caller's error
                    self._unrecorded += 1  # (a shape query MXNet refused): left unrecorded
            return rc
        return invoke

    def _make_free(self, raw: Callable[..., int]) -> Callable[..., int]:
        pop = self._cache.pop

        def free(h: Any) -> int:
            pop(getattr(h, "value", h), None)  # before the free: the address may be reused at once
            return raw(h)
        return free

    def _make_view(self, raw: Callable[..., int], name: str) -> Callable[..., int]:
        active, cache, recording, tapes = self._active, self._cache, self._recording, views.TAPES[name]

        def view(*a: Any) -> int:
            rc = raw(*a)  # (source handle, ..., NDArrayHandle* out): the out is a view of the source
            if rc == 0 and active[0]:
                try:
                    src = getattr(a[0], "value", a[0])
                    e = cache.get(src)
                    t = threading.get_ident()
                    rec = recording.get(t)
                    if rec is None:  # not set since the recorder was installed: asked once
                        rec = recording[t] = cachedop.autograd_recording()
                    if rec and tapes is not None:  # autograd tapes it (its source on the tape)
                        self._taped_view(tapes, src, e, a[-1]._obj.value, t, a)
                    elif e is not None:  # a source never seen has no producer: nor has its view
                        h = a[-1]._obj.value
                        s, d = self._store.meta(h) if self.shapes else (None, -1)
                        s = self._shapes.setdefault(s, s)
                        cache[h] = (s, d, e[2], e[3])  # one dict store, as the free's pop
                        if e[2] >= 0 and self._tape.holds():  # off the tape; its source's producer may be on it
                            self._views.add(None, h, (e[2], e[3]), self._store.seq(), t, src, e, (s, d), a)
                except Exception:  # noqa: BLE001 - the call succeeded: never the caller's error
                    self._unrecorded += 1
            return rc
        return view

    def _taped_view(self, kind: str, src: int, e: tuple | None, h: int, thread: int, a: tuple) -> None:
        """View ``h`` of ``src`` (cache entry ``e``) made while autograd records: its cache
        entry, and its nodes kept for the backward (:class:`pyprof.attribution.views.Views`)."""
        meta, shapes = self._store.meta, self._shapes
        if e is None or e[1] == -1:  # its shape is the nodes' (and the source alive for has_grad)
            sh, d = meta(src)
            e = self._cache[src] = (shapes.setdefault(sh, sh), d, -1, -1) if e is None else (sh, d, e[2], e[3])
        s, d = meta(h)
        s = shapes.setdefault(s, s)
        key = (e[2], e[3]) if e[2] >= 0 else (-1, self._views.tag())
        self._cache[h] = (s, d, *key)
        self._views.add(kind, h, key, self._store.seq(), thread, src, e, (s, d), a,
                        self._stack() if self.stack else None)

    def _meta(self, h: int) -> tuple:
        """The cache entry of input handle ``h``, queried and cached when not seen before."""
        e = self._cache.get(h)
        if e is None or e[1] == -1:  # never seen, or recorded without shapes
            s, d = self._store.meta(h)
            s = self._shapes.setdefault(s, s)
            e = self._cache[h] = (s, d, -1, -1) if e is None else (s, d, e[2], e[3])
        return e

    def _resolve_cached(self, a: tuple) -> cachedop.Graph | None:
        handle = getattr(a[0], "value", a[0])
        return self._graphs.get(handle) or self._graphs.from_stack(handle)

    def _record_cached(self, t_us: int, pushed_us: int, a: tuple, resolve: Callable) -> None:
        """A CachedOp invocation or an executor's forward: its seqs (one per operator node)
        reserved now, its node calls made at :meth:`take` (the shape inference cannot run inside
        MXNet's call, see :meth:`pyprof.attribution.cachedop.Graph.meta`); a CachedOp's outputs
        cached as the nodes' (an executor's at ``MXExecutorOutputs``)."""
        holder = resolve(a)
        if holder is None:
            self._unrecorded += 1
            return
        bound = holder if isinstance(holder, executor.Bound) else None
        if bound is None:
            graph, (_, ins, outs) = holder, cachedop.invoke_io(a)
        else:
            graph, ins, outs = bound.graph, bound.inputs, []
        meta, cache = self._store.meta, self._cache
        with self._lock:
            n = len(graph.nodes)
            first = self._store.reserve(n)
            if first < 0:  # the window is full: recording stopped
                return
            try:
                in_meta = [self._meta(h) for h in ins]
            except BaseException:
                self._store.release(n)
                raise
            if bound is not None:
                bound.last = first
            sig = tuple((e[0], e[1]) for e in in_meta)
            known = graph.outputs.get(sig)  # the outputs' (shape, dtype) at this signature
            if known is None or len(known) != len(outs):
                known = graph.outputs[sig] = [meta(h) if self.shapes else (None, -1) for h in outs]
            for h, (j, i), (s, d) in zip(outs, graph.heads, known):
                cache[h] = in_meta[i] if j < 0 else (s, d, first + j, i)
            inv = cachedop.Invocation(first, t_us, pushed_us, graph, ins, in_meta, threading.get_ident(),
                              self._stack() if self.stack else None)
            self.calls.append(inv)
            t = threading.get_ident()
            rec = self._recording.get(t) if bound is None else False  # an executor: not autograd's
            if rec is None:  # not set since the recorder was installed: asked once
                rec = self._recording[t] = cachedop.autograd_recording()
            if rec:
                self._taped.append(inv)

    def _make_set_recording(self, raw: Callable[..., int]) -> Callable[..., int]:
        recording, ident = self._recording, threading.get_ident

        def set_recording(*a: Any) -> int:
            rc = raw(*a)
            if rc == 0:
                on = recording[ident()] = bool(getattr(a[0], "value", a[0]))
                self._tape.set(ident(), on, self._store.seq())
            return rc
        return set_recording

    def _make_set_training(self, raw: Callable[..., int]) -> Callable[..., int]:
        ident = threading.get_ident

        def set_training(*a: Any) -> int:
            rc = raw(*a)
            if rc == 0:
                self._training.set(ident(), bool(getattr(a[0], "value", a[0])), self._store.seq())
            return rc
        return set_training

    def _make_mark_variables(self, raw: Callable[..., int]) -> Callable[..., int]:
        """``MXAutogradMarkVariables`` (``attach_grad``): an array a call wrote, or a taped view,
        is a variable from now on, a leaf to the gradient graph (MXNet gives it a new entry)."""
        active, cache = self._active, self._cache

        def mark(*a: Any) -> int:
            rc = raw(*a)
            if rc == 0 and active[0]:
                try:
                    t = threading.get_ident()
                    for h in a[1][:getattr(a[0], "value", a[0])]:
                        e = cache.get(int(h or 0))
                        if e is not None and (e[2] >= 0 or e[3] <= views.FIRST_TAG):
                            self._views.add(None, int(h), (e[2], e[3]), self._store.seq(), t, 0, e, e[:2], a)
                except Exception:  # noqa: BLE001 - the call succeeded: never the caller's error
                    self._unrecorded += 1
            return rc
        return mark

    def _make_backward(self, raw: Callable[..., int]) -> Callable[..., int]:
        active, now = self._active, time.time_ns

        def backward(*a: Any) -> int:
            t = now()
            rc = raw(*a)
            if rc == 0 and active[0]:
                try:
                    self._record_backward(t // 1000, now() // 1000, a)
                except Exception:  # noqa: BLE001 - the call succeeded: never the caller's error
                    self._unrecorded += 1
            return rc
        return backward

    def _record_backward(self, t_us: int, pushed_us: int, a: tuple) -> None:
        """The backward of what autograd recorded on this thread (:mod:`pyprof.attribution.autograd`):
        the head gradients MXNet makes, then each backward node in MXNet's run order, an
        imperative call's as a call now, a CachedOp invocation's as its plan (calls made at
        :meth:`take`); seqs reserved now. ``a``: MXAutogradBackwardEx's ctypes args; with its
        ``retain_graph`` the tape stays for the next backward, as MXNet keeps the graph."""
        thread = threading.get_ident()
        retain = bool(getattr(a[5], "value", a[5]))
        with self._lock:
            taped = self._taped if retain else self._taped[:]
            if not retain:
                self._taped = []
            logged = self._store.records(self._store.drain(False)[0])  # the C recorder's: the tape reads them
            if logged:
                self.calls = sorted(self.calls + logged, key=seq_of)
            spans = self._tape.taken(thread, self._store.seq(), keep=retain)
            calls = autograd.taped_calls(self.calls, spans, thread)
            writers: dict = {}
            start = self._store.seq()
            handles, given = autograd.backward_heads(a)
            made, nodes = autograd.derive(handles, given, calls, list(taped), self._cache,
                                          autograd.by_handle(), self._has_grad, writers, self._views)
            # a view not kept: the graph may be wrong
            unproven = self._views.overflowed(thread) if retain else self._views.consume(thread)
            reached = {id(n.fwd) for n in nodes}
            nodes += [autograd.BackwardNode(None, None, None, [], inv) for inv in reversed(taped)
                      if id(inv) not in reached]  # not reached from the heads: as before
            heads = []  # per head, its gradient's writer: the SetValueOp made, or the given one's
            metas = iter(made)
            for g in given:
                if g is not None:
                    e = self._cache.get(g)
                    heads.append((e[2], e[3]) if e is not None else (-1, -1))
                    continue
                if (s := self._store.reserve(1)) < 0:
                    return
                heads.append((s, 0))
                self.calls.append(autograd.head_call(s, t_us, pushed_us, next(metas), thread, self.shapes))
            for n in nodes:
                if n.op is not None:
                    if (s := self._store.reserve(1)) < 0:
                        return
                    n.seq = s
                    c = autograd.node_call(n, t_us, pushed_us, thread, heads, self.shapes)
                    c.unproven = unproven
                    self.calls.append(c)
                    continue
                g = n.fwd.graph
                plan = cachedop.plan_for(g, n.needs)
                if not plan:
                    continue
                if (first := self._store.reserve(len(plan))) < 0:
                    return
                self.calls.append(cachedop.Invocation(first, t_us, pushed_us, g, n.fwd, None,
                                                      thread, None, plan,
                                                      autograd.head_writers(n, heads)))
            if not self._link(writers):
                self._blind.append(start)

    def _has_grad(self, h: int) -> bool:
        """Whether leaf ``h`` is a variable with a gradient: asked of MXNet only while the
        handle lives (every input a call read is cached until its free), never of a freed one."""
        return self._cache.get(h) is not None and autograd.has_grad(h)

    def _link(self, writers: dict) -> bool:
        """Give the gradients a backward writes their writers: each variable's gradient array
        (whatever handle reads it: Gluon's grad arrays, ``.grad``) has the node writing it as
        producer, by its engine variable (the ``Chunk*`` every handle of it shares). False when
        a gradient's writer or engine variable is not known: the calls after it that read an
        array written before it are then not proven (:attr:`pyprof.attribution.calls.Call.unproven`)."""
        links, ok = {}, True
        for h, w in writers.items():
            c = autograd.grad_chunk(h, self._store.chunk)
            if c is None:
                ok = False
            elif w is None or w[0].seq < 0:  # its readers are not proven (Call.unproven)
                links[c] = (UNKNOWN_WRITER, -1)
            else:
                links[c] = (w[0].seq, w[1])
        return self._store.link(links) and ok if links else ok

    def _record(self, t_us: int, pushed_us: int, a: tuple, given: bool = False) -> None:
        op, ins, outs, keys, vals = capi.invoke_io(a)
        cache = self._cache
        with self._lock:
            if (seq := self._store.reserve(1)) < 0:  # bounded, whatever the window
                return
            try:
                prod, slots, fin, fout = [], [], [], []
                if self.shapes:  # flat (shape, dtype, ...), shapes interned: see calls.RECORD
                    meta, shapes = self._store.meta, self._shapes
                    if len(shapes) > _MAX_SHAPES:
                        shapes.clear()
                    links = self._store.links
                    for h in ins:
                        e = cache.get(h)
                        p, k = (-1, -1) if e is None else (e[2], e[3])
                        if e is None and links:  # first seen: a gradient autograd wrote?
                            p, k = links.get(shim.chunk_of(h), (p, k))
                        prod.append(p)
                        slots.append(k)
                        if e is None or e[1] == -1:  # never seen, or an executor's output (no shape yet)
                            sh, d = meta(h)
                            e = cache[h] = (shapes.setdefault(sh, sh), d, p, k)
                        fin += e[0], e[1]
                    for j, h in enumerate(outs):
                        sh, d = meta(h)
                        sh = shapes.setdefault(sh, sh)
                        cache[h] = (sh, d, seq, j)
                        fout += sh, d
                    fin, fout = tuple(fin), tuple(fout)
                else:
                    links = self._store.links
                    for h in ins:
                        e = cache.get(h)
                        p, k = (-1, -1) if e is None else (e[2], e[3])
                        if e is None and links:  # first seen: a gradient autograd wrote?
                            p, k = links.get(shim.chunk_of(h), (p, k))
                        prod.append(p)
                        slots.append(k)
                        if e is None:  # cached until its free: alive when a backward asks (_has_grad)
                            cache[h] = (None, -1, p, k)
                    fin = fout = None
                    for j, h in enumerate(outs):
                        cache[h] = (None, -1, seq, j)
                producers, slots = tuple(prod), tuple(slots)
                stack = self._stack() if self.stack else None
                self.calls.append((seq, t_us, pushed_us, op, ins, outs, fin, fout, keys, vals,
                                   producers, threading.get_ident(), stack, slots, given))
            except BaseException:
                self._store.release(1)  # not recorded: its seq stays spent, as its cache entries
                raise

    def _stack(self) -> tuple:
        """code, line, code, line, ... from the call site outwards (frames of skip_modules left
        out), flat: see calls.RECORD."""
        f = sys._getframe(3)
        skip = self._skip
        while f is not None:
            code = f.f_code
            s = skip.get(code)
            if s is None:
                name = f.f_globals.get("__name__") or ""
                s = skip[code] = any(name == m or name.startswith(m + ".") for m in _SKIP)
            if not s:
                break
            f = f.f_back
        out: list = []
        while f is not None:
            out += f.f_code, f.f_lineno
            f = f.f_back
        return tuple(out)


#: The producer seq of an array a backward wrote by a node no call stands for (a hybridized
#: block's backward): a call reading it is not proven (Call.unproven).
UNKNOWN_WRITER = _UNKNOWN_WRITER


def _unproven(calls: list, blind: list[int]) -> None:
    """Mark the calls no dependency model proves: one reading a gradient whose writer is not
    known (:data:`UNKNOWN_WRITER`); and after a backward whose gradients' engine variables could
    not be read (first seq in ``blind``), a call reading an array whose last known writer came
    before that backward (it may read a gradient the backward overwrote)."""
    import bisect

    blind = sorted(blind)
    for c in calls:
        if UNKNOWN_WRITER in c.producers:
            c.unproven = True
        elif blind and (k := bisect.bisect_left(blind, c.seq)) and any(p < blind[k - 1] for p in c.producers):
            c.unproven = True  # (the backwards before c: the last one decides)


_RECORDERS: weakref.WeakSet[Recorder] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # A parent thread may have held a recorder's lock at fork (that thread does not exist here),
    # and a forked child cuts no windows: its recorders record nothing.
    for r in list(_RECORDERS):
        r._lock = threading.Lock()
        r._active[0] = False
        r.calls, r._taped = [], []
        r._views = views.Views(MAX_CALLS)  # (its lock too)
        r._store.drain(True)


os.register_at_fork(after_in_child=_after_fork_in_child)
