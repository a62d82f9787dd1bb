"""Check :func:`pyprof.trace.stats` against MXNet's own aggregate statistics of the same run.

MXNet's aggregate table (``profiler.dumps(format='json')`` with ``aggregate_stats=True``) prints
times in ms and memory in kB, to 4 significant digits; :func:`cross_check` compares the exact
statistics with it within that rounding (counts exactly) and lists every disagreement.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson

from .. import rules
from .naming import MEMORY_PREFIX
from .records import OpStats, TraceStats


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """One disagreement between :func:`~pyprof.trace.stats` and MXNet's aggregate table.

    ``ours`` and ``theirs`` are in MXNet's units (ms for times, kB for memory, calls for counts);
    ``None`` when the entry is missing on that side.
    """

    category: str
    name: str
    field: str
    ours: float | None
    theirs: float | None
    tolerance: float


@dataclasses.dataclass(frozen=True)
class CrossCheck:
    """Result of :func:`cross_check`: ``ok`` when nothing disagrees; ``checked`` entries compared."""

    checked: int
    mismatches: list[Mismatch]

    @property
    def ok(self) -> bool:
        return not self.mismatches


def load_aggregate(aggregate: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    """Read MXNet's aggregate statistics JSON (``profiler.dumps(format='json')``).

    Args:
        aggregate: the JSON text, a path to a file holding it, or the already parsed dict.
            Unescaped quotes in names (MXNet does not escape them) are repaired.

    Raises:
        AggregateFormatError: the text is not MXNet's aggregate JSON.
    """
    if isinstance(aggregate, Mapping):
        return dict(aggregate)
    text = os.fspath(aggregate)
    if not text.lstrip().startswith("{"):
        try:
            with open(text, "rb") as f:
                raw = f.read()
        except OSError as exc:
            raise rules.error("aggregate.unreadable", path=text, why=exc.strerror) from exc
    else:
        raw = text.encode()
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        fixed = re.sub(rb'^(\s*")(.*)("\s*:\s*\{?\s*)$', lambda m: m.group(1) + m.group(2)
                       .replace(b"\\", b"\\\\").replace(b'"', b'\\"') + m.group(3), raw, flags=re.M)
        try:
            data = orjson.loads(fixed)
        except orjson.JSONDecodeError as exc:
            raise rules.error("aggregate.not_json") from exc
    if not isinstance(data, dict) or "Time" not in data:
        raise rules.error("aggregate.no_time")
    return data


def _tolerance(theirs: float) -> float:
    """Half a unit in the 4th significant digit MXNet prints (plus float slack)."""
    if theirs == 0:
        return 5e-4
    return 0.5 * 10 ** (math.floor(math.log10(abs(theirs))) - 3) * (1 + 1e-9) + 1e-12


def cross_check(result: TraceStats, aggregate: str | os.PathLike[str] | Mapping[str, Any]) -> CrossCheck:
    """Compare :func:`~pyprof.trace.stats` with MXNet's aggregate statistics of the same run.

    Counts must match exactly; ``Total``/``Min``/``Max`` (ms) and memory ``Min``/``Max`` (kB) must
    agree within MXNet's 4-significant-digit rounding. ``Avg`` is not compared (for counters
    MXNet prints ``(max-min)/2``). Entries are pooled over devices, as MXNet's table is.
    Counters in the time table (``MXNet C API Calls``, user counters) are checked by count.

    Args:
        result: statistics of the trace file(s) of that run.
        aggregate: see :func:`load_aggregate`.

    Returns:
        :class:`CrossCheck`.
    """
    agg = load_aggregate(aggregate)
    pooled: dict[tuple[str, str], list[OpStats]] = {}
    for o in result.operators:
        pooled.setdefault((o.category, o.name), []).append(o)
    counters = {(c.category, c.name): c for c in result.counters}
    mism: list[Mismatch] = []
    checked = 0
    seen = set()
    for cat, entries in (agg.get("Time") or {}).items():
        for name, row in entries.items():
            checked += 1
            seen.add((cat, name))
            ops = pooled.get((cat, name))
            if ops is None and (cat, name) in counters:
                c = counters[(cat, name)]
                if c.count != row.get("Count"):
                    mism.append(Mismatch(cat, name, "Count", c.count, row.get("Count"), 0))
                continue
            if ops is None:
                mism.append(Mismatch(cat, name, "Count", None, row.get("Count"), 0))
                continue
            d = np.concatenate([o.durations_us for o in ops])
            ours = {"Count": int(d.size), "Total": d.sum() / 1000.0, "Min": d.min() / 1000.0,
                    "Max": d.max() / 1000.0}
            for fld, val in ours.items():
                theirs = row.get(fld)
                tol = 0 if fld == "Count" else _tolerance(float(theirs or 0))
                if theirs is None or abs(val - theirs) > tol:
                    mism.append(Mismatch(cat, name, fld, float(val), theirs, tol))
    for (cat, name) in pooled:
        if (cat, name) not in seen:
            mism.append(Mismatch(cat, name, "Count", float(sum(o.count for o in pooled[(cat, name)])),
                                 None, 0))
    mem = {m.device: m for m in result.memory}
    for _section, entries in (agg.get("Memory") or {}).items():
        for name, row in entries.items():
            checked += 1
            dev = name[len(MEMORY_PREFIX):] if name.startswith(MEMORY_PREFIX) else name
            m = mem.get(dev)
            if m is None:
                mism.append(Mismatch("Memory", name, "Count", None, row.get("Count"), 0))
                continue
            for fld, val in (("Count", m.samples), ("Min", m.min_bytes / 1000.0),
                             ("Max", m.max_bytes / 1000.0)):
                theirs = row.get(fld)
                tol = 0 if fld == "Count" else _tolerance(float(theirs or 0))
                if theirs is None or abs(val - theirs) > tol:
                    mism.append(Mismatch("Memory", name, fld, float(val), theirs, tol))
    return CrossCheck(checked, mism)
