"""Turning a body of trace text into events, repairing what MXNet writes wrong.

A body (see :mod:`pyprof.trace.framing`) is parsed with **one** ``orjson.loads`` call (fast path).
If that call fails (an unescaped quote in a name, a broken seam), the body is split at every
separator and each piece is parsed alone; a piece that still fails is repaired (quotes, back
slashes and control characters inside ``name``/``cat``/``args`` strings are escaped by
:func:`escape_piece`), then joined with following pieces (a separator inside a string), and
dropped, counted, only as a last resort. A piece holding a finished trace's ``]}`` (MXNet appends a
second ``dump()`` after it) is cut there and both sides are kept.

Only JSON objects with a ``ph`` field are trace events; any other value (``{"foo": 1}``, a number)
is dropped and counted. Repairs and drops are recorded in a
:class:`~pyprof.trace.readreport.ReadReport`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import orjson

from .framing import EVENT_SEPARATOR, KEPT_KEYS, record_tail, skip_seam
from .jsonscan import scan_object, split_values
from .naming import ASYNC_COPY_CATEGORIES
from .readreport import ReadReport


# A finished trace's closing "]}" in the middle of the file (a later dump appended after it), with
# the "," and possibly a new header before the next event: "}  ], "displayTimeUnit": "ms" } , ".
_SEAM = re.compile(
    rb'\}\s*\]\s*(?:,\s*"[^"]*"\s*:\s*(?:"[^"]*"|-?[0-9.eE+-]+|true|false|null|\{[^{}]*\})\s*)*'
    rb'\}\s*,?\s*(?:\{\s*"traceEvents"\s*:\s*\[\s*,?\s*)?'
)
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
_TAIL_SCAN_BYTES = 4 << 20  # a longer text after the events array is scanned once, at the end


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


class BodyParser:
    """Parse the bodies of one file, recording repairs in ``report``.

    Args:
        report: the file's report (``escaped_names``, ``dropped_*``, ``inner_tails`` are updated).
        exclude_categories: events of these categories are skipped (after parsing: a bytes test
            cannot tell an event's category from a name or an ``args`` value that holds the same
            text; the fast path of the statistics skips them before, where the layout is exact).
        drop_async_copies: skip MXNet's async ``b``/``e`` copies of operators likewise.

    Attributes:
        saw_event: set once a body held a trace event, parsed or skipped on purpose.
    """

    def __init__(self, report: ReadReport, exclude_categories: Iterable[str] = (),
                 drop_async_copies: bool = False):
        self.report = report
        self.excluded = frozenset(exclude_categories)
        self.copies = ASYNC_COPY_CATEGORIES if drop_async_copies else frozenset()
        self.skipped_cats = self.excluded | self.copies
        self.skip_marks = (_marks(self.excluded), _marks(self.copies)) if self.skipped_cats else None
        self.saw_event = False
        self.carry = b""
        self._sep = b","
        self._escaped: set[int] = set()  # ids of events repaired in this parse call
        self.tail: bytearray | None = None
        self.tail_closed = False

    @property
    def pending(self) -> bool:
        """True while the next body must come here (not to a caller's own parser): part of an
        event is carried into it, or the events array has ended."""
        return bool(self.carry) or self.tail is not None

    def parse(self, body: bytes, last: bool = False, end: bytes | None = None,
              sep: bytes = b",") -> list[dict[str, Any]]:
        """The trace events in ``body`` (whole events separated by ``,``), in order.

        ``last``: the file's last body. ``end``: the text the reader stripped after it (MXNet's
        ``]`` and ``}``); ``None`` for a last body that keeps the file's end as written (no
        simple end found), where this parser finds the end of the events from the structure,
        or reports it missing.
        """
        raw = last and end is None
        # The separator text between the previous body and this one, kept exactly where it
        # joins them again (a "}, {" inside a string is part of the string).
        before, self._sep = self._sep, sep
        if self.tail is not None:
            return self._feed_tail(body + end if last and end else body, last, before)
        if self.carry:
            body, self.carry = self.carry + before + body, b""
            self.report.carried_events += 1
        if raw:
            body = body.rstrip()
            if body.endswith(b","):
                body = body[:-1]  # a crash's dangling separator
        try:
            events = orjson.loads(b"[" + body + b"]")
        except orjson.JSONDecodeError:
            events = self._parse_structured(body, last, end)
            if events is None:
                self.report.missing_tail |= raw
                events = self._parse_pieces(body, carry=not last)
        else:
            self.report.missing_tail |= raw
            if not all(type(ev) is dict and "ph" in ev for ev in events):
                # Drop (and count) what is not an event, value by value.
                events = self._parse_structured(body, last, end)
                if events is None:  # pragma: no cover - orjson read it whole
                    events = self._parse_pieces(body)
        if events:
            self.saw_event = True
        if not self.skipped_cats:
            self._escaped.clear()
            return events
        return self._skip(events)

    def _skip(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``events`` without those skipped on purpose: excluded categories, async copies."""
        excluded = self.excluded
        out = []
        for ev in events:
            cat = ev.get("cat")
            if type(cat) is str and cat in self.skipped_cats and (
                    cat in excluded or ev.get("ph") in ("b", "e")):
                if id(ev) in self._escaped:
                    self.report.escaped_names -= 1  # repairs count for events kept only
                continue
            out.append(ev)
        self._escaped.clear()
        return out

    def finish(self) -> None:
        """End of file: a trailing part that never closed is reported (missing tail)."""
        if self.carry:
            self.report.dropped_fragments += 1
            self.report.dropped_bytes += len(self.carry)
            self.carry = b""
            self.report.missing_tail = True
        if self.tail is not None and not self.tail_closed:
            self._close_tail(final=True)
            if not self.tail_closed:
                self.report.missing_tail = True

    def _parse_structured(self, body: bytes, last: bool,
                          end: bytes | None) -> list[dict[str, Any]] | None:
        """Events of a body that is valid JSON apart from where it ends: an event cut by a
        separator inside its ``args`` (carried into the next body), or the end of the events
        array followed by more top-level keys. ``None``: the body is damaged otherwise."""
        spans, status, at = split_values(body)
        if status == "error":
            return None
        values = []
        for i, (a, b) in enumerate(spans):
            try:
                values.append(orjson.loads(body[a:b]))
            except orjson.JSONDecodeError:
                if i < len(spans) - 1 or status != "complete":
                    return None  # damage inside the body
                # The last value is an event cut inside a string at a "}, {" the reader took
                # for a separator: it ends where the scan lost track of the string.
                spans, status, at = spans[:-1], "incomplete", a
                break
        events = []
        for (a, b), v in zip(spans, values):
            if type(v) is dict and "ph" in v:
                events.append(v)
            else:
                self.report.dropped_fragments += 1
                self.report.dropped_bytes += b - a
        raw = last and end is None
        if status == "incomplete":  # a cut event, or damage the scan could not follow
            self.report.missing_tail |= raw
            events.extend(self._parse_pieces(body[at:], carry=not last))
        elif status == "array_end":
            self.tail = bytearray(body[at + 1:])
            self.tail += end or b""
            events.extend(self._close_tail(last))
        else:
            self.report.missing_tail |= raw
        return events

    def _feed_tail(self, body: bytes, final: bool, before: bytes) -> list[dict[str, Any]]:
        if self.tail_closed:  # more text after the closed trace object and what followed it
            self.report.dropped_fragments += 1
            self.report.dropped_bytes += len(body)
            return []
        self.tail += before  # a bytearray: appending costs no copy of what came before
        self.tail += body
        if final or len(self.tail) <= _TAIL_SCAN_BYTES:
            return self._close_tail(final)
        return []

    def _close_tail(self, final: bool) -> list[dict[str, Any]]:
        """Scan the text after the events array's ``]``: the trace object's other keys up to its
        ``}``. Text after that is another dump appended to the file: its events are parsed."""
        scan = scan_object(self.tail, 0, first=False, keep=KEPT_KEYS)
        if scan.status == "incomplete" and not final:
            return []
        record_tail(self.report, scan)
        if scan.status != "closed":  # cut short at the end of the file, or not JSON
            self.tail_closed = True
            rest = self.tail[scan.end:]
            if rest.strip():
                self.report.dropped_fragments += 1
                self.report.dropped_bytes += len(rest)
            self.report.missing_tail = True
            return []
        rest = bytes(self.tail[scan.end:])
        self.tail, self.tail_closed = None, False
        if not rest.strip():
            self.tail, self.tail_closed = bytearray(), True
            return []
        self.report.inner_tails += 1
        rest = skip_seam(rest)
        return self.parse(rest, final, b"" if final else None) if rest.strip() else []

    def _parse_pieces(self, body: bytes, carry: bool = False) -> list[dict[str, Any]]:
        """Events of a body that is not valid JSON, piece by piece (see the module docstring).
        ``carry``: trailing pieces that fail are kept for the next body instead of dropped."""
        spans = []
        start = 0
        for m in EVENT_SEPARATOR.finditer(body):
            spans.append((start, m.start() + 1))
            start = m.end() - 1
        spans.append((start, len(body)))
        out: list[dict[str, Any]] = []
        failed: list[tuple[int, int]] = []  # pieces not yet dropped: a trailing run is carried
        i = 0
        while i < len(spans):
            evs, used = self._parse_joined(body, spans, i)
            if evs is None:
                failed.append(spans[i])
                i += 1
                continue
            self._drop(failed, body)
            out.extend(evs)
            i += used
        if carry and failed:
            self.carry = body[failed[0][0]:]  # an event cut at the read boundary: join it
        else:
            self._drop(failed, body)
        return out

    def _drop(self, pieces: list[tuple[int, int]], body: bytes) -> None:
        """Count unreadable pieces as dropped, except those of events skipped on purpose (their
        category's bytes show: the statistics' fast path skips them unread, so neither counts)."""
        for a, b in pieces:
            if self.skip_marks and self._marked(body[a:b]):
                self.saw_event = True
                continue
            self.report.dropped_fragments += 1
            self.report.dropped_bytes += b - a
        pieces.clear()

    def _marked(self, piece: bytes) -> bool:
        excluded, copies = self.skip_marks
        if any(m in piece for m in excluded):
            return True
        return any(m in piece for m in copies) and any(m in piece for m in _ASYNC_PH)

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
                self._escaped.add(id(ev))
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


_ASYNC_PH = (b'"ph": "b"', b'"ph":"b"', b'"ph": "e"', b'"ph":"e"')


def _marks(cats: frozenset[str]) -> tuple[bytes, ...]:
    """The bytes that show an event's category in MXNet's and in compact layouts."""
    return tuple(m for c in sorted(cats) for m in (b'"cat": "%s"' % c.encode(), b'"cat":"%s"' % c.encode()))


def _try_load(text: bytes) -> dict[str, Any] | None:
    """The trace event in ``text``: a JSON object with a ``ph`` field, else ``None``."""
    try:
        ev = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return ev if isinstance(ev, dict) and "ph" in ev else None
