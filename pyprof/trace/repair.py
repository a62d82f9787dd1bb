"""Turn any MXNet trace file into valid JSON."""

from __future__ import annotations

import dataclasses
import os

from .reader import ReadReport, TraceReader, is_gzip
from .writer import TraceWriter

__all__ = ["RepairResult", "repair"]


@dataclasses.dataclass(frozen=True)
class RepairResult:
    """What :func:`repair` did.

    Attributes:
        path: the input file.
        out: the file written (``path`` itself for an in-place repair); ``None`` when nothing was
            wrong and nothing was written.
        report: the reader's :class:`~pyprof.trace.reader.ReadReport` (what was wrong).
        events: events written.
    """

    path: str
    out: str | None
    report: ReadReport
    events: int

    @property
    def fixed(self) -> list[str]:
        """Human-readable list of the problems fixed (empty when the file was valid)."""
        return self.report.problems()


def repair(path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *,
           progress: bool | None = None) -> RepairResult:
    """Rewrite an MXNet trace as valid JSON that Chrome, Perfetto and ``json.load`` accept.

    Fixes a missing header, a leading bare comma (with or without the header: MXNet's
    ``{"traceEvents": [,`` of a second session), a missing closing ``]}``, unescaped quotes,
    back slashes and control characters in names; drops (and counts) a last event cut mid-way.
    Every event is re-serialised compactly, one per line; nothing else changes (order, values,
    64-bit ids are kept). Streams: memory does not grow with the file.

    Args:
        path: plain or gzip trace.
        out: destination; default ``path`` itself, replaced atomically (a temporary file beside
            it, then a rename) and only when something needed fixing. The output is gzip when
            ``out`` ends in ``.gz``, or, in place, when the input was gzip.
        progress: tqdm bar (see :class:`~pyprof.trace.reader.TraceReader`).

    Returns:
        :class:`RepairResult`.

    Raises:
        TraceNotFoundError: ``path`` cannot be opened.
        TraceFormatError: ``path`` holds no trace events (empty, or JSON that is not a trace,
            e.g. ``{"foo": 1}``: objects without a ``ph`` field are not events); nothing is
            written and ``path`` is left untouched.
        TraceError: the output cannot be written.
    """
    src = os.fspath(path)
    in_place = out is None
    if in_place:
        probe = TraceReader(src, progress=progress)
        for _ in probe:
            pass
        if not probe.report.damaged:
            return RepairResult(src, None, probe.report, probe.report.events)
        dest, gz = src, is_gzip(src)
    else:
        dest, gz = os.fspath(out), None
    reader = TraceReader(src, progress=progress)
    with TraceWriter(dest, gzip=gz) as w:
        for ev in reader:
            w.write(ev)
        w.display_time_unit = reader.report.display_time_unit or "ms"
    return RepairResult(src, dest, reader.report, w.count)
