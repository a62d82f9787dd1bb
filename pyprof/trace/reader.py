"""Streaming reader for MXNet (Chrome Trace Event) profiles, valid or damaged.

MXNet writes ``{"traceEvents": [ {...}, {...} ], "displayTimeUnit": "ms"}`` with each event
pretty-printed over several lines, names copied without JSON escaping, and, after a crash or a
second profiling session in one process, no closing ``]}``, a leading bare comma, or no header.

How it works (bounded memory whatever the file size):

1. The file (plain or gzip, detected from the magic bytes) is read in chunks of ``chunk_bytes``.
2. The text before the first event (``{"traceEvents": [``, ``[``, a bare ``,``, or the header
   followed by a bare comma, ``{"traceEvents": [,``, as MXNet writes for a second session) is
   recognised and skipped; what was found is recorded in :class:`ReadReport`.
3. Events are separated by ``}``, optional whitespace, ``,``, optional whitespace, ``{``. Each chunk
   is cut after the last separator; the complete part is parsed with **one** ``orjson.loads``
   call (fast path). The rest is carried into the next chunk.
4. If that call fails (an unescaped quote in a name, a broken seam), the chunk is split at every
   separator and each piece is parsed alone; a piece that still fails is repaired (quotes, back
   slashes and control characters inside ``name``/``cat``/``args`` strings are escaped), then joined
   with following pieces (a separator inside a string), and dropped, counted, only as a last resort.
   A piece holding a finished trace's ``]}`` (MXNet appends a second ``dump()`` after it) is cut
   there and both sides are kept.
5. At end of file the closing ``]`` plus trailing keys are stripped; their absence is reported as
   a missing tail, and a last event cut mid-way is dropped and counted.
6. Only JSON objects with a ``ph`` field are trace events; any other value (``{"foo": 1}``, a
   number) is dropped and counted. A file without a single trace event (empty, or JSON that is not
   a trace) raises :class:`~pyprof.trace.errors.TraceFormatError` once it has been read.

Nothing here assumes one event per line.
"""

from __future__ import annotations

import dataclasses
import gzip
import mmap
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import orjson

from .errors import TraceFormatError, TraceNotFoundError

__all__ = ["ReadReport", "TraceReader", "iter_events", "open_binary", "escape_piece", "is_gzip"]

#: Separator between two events: ``}`` , ``{`` with any whitespace around the comma.
_SEP = re.compile(rb"\}\s*,\s*\{")
_HEAD_OBJECT = re.compile(rb'\s*\{\s*"traceEvents"\s*:\s*\[\s*')
_HEAD_ANY_KEY = re.compile(rb'"traceEvents"\s*:\s*\[\s*')
_TAIL = re.compile(
    rb'\]\s*(?:,\s*"[^"]*"\s*:\s*(?:"[^"]*"|-?[0-9.eE+-]+|true|false|null|\{[^{}]*\})\s*)*\}?\s*$'
)
# A finished trace's closing "]}" in the middle of the file (a later dump appended after it), with
# the "," and possibly a new header before the next event: "}  ], "displayTimeUnit": "ms" } , ".
_SEAM = re.compile(
    rb'\}\s*\]\s*(?:,\s*"[^"]*"\s*:\s*(?:"[^"]*"|-?[0-9.eE+-]+|true|false|null|\{[^{}]*\})\s*)*'
    rb'\}\s*,?\s*(?:\{\s*"traceEvents"\s*:\s*\[\s*,?\s*)?'
)
_DISPLAY_UNIT = re.compile(rb'"displayTimeUnit"\s*:\s*"([^"]*)"')
_EVENT_KEYS = rb"name|cat|ph|ts|dur|tdur|tts|pid|tid|id|id2|args|s|bp|scope|cname|bind_id"
# A string value of a known key, ending at the first quote that is followed by the next key or
# the end of the object; DOTALL so an embedded newline is found too.
_STRING_FIELD = re.compile(
    rb'("(?:name|cat)"\s*:\s*")(.*?)("\s*(?:,\s*"(?:' + _EVENT_KEYS + rb')"\s*:|\}))', re.DOTALL
)
# args of counters ({"<counter name>": 12}) and metadata ({"name": "<process name>"}).
_ARGS_COUNTER = re.compile(rb'("args"\s*:\s*\{\s*")(.*?)("\s*:\s*-?[0-9][0-9.eE+-]*\s*\})', re.DOTALL)
_ARGS_NAME = re.compile(rb'("args"\s*:\s*\{\s*"name"\s*:\s*")(.*?)("\s*\})', re.DOTALL)
_CONTROL = re.compile(rb"[\x00-\x1f]")
_MAX_JOIN = 16
_GZIP_MAGIC = b"\x1f\x8b"


@dataclasses.dataclass
class ReadReport:
    """What the reader found and fixed while streaming one file.

    Attributes:
        path: the file read.
        bytes_read: bytes of the (decompressed) trace text consumed.
        events: events yielded (after the ``phases`` filter).
        missing_head: the ``{"traceEvents": [`` header was absent.
        leading_comma: a bare comma came before the first event, with or without the header
            (``{"traceEvents": [,``: second session in one process).
        missing_tail: the closing ``]`` / ``}`` was absent (crash, or profiler not finalised).
        inner_tails: closing ``]}`` found in the middle of the file (MXNet appends each further
            ``profiler.dump()`` after the previous, finished trace); the events on both sides are kept.
        escaped_names: events whose strings needed escaping (unescaped quotes, back slashes or
            control characters in names).
        dropped_fragments: pieces of text that could not be turned into an event, e.g. a last
            event cut mid-way by a crash.
        dropped_bytes: bytes in those pieces.
        display_time_unit: the trace's ``displayTimeUnit`` when present.
    """

    path: str
    bytes_read: int = 0
    events: int = 0
    missing_head: bool = False
    leading_comma: bool = False
    missing_tail: bool = False
    inner_tails: int = 0
    escaped_names: int = 0
    dropped_fragments: int = 0
    dropped_bytes: int = 0
    display_time_unit: str | None = None

    @property
    def damaged(self) -> bool:
        """True when anything had to be fixed or dropped."""
        return bool(self.missing_head or self.leading_comma or self.missing_tail
                     or self.inner_tails or self.escaped_names or self.dropped_fragments)

    def problems(self) -> list[str]:
        """Human-readable list of what was wrong, empty for a valid file."""
        out = []
        if self.leading_comma:
            out.append("bare comma before the first event (second profiling session in one process)")
        if self.missing_head:
            out.append('missing {"traceEvents": [ header')
        if self.missing_tail:
            out.append("missing closing ]} (process crashed or profiler not finalised)")
        if self.inner_tails:
            out.append(f"{self.inner_tails} closing ]}} in the middle of the file (a dump appended "
                       "after a finished trace), events on both sides kept")
        if self.escaped_names:
            out.append(f"{self.escaped_names} event(s) with unescaped characters in names")
        if self.dropped_fragments:
            out.append(f"{self.dropped_fragments} unreadable fragment(s), {self.dropped_bytes} bytes, dropped")
        return out


def open_binary(path: str | os.PathLike[str]) -> tuple[IO[bytes], IO[bytes]]:
    """Open a trace for binary reading, decompressing gzip transparently.

    Returns:
        ``(text_stream, raw_file)``: read trace bytes from the first; the second is the file on
        disk, whose ``tell()`` gives compressed progress. Close the first (closing both).

    Raises:
        TraceNotFoundError: the file does not exist or cannot be opened.
    """
    try:
        raw = open(path, "rb")  # noqa: SIM115 - returned to the caller
    except OSError as exc:
        raise TraceNotFoundError(f"cannot open trace {os.fspath(path)!r}: {exc.strerror}; "
                                 "check the path") from exc
    magic = raw.read(2)
    raw.seek(0)
    if magic == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw
    return raw, raw


def is_gzip(path: str | os.PathLike[str]) -> bool:
    """True when the file starts with the gzip magic bytes.

    Raises:
        TraceNotFoundError: the file cannot be opened.
    """
    stream, raw = open_binary(path)
    stream.close()
    raw.close()
    return stream is not raw


def _escape_segment(seg: bytes) -> bytes:
    """Escape a raw (never JSON-escaped) MXNet string for inclusion between quotes."""
    seg = seg.replace(b"\\", b"\\\\").replace(b'"', b'\\"')
    return _CONTROL.sub(lambda m: b"\\u%04x" % m.group(0)[0], seg)


def escape_piece(piece: bytes) -> bytes:
    """Escape unescaped characters inside the string fields of one event's text.

    MXNet copies names verbatim, so ``"name": "a"b"`` or a back slash makes invalid JSON. Each
    ``name``/``cat`` value is taken to run to the first quote that is followed by the next key (or
    the end of the object); counter and metadata ``args`` keys are treated alike.
    """
    def fix(m: re.Match[bytes]) -> bytes:
        return m.group(1) + _escape_segment(m.group(2)) + m.group(3)

    piece = _STRING_FIELD.sub(fix, piece)
    piece = _ARGS_NAME.sub(fix, piece)
    return _ARGS_COUNTER.sub(fix, piece)


class TraceReader:
    """Iterate over the events of one trace file in bounded memory.

    Args:
        path: a ``.json`` or gzip-compressed trace, valid or damaged.
        progress: show a tqdm progress bar (bytes read). ``None`` (default): only when stderr is a
            terminal and the file is larger than 64 MiB; ``False``: never; ``True``: always.
        phases: when given, only events whose ``ph`` is in this collection are parsed and yielded.
        chunk_bytes: read size; memory use is a small multiple of it.
        drop_async_copies: skip MXNet's async ``b``/``e`` duplicates of operators (categories
            ``operator`` / ``Custom Operator``) *before parsing* (a bytes test per event).
        exclude_categories: skip events of these categories before parsing, e.g.
            ``{"MXNET_C_API"}``. The bytes tests look for ``"cat": "<category>"``; a name that
            itself contains such text could be skipped too.

    Attributes:
        report: a :class:`ReadReport`, complete once iteration has finished.

    Iterating yields one ``dict`` per event, exactly as in the file (``ts`` in microseconds, 64-bit
    ``pid``/``tid`` as Python ints).

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
        cats = [c.encode() for c in exclude_categories]
        self._excluded = tuple(p for c in cats for p in (b'"cat": "%s"' % c, b'"cat":"%s"' % c))
        self._copies = (tuple(p for c in (b"operator", b"Custom Operator")
                              for p in (b'"cat": "%s"' % c, b'"cat":"%s"' % c))
                        if drop_async_copies else ())
        self.report = ReadReport(self.path)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self._events()

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
        for body in self._bodies():
            for ev in self._parse_body(body):
                if phases is None or ev.get("ph") in phases:
                    self.report.events += 1
                    yield ev

    def _bodies(self) -> Iterator[bytes]:
        """Yield the text of complete events, chunk by chunk (without the ``[``/``]`` around them).

        Each body is a run of whole events separated by ``,`` (as far as the separators found
        tell); :meth:`_parse_body` turns one into events. Head, tail and progress are handled
        here and recorded in :attr:`report`; raises :class:`TraceFormatError` at the end when no
        event was seen (``_saw_event`` must be set by whoever parses the bodies).
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
                    buf = self._skip_head(buf)
                    started = True
                if eof:
                    body, buf = self._strip_tail(buf), b""
                else:
                    cut = _last_separator(buf)
                    if cut is None:
                        continue  # one event larger than the chunk: read more
                    body, buf = buf[:cut[0]], buf[cut[1]:]
                if not body.strip():
                    continue
                yield body
            self._check_events()
        finally:
            if bar is not None:
                bar.close()
            stream.close()
            raw.close()

    def _check_events(self) -> None:
        """Raise :class:`TraceFormatError` when every body has been parsed and none held an event
        (events dropped by ``exclude_categories`` or ``drop_async_copies`` count as seen)."""
        if self._saw_event:
            return
        if not self.report.bytes_read:
            raise TraceFormatError(
                f"{self.path}: empty file, no trace events (the profiled run wrote nothing: "
                "crashed or never called profiler.dump()?); re-run the profiling or pass the "
                "right file")
        raise TraceFormatError(
            f"{self.path}: no trace events found (not an MXNet/Chrome trace, or the profiler "
            'recorded nothing; events are JSON objects with a "ph" field); pass the file named '
            "by profiler.set_config(filename=...) of a run that profiled something")

    def _body_spans(self) -> Iterator[tuple[int, int]]:
        """``(offset, length)`` in the file of each body :meth:`_bodies` would yield, in order.

        For plain (not gzip) files only: the same chunking, head/tail handling, report fields and
        progress bar as :meth:`_bodies`, computed on a memory map without copying the bodies (the
        caller reads them, e.g. in worker processes). The caller parses the bodies, then calls
        :meth:`_check_events`.
        """
        with open(self.path, "rb") as raw:
            size = os.fstat(raw.fileno()).st_size
            if not size:
                return
            bar = self._progress_bar(raw)
            mm = mmap.mmap(raw.fileno(), size, access=mmap.ACCESS_READ)
            try:
                start = 0  # file offset of the carried text (buf[0] in _bodies)
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
                        start = end - len(self._skip_head(head))
                        del head
                        started = True
                    if eof:
                        body = self._strip_tail(mm[start:end])
                        span = (start, len(body))
                        start = end
                        if not body.strip():
                            continue
                        del body
                    else:
                        cut = _last_separator(mm, start, end)
                        if cut is None:
                            continue  # one event larger than the chunk: read more
                        span = (start, cut[0] - start)
                        start = cut[1]
                        # A body cut at a separator ends with "}": never blank.
                    yield span
            finally:
                if bar is not None:
                    bar.close()
                mm.close()

    _saw_event = False

    def _skip_head(self, buf: bytes) -> bytes:
        stripped = buf.lstrip()
        m = _HEAD_OBJECT.match(buf)
        if m:
            return self._skip_comma(buf[m.end():])
        if stripped.startswith(b"{"):
            # Either an object whose first key is not traceEvents, or a bare event (no header).
            m = _HEAD_ANY_KEY.search(buf, 0, 4096)
            if m and not _looks_like_event_start(stripped):
                return self._skip_comma(buf[m.end():])
            self.report.missing_head = True
            return stripped
        if stripped.startswith(b"["):
            return self._skip_comma(stripped[1:].lstrip())
        if stripped.startswith(b","):
            self.report.leading_comma = True
            rest = stripped[1:].lstrip()
            if not rest.startswith(b"{"):
                return self._drop_to_brace(rest)
            self.report.missing_head = True
            return rest
        if not stripped:
            return stripped
        return self._drop_to_brace(stripped)

    def _skip_comma(self, rest: bytes) -> bytes:
        """After ``{"traceEvents": [`` or ``[``: skip the bare comma MXNet writes before the first
        event of a second session (``[,``), which would otherwise cost that event."""
        if rest.startswith(b","):
            self.report.leading_comma = True
            return rest[1:].lstrip()
        return rest

    def _drop_to_brace(self, buf: bytes) -> bytes:
        i = buf.find(b"{")
        if i < 0:
            i = len(buf)
        if i:
            self.report.dropped_fragments += 1
            self.report.dropped_bytes += i
        self.report.missing_head = True
        return buf[i:]

    def _strip_tail(self, buf: bytes) -> bytes:
        end = buf.rstrip()
        j = end.rfind(b"]")
        if j >= 0:
            m = _TAIL.match(end, j)
            if m:
                u = _DISPLAY_UNIT.search(end, j)
                if u:
                    self.report.display_time_unit = u.group(1).decode("utf-8", "replace")
                return end[:j].rstrip()
        self.report.missing_tail = True
        # A crash can leave a dangling separator.
        return end[:-1] if end.endswith(b",") else end

    def _prefilter(self, body: bytes) -> bytes:
        excluded, copies = self._excluded, self._copies
        keep = []
        # Pieces lose the "}" and "{" around each separator; they are put back by the join.
        for piece in _SEP.split(body):
            if excluded and any(p in piece for p in excluded):
                if b'"ph"' in piece:
                    self._saw_event = True  # a trace event, skipped on purpose
                continue
            if copies and any(p in piece for p in copies) and (
                    b'"ph": "b"' in piece or b'"ph": "e"' in piece or b'"ph":"b"' in piece
                    or b'"ph":"e"' in piece):
                self._saw_event = True
                continue
            keep.append(piece)
        if not keep:
            return b""
        text = b"},{".join(keep)
        # Restore the outer braces the split removed (unless that piece was dropped).
        if not text.startswith(b"{") and not text.lstrip().startswith(b"{"):
            text = b"{" + text
        if not text.rstrip().endswith(b"}"):
            text = text + b"}"
        return text

    def _parse_body(self, body: bytes) -> list[dict[str, Any]]:
        if self._excluded or self._copies:
            body = self._prefilter(body)
            if not body:
                return []
        try:
            events = orjson.loads(b"[" + body + b"]")
        except orjson.JSONDecodeError:
            events = self._parse_pieces(body)
        else:
            if not all(type(ev) is dict and "ph" in ev for ev in events):
                events = self._parse_pieces(body)  # drops (and counts) what is not an event
        if events:
            self._saw_event = True
        return events

    def _parse_pieces(self, body: bytes) -> list[dict[str, Any]]:
        spans = []
        start = 0
        for m in _SEP.finditer(body):
            spans.append((start, m.start() + 1))
            start = m.end() - 1
        spans.append((start, len(body)))
        out: list[dict[str, Any]] = []
        i = 0
        while i < len(spans):
            evs, used = self._parse_joined(body, spans, i)
            if evs is None:
                self.report.dropped_fragments += 1
                self.report.dropped_bytes += spans[i][1] - spans[i][0]
                i += 1
                continue
            out.extend(evs)
            i += used
        return out

    def _parse_joined(self, body: bytes, spans: list[tuple[int, int]],
                      i: int) -> tuple[list[dict[str, Any]] | None, int]:
        """Parse piece ``i``, joined with up to ``_MAX_JOIN - 1`` following pieces if needed."""
        for used in range(1, min(_MAX_JOIN, len(spans) - i) + 1):
            evs = self._load_piece(body[spans[i][0]:spans[i + used - 1][1]])
            if evs is not None:
                return evs, used
        return None, 1

    def _load_one(self, text: bytes) -> dict[str, Any] | None:
        """The event in ``text``, escaping unescaped characters in its strings if needed."""
        ev = _try_load(text)
        if ev is not None:
            return ev
        fixed = escape_piece(text)
        if fixed != text:
            ev = _try_load(fixed)
            if ev is not None:
                self.report.escaped_names += 1
        return ev

    def _load_piece(self, text: bytes) -> list[dict[str, Any]] | None:
        """The event(s) in ``text``: one, or those on both sides of a mid-file ``]}``; else None."""
        ev = self._load_one(text)
        if ev is not None:
            return [ev]
        if b"]" not in text:
            return None
        parts, start = [], 0
        for m in _SEAM.finditer(text):
            parts.append(text[start:m.start() + 1])
            start = m.end()
        seams = len(parts)
        if not seams:
            return None
        if text[start:].strip():
            parts.append(text[start:])
        escaped = self.report.escaped_names
        out = []
        for part in parts:
            ev = self._load_one(part)
            if ev is None:
                self.report.escaped_names = escaped
                return None
            out.append(ev)
        self.report.inner_tails += seams
        return out


def _try_load(text: bytes) -> dict[str, Any] | None:
    """The trace event in ``text``: a JSON object with a ``ph`` field, else ``None``."""
    try:
        ev = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return ev if isinstance(ev, dict) and "ph" in ev else None


def _looks_like_event_start(text: bytes) -> bool:
    return re.match(rb'\{\s*"(?:name|ph|cat|ts|pid|tid|args)"', text) is not None


def _last_separator(buf: bytes | mmap.mmap, start: int = 0,
                    stop: int | None = None) -> tuple[int, int] | None:
    """(end of the last complete event, start of the next) for the last separator in
    ``buf[start:stop]`` (positions in ``buf``)."""
    if stop is None:
        stop = len(buf)
    pos = stop
    while True:
        pos = buf.rfind(b"}", start, pos)
        if pos < 0:
            return None
        m = _SEP.match(buf, pos, stop)
        if m:
            return pos + 1, m.end() - 1


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


