"""Merge traces of several processes into one, and compact a trace for viewers.

MXNet writes 64-bit hashes as pids, tids and async ids. JavaScript viewers (chrome://tracing,
Perfetto's JSON importer) hold numbers as doubles and round anything above 2**53, merging unrelated
threads; both tools here renumber them to small integers (1, 2, ...), in order of first appearance.
Both read each input twice: once to plan the slices (:mod:`~pyprof.trace.slices`), once to write.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from .. import rules
from .ids import IdMap
from .naming import ASYNC_COPY_CATEGORIES
from .reader import ReadReport, TraceReader
from .slices import Rewriter, SliceCounts, is_number, plan_slices
from .writer import TraceWriter, check_output, kept_top_level


_SLICES_DOC = """\
    Slices are written so that viewers show them as they are (docs/trace-format.md, "What the
    writers guarantee"): every ``B``/``E`` pair (a named ``E`` closes the latest open ``B`` of its
    name on its thread, a nameless one the innermost) becomes one ``X`` event (``dur`` in
    microseconds, the ``args`` of both merged); a slice that partially overlaps another of its
    thread moves to a new thread ``"<thread name or tid> (overlap N)"``; slices with a negative
    duration, begins without an end, ends without a begin and slice events without a numeric
    ``ts`` are left out. The counts are in the result's ``slices``."""


@dataclasses.dataclass(frozen=True)
class MergeResult:
    """What :func:`merge` wrote.

    Attributes:
        out: the merged trace.
        events: events written.
        labels: the label of each input, in input order.
        pids: per input label, ``{original pid: new pid}``.
        offsets_us: per input label, microseconds added to every ``ts``.
        reports: the reader's report of each input.
        slices: what was done to the slices of all inputs together
            (:class:`~pyprof.trace.slices.SliceCounts`).
        ids: per input label, ``{"pid" | "tid" | "id": {original: new}}``.
    """

    out: str
    events: int
    labels: list[str]
    pids: dict[str, dict[Any, int]]
    offsets_us: dict[str, int]
    reports: list[ReadReport]
    slices: SliceCounts = SliceCounts()
    ids: dict[str, dict[str, dict[Any, int]]] = dataclasses.field(default_factory=dict)


def merge(paths: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], *,
          labels: Sequence[str] | None = None,
          align: Literal["absolute", "start"] | Mapping[str, int] = "absolute",
          gzip: bool | None = None, progress: bool | None = None) -> MergeResult:
    """Merge traces of several processes or ranks into one Chrome trace.

    Every input keeps its processes and threads, renumbered to small integers: pids 1, 2, ... over
    all inputs in order, tids likewise (both far below 2**53), async ids too (equal ids of two
    inputs stay apart). Process names become ``"<label>: <name>"`` (e.g. ``worker 0: cpu/0``),
    a ``process_sort_index`` keeps each input's processes together, and thread names are kept.
    Top level: the first input's ``displayTimeUnit``; ``otherData`` and ``metadata`` become
    ``{label: value}`` for the inputs that have them.

    Time alignment: MXNet's ``ts`` are microseconds since the Unix epoch from the system clock,
    so traces of processes on one host (or on hosts synchronised by NTP/PTP) are already on a
    common time base. ``align="absolute"`` (default) keeps ``ts`` unchanged. ``align="start"``
    shifts each input so that its first timed event is at 0 (to compare runs taken at different
    times side by side). A mapping ``{label: offset_us}`` adds explicit offsets (e.g. measured
    clock skew between hosts).

{slices}

    Args:
        paths: input traces (plain or gzip, damaged ones are repaired on the fly).
        out: output path; gzip when it ends in ``.gz`` or ``gzip=True``. Written atomically.
        labels: one label per input; default the file names. Must be unique.
        align: see above.
        gzip: compress the output.
        progress: tqdm bar per input and pass.

    Returns:
        :class:`MergeResult`.

    Raises:
        TraceError: no inputs, labels of the wrong length or not unique, unknown ``align``; the
            output cannot be written (``trace.bad_output``, checked before any input is read).
        TraceNotFoundError / TraceFormatError: an input cannot be read.
    """
    srcs = [os.fspath(p) for p in paths]
    if not srcs:
        raise rules.error("merge.no_paths")
    check_output(out)
    labs = list(labels) if labels is not None else [os.path.basename(p) for p in srcs]
    if len(labs) != len(srcs):
        raise rules.error("merge.label_count", labels=len(labs), traces=len(srcs))
    if len(set(labs)) != len(labs):
        raise rules.error("merge.labels_unique", labels=labs)
    if not (align in ("absolute", "start") or isinstance(align, Mapping)):
        raise rules.error("merge.align", align=align)

    plans, tops = [], []
    for src in srcs:
        reader = TraceReader(src, progress=progress)
        plans.append(plan_slices(reader))
        tops.append(reader.report)
    if align == "absolute":
        offsets = {lab: 0 for lab in labs}
    elif align == "start":
        offsets = {lab: -int(plan.first_ts or 0) for lab, plan in zip(labs, plans)}
    else:
        offsets = {lab: int(align.get(lab, 0)) for lab in labs}

    ids = IdMap(renumber_all=True)
    reports, counts = [], SliceCounts()
    unit = next((r.display_time_unit for r in tops if r.display_time_unit), "ms")
    top: dict[str, Any] = {}
    for lab, report in zip(labs, tops):
        for key, value in kept_top_level(report.top_level).items():
            if key != "displayTimeUnit":
                top.setdefault(key, {})[lab] = value
    with TraceWriter(out, gzip=gzip, display_time_unit=unit, top_level=top) as w:
        for index, (lab, src, plan) in enumerate(zip(labs, srcs, plans)):
            ids.scope = index
            rewriter = Rewriter(plan, ids)
            reader = TraceReader(src, progress=progress)
            named: set[Any] = set()
            for ev in _merged(rewriter.rewrite(reader), lab, offsets[lab], named):
                w.write(ev)
            for orig, pid in ids.mapping(index)["pid"].items():
                if pid not in named:
                    w.write({"ph": "M", "name": "process_name", "pid": pid,
                             "args": {"name": f"{lab}: pid {orig}"}})
            reports.append(reader.report)
            counts += rewriter.counts()
    mappings = {lab: ids.mapping(index) for index, lab in enumerate(labs)}
    return MergeResult(os.fspath(out), w.count, labs, {lab: m["pid"] for lab, m in mappings.items()},
                       offsets, reports, counts, mappings)


def _merged(events: Iterator[dict[str, Any]], label: str, offset: int,
            named: set[Any]) -> Iterator[dict[str, Any]]:
    """One input's events as merged: a ``process_sort_index`` before each new pid, process
    names prefixed with the label (their pids added to ``named``), ``ts`` shifted by ``offset``
    microseconds."""
    seen: set[Any] = set()
    for ev in events:
        if "pid" in ev:
            pid = ev["pid"]
            if pid not in seen:
                seen.add(pid)
                yield {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}}
            if ev.get("ph") == "M" and ev.get("name") == "process_name":
                args = dict(ev.get("args") or {})
                args["name"] = f"{label}: {args.get('name', '')}"
                ev["args"] = args
                named.add(pid)
        if offset and is_number(ev.get("ts")):
            ev["ts"] += offset
        yield ev


merge.__doc__ = (merge.__doc__ or "").replace("{slices}", _SLICES_DOC)


@dataclasses.dataclass(frozen=True)
class CompactResult:
    """What :func:`compact` did.

    Attributes:
        out: the file written.
        events_in: events read.
        events_out: events written.
        complete: ``B``/``E`` pairs turned into ``X`` events.
        async_copies_dropped: async operator copies (``b``/``e`` in :data:`ASYNC_COPY_CATEGORIES`).
        unmatched_begin: begins without an end, left out.
        unmatched_end: ends without a begin, left out.
        report: the reader's report.
        slices: everything done to the slices (:class:`~pyprof.trace.slices.SliceCounts`:
            moved to overlap tracks, negative durations and events without ``ts`` left out, ...).
        ids: ``{"pid" | "tid" | "id": {original: new}}``.
    """

    out: str
    events_in: int
    events_out: int
    complete: int
    async_copies_dropped: int
    unmatched_begin: int
    unmatched_end: int
    report: ReadReport
    slices: SliceCounts = SliceCounts()
    ids: dict[str, dict[Any, int]] = dataclasses.field(default_factory=dict)


def compact(path: str | os.PathLike[str], out: str | os.PathLike[str], *, gzip: bool | None = None,
            progress: bool | None = None) -> CompactResult:
    """Rewrite a trace for viewers: smaller, valid, and with ids JavaScript can hold.

    * MXNet's async duplicates of operators are dropped; other async pairs (C API calls, domain
      tasks) are kept with small ids.
    * pids, tids and async ids are renumbered 1, 2, ... (below 2**53); metadata follows, and the
      top-level ``displayTimeUnit``, ``otherData`` and ``metadata`` are kept.
    * Damaged inputs are repaired on the fly. Output is one compact event per line, written
      atomically; ``.json.gz`` (or ``gzip=True``) gives gzip, which Perfetto and chrome://tracing
      open directly.

{slices}

    Args:
        path: input trace (read twice).
        out: output path.
        gzip: compress; default when ``out`` ends in ``.gz``.
        progress: tqdm bar.

    Returns:
        :class:`CompactResult`.

    Raises:
        TraceNotFoundError / TraceFormatError: the input cannot be read.
        TraceError: the output cannot be written (``trace.bad_output``, checked first).
    """
    check_output(out)
    first = TraceReader(path, progress=progress)
    plan = plan_slices(first)
    ids = IdMap(renumber_all=True)
    rewriter = Rewriter(plan, ids)
    reader = TraceReader(path, progress=progress)
    n = {"in": 0, "copies": 0}

    def source() -> Iterator[dict[str, Any]]:
        for ev in reader:
            n["in"] += 1
            if ev.get("ph") in ("b", "e") and ev.get("cat") in ASYNC_COPY_CATEGORIES:
                n["copies"] += 1
                continue
            yield ev

    top = kept_top_level(first.report.top_level)
    top.pop("displayTimeUnit", None)
    with TraceWriter(out, gzip=gzip, display_time_unit=first.report.display_time_unit or "ms",
                     top_level=top) as w:
        for ev in rewriter.rewrite(source()):
            w.write(ev)
    counts = rewriter.counts()
    return CompactResult(os.fspath(out), n["in"], w.count, counts.complete, n["copies"],
                         counts.unmatched_begin, counts.unmatched_end, reader.report, counts,
                         ids.mapping())


compact.__doc__ = (compact.__doc__ or "").replace("{slices}", _SLICES_DOC)
