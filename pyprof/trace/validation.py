"""Check a trace against what every trace pyprof writes guarantees (docs/trace-format.md).

:func:`validate` is independent of the writers: it reads the file with
:class:`~pyprof.trace.reader.TraceReader`, pairs ``B``/``E`` events by the documented rules
(:class:`~pyprof.trace.slices.Pairing`) and checks, per thread, that slices nest with its own
sort and stack.
"""

from __future__ import annotations

import dataclasses
import json
import os
from array import array
from typing import Any

import numpy as np

from .errors import TraceFormatError, TraceNotFoundError
from .ids import id_key, id_values, is_safe_id
from .reader import TraceReader, open_binary
from .slices import SLICE_PHASES, Pairing, is_number, track_of


#: The checks, by key of :attr:`ValidationResult.counts`, and what each finds.
CHECKS = {
    "json": "the file is not valid JSON (json.loads of it, or of its gzip content, fails)",
    "no_trace_events": 'the top level is not an object with a "traceEvents" list',
    "not_an_object": 'entries of traceEvents that are not JSON objects with a "ph" field',
    "untimed": "B/E/X events without a numeric ts (or X events without a numeric dur)",
    "negative_duration": "slices with a negative duration (X with dur < 0, or an E before its B)",
    "unmatched_begin": "B events without an E",
    "unmatched_end": "E events without a B",
    "overlap": "slices that partially overlap another slice of their thread (pid, tid)",
    "unsafe_id": "pid, tid, id, bind_id or id2 values that are neither strings nor integers "
                 "below 2**53 in magnitude",
}

_WHOLE_FILE = frozenset({"json", "no_trace_events"})  # said without a count


@dataclasses.dataclass(frozen=True)
class ValidationResult:
    """What :func:`validate` found.

    Attributes:
        path: the file checked.
        events: events read.
        counts: ``{check: number of offences}`` for each check of :data:`CHECKS` that failed.
        problems: one short line per failed check, with its count (the whole-file checks,
            ``json`` and ``no_trace_events``, without).
    """

    path: str
    events: int
    counts: dict[str, int]
    problems: list[str]

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return not self.problems


def validate(path: str | os.PathLike[str], *, progress: bool | None = None) -> ValidationResult:
    """Check that a trace is valid for Perfetto and chrome://tracing, as pyprof writes them.

    Checks (see :data:`CHECKS`): the file is JSON with a ``traceEvents`` list; per ``(pid, tid)``
    the slices (``X`` events and ``B``/``E`` pairs, paired as in docs/trace-format.md) nest
    properly (touching slices and equal intervals nest; times in microseconds); no negative
    duration; every ``B`` has an ``E`` and every ``E`` a ``B``; every ``pid``, ``tid``, ``id``,
    ``bind_id`` and ``id2`` value is a string or an integer below 2**53 in magnitude. A trace
    with an empty ``traceEvents`` list is valid.

    Memory: the JSON check loads the whole file once (``json.loads``); the other checks stream,
    keeping per thread two numbers per slice.

    Args:
        path: plain or gzip trace.
        progress: tqdm bar while streaming (see :class:`~pyprof.trace.reader.TraceReader`).

    Returns:
        :class:`ValidationResult`; ``ok`` is True when every check passed.

    Raises:
        TraceNotFoundError: ``path`` cannot be opened.
    """
    src = os.fspath(path)
    counts: dict[str, int] = {}
    details: dict[str, str] = {}
    _check_json(src, counts, details)
    checker = _Checker()
    reader = TraceReader(src, progress=progress)
    try:
        for ev in reader:
            checker.add(ev)
    except TraceFormatError:
        if "json" in counts:  # else the JSON check has said what is wrong, or nothing is
            counts["no_trace_events"] = 1
    except TraceNotFoundError:
        raise
    except (OSError, EOFError) as exc:  # a gzip stream cut short: the JSON check failed too
        counts["json"] = 1
        details.setdefault("json", str(exc))
    checker.finish(counts, details)
    problems = [("" if k in _WHOLE_FILE else f"{counts[k]} ") + CHECKS[k]
                + (f" ({details[k]})" if k in details else "") for k in CHECKS if counts.get(k)]
    return ValidationResult(src, reader.report.events, counts, problems)


def _check_json(path: str, counts: dict[str, int], details: dict[str, str]) -> None:
    """The whole-file checks: JSON, a ``traceEvents`` list, events that are objects."""
    stream, _raw = open_binary(path)
    try:
        text = stream.read()
    except OSError as exc:
        counts["json"] = 1
        details["json"] = str(exc)
        return
    finally:
        stream.close()
    if getattr(stream, "truncated", False):
        counts["json"] = 1
        details["json"] = "gzip stream ended before the end-of-stream marker was reached"
        return
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        counts["json"] = 1
        details["json"] = str(exc)[:200]
        return
    del text
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        counts["no_trace_events"] = 1
        return
    bad = sum(1 for ev in events if not (isinstance(ev, dict) and "ph" in ev))
    if bad:
        counts["not_an_object"] = bad


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON; fix: write it as null or a number")


class _Checker:
    """The streaming checks: ids, times, pairing, and per thread the intervals of the slices."""

    def __init__(self) -> None:
        self.pairing = Pairing()
        self.begin: dict[Any, list[Any]] = {}
        self.end: dict[Any, list[Any]] = {}
        self.counts: dict[str, int] = {}
        self.unsafe: dict[str, int] = {}

    def _count(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def add(self, ev: dict[str, Any]) -> None:
        for _kind, field, value in id_values(ev):
            if not is_safe_id(value):
                self.unsafe[field] = self.unsafe.get(field, 0) + 1
        ph = ev.get("ph")
        if ph not in SLICE_PHASES:
            return
        ts = ev.get("ts")
        if not is_number(ts):
            self._count("untimed")
            return
        track = track_of(ev)
        name = ev.get("name")
        name = None if name is None else id_key(name)
        if ph == "X":
            dur = ev.get("dur")
            if not is_number(dur):
                self._count("untimed")
            elif dur < 0:
                self._count("negative_duration")
            else:
                self._interval(track, ts, ts + dur)
        elif ph == "B":
            self.pairing.begin(track, name, ts)
        else:
            begin = self.pairing.end(track, name)
            if begin is None:
                self._count("unmatched_end")
            elif ts < begin:
                self._count("negative_duration")
            else:
                self._interval(track, begin, ts)

    def _interval(self, track: Any, begin: Any, end: Any) -> None:
        b = self.begin.get(track)
        if b is None:
            b = self.begin[track] = []
            self.end[track] = []
        b.append(begin)
        self.end[track].append(end)

    def finish(self, counts: dict[str, int], details: dict[str, str]) -> None:
        unmatched = sum(1 for _ in self.pairing.still_open())
        if unmatched:
            self._count("unmatched_begin", unmatched)
        first = None
        for track, begins in self.begin.items():
            n, example = _overlaps(begins, self.end[track])
            if n:
                self._count("overlap", n)
                if first is None:
                    first = f"first on pid {track[0]!r}, tid {track[1]!r}: {example}"
        if first:
            details["overlap"] = first
        if self.unsafe:
            self._count("unsafe_id", sum(self.unsafe.values()))
            details["unsafe_id"] = ", ".join(f"{f}: {n}" for f, n in self.unsafe.items())
        for k, v in self.counts.items():
            counts[k] = counts.get(k, 0) + v


def _overlaps(begins: list[Any], ends: list[Any]) -> tuple[int, str]:
    """How many slices of one thread partially overlap an enclosing one, and the first such pair.

    Sorted by (begin ascending, end descending), each slice must end within the innermost slice
    still open at its begin; one that does not is counted and left off the stack.
    """
    b = _numbers(begins)
    e = _numbers(ends)
    order = np.lexsort((-e, b))
    stack: list[tuple[Any, Any]] = []
    bad = 0
    example = ""
    for lo, hi in zip(b[order].tolist(), e[order].tolist()):
        while stack and stack[-1][1] <= lo:
            stack.pop()
        if stack and hi > stack[-1][1]:
            bad += 1
            if not example:
                example = f"[{lo}, {hi}] us overlaps [{stack[-1][0]}, {stack[-1][1]}] us"
            continue
        stack.append((lo, hi))
    return bad, example


def _numbers(values: list[Any]) -> np.ndarray:
    """int64 when every value is an integer that fits, else float64."""
    if all(type(v) is int for v in values):
        try:
            return np.frombuffer(array("q", values), dtype=np.int64)
        except OverflowError:
            pass
    return np.asarray(values, dtype=np.float64)
