"""Where the events are in a trace file's text: opening, head, separators, tail.

The reader (:class:`~pyprof.trace.reader.TraceReader`) cuts a trace into *bodies*, runs of whole
events separated by ``,``, without parsing it:

1. The file (plain or gzip, detected from the magic bytes) is opened with :func:`open_binary`.
2. The text before the first event (``{"traceEvents": [``, other top-level keys before it,
   ``[``, a bare ``,``, or the header followed by a bare comma, ``{"traceEvents": [,``, as MXNet
   writes for a second session) is recognised and skipped by :func:`skip_head`.
3. Events are separated by ``}``, optional whitespace, ``,``, optional whitespace, ``{``
   (:data:`EVENT_SEPARATOR`); each chunk read is cut after its last separator
   (:func:`last_separator`) and the rest carried into the next chunk.
4. At end of file MXNet's closing ``]`` and ``}`` are stripped by :func:`strip_tail`; any other
   end (more top-level keys, or none: a missing tail) is left to the body parser, which finds
   the end of the events array from the JSON structure (:mod:`pyprof.trace.jsonscan`).

What was found is recorded in a :class:`~pyprof.trace.readreport.ReadReport`.
"""

from __future__ import annotations

import mmap
import os
import re
import zlib
from typing import IO

from .. import rules
from .jsonscan import ObjectScan, scan_object
from .phases import TOP_LEVEL
from .readreport import ReadReport


#: Separator between two events: ``}`` , ``{`` with any whitespace around the comma.
EVENT_SEPARATOR = re.compile(rb"\}\s*,\s*\{")
_HEAD_OBJECT = re.compile(rb'\s*\{\s*"traceEvents"\s*:\s*\[\s*')
_HEAD_ANY_KEY = re.compile(rb'"traceEvents"\s*:\s*\[\s*')
_TAIL = re.compile(
    rb'\]\s*(?:,\s*"[^"]*"\s*:\s*(?:"[^"]*"|-?[0-9.eE+-]+|true|false|null|\{[^{}]*\})\s*)*\}?\s*$'
)
_DISPLAY_UNIT = re.compile(rb'"displayTimeUnit"\s*:\s*"([^"]*)"')
_GZIP_MAGIC = b"\x1f\x8b"
KEPT_KEYS = frozenset(TOP_LEVEL["kept_by_writers"])
_NOT_OTHER = frozenset({*TOP_LEVEL["events"], TOP_LEVEL["display_time_unit"]})


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
        raise rules.error("trace.cannot_open", path=os.fspath(path), shown=repr(os.fspath(path)),
                          why=exc.strerror) from exc
    magic = raw.read(2)
    raw.seek(0)
    if magic == _GZIP_MAGIC:
        return GunzipStream(raw), raw
    return raw, raw


class GunzipStream:
    """Decompressed text of a gzip file (several members too), read in order.

    Unlike :class:`gzip.GzipFile`, a stream cut short (a crash while writing) gives every byte
    that can be decoded and then ends, with :attr:`truncated` set, instead of raising and losing
    the last read.
    """

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.truncated = False
        self._d = zlib.decompressobj(31)
        self._fed = False  # the current member has input
        self._buf = bytearray()
        self._eof = False

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all the rest when ``n < 0``); ``b""`` at the end."""
        while (n < 0 or len(self._buf) < n) and not self._eof:
            data = self.raw.read(1 << 20)
            if not data:
                self._eof = True
                self.truncated = self._fed and not self._d.eof
                break
            while data:
                self._fed = True
                try:
                    self._buf += self._d.decompress(data)
                except zlib.error:
                    self._eof = self.truncated = True
                    break
                if not self._d.eof:
                    break
                data = self._d.unused_data  # the next member, or padding
                self._d, self._fed = zlib.decompressobj(31), False
                if data and not data.startswith(_GZIP_MAGIC):
                    self._eof = True  # trailing bytes that start no member: ignored, as gzip does
                    break
        if n < 0:
            n = len(self._buf)
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def close(self) -> None:
        self.raw.close()


def is_gzip(path: str | os.PathLike[str]) -> bool:
    """True when the file starts with the gzip magic bytes.

    Raises:
        TraceNotFoundError: the file cannot be opened.
    """
    stream, raw = open_binary(path)
    stream.close()
    raw.close()
    return stream is not raw


def skip_head(buf: bytes, report: ReadReport, eof: bool = True) -> bytes | None:
    """``buf`` (the file's first bytes, at least 4 KiB unless the file is shorter) without the text
    before the first event; what was found (header, other top-level keys, bare comma, junk) is
    recorded in ``report``. ``None``: the top-level keys before ``traceEvents`` run past ``buf``
    and ``eof`` is false (read more and call again)."""
    stripped = buf.lstrip()
    m = _HEAD_OBJECT.match(buf)
    if m:
        return _skip_comma(buf[m.end():], report)
    if stripped.startswith(b"{"):
        if _looks_like_event_start(stripped):
            report.missing_head = True  # a bare event: the header is missing
            return stripped
        scan = scan_object(stripped, 1, first=True, keep=KEPT_KEYS)
        if scan.status == "incomplete" and not eof:
            return None
        _record_keys(report, scan)
        if scan.status == "events":
            return _skip_comma(stripped[scan.end:].lstrip(), report)
        if scan.status == "closed" and not stripped[scan.end:].strip():
            return b""  # an object without traceEvents: not a trace
        report.missing_head = True
        return _drop_to_brace(stripped, report)
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


def skip_seam(rest: bytes) -> bytes:
    """The events after a finished trace object inside the file (MXNet appends each further
    ``dump()``): without the ``,`` and the new ``{"traceEvents": [`` (and its bare ``,``)."""
    rest = rest.lstrip()
    if rest.startswith(b","):
        rest = rest[1:].lstrip()
    m = _HEAD_OBJECT.match(rest)
    if m:
        rest = rest[m.end():]
        if rest.startswith(b","):
            rest = rest[1:].lstrip()
    return rest


def _record_keys(report: ReadReport, scan: ObjectScan) -> None:
    """Note the top-level keys other than ``traceEvents`` and keep the small ones writers keep."""
    for key in scan.keys:
        if key not in _NOT_OTHER and key not in report.other_keys:
            report.other_keys.append(key)
    report.top_level.update(scan.values)
    unit = scan.values.get(TOP_LEVEL["display_time_unit"])
    if isinstance(unit, str):
        report.display_time_unit = unit


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


def strip_tail(buf: bytes, report: ReadReport) -> bytes | None:
    """``buf`` (the file's last bytes) without MXNet's closing ``]``, ``"displayTimeUnit"`` and
    ``}`` (recorded in ``report``); ``None`` when the end is not that simple (other top-level keys,
    no closing at all): the body parser then finds the end of the events from the structure."""
    end = buf.rstrip()
    j = end.rfind(b"]")
    if j >= 0:
        m = _TAIL.match(end, j)
        if m:
            scan = scan_object(end, j + 1, first=False, keep=KEPT_KEYS)
            if scan.status == "closed":
                _record_keys(report, scan)
            else:  # a bare array's "]", or a "}" missing: only the time unit, as written
                u = _DISPLAY_UNIT.search(end, j)
                if u:
                    report.display_time_unit = u.group(1).decode("utf-8", "replace")
            return end[:j].rstrip()
    return None


def record_tail(report: ReadReport, scan: ObjectScan) -> None:
    """Note the top-level keys found after the events array (see :func:`skip_head`)."""
    _record_keys(report, scan)


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
