"""Finding where JSON values end without parsing them: the structure of a trace around its events.

The reader's bodies are cut at ``}``, ``{`` separators, which is right for MXNet's events but not
for every trace the format allows: ``args`` may hold lists of objects (a separator inside an
event), and top-level keys may come before or after ``traceEvents`` (``stackFrames``,
``samples``, ``otherData``). These helpers find the extent of values exactly for valid JSON, so
the reader can cut at the end of the events array and carry an event split across two bodies.
Every value found is still parsed by orjson, which decides; a scan that goes wrong on invalid
JSON (MXNet's unescaped names) only sends the body to the repairing parser.
"""

from __future__ import annotations

import contextlib
import gc
import re
from collections.abc import Iterator
from typing import Any

import orjson


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic GC while parsing: a parse makes millions of short-lived dicts and tuples
    and no cycle (about a tenth of its time would go to collections)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()

#: :func:`value_end`'s result when the value runs past the end of the text.
INCOMPLETE = -1

_STRUCT = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SCALAR = re.compile(rb"[^\s,:\[\]{}\"]+")
_WS = re.compile(rb"[ \t\r\n]*")
_QUOTE, _OPEN_OBJ, _OPEN_ARR = 0x22, 0x7B, 0x5B


def _ws(buf: bytes, pos: int) -> int:
    return _WS.match(buf, pos).end()


def value_end(buf: bytes, pos: int) -> int:
    """End (exclusive) of the JSON value starting at ``buf[pos]``, or :data:`INCOMPLETE`.

    Strings and brackets are followed exactly; scalars run to the next delimiter. Invalid JSON
    gives some end that orjson will then refuse.
    """
    c = buf[pos]
    if c == _OPEN_OBJ or c == _OPEN_ARR:
        depth = 0
        for m in _STRUCT.finditer(buf, pos):
            ch = buf[m.start()]
            if ch == _QUOTE:
                continue
            if ch == _OPEN_OBJ or ch == _OPEN_ARR:
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    return m.end()
        return INCOMPLETE
    if c == _QUOTE:
        m = _STRING.match(buf, pos)
        return m.end() if m else INCOMPLETE
    m = _SCALAR.match(buf, pos)
    if m is None:
        return pos + 1  # a stray delimiter: one byte that orjson will refuse
    return INCOMPLETE if m.end() == len(buf) else m.end()


def split_values(body: bytes, pos: int = 0) -> tuple[list[tuple[int, int]], str, int]:
    """Split the comma-separated values of an array's contents.

    Returns ``(spans, status, at)``: the ``(start, end)`` of each whole value, and how the scan
    stopped at ``at``: ``"complete"`` (end of text after a value or a comma), ``"array_end"``
    (a ``]`` that closes the array), ``"incomplete"`` (a value runs past the end of the text)
    or ``"error"`` (something else where a comma or ``]`` belongs).
    """
    spans: list[tuple[int, int]] = []
    n = len(body)
    pos = _ws(body, pos)
    while pos < n:
        c = body[pos]
        if c == 0x5D:  # ]
            return spans, "array_end", pos
        end = value_end(body, pos)
        if end == INCOMPLETE:
            return spans, "incomplete", pos
        spans.append((pos, end))
        pos = _ws(body, end)
        if pos == n:
            break
        c = body[pos]
        if c == 0x5D:
            return spans, "array_end", pos
        if c != 0x2C:  # ,
            return spans, "error", pos
        pos = _ws(body, pos + 1)
    return spans, "complete", pos


class ObjectScan:
    """What :func:`scan_object` found: the keys of an object and where its members stopped.

    Attributes:
        keys: every key, in order.
        values: the values of keys in ``keep`` whose text was at most ``keep_bytes`` long.
        status: ``"closed"`` (the object's ``}`` was reached: ``end`` is just after it),
            ``"events"`` (the key ``traceEvents`` with its ``[``: ``end`` is just after the
            ``[``), ``"incomplete"`` (the text ends first) or ``"error"``.
        end: position in the text where the scan stopped.
    """

    __slots__ = ("keys", "values", "status", "end")

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.values: dict[str, Any] = {}
        self.status = "incomplete"
        self.end = 0


def scan_object(buf: bytes, pos: int, *, first: bool, keep: frozenset[str] = frozenset(),
                keep_bytes: int = 1 << 20) -> ObjectScan:
    """Scan an object's members from ``pos`` up to its ``}`` or its ``traceEvents`` array.

    ``first``: ``pos`` is just after the ``{`` (else just after a value, where ``,`` or ``}``
    comes next).
    """
    out = ObjectScan()
    n = len(buf)
    if first:
        pos = _ws(buf, pos)
        if pos < n and buf[pos] == 0x7D:  # }
            out.status, out.end = "closed", pos + 1
            return out
    else:
        pos = _next_member(buf, pos, out)
    while pos is not None and pos < n:
        m = _STRING.match(buf, pos)
        if m is None:
            out.status = "error" if buf[pos] != _QUOTE else "incomplete"
            out.end = pos
            return out
        try:
            key = orjson.loads(m.group())
        except orjson.JSONDecodeError:
            out.status, out.end = "error", pos
            return out
        pos = _ws(buf, m.end())
        if pos >= n:
            break
        if buf[pos] != 0x3A:  # :
            out.status, out.end = "error", pos
            return out
        pos = _ws(buf, pos + 1)
        if pos >= n:
            break
        out.keys.append(key)
        if key == "traceEvents" and buf[pos] == _OPEN_ARR:
            out.status, out.end = "events", pos + 1
            return out
        end = value_end(buf, pos)
        if end == INCOMPLETE:
            out.keys.pop()
            break
        if key in keep and end - pos <= keep_bytes:
            try:
                out.values[key] = orjson.loads(buf[pos:end])
            except orjson.JSONDecodeError:
                out.status, out.end = "error", pos
                return out
        pos = _next_member(buf, end, out)
    if pos is not None:
        out.end = pos
    return out


def _next_member(buf: bytes, pos: int, out: ObjectScan) -> int | None:
    """After a member's value (or where one would end): the start of the next member after a
    ``,``; ``None`` when the scan stops there, with ``out`` saying why (``}``: closed; the end of
    the text: incomplete; anything else: error)."""
    pos = _ws(buf, pos)
    if pos >= len(buf):
        out.end = pos
        return None
    if buf[pos] == 0x7D:  # }
        out.status, out.end = "closed", pos + 1
        return None
    if buf[pos] != 0x2C:  # ,
        out.status, out.end = "error", pos
        return None
    return _ws(buf, pos + 1)
