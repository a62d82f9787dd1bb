"""One recorded operator call (:class:`Call`), and the operators' handles, for
:mod:`pyprof.attribution.capture` (which records them) and :mod:`pyprof.attribution.matching`
(which matches them to trace events). No C function is called here but ``NNGetOpHandle``
(:func:`load_handles`, once per process)."""

from __future__ import annotations

import re


from .. import rules
from ..native import capi


_DTYPES: dict[int, str] = {int(k): v for k, v in rules.spec("attribution.json")["capture"]["dtypes"].items()}
#: dtype name -> MXNet's code (attribution.json capture.dtypes).
CODES: dict[str, int] = {v: k for k, v in _DTYPES.items()}
_AUTOGRAD: dict = rules.spec("attribution.json")["capture"]["autograd"]

#: Operator name -> handle (aliases share a handle; a trace names the operator by one of them),
#: and handle -> one of its names; filled once per process.
HANDLES: dict[str, int] = {}
_NAMES: dict[int, str] = {}


def dtype_name(code: int) -> str:
    """The name of MXNet's dtype code (``0`` -> ``"float32"``; an unknown code as ``"dtype<N>"``)."""
    return _DTYPES.get(code, f"dtype{code}")


_UNSET = ("", "None", "none", "False", "false", "0")


def holds(v: dict, attrs: dict[str, str]) -> bool:
    """Whether the conditions of ``v`` (a ``capture.backward`` variant, a
    ``matching.hidden_outputs`` output) hold for a node with ``attrs``: ``feature`` (the build
    has it), ``without_feature`` (it lacks it), ``when_all`` (``defaults`` applied),
    ``kernel_dims``, ``when_set`` or ``when``."""
    at = {**v.get("defaults", {}), **{k: x for k, x in attrs.items() if x != "None"}}
    if "feature" in v and not _feature(v["feature"]):
        return False
    if "without_feature" in v and _feature(v["without_feature"]):
        return False
    if any(str(at.get(k, "None")) not in vals for k, vals in v.get("when_all", {}).items()):
        return False
    if "kernel_dims" in v and len(re.findall(r"\d+", attrs.get("kernel", ""))) not in v["kernel_dims"]:
        return False
    if "when_set" in v or "when" in v:
        return any(at.get(k, "None") not in _UNSET for k in v.get("when_set", ())) or any(
            at.get(k) in vals for k, vals in v.get("when", {}).items())
    return True


_FEATURES: dict[str, bool] = {}


def _feature(name: str) -> bool:
    """Whether the loaded libmxnet has ``name`` (``mx.runtime.Features``, asked once)."""
    if name not in _FEATURES:
        try:
            import mxnet as mx

            _FEATURES[name] = bool(mx.runtime.Features().is_enabled(name))
        except Exception:  # noqa: BLE001 - an unknown feature is off
            _FEATURES[name] = False
    return _FEATURES[name]


#: The producer seq of an array written by a node no call stands for (a hybridized block's
#: backward node of an operator capture.backward does not know, a backward's gradient whose
#: writer is not known): a call reading it is not proven (Call.unproven).
UNKNOWN_WRITER = -2


class Call:
    """One recorded call. ``op`` is the operator's handle (:attr:`name` one of its names);
    shapes and dtypes are None without ``record_shapes``; ``stack`` is a flat tuple (code, line,
    code, line, ...), innermost frame first, None without ``with_stack``. A node's call (a
    hybridized block's, see :mod:`pyprof.attribution.cachedop`; a bound executor's, :mod:`pyprof.attribution.executor`)
    has only its graph inputs' handles and no outputs, its ``block`` (None for an executor),
    ``source`` (``capture.sources``) and ``invocation``: the first seq of its invocation (its
    nodes' seqs follow in graph order), -1 for an imperative call. ``t_us`` is when the call began,
    ``pushed_us`` when it returned (by then MXNet's engine has the operator), both on the
    trace's clock (microseconds since the epoch)."""

    __slots__ = ("seq", "t_us", "pushed_us", "op", "inputs", "outputs", "in_meta", "out_meta", "keys", "vals",
                 "producers", "slots", "thread", "stack", "block", "source", "invocation", "fresh",
                 "unproven", "training", "nbytes", "key")

    def __init__(self, seq: int, t_us: int, pushed_us: int, op: int, inputs: list, outputs: list,
                 in_meta: list | None, out_meta: list | None, keys: list, vals: list,
                 producers: tuple, thread: int, stack: tuple | None, slots: tuple = (),
                 block: str | None = None, source: str = "call", invocation: int = -1,
                 fresh: tuple | None = None) -> None:
        self.seq, self.t_us, self.pushed_us, self.op = seq, t_us, pushed_us, op
        self.inputs, self.outputs, self.in_meta, self.out_meta = inputs, outputs, in_meta, out_meta
        self.keys, self.vals, self.producers = keys, vals, producers
        self.slots = slots  # per input: which output of its producer it is (-1: unknown)
        self.thread, self.stack = thread, stack
        #: the Gluon block of a CachedOp node (``conv0``), None for an imperative call; source:
        #: where the shapes came from (attribution.json ``capture.sources``)
        self.block, self.source, self.invocation = block, source, invocation
        #: per output, whether the call allocates it (None: every output); an autograd
        #: backward node writing a variable's gradient does not (MXNet allocated it before)
        self.fresh = fresh
        #: the dependency model does not know every writer of its inputs (a gradient a backward
        #: wrote that was not linked to its writer): its match is never labelled exact
        self.unproven = False
        #: MXNet's is_train was set when the call ran (autograd.record(), train_mode()): what
        #: some operators allocate depends on it (attribution.json matching.hidden_outputs)
        self.training = False
        #: what the call allocates (matching.expected_bytes), once known; -1: not yet
        self.nbytes: int | None = -1
        #: its shapes, dtypes and attributes as one hashable value (matching.call_key, which
        #: the expected bytes, FLOPs and args are kept by), once made; -1: not yet
        self.key: tuple | None | int = -1

    @property
    def name(self) -> str:
        return _NAMES.get(self.op, f"op@{self.op:#x}")

    def attrs(self) -> dict[str, str]:
        """The call's attributes as MXNet's strings."""
        return {k.decode("utf-8", "replace"): v.decode("utf-8", "replace")
                for k, v in zip(self.keys, self.vals)}

    def shapes(self, which: str = "in") -> list[list[int]] | None:
        meta = self.in_meta if which == "in" else self.out_meta  # (an entry None: not known)
        return None if meta is None else [None if m is None or m[0] is None else list(m[0]) for m in meta]

    def dtypes(self, which: str = "in") -> list[str] | None:
        meta = self.in_meta if which == "in" else self.out_meta
        return None if meta is None else [None if m is None else dtype_name(m[1]) for m in meta]

    def frames(self) -> list[str]:
        """The stack as ``"file:line function"`` frames, outermost first (the call site last)."""
        st = self.stack or ()
        return [f"{st[i].co_filename}:{st[i + 1]} {st[i].co_name}" for i in range(len(st) - 2, -1, -2)]

    def call_site(self) -> str | None:
        if not self.stack:
            return None
        code, line = self.stack[0], self.stack[1]
        return f"{code.co_filename}:{line} {code.co_name}"


#: How the recorder keeps an imperative call until the window is taken: a flat tuple of
#: ints, bytes, code objects and tuples of those (shapes interned by the recorder), so that the
#: cyclic collector drops it from its lists at its first or second pass, before it reaches the
#: oldest generation; a Call, its lists and nested tuples stayed there, and every full
#: collection walked the window's calls (about 6-10 us a call, measured on the small-operator
#: workload). ``in_meta``/``out_meta`` are flat (shape, dtype code, shape, dtype code, ...);
#: ``given``: the caller passed the outputs (``out=``: arrays allocated before the call, so it
#: allocates none of them, :attr:`Call.fresh`); :func:`as_call` makes the Call.
RECORD = ("seq", "t_us", "pushed_us", "op", "inputs", "outputs", "in_meta", "out_meta", "keys",
          "vals", "producers", "thread", "stack", "slots", "given")


def as_call(entry: object) -> object:
    """The :class:`Call` of a record (:data:`RECORD`); any other entry as it is."""
    if type(entry) is not tuple:
        return entry
    seq, t_us, pushed_us, op, ins, outs, fin, fout, keys, vals, producers, thread, stack, slots, given = entry
    in_meta = out_meta = None
    if fin is not None:
        in_meta = [(fin[2 * i], fin[2 * i + 1], producers[i], slots[i]) for i in range(len(ins))]
        out_meta = [(fout[2 * j], fout[2 * j + 1], seq, j) for j in range(len(outs))]
    return Call(seq, t_us, pushed_us, op, ins, outs, in_meta, out_meta, keys, vals, producers,
                thread, stack, slots, fresh=(False,) * len(outs) if given else None)


def seq_of(entry: object) -> int:
    """The seq of a record or Call; a CachedOp invocation's first seq."""
    t = type(entry)
    return entry[0] if t is tuple else entry.seq if t is Call else entry.first  # type: ignore[attr-defined]


def load_handles() -> None:
    """Fill :data:`HANDLES` once per process (mxnet imported). C: NNGetOpHandle."""
    if not HANDLES:
        HANDLES.update(capi.op_handles())
        for name, h in sorted(HANDLES.items(), reverse=True):
            _NAMES[h] = name
        # the head gradient autograd fills with ones is an engine push, not an operator
        HANDLES[_AUTOGRAD["head_gradient"]] = _AUTOGRAD["head_gradient_handle"]
        _NAMES[_AUTOGRAD["head_gradient_handle"]] = _AUTOGRAD["head_gradient"]
