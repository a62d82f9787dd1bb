"""The raw-file functions: MXNet's trace files read and written again as valid traces, with
every metadata event this process has seen first (:data:`METADATA`).

One layer below the profiler API and sessions (docs/architecture.md, the layers), which both
use them: ``profiler.dump`` and :mod:`pyprof.process.keep_file` complete a finished file and
join kept parts, :mod:`pyprof.session.windows` cuts windows, and the JPype bridge lends
:data:`METADATA` to the JVM (:mod:`pyprof.bridge.metadata`). The byte work is
:mod:`pyprof.trace.rawcut`'s, imported when first needed, so that ``import pyprof`` does not
load the trace package. Package-internal.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable, Sequence
from typing import Any

import orjson

#: Every metadata event (``ph == "M"``) this process has read from a raw trace, in order, by
#: :func:`metadata_key`. MXNet writes a ``process_name`` event per device only in its first
#: dump; every window carries all of them.
METADATA: dict[bytes, dict[str, Any]] = {}


def metadata_key(event: dict[str, Any]) -> bytes:
    """The identity of a metadata event (its canonical JSON)."""
    return orjson.dumps(event, option=orjson.OPT_SORT_KEYS)


def at_exit(fn: Callable[[], None]) -> None:
    """Register ``fn`` to run at interpreter exit, last (so before MXNet's own exit handler),
    with what a trace's finish imports when first needed (:mod:`pyprof.trace.rawcut`, the cut's
    C code) loaded now: a module first imported at exit (a dataclass's methods are exec'd
    source) resets CPython's record of an unhandled KeyboardInterrupt, and Ctrl+C would end the
    process with status 1 instead of by SIGINT. Every exit handler of pyprof that writes a trace
    registers here."""
    from ..native import cutter
    from ..trace import rawcut  # noqa: F401

    cutter.available()  # built now (once per machine), not at the first window's stop
    atexit.unregister(fn)
    atexit.register(fn)


def read_range(raw: str, start: int, end: int | None, metadata: dict[bytes, dict[str, Any]],
               out: str | None, scratch: str | None = None,
               extra: Sequence[dict[str, Any]] = (), keep: Any = None, tail: Any = None) -> int:
    """Read the events in bytes ``[start, end)`` of ``raw`` (``end`` None: to the end).

    New metadata events are added to ``metadata``. With ``out``, a valid trace is written there:
    all known metadata events first, then the range's other events; returns events written.
    The window is valid as every trace pyprof writes (docs/trace-format.md): ``B``/``E`` pairs
    are kept as they are, but a slice that partially overlaps another of its thread moves to a
    new thread (as an ``X`` event), slices with a negative duration and unmatched begins and ends
    are left out, and ids JavaScript cannot hold (MXNet's 64-bit pids, tids and async ids) are
    renumbered to small integers no other id of the window uses. ``extra`` events (the window's
    step marks, :mod:`pyprof.session.stepmarks`) are written after the range's. The range is
    streamed in constant memory (:mod:`pyprof.trace.rawcut`); bytes the streaming reader refuses
    (an event cut short) are read whole, the tolerant way, from a copy in ``scratch`` (default:
    beside ``out``, else ``raw``), named ``.pyprof-<pid>-segment-*.json`` so that a dead
    process's copy is recognised and deleted. ``keep`` (a :class:`pyprof.trace.rawcut.Kept`):
    a window the C code read whole is held there instead of written (its annotation writes it).
    ``tail``: the cut of the range begun before MXNet's last append to it
    (:func:`follow`), taken when it may be.
    """
    from ..trace import rawcut  # late, as pyprof.trace is: it imports pyprof

    return rawcut.read_range(raw, start, end, metadata, out, scratch, extra, keep=keep, tail=tail)


#: When a session's stop cuts its window on a second thread while MXNet appends the window's
#: last events (:func:`follow`): ``"auto"``, when a core is free (:func:`core_free`; on a busy
#: machine the two threads share one core's time, MXNet's append then waits as long as the cut
#: would have); ``"always"``; ``"never"``.
FOLLOW = "auto"


def core_free() -> bool:
    """Whether a core is free for a second thread now (:data:`FOLLOW` ``"auto"``): no other
    thread of any process runnable beyond the CPUs this process may run on, less the two the
    stop uses. Read from the kernel's count of runnable threads (``/proc/loadavg``, the fewest
    of three reads: a kernel worker's moment is no load); where there is none, the 1-minute
    load average below the CPUs less a half. The load average lags: right after a program's
    busy loop (a window's own steps) it says busy while the cores are idle."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    others = _runnable_others()
    if others is None:
        return os.getloadavg()[0] < cpus - 0.5
    return others <= cpus - 2


def _runnable_others() -> int | None:
    """Threads runnable now other than the caller (``/proc/loadavg``'s fourth field, the
    fewest of three reads), or None where the kernel does not say."""
    got = None
    try:
        for _ in range(3):
            with open("/proc/loadavg", "rb") as f:
                running = int(f.read().split()[3].split(b"/")[0]) - 1  # less the reader
            got = running if got is None else min(got, running)
    except (OSError, ValueError, IndexError):
        return None
    return got


def follow(raw: str, start: int, out: str, keep: Any = None) -> Any:
    """The cut of the window at byte ``start`` of ``raw``, to be written at ``out`` (or held in
    ``keep``), begun now on a thread of its own, before MXNet's last append to it
    (:class:`pyprof.trace.rawcut.Tail`: give it the end with ``end_at``, pass it to
    :func:`read_range`); None where it is not begun (:data:`FOLLOW`, no core free, no C code to
    read the runs, no directory for ``out``): the save cuts then."""
    from ..native import cutter
    from ..trace import rawcut

    if FOLLOW == "never" or FOLLOW == "auto" and not core_free():
        return None
    if not cutter.available() or not os.path.isdir(os.path.dirname(out) or "."):
        return None
    try:
        return rawcut.Tail(raw, start, METADATA, out, keep)
    except OSError:
        return None


def join_traces(sources: list[str], out: str, metadata: dict[bytes, dict[str, Any]]) -> int:
    """Write the events of ``sources`` (MXNet traces, finished or not, with or without their
    header; none being written any more), in order, as one valid trace at ``out`` (which may be
    one of them), as :func:`read_range` writes a window: known metadata first. New metadata
    events are added to ``metadata``. Returns the events written. A source that does not exist
    or holds no event adds nothing."""
    from ..trace import rawcut

    return rawcut.join(sources, out, metadata)


def complete_headless_trace(path: str | os.PathLike[str]) -> int:
    """Make a finished trace of a second session in this process valid, with process names.

    MXNet writes only its first dump with the ``{"traceEvents": [`` header and the
    ``process_name`` events; a later session's file starts with a bare comma.
    ``pyprof.profiler.dump`` calls this (through :mod:`pyprof.process.keep_file`) for such a
    file: it is rewritten with every metadata event this process has seen first. Returns the
    events written.
    """
    out = os.path.abspath(os.fspath(path))
    return read_range(out, 0, None, dict(METADATA), out=out)
