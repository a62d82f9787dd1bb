"""Windows of profiling sessions: byte ranges of a raw MXNet trace, written as valid traces.

A window is the range ``[start, end)`` of the raw trace MXNet appends to (see
:mod:`pyprof.session` for the design). It is read by the grammar of trace.json ``mxnet_layout``
(:func:`pyprof.trace.mxnet_layout.parse_raw`, as the JVM reads it: the header only in the first
range, leading or trailing commas, names copied unescaped, a last event cut short dropped), and
written as a new, compact, valid Chrome trace with every metadata event
this process has seen first, by the raw-file functions one layer down
(:mod:`pyprof.process.rawfile`: ``read_range``, ``METADATA``). Package-internal: the public
names are re-exported by :mod:`pyprof.session`.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from typing import Any

import orjson

from ..process.rawfile import METADATA


#: Suffix of the file beside an open window that names its raw trace (for recovery).
PARTIAL = ".partial"


@dataclasses.dataclass(frozen=True)
class Window:
    """One recorded window, saved as a valid Chrome trace.

    Attributes:
        index: 0 for the first window of the session, then 1, 2, ...
        path: absolute path of the trace file.
        first_step, last_step: the session steps recorded (``last_step`` included).
        events: events written (metadata included).
        start_us, end_us: the real time span the window recorded: when the profiler started
            recording into it and when it stopped, in microseconds since the epoch (the clock
            of the trace's ``ts``). ``end_us`` is None for a window rebuilt by
            :func:`pyprof.recover`.
        truncated: True when the window stopped recording at the raw trace's cap (``api.json``
            ``raw_trace`` ``max_bytes``, ``$PYPROF_RAW_MAX_BYTES``): it holds the events up to
            that point, none of its later steps (:attr:`end_us` is when it stopped).
        attribution: with ``record_shapes``/``with_stack``/``with_flops``, what matching the
            recorded calls to the window's operator events found
            (:class:`pyprof.attribution.matching.MatchReport`); else None.
    """

    index: int
    path: str
    first_step: int
    last_step: int
    events: int
    start_us: int | None = None
    end_us: int | None = None
    truncated: bool = False
    attribution: Any = None

    def stats(self, **options: Any):
        """Exact statistics of this window: :func:`pyprof.trace.stats` on :attr:`path`."""
        from ..trace import stats
        return stats(self.path, **options)

    def summary(self, **options: Any) -> str:
        """Text summary of this window (:func:`pyprof.trace.summarize`); notes bulk names, and
        a first line when the window is :attr:`truncated`."""
        from ..trace import summarize
        text = summarize(self.path, **options)
        if self.truncated:
            from .. import rules
            text = rules.render(str(rules.API["raw_trace"]["truncated_summary"]),
                                {"env": rules.API["raw_trace"]["max_env"]}) + "\n" + text
        return text


class OpenWindow:
    """The window being recorded: its index, where it starts in the raw trace, and when."""

    __slots__ = ("index", "start", "first_step", "path", "start_us", "truncated", "steps")

    def __init__(self, index: int, start: int, first_step: int, path: str,
                 start_us: int) -> None:
        self.index, self.start, self.first_step = index, start, first_step
        self.path, self.start_us = path, start_us
        self.truncated = False  # stopped recording at the raw trace's cap
        # (step, began_us) of each step recorded: the window's step marks (stepmarks.py)
        self.steps: list[tuple[int, int]] = [(first_step, start_us)]


class EndedWindow:
    """A window whose recording stopped, not yet cut: where and when it ended; ``tail``: its
    cut begun before MXNet's last append (:func:`pyprof.process.rawfile.follow`), or None."""

    __slots__ = ("window", "end", "end_us", "last_step", "tail")

    def __init__(self, window: OpenWindow, end: int, end_us: int, last_step: int,
                 tail: Any = None) -> None:
        self.window, self.end, self.end_us, self.last_step = window, end, end_us, last_step
        self.tail = tail


def now_us() -> int:
    """Now, in microseconds since the epoch (MXNet's ``ts`` clock)."""
    return time.time_ns() // 1000


def write_partial(path: str, raw: str, start: int, index: int, start_us: int,
                  end: int | None = None) -> None:
    """Record where a window starts (``<path>.partial``), so that ``recover`` works after a
    crash; ``end`` once it ended (not cut yet). The JVM layer writes the same format."""
    info = {"raw": raw, "start": start, "window": index, "pid": os.getpid(),
            "start_us": start_us, "metadata": list(METADATA.values())}
    if end is not None:
        info["end"] = end
    # atomically: a process killed while writing must not leave a cut .partial (the temporary
    # file is named with the pid, so that the next start deletes it); a window directory
    # removed while the session runs is made again, as the JVM does: nothing recorded is lost
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".pyprof-{os.getpid()}-", suffix=".tmp",
                               dir=os.path.dirname(path) or ".")
    with os.fdopen(fd, "wb") as f:
        f.write(orjson.dumps(info))
    os.replace(tmp, path + PARTIAL)
