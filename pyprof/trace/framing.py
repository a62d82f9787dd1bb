"""Where the events are in a trace file's text: opening, head, separators, tail.

The reader (:class:`~pyprof.trace.reader.TraceReader`) cuts a trace into *bodies*, runs of whole
events separated by ``,``, without parsing it:

1. The file (plain or gzip, detected from the magic bytes) is opened with :func:`open_binary`.
2. The text before the first event (``{"traceEvents": [``, ``[``, a bare ``,``, or the header
   followed by a bare comma, ``{"traceEvents": [,``, as MXNet writes for a second session) is
   recognised and skipped by :func:`skip_head`.
3. Events are separated by ``}``, optional whitespace, ``,``, optional whitespace, ``{``
   (:data:`EVENT_SEPARATOR`); each chunk read is cut after its last separator
   (:func:`last_separator`) and the rest carried into the next chunk.
4. At end of file the closing ``]`` plus trailing keys are stripped by :func:`strip_tail`; their
   absence is reported as a missing tail.

What was found is recorded in a :class:`~pyprof.trace.readreport.ReadReport`.
"""

from __future__ import annotations

import gzip
import mmap
import os
import re
from typing import IO

from .errors import TraceNotFoundError
from .readreport import ReadReport

__all__ = ["EVENT_SEPARATOR", "open_binary", "is_gzip", "skip_head", "strip_tail", "last_separator"]

#: Separator between two events: ``}`` , ``{`` with any whitespace around the comma.
EVENT_SEPARATOR = re.compile(rb"\}\s*,\s*\{")
_HEAD_OBJECT = re.compile(rb'\s*\{\s*"traceEvents"\s*:\s*\[\s*')
_HEAD_ANY_KEY = re.compile(rb'"traceEvents"\s*:\s*\[\s*')
_TAIL = re.compile(
    rb'\]\s*(?:,\s*"[^"]*"\s*:\s*(?:"[^"]*"|-?[0-9.eE+-]+|true|false|null|\{[^{}]*\})\s*)*\}?\s*$'
)
_DISPLAY_UNIT = re.compile(rb'"displayTimeUnit"\s*:\s*"([^"]*)"')
_GZIP_MAGIC = b"\x1f\x8b"


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


def skip_head(buf: bytes, report: ReadReport) -> bytes:
    """``buf`` (the file's first bytes, at least 4 KiB unless the file is shorter) without the text
    before the first event; what was found (header, bare comma, junk) is recorded in ``report``."""
    stripped = buf.lstrip()
    m = _HEAD_OBJECT.match(buf)
    if m:
        return _skip_comma(buf[m.end():], report)
    if stripped.startswith(b"{"):
        # Either an object whose first key is not traceEvents, or a bare event (no header).
        m = _HEAD_ANY_KEY.search(buf, 0, 4096)
        if m and not _looks_like_event_start(stripped):
            return _skip_comma(buf[m.end():], report)
        report.missing_head = True
        return stripped
    if stripped.startswith(b"["):
        return _skip_comma(stripped[1:].lstrip(), report)
    if stripped.startswith(b","):
        report.leading_comma = True
        rest = stripped[1:].lstrip()
        if not rest.startswith(b"{"):
            return _drop_to_brace(rest, report)
        report.missing_head = True
        return rest
    if not stripped:
        return stripped
    return _drop_to_brace(stripped, report)


def _skip_comma(rest: bytes, report: ReadReport) -> bytes:
    """After ``{"traceEvents": [`` or ``[``: skip the bare comma MXNet writes before the first
    event of a second session (``[,``), which would otherwise cost that event."""
    if rest.startswith(b","):
        report.leading_comma = True
        return rest[1:].lstrip()
    return rest


def _drop_to_brace(buf: bytes, report: ReadReport) -> bytes:
    i = buf.find(b"{")
    if i < 0:
        i = len(buf)
    if i:
        report.dropped_fragments += 1
        report.dropped_bytes += i
    report.missing_head = True
    return buf[i:]


def strip_tail(buf: bytes, report: ReadReport) -> bytes:
    """``buf`` (the file's last bytes) without the closing ``]`` and trailing keys; their absence
    (and the ``displayTimeUnit`` when present) is recorded in ``report``."""
    end = buf.rstrip()
    j = end.rfind(b"]")
    if j >= 0:
        m = _TAIL.match(end, j)
        if m:
            u = _DISPLAY_UNIT.search(end, j)
            if u:
                report.display_time_unit = u.group(1).decode("utf-8", "replace")
            return end[:j].rstrip()
    report.missing_tail = True
    # A crash can leave a dangling separator.
    return end[:-1] if end.endswith(b",") else end


def _looks_like_event_start(text: bytes) -> bool:
    return re.match(rb'\{\s*"(?:name|ph|cat|ts|pid|tid|args)"', text) is not None


def last_separator(buf: bytes | mmap.mmap, start: int = 0,
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
        m = EVENT_SEPARATOR.match(buf, pos, stop)
        if m:
            return pos + 1, m.end() - 1
