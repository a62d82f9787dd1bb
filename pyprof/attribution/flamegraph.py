"""Folded stacks of a trace for flame graphs: ``device;thread;[frames;]operator N``.

One line per distinct stack, ``N`` the operator time in whole microseconds, the format
flamegraph.pl, inferno and speedscope read. Today's traces carry no call stacks, so a stack is
device;thread;operator; an operator event that carries the call-stack arg named in
``pyprof/spec/attribution.json`` (``trace_args.stack``, ``"pyprof.stack"``: frames
``"file:line function"``, outermost first) gets those frames between thread and operator.
Frames are escaped as the spec's ``flamegraph.escape`` says, so a ``;`` or a space in a frame
never breaks a line. Pure Python over the trace file: no C function is called.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

from .. import rules
from ..trace.reader import iter_events
from ..trace.slices import closed_slices
from ..trace.writer import check_output


_SPEC: dict[str, Any] = rules.spec("attribution.json")
_FG: dict[str, Any] = _SPEC["flamegraph"]
#: Name of the call-stack arg on an operator event (a list of "file:line function" frames).
STACK_ARG: str = _SPEC["trace_args"]["stack"]
_CATEGORIES = frozenset(_FG["categories"])
_ESCAPE = str.maketrans(_FG["escape"])


def escape(frame: Any) -> str:
    """A frame as it may appear in a folded line: the spec's characters percent-encoded."""
    return str(frame).translate(_ESCAPE)


@dataclasses.dataclass(frozen=True)
class FoldedStacks:
    """Folded stacks of one or more traces.

    Attributes:
        weights: stack (tuple of unescaped frames) -> operator time in microseconds (exact:
            int, or float when a duration in the trace is fractional).
        events: operator events counted.
    """

    weights: dict[tuple[str, ...], int | float]
    events: int

    @property
    def total_us(self) -> int | float:
        """All operator time counted, in microseconds."""
        return sum(self.weights.values())

    def lines(self) -> list[str]:
        """The folded lines, sorted by stack, weights in whole microseconds that add up to the
        rounded total (largest remainder); stacks of 0 us are left out."""
        stacks = sorted(self.weights)
        exact = [self.weights[s] for s in stacks]
        whole = [math.floor(w) for w in exact]
        short = round(sum(exact)) - sum(whole)
        for i in sorted(range(len(exact)), key=lambda i: whole[i] - exact[i])[:max(short, 0)]:
            whole[i] += 1
        return [f"{';'.join(escape(f) for f in s)} {n}" for s, n in zip(stacks, whole) if n > 0]

    def text(self) -> str:
        """The folded file's text (one line per stack, newline-terminated)."""
        return "".join(line + "\n" for line in self.lines())


def _frames(args: Any) -> list[str]:
    stack = args.get(STACK_ARG) if isinstance(args, dict) else None
    return [str(f) for f in stack] if isinstance(stack, list) else []


def folded(traces: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
           progress: bool | None = None) -> FoldedStacks:
    """Fold the operator events of ``traces`` (plain or gzip, damaged ones as far as they read)
    into stacks weighted by operator time (microseconds): B/E pairs per thread, matched by
    name (an unnamed end closes the innermost), and X events; async copies are not counted.

    Raises:
        TraceNotFoundError: a file cannot be opened.
        TraceFormatError: a file holds no trace events.
    """
    paths = [traces] if isinstance(traces, (str, os.PathLike)) else list(traces)
    weights: dict[tuple[str, ...], int | float] = {}
    count = 0
    for path in paths:
        for stack, dur in _durations(iter_events(path, progress=progress)):
            weights[stack] = weights.get(stack, 0) + dur
            count += 1
    return FoldedStacks(weights, count)


def _durations(events: Iterable[dict[str, Any]]) -> Iterable[tuple[tuple[str, ...], int | float]]:
    """(stack, duration) of every operator event, in file order of the ends."""
    devices: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for _, ev, closed in closed_slices(events):
        if ev.get("ph") == "M":
            name = (ev.get("args") or {}).get("name")
            if ev.get("name") == "process_name" and name is not None:
                devices[ev.get("pid")] = str(name)
            elif ev.get("name") == "thread_name" and name is not None:
                threads[(ev.get("pid"), ev.get("tid"))] = str(name)
        elif closed is not None and ev.get("cat", closed[1].get("cat")) in _CATEGORIES:
            _, begin, dur = closed
            pid, tid = begin.get("pid"), begin.get("tid")
            device = devices.get(pid, _FG["device_label"].format(pid=pid))
            thread = threads.get((pid, tid), _FG["thread_label"].format(tid=tid))
            frames = _frames(begin.get("args")) or _frames(ev.get("args"))
            yield (device, thread, *frames, str(begin.get("name"))), dur


@dataclasses.dataclass(frozen=True)
class FoldedResult:
    """What :func:`write_folded` wrote: the path, its lines and the operator time (us)."""

    out: str
    stacks: int
    total_us: int | float
    events: int


def write_folded(traces: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                 out: str | os.PathLike[str], *, progress: bool | None = None) -> FoldedResult:
    """Write the folded stacks of ``traces`` to ``out`` (see :func:`folded`).

    Raises:
        TraceError: ``out`` cannot be written (``trace.bad_output``, checked before reading).
        TraceNotFoundError, TraceFormatError: as :func:`folded`.
    """
    check_output(out, example="stacks.folded",
                 inputs=[traces] if isinstance(traces, (str, os.PathLike)) else traces)
    fs = folded(traces, progress=progress)
    lines = fs.lines()
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(line + "\n" for line in lines))
    return FoldedResult(os.fspath(out), len(lines), fs.total_us, fs.events)
