"""What MXNet's event categories and names mean to the trace tools.

* :data:`API_CATEGORY`: C API calls, kept by :func:`~pyprof.trace.stats`, left out by default by
  :func:`~pyprof.trace.summarize`, :func:`~pyprof.trace.diff` and :func:`~pyprof.trace.plot`.
* :data:`ASYNC_COPY_CATEGORIES`: async ``b``/``e`` copies MXNet writes of every operator; never
  counted, dropped by :func:`~pyprof.trace.compact`.
* Bulk segments: operators MXNet ran, and recorded, as one segment under one name
  (``ImperativeBulk``, ``[A,B]``, ``A,B``). :func:`is_bulk_name` recognises every name MXNet
  1.9.1 writes for one (:data:`BULK_PATTERNS`), :data:`BULK_NOTE` tells the user how to avoid
  them, :func:`bulk_shares` and :func:`bulk_share_note` give each segment's share of the time.
  A segment of one operator (``[dot]``, :func:`is_one_operator_segment`) is that operator's
  time: :func:`one_operator_note` names it, with no advice, and the shares leave it out.
  Patterns and wording are data: ``pyprof/spec/trace.json``'s ``bulk`` section, which the JVM's
  statistics read too.
* :data:`MEMORY_PREFIX`: counters named ``Memory: <device>`` are memory samples in bytes.
* :data:`BOOKKEEPING`: operator events that are the engine's own bookkeeping (``WaitForVar``,
  ``DeleteVariable``, ...), not compute (``trace.json`` ``bookkeeping``): the summaries rank them
  after compute, in a section of their own (:func:`is_bookkeeping`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from .. import rules


_BULK: dict[str, Any] = rules.spec("trace.json")["bulk"]
_CATEGORIES: dict[str, Any] = rules.spec("trace.json")["categories"]

#: Category of MXNet's C API call events: included by :func:`~pyprof.trace.stats`, excluded by default by
#: :func:`~pyprof.trace.summarize` and :func:`~pyprof.trace.diff` (``include_api=True`` keeps them).
API_CATEGORY: str = _CATEGORIES["api"]

#: Async (``b``/``e``) categories that duplicate a ``B``/``E`` pair; never counted.
ASYNC_COPY_CATEGORIES: frozenset[str] = frozenset(_CATEGORIES["async_copies"])

#: Regular expressions, searched anywhere in a name, of every bulk segment name MXNet 1.9.1
#: writes: ``ImperativeBulk`` (the engine's bulk: hybridized Gluon blocks, autograd backward,
#: ``mx.engine.bulk``), ``[...`` (bound symbols: ``[dot]``, ``[Convolution,relu]``, cut at 127
#: characters) and ``,`` (blocks hybridized with ``static_alloc``: ``Activation,Pooling``).
BULK_PATTERNS: tuple[str, ...] = tuple(n["pattern"] for n in _BULK["names"])

#: What bulk segment names mean, and how to get per-operator numbers instead.
BULK_NOTE: str = _BULK["note"]

#: Prefix of memory counter names: ``Memory: <device>`` (values in bytes).
MEMORY_PREFIX: str = _CATEGORIES["memory_prefix"]

_BOOKKEEPING: dict[str, Any] = rules.spec("trace.json")["bookkeeping"]
#: Operator event names that are MXNet's engine bookkeeping, not compute (trace.json
#: ``bookkeeping.names``): waits, deletions, the seeding of random resources, oneDNN's weight
#: reorder, an executor's setup.
BOOKKEEPING: frozenset[str] = frozenset(_BOOKKEEPING["names"])
#: How the summaries mark them: the title of their section, the ``bookkeeping`` key of a record.
BOOKKEEPING_LABEL: str = _BOOKKEEPING["label"]
#: What a bookkeeping section says of its rows.
BOOKKEEPING_NOTE = "the engine's own work (waits, deletions, seeding), not compute"

_BULK_RE = re.compile("|".join(f"(?:{p})" for p in BULK_PATTERNS))
_ONE: dict[str, str] = _BULK["one_operator"]
_ONE_RE = re.compile(_ONE["pattern"])


def is_bulk_name(name: str) -> bool:
    """True for names of MXNet bulk segments: ``ImperativeBulk``, ``[dot]``,
    ``[Convolution,relu]`` or ``Activation,Pooling``."""
    return bool(_BULK_RE.search(name))


def is_bookkeeping(name: str) -> bool:
    """True for an operator event of the engine's bookkeeping (:data:`BOOKKEEPING`), e.g.
    ``WaitForVar`` or ``DeleteVariable``."""
    return name in BOOKKEEPING


def is_one_operator_segment(name: str) -> bool:
    """True for a bulk segment of one operator, e.g. ``[dot]``: its time is that operator's
    time (trace.json bulk.one_operator)."""
    return bool(_ONE_RE.search(name))


def one_operator_note(names: Sequence[str]) -> str:
    """The note naming one-operator segments (``names``, non-empty): ``"'[dot]' is a bulk segment
    of one operator: its time is that operator's time"``; no advice, since nothing is merged."""
    listed = ", ".join(f"'{n}'" for n in names[:3]) + (", ..." if len(names) > 3 else "")
    return _ONE["note" if len(names) == 1 else "note_many"].format(names=listed)


def bulk_shares(records: Iterable[tuple[str, str, float]], *,
                limit: int = 3) -> str:
    """Each bulk segment's share of its group's time, as text; ``""`` when there is none.
    Segments of one operator (:func:`is_one_operator_segment`) are left out: their time is
    their operator's.

    ``records`` are ``(group, name, total time)``, a group being what the shares are of (the
    summaries use ``"<device> / <category>"``). Per group holding a segment, biggest share first:
    ``"87.6% of cpu/0 / operator (ImperativeBulk 87.6%)"``; up to ``limit`` names each, then
    ``...``; groups joined by ``"; "``.
    """
    totals: dict[str, float] = {}
    bulk: dict[str, dict[str, float]] = {}
    for group, name, total in records:
        totals[group] = totals.get(group, 0) + total
        if is_bulk_name(name) and not is_one_operator_segment(name):
            names = bulk.setdefault(group, {})
            names[name] = names.get(name, 0) + total

    def pct(part: float, group: str) -> float:
        return 100.0 * part / totals[group] if totals[group] else 0.0

    parts = []
    for group, names in sorted(bulk.items(), key=lambda g: (-pct(sum(g[1].values()), g[0]), g[0])):
        ranked = sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))
        listed = ", ".join(f"{n} {pct(t, group):.1f}%" for n, t in ranked[:limit])
        more = ", ..." if len(ranked) > limit else ""
        parts.append(f"{pct(sum(names.values()), group):.1f}% of {group} ({listed}{more})")
    return "; ".join(parts)


def bulk_share_note(shares: str) -> str:
    """The summaries' bulk note: ``shares`` (from :func:`bulk_shares`), then :data:`BULK_NOTE`.
    It ends with :data:`BULK_NOTE`, as the statistics' own bulk note does."""
    return _BULK["share_note"].format(shares=shares, note=BULK_NOTE)


def bulk_shape_note(shares: str) -> str:
    """``summarize --by shape``'s bulk note: ``shares`` (from :func:`bulk_shares`), what a
    segment's row holds, and that per-operator rows need ``PYPROF_PER_OPERATOR=1``."""
    return _BULK["shape_note"].format(shares=shares)


def category_text(cat: Any) -> str:
    """An event's category as the statistics count it (``trace.json`` ``categories``): a string
    itself, a missing or null one ``""``, any other JSON value its compact JSON text (``5`` is
    ``"5"``), as the JVM's statistics read it."""
    if type(cat) is str:
        return cat
    if cat is None:
        return ""
    import orjson

    try:
        return orjson.dumps(cat).decode()
    except TypeError:
        return str(cat)


def category_names(option: str, value: Any, *, none: frozenset[str] | None = None) \
        -> frozenset[str] | None:
    """The category names of the statistics option ``option`` (``categories``,
    ``exclude_categories``): a collection of strings (a mapping's keys); ``None`` gives
    ``none``. Raises TraceError ``trace.categories_not_collection`` for a string (read as its
    characters it would match nothing) and ``trace.category_not_name`` for a value that is no
    collection or holds a value that is no string."""
    if value is None:
        return none
    if isinstance(value, (str, bytes)):
        raise rules.error("trace.categories_not_collection", option=option, value=value,
                          example='{"operator"}')
    if not isinstance(value, Iterable):
        raise rules.error("trace.category_not_name", option=option, value=value,
                          example='{"operator"}')
    names = list(value)
    for name in names:
        if type(name) is not str:
            raise rules.error("trace.category_not_name", option=option, value=name,
                              example='{"operator"}')
    return frozenset(names)
