"""Streaming reader for MXNet (Chrome Trace Event) profiles, valid or damaged.

MXNet writes ``{"traceEvents": [ {...}, {...} ], "displayTimeUnit": "ms"}`` with each event
pretty-printed over several lines, names copied without JSON escaping, and, after a crash or a
second profiling session in one process, no closing ``]}``, a leading bare comma, or no header.

How it works (bounded memory whatever the file size):

1. The file (plain or gzip) is read in chunks of ``chunk_bytes``; the text before the first event
   is skipped, each chunk is cut after its last event separator (the rest is carried into the
   next chunk) and the closing ``]}`` is stripped at the end (:mod:`pyprof.trace.framing`).
2. Each complete part, a *body*, is parsed with **one** ``orjson.loads`` call; bodies that fail
   are split into events, repaired where MXNet wrote invalid JSON, and what cannot be repaired is
   dropped and counted (:mod:`pyprof.trace.bodyparser`).
3. Everything found and fixed is recorded in a :class:`ReadReport`. A file without a single trace
   event (empty, or JSON that is not a trace) raises
   :class:`~pyprof.trace.errors.TraceFormatError` once it has been read.

Nothing here assumes one event per line.
"""

from __future__ import annotations

import mmap
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from .bodyparser import BodyParser, escape_piece
from .. import rules
from .framing import is_gzip, last_separator, open_binary, skip_head, strip_tail
from .readreport import ReadReport


class TraceReader:
    """Iterate over the events of one trace file in bounded memory.

    Args:
        path: a ``.json`` or gzip-compressed trace, valid or damaged.
        progress: show a tqdm progress bar (bytes read). ``None`` (default): only when stderr is a
            terminal and the file is larger than 64 MiB; ``False``: never; ``True``: always.
        phases: when given, only events whose ``ph`` is in this collection are parsed and yielded.
        chunk_bytes: read size; memory use is a small multiple of it.
        drop_async_copies: skip MXNet's async ``b``/``e`` duplicates of operators (categories
            ``operator`` / ``Custom Operator``).
        exclude_categories: skip events of these categories, e.g. ``{"MXNET_C_API"}``.

    Attributes:
        report: a :class:`ReadReport`, complete once iteration has finished.
        drop_async_copies: as given.

    Iterating yields one ``dict`` per event, exactly as in the file (``ts`` in microseconds, 64-bit
    ``pid``/``tid`` as Python ints).

    Consumers with their own parser (the fast path of :func:`~pyprof.trace.stats`) read the file
    body by body instead: :meth:`bodies` (or :meth:`body_spans` and :meth:`check_events`), each
    body handed to :meth:`parse_body` or, when parsed by the caller, :meth:`record_parsed`.
    ``phases`` does not apply to these.

    Raises:
        TraceNotFoundError: the file cannot be opened.
        TraceFormatError: the file holds no trace events at all (empty, or not a trace: events are
            JSON objects with a ``ph`` field), raised when iteration reaches the end of the file.
    """

    def __init__(self, path: str | os.PathLike[str], *, progress: bool | None = None,
                 phases: Iterable[str] | None = None, chunk_bytes: int = 8 << 20,
                 drop_async_copies: bool = False, exclude_categories: Iterable[str] = ()):
        self.path = os.fspath(path)
        self.progress = progress
        self.phases = frozenset(phases) if phases is not None else None
        self.chunk_bytes = chunk_bytes
        self.drop_async_copies = drop_async_copies
        self.report = ReadReport(self.path)
        self._parser = BodyParser(self.report, exclude_categories, drop_async_copies)
        # The last body (or span) and the text stripped after it (None: not stripped).
        self._last: bytes | None = None
        self._last_span: tuple[int, int] | None = None
        self._end: bytes | None = None
        self._gzip_cut = False
        # The separator text after a body (or span) that was cut at one.
        self._sep_of: tuple[bytes, bytes] | None = None
        self._span_seps: dict[tuple[int, int], bytes] = {}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self._events()

    # -- body by body ------------------------------------------------------------------------
    def bodies(self) -> Iterator[bytes]:
        """Yield the text of complete events, chunk by chunk (without the ``[``/``]`` around them).

        Each body is a run of whole events separated by ``,`` (as far as the separators found
        tell); :meth:`parse_body` turns one into events. Head, tail and progress are handled
        here and recorded in :attr:`report`; raises :class:`TraceFormatError` at the end when no
        event was seen (so every body must go through :meth:`parse_body` or
        :meth:`record_parsed`).
        """
        stream, raw = open_binary(self.path)
        bar = self._progress_bar(raw)
        try:
            buf = b""
            started = False
            eof = False
            last_pos = 0
            while not eof:
                chunk = stream.read(self.chunk_bytes)
                if not chunk and getattr(stream, "truncated", False):
                    self._gzip_cut = True
                    self.report.dropped_fragments += 1  # the undecodable rest of the stream
                eof = not chunk
                self.report.bytes_read += len(chunk)
                if bar is not None:
                    pos = raw.tell()
                    bar.update(pos - last_pos)
                    last_pos = pos
                buf = buf + chunk if buf else chunk
                if not started:
                    if not eof and len(buf) < 4096:
                        continue
                    rest = skip_head(buf, self.report, eof)
                    if rest is None:
                        continue  # top-level keys before traceEvents: read more
                    buf, started = rest, True
                if eof:
                    body = strip_tail(buf, self.report)
                    if body is None:
                        body, self._end = buf, None  # the parser finds the end
                    else:
                        self._end = buf[len(body):]
                    self._last = body
                    buf = b""
                else:
                    cut = last_separator(buf)
                    if cut is None:
                        continue  # one event larger than the chunk: read more
                    body = buf[:cut[0]]
                    self._sep_of = (body, buf[cut[0]:cut[1]])
                    buf = buf[cut[1]:]
                if not body.strip() and not (self._last is body and self._end is None):
                    continue
                yield body
            self.check_events()
        finally:
            if bar is not None:
                bar.close()
            stream.close()
            raw.close()

    def body_spans(self) -> Iterator[tuple[int, int]]:
        """``(offset, length)`` in the file of each body :meth:`bodies` would yield, in order.

        For plain (not gzip) files only: the same chunking, head/tail handling, report fields and
        progress bar as :meth:`bodies`, computed on a memory map without copying the bodies (the
        caller reads them, e.g. in worker processes). The caller parses the bodies, then calls
        :meth:`check_events`.
        """
        with open(self.path, "rb") as raw:
            size = os.fstat(raw.fileno()).st_size
            if not size:
                return
            bar = self._progress_bar(raw)
            mm = mmap.mmap(raw.fileno(), size, access=mmap.ACCESS_READ)
            try:
                start = 0  # file offset of the carried text (buf[0] in bodies())
                end = 0  # bytes read so far
                started = False
                eof = False
                while not eof:
                    n = min(self.chunk_bytes, size - end)
                    eof = not n
                    end += n
                    self.report.bytes_read += n
                    if bar is not None:
                        bar.update(n)
                    if not started:
                        if not eof and end - start < 4096:
                            continue
                        head = mm[start:end]
                        rest = skip_head(head, self.report, eof)
                        if rest is None:
                            continue
                        start = end - len(rest)
                        del head, rest
                        started = True
                    if eof:
                        body = strip_tail(mm[start:end], self.report)
                        if body is None:  # the parser finds the end: hand it everything
                            span, self._end = (start, end - start), None
                        else:
                            span, self._end = (start, len(body)), mm[start + len(body):end]
                        self._last_span = span
                        start = end
                        if body is not None and not body.strip():
                            continue
                        del body
                    else:
                        cut = last_separator(mm, start, end)
                        if cut is None:
                            continue  # one event larger than the chunk: read more
                        span = (start, cut[0] - start)
                        self._span_seps[span] = mm[cut[0]:cut[1]]
                        start = cut[1]
                        # A body cut at a separator ends with "}": never blank.
                    yield span
            finally:
                if bar is not None:
                    bar.close()
                mm.close()

    def parse_body(self, body: bytes, span: tuple[int, int] | None = None) -> list[dict[str, Any]]:
        """Every event of one body (from :meth:`bodies`, or the text of ``span`` of
        :meth:`body_spans`), in file order, counted in ``report.events``; ``phases`` is not
        applied."""
        events = self._parse(body, span)
        self.report.events += len(events)
        return events

    def _parse(self, body: bytes, span: tuple[int, int] | None = None) -> list[dict[str, Any]]:
        last = body is self._last if span is None else span == self._last_span
        if span is not None:
            sep = self._span_seps.pop(span, b",")
        else:
            sep = self._sep_of[1] if self._sep_of is not None and self._sep_of[0] is body else b","
        return self._parser.parse(body, last, self._end if last else None, sep)

    def keeps_end(self, body: bytes | None = None, span: tuple[int, int] | None = None) -> bool:
        """True for the last body of :meth:`bodies` (or span of :meth:`body_spans`) when it holds
        the file's end as written (no simple MXNet end was stripped): it must go to
        :meth:`parse_body`, which finds the end of the events or reports it missing."""
        if self._end is not None:
            return False
        return body is self._last if span is None else span == self._last_span

    @property
    def pending(self) -> bool:
        """True when the next body must go to :meth:`parse_body`, not to a caller's own parser
        (part of an event is carried into it, or the events array has ended)."""
        return self._parser.pending

    def record_parsed(self, events: int) -> None:
        """Account for a body the caller parsed itself: ``events`` taken from it are counted in
        ``report.events``, and the body held trace events (perhaps only ones skipped on purpose)."""
        self._parser.saw_event = True
        self.report.events += events

    def check_events(self) -> None:
        """Raise :class:`TraceFormatError` when every body has been parsed and none held an event
        (events dropped by ``exclude_categories`` or ``drop_async_copies`` count as seen).

        :meth:`bodies` calls it after its last body; a caller of :meth:`body_spans` calls it
        once it has parsed every span.
        """
        self._parser.finish()
        if self._parser.saw_event:
            return
        if not self.report.bytes_read and self._gzip_cut:
            raise rules.error("trace.gzip_cut", path=self.path)
        if not self.report.bytes_read:
            raise rules.error("trace.empty", path=self.path)
        raise rules.error("trace.no_events", path=self.path)

    # -- internals -------------------------------------------------------------------------
    def _progress_bar(self, raw: IO[bytes]):
        size = os.fstat(raw.fileno()).st_size
        show = self.progress
        if show is None:
            show = sys.stderr.isatty() and size > (64 << 20)
        if not show:
            return None
        from tqdm import tqdm
        return tqdm(total=size, unit="B", unit_scale=True, unit_divisor=1024,
                    desc=os.path.basename(self.path), leave=False)

    def _events(self) -> Iterator[dict[str, Any]]:
        phases = self.phases
        for body in self.bodies():
            for ev in self._parse(body):
                if phases is None or ev.get("ph") in phases:
                    self.report.events += 1
                    yield ev


def iter_events(path: str | os.PathLike[str], *, progress: bool | None = None,
                phases: Iterable[str] | None = None,
                report: Callable[[ReadReport], None] | None = None) -> Iterator[dict[str, Any]]:
    """Yield the events of a trace file one by one, in file order, in bounded memory.

    Args:
        path: plain or gzip MXNet/Chrome trace; damaged files (missing tail, leading comma, missing
            header, unescaped names) are read as far as possible.
        progress: tqdm bar over bytes read; ``None`` = only on a terminal for files > 64 MiB.
        phases: only yield events whose ``ph`` is in this collection (e.g. ``{"B", "E"}``).
        report: called with the file's :class:`ReadReport` after the last event.

    Yields:
        One ``dict`` per event, as written (``ts`` in integer microseconds since the epoch).

    Raises:
        TraceNotFoundError: the file cannot be opened.
        TraceFormatError: no events could be found.
    """
    reader = TraceReader(path, progress=progress, phases=phases)
    yield from reader
    if report is not None:
        report(reader.report)
