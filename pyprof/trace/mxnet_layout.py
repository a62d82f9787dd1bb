"""MXNet's own trace layout, read by the grammar of ``trace.json`` ``"mxnet_layout"``.

MXNet 1.9.1 writes every event as fixed lines, one field per line, and copies string values
without JSON escaping (a name may hold a back slash or a quote). Bytes MXNet itself wrote (a
range of the raw trace a session appends to, a trace file MXNet appended to) are read here, by
the grammar stated as data in the spec, as the JVM's ``pyprof.trace.reader/parse-raw`` reads
them: both languages give the same events for the same bytes
(``tests/cases/mxnet_layout.json``). General files of unknown origin go to
:class:`pyprof.trace.TraceReader`, which uses :func:`escape_lines` once a file
:func:`shows_raw_layout`.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from .. import rules


_LAYOUT = rules.spec("trace.json")["mxnet_layout"]
_HEADER = re.compile(_LAYOUT["header"])
_FOOTER = re.compile(_LAYOUT["footer"])
_LINES = [re.compile(p, re.MULTILINE) for p in _LAYOUT["raw_string_lines"]]
_WHOLE_EVENT_END = re.compile(r"(?m)^\s*\}\s*$")
# A field line of an event as MXNet's EmitSubEvent writes it (8 spaces: an event of the
# traceEvents array at 4), which no JSON writer's indentation of {"traceEvents": [...]} gives.
_SUB_EVENT_FIELD = re.compile(rb'(?m)(?:^    |\A)\{\n        "name": "')


# The same lines where the raw value holds what JSON escapes (mxnet_layout "escaped"): escaping
# any other value leaves it as it is, so only these are rewritten, without a Python call for
# each of a window's millions of plain lines.
_NEEDING = [re.compile(p.pattern.replace("(.*)", f"(.*?{_LAYOUT['escaped']}.*)", 1), re.MULTILINE)
            for p in _LINES]
assert all(n.pattern != p.pattern for n, p in zip(_NEEDING, _LINES)), "a value group (.*)"


def _escape(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)[1:-1]


def escape_lines(text: str) -> str:
    """``text`` with group 2 (the raw value) of every line a ``raw_string_lines`` pattern
    matches in full JSON-escaped, between groups 1 and 3."""
    for line in _NEEDING:
        text = line.sub(lambda m: m.group(1) + _escape(m.group(2)) + m.group(3), text)
    return text


def shows_raw_layout(body: bytes) -> bool:
    """True when ``body`` (bytes of a trace) is MXNet's own layout with raw strings, as far as
    that can be decided: its events are laid out line by line as MXNet writes them (an event at
    4 spaces whose fields are at 8, which no indenting JSON writer gives a
    ``{"traceEvents": [...]}`` object), and at least one string value on a ``raw_string_lines``
    line is no JSON string (a back slash before a letter JSON has no escape for, a lone quote,
    a back slash at the end), so its writer did not escape. A layout whose strings all read
    as JSON (``C:\\tmp`` alone) cannot be told from an escaped one and is read as JSON."""
    if _SUB_EVENT_FIELD.search(body) is None:
        return False
    text = body.decode("utf-8", "replace")
    for line in _LINES:
        for m in line.finditer(text):
            try:
                orjson.loads('"' + m.group(2) + '"')
            except orjson.JSONDecodeError:
                return True
    return False


def _parse_array(body: str) -> list[Any]:
    text = "[" + body + "]"
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)  # an integer over 64 bits (orjson's limit), else the error


# Every byte but the quote and the line end: deleting them leaves each line's quotes, so that a
# line with more than 4 (a raw value holding a quote) shows as 5 in a row.
_NOT_QUOTE_OR_LINE_END = bytes(b for b in range(256) if b not in b'"\n')


def parse_run(run: bytes) -> list[Any]:
    """The events of ``run``, bytes of whole events in MXNet's layout separated by commas (no
    header, no footer, no comma at either end), as :func:`parse_raw` reads them, without the
    Python work of escaping when no line can need it: the bytes are parsed as they are unless
    they hold a back slash, a line with more than 4 quotes (a raw value holding one), or what
    orjson refuses (a control character in a value, bytes that are not UTF-8, an integer past
    64 bits); only then are they decoded and escaped line by line, as :func:`parse_raw` does.

    Raises:
        ValueError: the bytes do not parse (an event cut short, no such layout); the caller
            reads them with :func:`parse_raw`, which drops a last event cut short.
    """
    if b"\\" not in run and b'"""""' not in run.translate(None, _NOT_QUOTE_OR_LINE_END):
        try:
            return orjson.loads(b"[" + run + b"]")
        except orjson.JSONDecodeError:
            pass  # a value holding a control character, not UTF-8, a big integer: as parse_raw
    return _parse_array(escape_lines(run.decode("utf-8", "replace")))


def parse_raw(text: str, where: str = "the raw trace") -> list[dict[str, Any]]:
    """The events in ``text``, bytes of a trace in MXNet's own layout (trace.json
    ``"mxnet_layout"``): a leading header and trailing footer removed, leading and trailing
    commas, raw string values JSON-escaped, parsed; a last event cut short (a crash) dropped.

    Raises:
        TraceFormatError: ``trace.not_valid``, text in no such layout (``where`` names it).
    """
    body = _FOOTER.sub("", _HEADER.sub("", text, count=1), count=1)
    body = escape_lines(re.sub(r"^[\s,]+", "", body)).rstrip().rstrip(",").rstrip()
    while body.endswith(","):
        body = body.rstrip(",").rstrip()
    if not body:
        return []
    # where the text may end: all of it, else after a '}' followed by one event cut short
    ends = [len(body)]
    at = body.rfind("}")
    while at >= 0 and not _WHOLE_EVENT_END.search(body[at + 1:]):
        ends.append(at + 1)
        at = body.rfind("}", 0, at)
    for end in ends:
        try:
            return _parse_array(body[:end])
        except ValueError:
            continue
    if body.startswith("{") and "\n    }\n" not in body:
        return []  # one event, cut short
    raise rules.error("trace.not_valid", path=where, why="not MXNet's trace layout")
