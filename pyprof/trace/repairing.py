"""Turn any MXNet trace file into a valid trace: JSON that parses, and slices viewers can show."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from .ids import IdMap
from .reader import ReadReport, TraceReader, is_gzip
from .slices import Rewriter, SliceCounts, plan_slices
from .writer import TraceWriter, check_output, kept_top_level


@dataclasses.dataclass(frozen=True)
class RepairResult:
    """What :func:`repair` did.

    Attributes:
        path: the input file.
        out: the file written (``path`` itself for an in-place repair); ``None`` when nothing was
            wrong and nothing was written.
        report: the reader's :class:`~pyprof.trace.reader.ReadReport` (what was wrong in the text).
        events: events written (read, when nothing was written).
        slices: what was done to the slices (:class:`~pyprof.trace.slices.SliceCounts`).
        ids: ``{"pid" | "tid" | "id": {original: new}}`` of the ids renumbered (those JavaScript
            cannot hold: integers from 2**53 on, and values that are neither strings nor
            integers).
    """

    path: str
    out: str | None
    report: ReadReport
    events: int
    slices: SliceCounts = SliceCounts()
    ids: dict[str, dict[Any, int]] = dataclasses.field(default_factory=dict)

    @property
    def fixed(self) -> list[str]:
        """Human-readable list of the problems fixed (empty when the file was valid)."""
        out = self.report.problems() + self.slices.notes()
        renumbered = {kind: len(m) for kind, m in self.ids.items() if m}
        if renumbered:
            out.append("ids viewers cannot hold renumbered (" + ", ".join(
                f"{n} {kind}(s)" for kind, n in renumbered.items()) + ")")
        return out


def repair(path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *,
           progress: bool | None = None) -> RepairResult:
    """Rewrite an MXNet trace as a valid trace that Chrome, Perfetto and ``json.load`` accept.

    Fixes a missing header, a leading bare comma (with or without the header: MXNet's
    ``{"traceEvents": [,`` of a second session), a missing closing ``]}``, unescaped quotes,
    back slashes and control characters in names; drops (and counts) a last event cut mid-way.

    The slices are made valid too (docs/trace-format.md, "What the writers guarantee"), so
    **``B``/``E`` pairs are rewritten as ``X`` events** (begin ``ts``, ``dur`` = end - begin in
    microseconds, the ``args`` of both merged), written where the ``E`` was; a slice that
    partially overlaps another of its thread moves to a new thread ``"<thread name or tid>
    (overlap N)"``; slices with a negative duration, begins without an end, ends without a begin
    and slice events without a numeric ``ts`` are left out. Ids JavaScript cannot hold exactly
    (integers from 2**53 on, MXNet's 64-bit pids, tids and async ids; values that are neither
    strings nor integers) are renumbered to small integers no other id uses; the others are kept.
    Every other event keeps its place and values; the top-level ``displayTimeUnit``,
    ``otherData`` and ``metadata`` are kept. Each event is written compactly, one per line.
    Reads the input twice; memory holds per thread a few numbers per slice.

    Args:
        path: plain or gzip trace.
        out: destination; default ``path`` itself, replaced atomically (a temporary file beside
            it, then a rename) and only when something needed fixing (damaged text, or a slice
            or id to fix). The output is gzip when ``out`` ends in ``.gz``, or, in place, when
            the input was gzip.
        progress: tqdm bar (see :class:`~pyprof.trace.reader.TraceReader`).

    Returns:
        :class:`RepairResult`.

    Raises:
        TraceNotFoundError: ``path`` cannot be opened.
        TraceFormatError: ``path`` holds no trace events (empty, or JSON that is not a trace,
            e.g. ``{"foo": 1}``: objects without a ``ph`` field are not events); nothing is
            written and ``path`` is left untouched.
        TraceError: the output cannot be written (``trace.bad_output``, checked first).
    """
    src = os.fspath(path)
    if out is not None:
        check_output(out)
    ids = IdMap(renumber_all=False)
    first = TraceReader(src, progress=progress)
    plan = plan_slices(first, ids)
    if out is None:
        if not (first.report.damaged or _slices_to_fix(plan.counts) or ids.unsafe):
            return RepairResult(src, None, first.report, first.report.events, plan.counts)
        dest, gz = src, is_gzip(src)
    else:
        dest, gz = os.fspath(out), None
    rewriter = Rewriter(plan, ids)
    reader = TraceReader(src, progress=progress)
    top = kept_top_level(first.report.top_level)
    top.pop("displayTimeUnit", None)
    with TraceWriter(dest, gzip=gz, display_time_unit=first.report.display_time_unit or "ms",
                     top_level=top) as w:
        for ev in rewriter.rewrite(reader):
            w.write(ev)
    return RepairResult(src, dest, reader.report, w.count, rewriter.counts(), ids.mapping())


def _slices_to_fix(counts: SliceCounts) -> bool:
    return bool(counts.moved or counts.dropped)
