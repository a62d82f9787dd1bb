"""The Trace Event Format's phases as pyprof's tools use them, read from ``pyprof/spec/trace.json``.

* :data:`PHASES`: ``ph`` -> role (``slice_begin``, ``counter``, ``flow``, ...); a ``ph`` not in it
  is an unknown phase, counted and named in the notes.
* :data:`PAIRS`: begin phase -> ``(end phase, kind)``; kind ``"thread"`` pairs within
  ``(pid, tid)``, ``"async"`` within ``(pid, cat, id)``.
* :data:`TOP_LEVEL`: what the top-level keys of a trace object mean.
* :func:`note`: the wording of a note of the statistics.
* :func:`hashable`: a JSON value usable as part of a pairing key (lists and objects become their
  JSON text).
* :func:`async_id`: the id of an async event: ``id``, else ``id2``'s ``local``/``global`` value.

docs/trace-format.md explains each rule; the JVM's statistics read the same file.
"""

from __future__ import annotations

from typing import Any

import orjson

from .. import rules


_SPEC = rules.spec("trace.json")

PHASES: dict[str, str] = _SPEC["phases"]
PAIRS: dict[str, tuple[str, str]] = {
    p["begin"]: (p["end"], "thread" if "tid" in p["scope"] else "async")
    for p in _SPEC["pairs"].values()}
END_PHASES: dict[str, str] = {end: begin for begin, (end, _kind) in PAIRS.items()}
TOP_LEVEL: dict[str, Any] = _SPEC["top_level_keys"]
#: Roles of the phases that pair within a thread (slices, contexts).
THREAD_ROLES: frozenset[str] = frozenset(
    PHASES[ph] for begin, (end, kind) in PAIRS.items() if kind == "thread" for ph in (begin, end))
#: Roles the statistics count but do not use (instants, flows, samples, ...).
COUNTED_ONLY_ROLES: frozenset[str] = frozenset(_SPEC["counted_only_roles"])
_NOTES: dict[str, str] = _SPEC["notes"]


def note(kind: str, **fields: Any) -> str:
    """The note ``kind`` of ``spec/trace.json`` with ``fields`` filled in."""
    return _NOTES[kind].format(**fields)


def hashable(value: Any) -> Any:
    """``value`` itself, or for a JSON list or object its JSON text (keys sorted)."""
    if isinstance(value, (list, dict)):
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return value


def async_id(ev: dict[str, Any]) -> Any:
    """The id that pairs an async event: ``id``, else ``id2`` (``{"local": v}`` or
    ``{"global": v}``, kept apart from a plain ``id`` of the same value), else ``None``; with
    its ``scope`` when the event names one."""
    if "id" in ev:
        ident = hashable(ev["id"])
    else:
        ident = ev.get("id2")
        if isinstance(ident, dict) and ident.keys() & {"local", "global"}:
            scope = "local" if "local" in ident else "global"
            ident = (scope, hashable(ident[scope]))
        else:
            ident = hashable(ident)
    scope = ev.get("scope")
    return ident if scope is None else (hashable(scope), ident)
