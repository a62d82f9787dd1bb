"""Ids that JavaScript viewers hold exactly: strings, or integers below 2**53 in magnitude.

MXNet writes 64-bit hashes as pids, tids and async ids. chrome://tracing and Perfetto's JSON
importer hold numbers as doubles and round anything from 2**53 on, merging unrelated threads.
Every trace pyprof writes renumbers such values (docs/trace-format.md, "What the writers
guarantee"):

* :func:`is_safe_id`: whether a value may be written as it is.
* :func:`id_values`: the ``pid``, ``tid``, ``id``, ``bind_id`` and ``id2`` values of an event.
* :class:`IdMap`: the renumbering one writer applies, with the mapping kept.

The limit and the fields of each kind are ``ids`` in ``pyprof/spec/trace.json``, which the JVM's
``pyprof.trace.ids`` reads too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .. import rules
from .phases import hashable


_SPEC = rules.spec("trace.json")["ids"]

#: Ids must be strings or integers ``v`` with ``-ID_LIMIT < v < ID_LIMIT`` (2**53).
ID_LIMIT: int = 2 ** _SPEC["limit_bits"]

#: The kinds of ids renumbered apart: processes, threads, and async/flow ids (``id``,
#: ``bind_id`` and ``id2`` share one numbering, so that equal values stay equal).
KINDS: tuple[str, ...] = tuple(_SPEC["kinds"])
#: ``(kind, field)`` for every id field, in the order :func:`id_values` yields them.
_FIELDS: tuple[tuple[str, str], ...] = tuple(
    (kind, field) for kind, fields in _SPEC["kinds"].items() for field in fields)
_ID2_SCOPES: tuple[str, ...] = tuple(_SPEC["id2_scopes"])


def is_safe_id(value: Any) -> bool:
    """True for a string, or an integer (not a bool) with ``abs(value) < 2**53``."""
    t = type(value)
    return t is str or (t is int and -ID_LIMIT < value < ID_LIMIT)


def id_key(value: Any) -> Any:
    """A hashable key for an id value that keeps JSON types apart (``1``, ``1.0``, ``true``)."""
    t = type(value)
    if t is int or t is str:
        return value
    return (t.__name__, hashable(value))


def id_values(ev: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """``(kind, field, value)`` for each id of ``ev``: ``pid``, ``tid``, ``id``, ``bind_id``, and
    ``id2`` (field ``"id2.local"`` / ``"id2.global"``, or ``"id2"`` when it is not an object)."""
    for kind, field in _FIELDS:
        if field not in ev:
            continue
        value = ev[field]
        if field == "id2" and isinstance(value, dict):
            for scope in _ID2_SCOPES:
                if scope in value:
                    yield kind, f"id2.{scope}", value[scope]
        else:
            yield kind, field, value


class IdMap:
    """The renumbering of pids, tids and async ids one writer applies.

    Args:
        renumber_all: True: every value becomes 1, 2, ... per kind, in order of first use (what
            :func:`~pyprof.trace.compact` and :func:`~pyprof.trace.merge` do). False: only values
            :func:`is_safe_id` refuses are renumbered, to integers no kept value of that kind uses
            (call :meth:`reserve` on every event first).

    Attributes:
        scope: part of every key (``merge`` sets the input's index, so that equal ids of two
            inputs stay apart); ``None`` by default.
        unsafe: values :meth:`reserve` saw that will be renumbered (``renumber_all=False``).
    """

    def __init__(self, *, renumber_all: bool) -> None:
        self.renumber_all = renumber_all
        self.scope: Any = None
        self.unsafe = 0
        self._maps: dict[str, dict[tuple[Any, Any], int]] = {k: {} for k in KINDS}
        self._originals: dict[str, dict[tuple[Any, Any], Any]] = {k: {} for k in KINDS}
        self._reserved: dict[str, set[int]] = {k: set() for k in KINDS}
        self._next = dict.fromkeys(KINDS, 1)

    def reserve(self, ev: Mapping[str, Any]) -> None:
        """Record the safe integer ids of ``ev`` as taken (no renumbered value will use them)."""
        if self.renumber_all:
            return
        for kind, _field, value in id_values(ev):
            if not is_safe_id(value):
                self.unsafe += 1
            elif type(value) is int:
                self._reserved[kind].add(value)

    def fresh(self, kind: str) -> int:
        """A new integer of ``kind`` no other value uses (e.g. the tid of an overlap track)."""
        n = self._next[kind]
        taken = self._reserved[kind]
        while n in taken:
            n += 1
        self._next[kind] = n + 1
        return n

    def get(self, kind: str, value: Any) -> Any:
        """The value to write for ``value`` of ``kind`` (``"pid"``, ``"tid"`` or ``"id"``)."""
        if not self.renumber_all and is_safe_id(value):
            return value
        key = (self.scope, id_key(value))
        m = self._maps[kind]
        new = m.get(key)
        if new is None:
            new = m[key] = self.fresh(kind)
            self._originals[kind][key] = value
        return new

    def known(self, kind: str, value: Any) -> bool:
        """True when ``value`` of ``kind`` has been renumbered already (in the current scope)."""
        return (self.scope, id_key(value)) in self._maps[kind]

    def apply(self, ev: dict[str, Any]) -> dict[str, Any]:
        """A shallow copy of ``ev`` with its ids renumbered (``id2`` copied when changed)."""
        out = dict(ev)
        for kind, field, value in id_values(ev):
            new = self.get(kind, value)
            if new is value:
                continue
            if field.startswith("id2."):
                id2 = out["id2"] = dict(out["id2"])
                id2[field[4:]] = new
            else:
                out[field] = new
        return out

    def mapping(self, scope: Any = None) -> dict[str, dict[Any, int]]:
        """``{kind: {original value: new value}}`` of the values renumbered in ``scope``
        (lists and objects as their JSON text)."""
        out: dict[str, dict[Any, int]] = {}
        for kind in KINDS:
            orig = self._originals[kind]
            out[kind] = {hashable(orig[key]): new for key, new in self._maps[kind].items()
                         if key[0] == scope}
        return out
