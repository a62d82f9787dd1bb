"""What the trace reader found and fixed in one file: :class:`ReadReport`."""

from __future__ import annotations

import dataclasses
from typing import Any


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
        other_keys: top-level keys other than ``traceEvents`` (``stackFrames``, ``otherData``, ...).
        top_level: the values of ``displayTimeUnit``, ``otherData`` and ``metadata`` (when at most
            1 MiB), by key, which the writers keep.
        carried_events: events cut in two by a ``}, {`` inside their ``args`` at a read boundary,
            read whole by joining the two parts (not damage).
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
    other_keys: list[str] = dataclasses.field(default_factory=list)
    top_level: dict[str, Any] = dataclasses.field(default_factory=dict)
    carried_events: int = 0

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
