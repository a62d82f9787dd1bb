"""FLOPs and bytes of one MXNet operator call, from its input shapes and attributes.

The formulas are data: ``pyprof/spec/flops.json`` maps an operator name to a family, and a
family gives its FLOPs and output shapes as expressions of a small grammar (the spec's
``grammar``; docs/attribution.md). This module evaluates them, for the capture of a Python
session (``with_flops``) and, through :func:`counted`, for the readers of any trace whose
operator events carry shapes and attributes but no FLOPs (a JVM window: FLOPs are derived when
reading). Conventions: a multiply-add is 2 FLOPs, bias and
elementwise work 1 per element, bytes are the bytes of the inputs read plus the outputs written.

No C function is called: this is pure logic over shapes.
"""

from __future__ import annotations

import functools
import numbers
import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from .. import rules
from ..errors import PyprofError


Shape = Sequence[int]
SPEC: dict[str, Any] = rules.spec("flops.json")
OPERATORS: dict[str, str] = SPEC["operators"]
FAMILIES: dict[str, Any] = SPEC["families"]
DTYPE_BYTES: dict[str, int] = SPEC["dtype_bytes"]
_ARITY: dict[str, list] = SPEC["grammar"]["ops"]
#: MXNet's own reading (dmlc parameters: C++ streams in the C locale): ASCII digits and ASCII
#: white space only; "(\u0663,\u0663)" or a kernel padded with U+00A0 is refused by MXNet, so it
#: gives no FLOPs here either (the attribute stays text, which no formula takes).
_INT = re.compile(r"-?[0-9]+")
_SPACE = " \t\n\r\v\f"
_ARGS: dict[str, str] = rules.spec("attribution.json")["trace_args"]
#: oneDNN subgraph operator -> its base operator, the name flops.json knows it by.
_BASE: dict[str, str] = {k: v["base"] for k, v in
                         rules.spec("attribution.json")["matching"]["subgraphs"].items() if k != "about"}


class _Unknown(Exception):
    """An output shape the spec leaves to the recorded outputs, which were not given."""


def parse_attr(value: Any) -> Any:
    """An attribute as MXNet writes it (``"(3, 3)"``, ``"True"``, ``"64"``, ``"relu"``) or as a
    Python value, as the grammar sees it: a shape (list of int), bool, int or str; None for
    missing, ``"None"`` and an empty tuple (the default applies). Numbers are read as MXNet
    reads them: ASCII digits and ASCII white space only (other scripts' digits and U+00A0 stay
    text, so no FLOPs: ``flops.bad_input``)."""
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value] or None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)  # numpy integers too
    if not isinstance(value, str):
        return value
    text = value.strip(_SPACE)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if text.lower() in ("none", ""):
        return None
    if text[:1] in "([":
        items = [t.strip(_SPACE) for t in text.strip("()[]").split(",") if t.strip(_SPACE)]
        if not all(_INT.fullmatch(t) for t in items):
            return text
        return [int(t) for t in items] or None
    return int(text) if _INT.fullmatch(text) else text


class _Eval:
    """One evaluation: the operator, its inputs, outputs (or None) and parsed attributes."""

    def __init__(self, op: str, ins: Sequence[Shape], attrs: Mapping[str, Any],
                 outs: Sequence[Shape] | None):
        self.op, self.outs = op, outs
        self.ins = [list(map(int, s)) for s in ins]
        self.attrs = {k: parse_attr(v) for k, v in attrs.items()}

    def ev(self, e: Any, env: dict[str, Any]) -> Any:
        if e is None or isinstance(e, (bool, int)):
            return e
        if isinstance(e, str):
            if e not in env:
                raise rules.error("flops.bad_spec", where=self.op, why=f"no let name {e!r}")
            return env[e]
        op, args = e[0], e[1:]
        if op == "if":
            c = self.ev(args[0], env)
            if not isinstance(c, bool):
                raise rules.error("flops.bad_input", op=self.op, why=f"'if' needs a boolean, got {c!r}")
            return self.ev(args[1] if c else args[2], env)
        if op == "attr":
            v = self.attrs.get(args[0])
            if v is not None:
                return v
            if len(args) < 2:
                raise rules.error("flops.bad_input", op=self.op, why=f"attribute {args[0]!r} is required")
            return self.ev(args[1], env)
        if op == "str":
            return args[0]
        if op == "call":
            return flops(args[0], [self.ev(a, env) for a in args[1]], self.attrs)
        v = [self.ev(a, env) for a in args]
        return self.apply(op, v)

    def apply(self, op: str, v: list[Any]) -> Any:
        if op == "in":
            if v[0] >= len(self.ins):
                raise rules.error("flops.bad_input", op=self.op, why=f"needs input {v[0]}, got {len(self.ins)} shape(s)")
            return self.ins[v[0]]
        if op == "out":
            if self.outs is None or v[0] >= len(self.outs):
                raise _Unknown()
            return list(self.outs[v[0]])
        simple = {"ins": lambda: self.ins, "nin": lambda: len(self.ins)}
        if op in simple:
            return simple[op]()
        if op in ("+", "*", "-", "//", ">"):
            out = v[0]
            for x in v[1:]:
                out = self.arith(op, out, x)
            return self.arith(op, 0, out) if op == "+" and len(v) == 1 else out
        if op == "=":
            return v[0] == v[1]
        if op in ("len", "prod"):
            s = self.shape(v[0])
            if op == "len":
                return len(s)
            p = 1
            for d in s:
                p *= d
            return p
        if op == "at":
            s = self.shape(v[0])
            if not -len(s) <= v[1] < len(s):
                raise rules.error("flops.bad_input", op=self.op, why=f"shape {s} has no axis {v[1]}")
            return s[v[1]]
        if op == "slice":
            return self.shape(v[0])[v[1]:v[2]]
        if op == "set":
            s = list(self.shape(v[0]))
            if not -len(s) <= v[1] < len(s):
                raise rules.error("flops.bad_input", op=self.op, why=f"shape {s} has no axis {v[1]}")
            s[v[1]] = v[2]
            return s
        if op == "vec":
            return [self.scalar(x) for x in v]
        if op == "cat":
            return [d for s in v for d in self.shape(s)]
        if op == "fill":
            return [v[1]] * v[0]
        if op == "broadcast":
            return self.broadcast(v[0])
        raise rules.error("flops.bad_spec", where=self.op, why=f"unknown operation {op!r}")

    def shape(self, s: Any) -> list[int]:
        if not isinstance(s, list):
            raise rules.error("flops.bad_input", op=self.op, why=f"expected a shape, got {s!r}")
        return s

    def scalar(self, x: Any) -> int:
        if isinstance(x, bool) or not isinstance(x, int):
            raise rules.error("flops.bad_input", op=self.op, why=f"expected an integer, got {x!r}")
        return x

    def arith(self, op: str, a: Any, b: Any) -> Any:
        if isinstance(a, list) or isinstance(b, list):
            n = len(a) if isinstance(a, list) else len(b)
            aa = a if isinstance(a, list) else [a] * n
            bb = b if isinstance(b, list) else [b] * n
            if len(aa) != len(bb):
                raise rules.error("flops.bad_input", op=self.op, why=f"{op!r} of shapes of different lengths {aa} and {bb}")
            return [self.arith(op, x, y) for x, y in zip(aa, bb)]
        a, b = self.scalar(a), self.scalar(b)
        if op == "//" and b == 0:
            raise rules.error("flops.bad_input", op=self.op, why="division by zero (a stride or group of 0)")
        return {"+": a + b, "*": a * b, "-": a - b, "//": a // b if b else 0, ">": a > b}[op]

    def broadcast(self, shapes: list[list[int]]) -> list[int]:
        n = max((len(s) for s in shapes), default=0)
        out = [1] * n
        for s in shapes:
            for i, d in enumerate([1] * (n - len(s)) + list(s)):
                if d != out[i] and 1 not in (d, out[i]):
                    raise rules.error("flops.bad_input", op=self.op, why=f"shapes {shapes} do not broadcast")
                out[i] = d if out[i] == 1 else out[i]
        return out

    def env(self, fam: dict[str, Any]) -> dict[str, Any]:
        env: dict[str, Any] = {}
        for name, expr in fam["let"]:
            env[name] = self.ev(expr, env)
        return env


def evaluate(op: str, expr: Any, input_shapes: Sequence[Shape], attrs: Mapping[str, Any] | None = None,
             output_shapes_: Sequence[Shape | None] | None = None, let: Sequence = ()) -> Any:
    """The value of the grammar's expression ``expr`` for a call of ``op`` (``let``: ordered
    ``[name, expression]`` pairs evaluated first, as a family's); None when it reads an output
    not given (attribution.json matching.hidden_outputs' shapes). Raises ``flops.bad_input``."""
    ev = _Eval(op, input_shapes, attrs or {}, output_shapes_)
    try:
        return ev.ev(expr, ev.env({"let": list(let)}))
    except _Unknown:
        return None


def family(op: str) -> dict[str, Any] | None:
    """The family of ``op`` in flops.json, or None when the operator has no formula."""
    name = OPERATORS.get(op)
    return None if name is None else FAMILIES[name]


def flops(op: str, input_shapes: Sequence[Shape], attrs: Mapping[str, Any] | None = None) -> int | None:
    """Floating-point operations of one call of ``op`` (a multiply-add is 2), or None when the
    spec has no formula for it.

    ``input_shapes`` are the inputs' shapes in MXNet's order; ``attrs`` the operator's
    attributes, as MXNet's strings or Python values. Raises PyprofError (``flops.bad_input``)
    for shapes or attributes the formula cannot use, and (``flops.bad_spec``) for a malformed
    spec entry."""
    fam = family(op)
    if fam is None:
        return None
    ev = _Eval(op, input_shapes, attrs or {}, None)
    return ev.scalar(ev.ev(fam["flops"], ev.env(fam)))


def output_shapes(op: str, input_shapes: Sequence[Shape],
                  attrs: Mapping[str, Any] | None = None) -> list[list[int]] | None:
    """The output shapes the spec gives for ``op`` (all outputs MXNet writes, hidden ones too),
    or None when it has no formula or leaves them to the recorded outputs."""
    fam = family(op)
    if fam is None or "out" not in fam:
        return None
    ev = _Eval(op, input_shapes, attrs or {}, None)
    env = ev.env(fam)
    try:
        return [ev.shape(s) for s in (ev.ev(e, env) for e in fam["out"]) if s is not None]
    except _Unknown:
        return None


def _nbytes(shapes: Sequence[Shape], dtypes: str | Sequence[str] | None, default: str) -> int:
    names = [dtypes or default] * len(shapes) if not isinstance(dtypes, (list, tuple)) else dtypes
    total = 0
    for shape, dtype in zip(shapes, names):
        if dtype not in DTYPE_BYTES:
            raise rules.error("flops.bad_input", op="bytes", why=f"unknown dtype {dtype!r}")
        n = DTYPE_BYTES[dtype]
        for d in shape:
            n *= int(d)
        total += n
    return total


def bytes_moved(op: str, input_shapes: Sequence[Shape], attrs: Mapping[str, Any] | None = None, *,
                dtypes: str | Sequence[str] | None = None,
                output_shapes_: Sequence[Shape] | None = None,
                output_dtypes: str | Sequence[str] | None = None) -> int | None:
    """Bytes of the inputs read plus the outputs written by one call of ``op``, or None when the
    spec has no formula and no recorded outputs are given.

    ``dtypes``: one dtype name for every input, or one per input (default the spec's
    ``default_dtype``, float32); outputs take ``output_dtypes``, default the first input's.
    ``output_shapes_``: the recorded output shapes, used instead of the spec's. Raises as
    :func:`flops`."""
    outs = output_shapes_ if output_shapes_ is not None else output_shapes(op, input_shapes, attrs)
    if outs is None:
        return None
    default = SPEC["default_dtype"]
    first = dtypes if isinstance(dtypes, str) else (dtypes[0] if dtypes else default)
    return (_nbytes(input_shapes, dtypes, default)
            + _nbytes(outs, output_dtypes, first or default))


def segment_flops(nodes: Sequence[tuple[str, Sequence[Shape], Mapping[str, Any]]]) -> int | None:
    """FLOPs of a bulk segment (``[dot,relu]``, ``ImperativeBulk``): the sum over its nodes
    ``(op, input_shapes, attrs)``, or None when any node has no formula."""
    counts = [flops(op, shapes, attrs) for op, shapes, attrs in nodes]
    return None if any(c is None for c in counts) else sum(counts)


def segment_bytes(nodes: Sequence[tuple[str, Sequence[Shape], Mapping[str, Any]]]) -> int | None:
    """Bytes of a bulk segment: the sum of its nodes' :func:`bytes_moved` (float32), or None."""
    counts = [bytes_moved(op, shapes, attrs) for op, shapes, attrs in nodes]
    return None if any(c is None for c in counts) else sum(counts)


def counted(name: Any, args: Any) -> Any:
    """The args of operator event ``name`` with its FLOPs and bytes (``trace_args`` ``flops``,
    ``bytes``): the ones it carries, or, where it carries none, derived from its shapes and
    attributes as the capture derives them (``with_flops``). One function for every reader
    (``summarize --by shape``, ``roofline``, ``report``), so they agree.

    Derived only for an event of one operator call: one that carries ``attrs`` (a segment of
    several nodes carries none) and its input and output shapes; its operator is its name
    (``[dot]`` for a segment of one node, a oneDNN subgraph operator's base). ``args`` itself
    is returned when nothing is added (no formula, shapes missing, a formula that cannot use
    them)."""
    if not isinstance(args, dict) or (_ARGS["flops"] in args and _ARGS["bytes"] in args):
        return args
    keys = ("input_dims", "input_type", "output_dims", "output_type", "attrs")
    if not isinstance(name, str) or not isinstance(args.get(_ARGS["attrs"]), dict) \
            or not isinstance(args.get(_ARGS["input_dims"]), list):
        return args
    try:
        key = orjson.dumps([args.get(_ARGS[k]) for k in keys], option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return args
    f, b = _derived(name, key)
    add = {k: v for k, v in ((_ARGS["flops"], f), (_ARGS["bytes"], b))
           if v is not None and k not in args}
    return {**args, **add} if add else args


@functools.lru_cache(maxsize=4096)
def _derived(name: str, key: bytes) -> tuple[int | None, int | None]:
    """(FLOPs, bytes) of one call of the operator of event ``name`` whose (input dims, input
    types, output dims, output types, attrs) are the JSON ``key``; None where unknown."""
    ins, types, outs, out_types, attrs = orjson.loads(key)
    op = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    op = _BASE.get(op, op)
    if "," in op or outs is None:
        return None, None
    try:
        f = flops(op, ins, attrs)
    except (PyprofError, TypeError, ValueError):
        f = None
    try:
        b = bytes_moved(op, ins, attrs, dtypes=types or None, output_shapes_=outs,
                        output_dtypes=out_types)
    except (PyprofError, TypeError, ValueError):
        b = None
    return f, b


def check_spec(spec: Mapping[str, Any] = SPEC) -> None:
    """Check every expression of ``spec`` against the grammar (known operations, their numbers
    of arguments, families that exist); raises PyprofError ``flops.bad_spec`` naming the entry."""
    def walk(e: Any, where: str) -> None:
        if isinstance(e, list):
            if not e or e[0] not in _ARITY:
                raise rules.error("flops.bad_spec", where=where, why=f"unknown operation {e[:1]!r}")
            lo, hi = _ARITY[e[0]]
            if not lo <= len(e) - 1 <= (hi if hi is not None else len(e)):
                raise rules.error("flops.bad_spec", where=where,
                                  why=f"{e[0]!r} takes {lo} to {hi} arguments, got {len(e) - 1}")
            if e[0] == "call":
                if e[1] not in spec["operators"]:
                    raise rules.error("flops.bad_spec", where=where, why=f"calls unknown {e[1]!r}")
                for a in e[2]:
                    walk(a, where)
            elif e[0] != "str":
                for a in e[1:]:
                    walk(a, where)
    for op, name in spec["operators"].items():
        if name not in spec["families"]:
            raise rules.error("flops.bad_spec", where=f"operators.{op}", why=f"no family {name!r}")
    for name, fam in spec["families"].items():
        if "flops" not in fam or not isinstance(fam.get("let"), list):
            raise rules.error("flops.bad_spec", where=f"families.{name}", why="needs let and flops")
        for pair in fam["let"]:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                raise rules.error("flops.bad_spec", where=f"families.{name}.let",
                                  why=f"{pair!r} is not a [name, expression] pair")
            walk(pair[1], f"families.{name}.let.{pair[0]}")
        walk(fam["flops"], f"families.{name}.flops")
        for e in fam.get("out", []):
            walk(e, f"families.{name}.out")


check_spec()  # a malformed entry fails at import
