"""Per-operator summary tables (``pyprof trace summarize``)."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from typing import Any

import orjson

from .. import rules
from .naming import BOOKKEEPING_LABEL, BOOKKEEPING_NOTE, BULK_NOTE, bulk_share_note, bulk_shares, \
    is_bookkeeping
from .statistics import API_CATEGORY, OpStats, TraceStats, stats


#: ``sort=`` values and the record field each sorts by (descending, except ``name``); ties are
#: broken by total time (descending), then by name.
SORT_KEYS = {"total": "total_us", "count": "count", "mean": "mean_us", "p50": "p50_us",
             "p90": "p90_us", "p99": "p99_us", "max": "max_us", "min": "min_us", "name": "name"}
FORMATS = ("table", "json", "csv", "markdown")

_HEADERS = ["operator", "calls", "total (ms)", "share (%)", "mean (ms)", "p50 (ms)", "p90 (ms)",
            "p99 (ms)", "min (ms)", "max (ms)"]


def _rows(ops: list[OpStats], group_total: int) -> list[list[Any]]:
    return [[o.name, o.count, o.total_us / 1e3,
             100.0 * o.total_us / group_total if group_total else 0.0, o.mean_us / 1e3,
             o.p50_us / 1e3, o.p90_us / 1e3, o.p99_us / 1e3, o.min_us / 1e3, o.max_us / 1e3]
            for o in ops]


class _Group:
    """One ``(device, category)`` group: totals over all its records, the compute records shown
    and, apart, its bookkeeping records (all of them; none when ranked with compute)."""

    __slots__ = ("device", "category", "total_us", "calls", "size", "shown", "bookkeeping")

    def __init__(self, device: str, category: str, ops: list[OpStats], shown: list[OpStats],
                 bookkeeping: list[OpStats]):
        self.device, self.category = device, category
        self.total_us = sum(o.total_us for o in ops)
        self.calls = sum(o.count for o in ops)
        self.size = len(ops)
        self.shown = shown
        self.bookkeeping = bookkeeping

    def title(self) -> str:
        """``cpu/0 / operator: 12.345 ms in 40 calls, 3 of 7 operators shown`` (whole group)."""
        n = len(self.shown) + len(self.bookkeeping)
        rows = (f"{self.size} operator{'' if self.size == 1 else 's'}"
                if n == self.size else f"{n} of {self.size} operators shown")
        return (f"{self.device or 'host'} / {self.category}: {self.total_us / 1e3:.3f} ms in "
                f"{self.calls} call{'' if self.calls == 1 else 's'}, {rows}")

    def bookkeeping_title(self) -> str:
        """``bookkeeping: 1.234 ms in 40 calls, 56.78% of cpu/0 / operator; the engine's own
        work ...``: the title of the group's bookkeeping section."""
        total = sum(o.total_us for o in self.bookkeeping)
        calls = sum(o.count for o in self.bookkeeping)
        share = 100.0 * total / self.total_us if self.total_us else 0.0
        return (f"{BOOKKEEPING_LABEL}: {total / 1e3:.3f} ms in {calls} call{'' if calls == 1 else 's'}, "
                f"{share:.2f}% of {self.device or 'host'} / {self.category}; {BOOKKEEPING_NOTE}")


def _sort_key(field: str):
    if field == "name":
        return lambda o: o.name
    # Ties on the key: more total time first, then by name (deterministic whatever the input order).
    return lambda o: (-getattr(o, field), -o.total_us, o.name)


def _groups(result: TraceStats, sort: str, top: int | None, rank_bookkeeping: bool) -> list[_Group]:
    key = _sort_key(SORT_KEYS[sort])
    groups: dict[tuple[str, str], list[OpStats]] = {}
    for o in result.operators:
        groups.setdefault((o.device, o.category), []).append(o)
    out = []
    for (device, cat), ops in groups.items():
        ops = sorted(ops, key=key)
        apart = [] if rank_bookkeeping else [o for o in ops if is_bookkeeping(o.name)]
        ranked = [o for o in ops if rank_bookkeeping or not is_bookkeeping(o.name)]
        out.append(_Group(device, cat, ops, ranked[:top] if top else ranked, apart))
    # device pids first (cpu/0, gpu/0, ...), then category pids; biggest group first within.
    out.sort(key=lambda g: (g.device == "", -g.total_us, g.device, g.category))
    return out


def summary_notes(result: TraceStats) -> list[str]:
    """The notes of ``result``, its bulk note replaced by one that gives each bulk segment's
    share of its ``<device> / <category>`` group's time (the summaries' ``share (%)``)."""
    out = [n for n in result.notes if not n.endswith(BULK_NOTE)]
    shares = bulk_shares(((f"{o.device or 'host'} / {o.category}", o.name, o.total_us)
                          for o in result.operators))
    return out + [bulk_share_note(shares)] if shares else out


def summarize(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | TraceStats, *,
              top: int | None = None, sort: str = "total", fmt: str = "table",
              include_api: bool = False, progress: bool | None = None, by: str | None = None,
              rank_bookkeeping: bool = False) -> str:
    """Per-operator summary of one or more traces, grouped by device and category.

    For each ``(device, category)`` group: calls, total, share of the group's total time, mean,
    p50, p90, p99, min and max per call (milliseconds in ``table``/``markdown``, whose headers
    state the unit; integer/float microseconds in ``json``/``csv``, whose keys end in ``_us``),
    then the memory high-water mark per device, then notes (damage repaired, bulk segments with
    their share of the time and how to get per-operator numbers: :func:`summary_notes`). Each
    group's title gives the group's total time and calls over *all* its records, and how many of
    them are shown when ``top`` cuts the list (``cpu/0 / operator: 12.345 ms in 40 calls, 3 of 7
    operators shown``).

    The engine's bookkeeping (:data:`pyprof.trace.naming.BOOKKEEPING`, ``trace.json``
    ``bookkeeping``: ``WaitForVar``, ``DeleteVariable``, ...: waits and deletions, not compute)
    is ranked after compute: in ``table``/``markdown`` each group lists it in a section of its
    own after the compute rows, titled ``bookkeeping: <ms> in <calls>, <share>% of <group>``; in
    ``json``/``csv`` its records come after the group's compute records, each with
    ``"bookkeeping": true`` (false for the others). Its time stays in the group's total and its
    rows' ``share (%)`` is of that total, so the shares of a group still add up to 100.

    C API calls (category ``MXNET_C_API``) are left out unless ``include_api=True``, as in
    :func:`~pyprof.trace.diff`; :func:`~pyprof.trace.stats` always includes them.

    Args:
        paths: trace path(s), or statistics from :func:`~pyprof.trace.stats`.
        top: keep the first ``top`` compute operators of each group (after sorting); default
            all. Bookkeeping rows are all kept, after them.
        sort: one of :data:`SORT_KEYS` (descending; ``name`` ascending); ties are broken by
            total time (descending), then by name.
        fmt: ``table`` (aligned text), ``markdown``, ``csv`` (operators only, one row each with
            ``device`` and ``category`` columns, plus ``share_pct``) or ``json`` (operators with
            ``share_pct``, ``memory``, ``notes``).
        include_api: also report C API calls (category ``MXNET_C_API``). Off by default: they are
            not operators, and skipping them before parsing roughly halves the reading time.
        progress: tqdm bar while reading.
        by: ``"shape"``: one row per (operator, input shapes) with GFLOP/s and GB/s
            (:func:`pyprof.trace.shapes.render`); ``sort`` does not apply (most time first,
            bookkeeping after compute).
        rank_bookkeeping: rank bookkeeping rows with compute, as any operator (no section of
            their own; ``top`` cuts them as any row); their records still say
            ``"bookkeeping": true``. Off by default.

    Returns:
        The rendered text, ending with a newline.

    Raises:
        TraceError: unknown ``sort``, ``fmt`` or ``by``, a ``top`` below 1
        (``trace.top``); TraceNotFoundError / TraceFormatError for
        unreadable traces (TraceFormatError also for an empty file or JSON that is not a trace).
    """
    if top is not None and (not isinstance(top, int) or isinstance(top, bool) or top < 1):
        raise rules.error("trace.top", top=top)
    if sort not in SORT_KEYS:
        raise rules.error("trace.sort_key", sort=sort, choices=list(SORT_KEYS))
    if fmt not in FORMATS:
        raise rules.error("trace.format", fmt=fmt, choices=list(FORMATS))
    if by is not None:
        from .shapes import check_by, render
        check_by(by)
        return render(stats(paths, progress=progress, by=by, exclude_categories=() if include_api
                            else (API_CATEGORY,)), fmt=fmt, top=top,
                      rank_bookkeeping=rank_bookkeeping)
    result = paths if isinstance(paths, TraceStats) else stats(
        paths, progress=progress, exclude_categories=() if include_api else (API_CATEGORY,))
    groups = _groups(result, sort, top, rank_bookkeeping)
    if fmt in ("json", "csv"):
        records = []
        for g in groups:
            total = g.total_us
            for o in g.shown + g.bookkeeping:
                r = o.as_dict()
                r["share_pct"] = 100.0 * o.total_us / total if total else 0.0
                r[BOOKKEEPING_LABEL] = is_bookkeeping(o.name)
                records.append(r)
        if fmt == "csv":
            buf = io.StringIO()
            cols = list(records[0]) if records else ["category", "name", "device"]
            w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
            w.writeheader()
            w.writerows(records)
            return buf.getvalue()
        return orjson.dumps({"units": {"time": "us", "memory": "bytes"}, "operators": records,
                             "memory": [m.as_dict() for m in result.memory],
                             "notes": summary_notes(result)}, option=orjson.OPT_INDENT_2).decode() + "\n"

    from tabulate import tabulate
    tablefmt = "github" if fmt == "markdown" else "simple"
    parts = []
    for g in groups:
        title = f"### {g.title()}" if fmt == "markdown" else g.title()
        if g.shown or not g.bookkeeping:
            title += "\n\n" + tabulate(_rows(g.shown, g.total_us), headers=_HEADERS,
                                        tablefmt=tablefmt, floatfmt=".4f")
        if g.bookkeeping:
            title += ("\n\n" + ("#### " if fmt == "markdown" else "") + g.bookkeeping_title()
                      + "\n\n" + tabulate(_rows(g.bookkeeping, g.total_us), headers=_HEADERS,
                                          tablefmt=tablefmt, floatfmt=".4f"))
        parts.append(title)
    if result.memory:
        mem = [[m.device, m.samples, m.max_bytes, m.max_bytes / 1e3, m.mean_bytes / 1e3,
                m.time_weighted_mean_bytes / 1e3] for m in result.memory]
        head = "### Memory" if fmt == "markdown" else "Memory"
        parts.append(head + "\n\n" + tabulate(mem, headers=[
            "device", "samples", "high water (bytes)", "high water (kB)", "mean (kB)",
            "time-weighted mean (kB)"], tablefmt=tablefmt, floatfmt=".2f"))
    found = summary_notes(result)
    if found:
        parts.append("Notes:\n" + "\n".join(f"- {n}" for n in found))
    if not groups:
        parts.insert(0, "no timed events found")
    return "\n\n".join(parts) + "\n"
