"""Operator time grouped by (operator, input shapes): ``stats(..., by="shape")`` and
``pyprof summarize --by shape``.

The shapes, FLOPs and bytes are the args pyprof's capture wrote on each operator event
(``pyprof/spec/attribution.json`` ``trace_args``: ``"Input Dims"``, ``"Input type"``,
``"pyprof.flops"``, ``"pyprof.bytes"``); an event that carries shapes and attributes but no
FLOPs (a JVM window) gets them from ``flops.json`` as it is read
(:func:`pyprof.attribution.flops.counted`); an event without shapes falls in its operator's
group with no shape. Calls are paired as :func:`pyprof.trace.stats` pairs them (``B``/``E`` per
thread by name, innermost first, and ``X`` events; async ``b``/``e`` copies are not read), so the
groups of one operator add up to its ungrouped total. Times in microseconds; GFLOP/s and GB/s
are FLOPs (bytes) over the group's operator time.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from typing import Any

from .. import rules
from ..attribution.flops import counted
from .naming import (BOOKKEEPING_LABEL, BOOKKEEPING_NOTE, bulk_shape_note, bulk_shares,
                     category_names, category_text, is_bookkeeping)
from .reader import iter_events
from .slices import closed_slices


_ARGS: dict[str, str] = rules.spec("attribution.json")["trace_args"]
#: The groupings ``stats(by=...)`` and ``summarize(by=...)`` know.
BY = ("shape",)


def _frozen(v: Any) -> Any:
    return tuple(_frozen(x) for x in v) if isinstance(v, list) else v


@dataclasses.dataclass
class ShapeGroup:
    """The calls of one operator at one input signature.

    Attributes:
        category, name, device: as :class:`~pyprof.trace.OpStats` (device empty on a category pid).
        input_dims, input_type: the ``"Input Dims"`` and ``"Input type"`` args (tuples), None
            for calls without them.
        count, total_us: calls and their total time (microseconds).
        flops, bytes: summed over the calls; None when any call lacks them.
    """

    category: str
    name: str
    device: str
    input_dims: tuple | None
    input_type: tuple | None
    count: int = 0
    total_us: int | float = 0
    flops: int | None = 0
    bytes: int | None = 0

    @property
    def mean_us(self) -> float:
        return self.total_us / self.count if self.count else 0.0

    @property
    def gflops_per_s(self) -> float | None:
        """FLOPs per second of operator time, in 1e9 (None without FLOPs or time)."""
        return self.flops / self.total_us / 1e3 if self.flops is not None and self.total_us else None

    @property
    def gb_per_s(self) -> float | None:
        """Bytes moved per second of operator time, in 1e9 (None without bytes or time)."""
        return self.bytes / self.total_us / 1e3 if self.bytes is not None and self.total_us else None

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "mean_us": self.mean_us,
                "gflops_per_s": self.gflops_per_s, "gb_per_s": self.gb_per_s}


@dataclasses.dataclass
class ShapeStats:
    """Every (category, name, device, input signature) group of the traces read."""

    groups: list[ShapeGroup]

    def totals(self) -> dict[tuple[str, str, str], int | float]:
        """(category, name, device) -> total microseconds over its groups."""
        out: dict[tuple[str, str, str], int | float] = {}
        for g in self.groups:
            key = (g.category, g.name, g.device)
            out[key] = out.get(key, 0) + g.total_us
        return out


def shape_stats(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
                categories: Iterable[str] | None = None, exclude_categories: Iterable[str] = (),
                progress: bool | None = None) -> ShapeStats:
    """Group the timed events of ``paths`` by (category, name, device, input dims, input type).

    Raises TraceNotFoundError / TraceFormatError as :func:`pyprof.trace.stats`."""
    keep = category_names("categories", categories)
    skip = category_names("exclude_categories", exclude_categories, none=frozenset())
    groups: dict[tuple, ShapeGroup] = {}
    for path in [paths] if isinstance(paths, (str, os.PathLike)) else list(paths):
        for cat, name, device, args, dur in _calls(iter_events(os.fspath(path), progress=progress)):
            if cat in skip or (keep is not None and cat not in keep):
                continue
            args = counted(name, args) if isinstance(args, dict) else {}
            dims = args.get(_ARGS["input_dims"])
            types = args.get(_ARGS["input_type"])
            key = (cat, name, device, _frozen(dims), _frozen(types))
            g = groups.get(key)
            if g is None:
                g = groups[key] = ShapeGroup(cat, name, device, key[3], key[4])
            g.count += 1
            g.total_us += dur
            for field, arg in (("flops", "flops"), ("bytes", "bytes")):
                v, have = args.get(_ARGS[arg]), getattr(g, field)
                setattr(g, field, have + v if have is not None and isinstance(v, int) else None)
    return ShapeStats(list(groups.values()))


def _calls(events: Iterable[dict[str, Any]]):
    """(category, name, device, args of the begin, duration) of every timed call."""
    names: dict[Any, str] = {}
    for _, ev, closed in closed_slices(events):
        if ev.get("ph") == "M":
            if ev.get("name") == "process_name":
                names[ev.get("pid")] = str((ev.get("args") or {}).get("name", ""))
        elif closed is not None:
            _, begin, dur = closed
            cat = category_text(ev.get("cat", begin.get("cat")))
            device = names.get(begin.get("pid"), "")
            yield cat, begin.get("name"), "" if device == cat else device, begin.get("args"), dur


#: What ``--by shape`` says of a trace none of whose events carries shapes (and that holds no bulk
#: segment: then :func:`pyprof.trace.naming.bulk_shape_note` instead).
NO_SHAPES_NOTE = ("no event of these traces carries shapes (\"Input Dims\"): every row is one "
                  "operator; record with pyprof.profile(..., record_shapes=True), and "
                  "with_flops=True for GFLOP/s and GB/s (on the JVM: the session option "
                  "record_shapes, for executors bound through pyprof; another "
                  "binding's calls, DJL's, carry none)")


def check_by(by: str | None) -> None:
    """Raise TraceError (``trace.by``) for a grouping other than None or one of :data:`BY`."""
    if by is not None and by not in BY:
        raise rules.error("trace.by", by=by, choices=list(BY))


def render(result: ShapeStats, *, fmt: str = "table", top: int | None = None,
           rank_bookkeeping: bool = False) -> str:
    """The ``summarize --by shape`` text: per (device, category), one row per (operator, input
    signature), most time first: calls, total and mean (ms; ``_us`` keys in json/csv), share of
    the group, GFLOP/s and GB/s.

    The engine's bookkeeping (:data:`pyprof.trace.naming.BOOKKEEPING`: ``WaitForVar``,
    ``DeleteVariable``, ...) comes after compute, as in :func:`pyprof.trace.summarize`: a section
    of its own per group in ``table``/``markdown``, ``"bookkeeping": true`` records after the
    group's others in ``json``/``csv``; ``top`` cuts the compute rows only, and the group's total
    and shares include it. ``rank_bookkeeping=True`` ranks it with compute, as any row."""
    import io
    import csv

    import orjson

    by_group: dict[tuple[str, str], list[ShapeGroup]] = {}
    for g in result.groups:
        by_group.setdefault((g.device, g.category), []).append(g)
    order = sorted(by_group, key=lambda k: (k[0] == "", -sum(g.total_us for g in by_group[k]), k))
    records = []
    for key in order:
        rows = sorted(by_group[key], key=lambda g: (-g.total_us, g.name, str(g.input_dims)))
        total = sum(g.total_us for g in rows)
        apart = [] if rank_bookkeeping else [g for g in rows if is_bookkeeping(g.name)]
        ranked = [g for g in rows if rank_bookkeeping or not is_bookkeeping(g.name)]
        for g in (ranked[:top] if top else ranked) + apart:
            records.append({**g.as_dict(), "share_pct": 100.0 * g.total_us / total if total else 0.0,
                            BOOKKEEPING_LABEL: is_bookkeeping(g.name)})
    # bulk segments: per-operator rows need per-operator mode, whatever was recorded
    shares = bulk_shares((f"{g.device or 'host'} / {g.category}", g.name, g.total_us)
                         for g in result.groups)
    notes = [bulk_shape_note(shares)] if shares else [NO_SHAPES_NOTE] if records and all(
        r["input_dims"] is None for r in records) else []
    from tabulate import tabulate
    headers = ["operator", "input dims", "input type", "calls", "total (ms)", "share (%)",
               "mean (ms)", "GFLOP/s", "GB/s"]
    tablefmt = "github" if fmt == "markdown" else "simple"

    def table(rows: list[dict[str, Any]]) -> str:
        return tabulate([[r["name"], dims_text(r["input_dims"]), dims_text(r["input_type"]),
                          r["count"], r["total_us"] / 1e3, r["share_pct"], r["mean_us"] / 1e3,
                          _num(r["gflops_per_s"]), _num(r["gb_per_s"])] for r in rows],
                        headers=headers, tablefmt=tablefmt, floatfmt=".4f")

    if fmt == "json":
        return orjson.dumps({"units": {"time": "us", "flops": "1e9/s", "bytes": "1e9/s"},
                             "groups": records, "notes": notes},
                            option=orjson.OPT_INDENT_2).decode() + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        cols = list(records[0]) if records else ["category", "name", "device", "input_dims"]
        w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        w.writerows({**r, "input_dims": dims_text(r["input_dims"]),
                     "input_type": dims_text(r["input_type"])}
                    for r in records)
        return buf.getvalue()
    parts = []
    for key in order:
        rows = [r for r in records if (r["device"], r["category"]) == key]
        total = sum(g.total_us for g in by_group[key])
        where = f"{key[0] or 'host'} / {key[1]}"
        text = ("### " if fmt == "markdown" else "") + f"{where}: {total / 1e3:.3f} ms, by input shape"
        compute = [r for r in rows if rank_bookkeeping or not r[BOOKKEEPING_LABEL]]
        apart = [r for r in rows if not rank_bookkeeping and r[BOOKKEEPING_LABEL]]
        if compute or not apart:
            text += "\n\n" + table(compute)
        if apart:
            bk_us, calls = sum(r["total_us"] for r in apart), sum(r["count"] for r in apart)
            share = 100.0 * bk_us / total if total else 0.0
            text += ("\n\n" + ("#### " if fmt == "markdown" else "")
                     + f"{BOOKKEEPING_LABEL}: {bk_us / 1e3:.3f} ms in {calls} call"
                     + f"{'' if calls == 1 else 's'}, {share:.2f}% of {where}; {BOOKKEEPING_NOTE}"
                     + "\n\n" + table(apart))
        parts.append(text)
    return "\n\n".join((parts or ["no timed events found"]) + [f"note: {n}" for n in notes]) + "\n"


def dims_text(v: Any) -> str:
    """Shapes as a table shows them: ``[[4, 5], [5, 3]]`` -> ``"4x5; 5x3"``, dtypes
    ``["float32", "int64"]`` -> ``"float32, int64"``, ``[]`` -> ``"()"``, None -> ``"-"``."""
    if v is None:
        return "-"
    return "; ".join("x".join(str(d) for d in s) if isinstance(s, (list, tuple)) else str(s) for s in v) \
        if v and isinstance(v[0], (list, tuple)) else ", ".join(str(x) for x in v) or "()"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"
