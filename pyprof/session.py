"""Profiling sessions: ``pyprof.profile`` with a step schedule, many windows per process.

Quick start::

    import pyprof
    with pyprof.profile(schedule=pyprof.schedule(wait=1, warmup=1, active=2, repeat=3),
                        path="trace_{window}.json",
                        on_trace_ready=lambda w: print(w.path, w.summary(top=5))) as prof:
        for batch in data:
            train_step(batch)
            prof.step()

Design
======

**One raw trace per process.** MXNet's profiler is a process-wide singleton that can finish
exactly one trace file: after ``dump(finished=True)`` it never writes a valid file again, and a
second session in one process yields a file with a bare leading comma or no header. pyprof
therefore never finishes a trace while the process lives. It configures MXNet once with
``continuous_dump=True`` and a file it owns (``.pyprof-raw-<pid>.json`` beside the first window,
or in ``$PYPROF_RAW_DIR``), and only ever calls ``dump(finished=False)``, which *appends* the
events collected so far. The raw file only grows; it is never a trace a user sees.

**Windows are byte ranges of the raw file.** Every window boundary is made at a quiescent point:
``MXNDArrayWaitAll`` (every operator pushed so far finishes while the profiler still records
it), ``set_state('stop')``, then ``dump(finished=False)`` (everything collected is appended). With
the profiler stopped and its queues empty, MXNet's timer thread appends nothing, so the file
size right then is an exact boundary between events. A window is the range ``[size at its start,
size at its end)``. It is read by :class:`pyprof.trace.TraceReader`, which accepts what MXNet
writes there (the header only in the first range, leading or trailing commas, unescaped names),
and written as a new, compact, valid Chrome trace (a temporary file renamed into place). Warm-up
steps record too (so MXNet's one-off costs fall there) but their range is skipped: the window
starts after a boundary taken at the warm-up/record transition.

**Metadata is carried into every window.** MXNet writes a ``process_name`` metadata event per
device only in its very first dump, and one for a new category pid when it first appears. pyprof
remembers every metadata event (``ph == "M"``) it has read, in order, and writes all of them at
the head of each window, followed by the window's own events (a metadata event already written is
not repeated). Every window therefore names its processes, whatever window came first.

**Events in flight at a boundary.** Operators pushed before the boundary are waited for and land
in the window that is ending. Operators pushed by other threads after the wait land in the next
recorded range. A user ``Task``/``Frame``/``Event`` started in one window and stopped while the
profiler is stopped is dropped by MXNet (MXNet records a duration only at ``stop()``, and only
while running); one stopped inside a later window appears there, with its true start time before
that window began. Between windows (``wait`` and ``skip_first`` steps) nothing is recorded.

**Disk.** The raw file holds what was recorded (warm-ups and windows) since it was last started
afresh: between windows, once it exceeds ``ROTATE_BYTES`` (256 MiB), pyprof reconfigures MXNet
with the same options, which deletes it (not with ``aggregate_stats`` on: that would reset
MXNet's statistics). At exit it is deleted (kept with ``PYPROF_KEEP_RAW=1``).

**Configuration.** The recording options (``profile_symbolic``, ``profile_imperative``,
``profile_api``, ``profile_memory``, ``profile_all``, ``aggregate_stats``, ``dump_period``) are
given per session. A session whose options equal the configuration in force reuses the raw file;
otherwise pyprof reconfigures MXNet, which deletes the raw file and starts a new one without a
header (carried metadata fills that gap). ``filename``, ``continuous_dump`` and
``profile_process`` are pyprof's and cannot be given.

**Ownership.** While a session is open it owns the profiler: ``pyprof.profiler.set_config``,
``set_state`` and ``dump`` raise :class:`~pyprof.errors.StateError` (``pause``/``resume`` and
``dumps`` still work). Sessions do not nest; consecutive sessions in one process are fine.

**Exit and crashes.** At interpreter exit an open session is closed (its window written), and
the raw file is finished and deleted. While a window records, a small ``<window>.partial`` file
beside it names the raw file and the window's start offset; MXNet appends the raw file every
``dump_period`` seconds. If the process dies, :func:`recover` turns what was flushed into a valid
window trace.

**Plain sessions afterwards.** ``pyprof.profiler.set_config(filename=...)`` after a session (or
after any run) gets a file that MXNet writes without its header; the finished
``pyprof.profiler.dump()`` completes it with the carried metadata
(:func:`complete_headless_trace`), so that file is valid too.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import enum
import json
import os
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import IO, Any

import orjson

from . import _capi, config, profiler
from ._tracker import TRACKER
from .errors import ConfigError, StateError

__all__ = ["Action", "schedule", "profile", "Window", "recover", "raw_trace_path",
           "complete_headless_trace"]

_RESERVED = {
    "filename": "pyprof.profile writes one file per window: pass path='trace_{window}.json'",
    "continuous_dump": "pyprof.profile always appends continuously (that is how windows are cut)",
    "profile_process": "server profiling runs through pyprof.dist / pyprof.profiler with a "
                       "distributed kvstore, not through pyprof.profile",
}
_PARTIAL = ".partial"

#: Size above which the raw trace is started afresh between windows (see _RawTrace).
ROTATE_BYTES = 256 << 20


class Action(enum.Enum):
    """What the profiler does during one step (the value of ``schedule(step)``)."""

    NONE = "none"                        #: not recording
    WARMUP = "warmup"                    #: recording, discarded
    RECORD = "record"                    #: recording into the current window
    RECORD_AND_SAVE = "record_and_save"  #: last step of a window: saved at the next step()


def schedule(*, wait: int = 0, warmup: int = 0, active: int = 1, repeat: int = 0,
             skip_first: int = 0) -> Callable[[int], Action]:
    """A step schedule: the :class:`Action` for each step number (0, 1, 2, ...).

    After ``skip_first`` steps, cycles of ``wait`` idle steps, ``warmup`` discarded steps and
    ``active`` recorded steps repeat ``repeat`` times (0 = for ever). Each cycle's active steps
    form one window, saved as one trace file.
    """
    for name, value, low in (("wait", wait, 0), ("warmup", warmup, 0), ("active", active, 1),
                             ("repeat", repeat, 0), ("skip_first", skip_first, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"invalid schedule {name}={value!r}: expected an int >= {low}")
    cycle = wait + warmup + active

    def action(step: int) -> Action:
        if step < skip_first:
            return Action.NONE
        step -= skip_first
        if repeat and step >= repeat * cycle:
            return Action.NONE
        pos = step % cycle
        if pos < wait:
            return Action.NONE
        if pos < wait + warmup:
            return Action.WARMUP
        return Action.RECORD_AND_SAVE if pos == cycle - 1 else Action.RECORD

    action.__doc__ = (f"schedule(wait={wait}, warmup={warmup}, active={active}, "
                      f"repeat={repeat}, skip_first={skip_first})")
    return action


@dataclasses.dataclass(frozen=True)
class Window:
    """One recorded window, saved as a valid Chrome trace.

    Attributes:
        index: 0 for the first window of the session, then 1, 2, ...
        path: absolute path of the trace file.
        first_step, last_step: the session steps recorded (``last_step`` included).
        events: events written (metadata included).
    """

    index: int
    path: str
    first_step: int
    last_step: int
    events: int

    def stats(self, **options: Any):
        """Exact statistics of this window: :func:`pyprof.trace.stats` on :attr:`path`."""
        from .trace import stats
        return stats(self.path, **options)

    def summary(self, **options: Any) -> str:
        """Text summary of this window (:func:`pyprof.trace.summarize`); notes bulk names."""
        from .trace import summarize
        return summarize(self.path, **options)


# --- the raw trace: one per process ---------------------------------------------------------

class _RawTrace:
    """The one MXNet trace file pyprof appends to for the life of the process."""

    def __init__(self) -> None:
        self.path: str | None = None
        self.metadata: dict[bytes, dict[str, Any]] = {}  # every "M" event seen, in order
        self.scanned = 0  # bytes of the raw file whose metadata events are in self.metadata
        self.finished = False

    def configure(self, options: dict[str, str], directory: str) -> None:
        """Make MXNet record with ``options`` into the raw file (reconfiguring only if needed)."""
        t = TRACKER
        if t.finished or self.finished:
            raise StateError(
                "the profiler already wrote its finished trace in this process "
                "(profiler.dump(finished=True)); MXNet cannot record again. fix: use only "
                "pyprof.profile in this process (it never finishes the trace), or run the "
                "session in a child process")
        if t.running:
            raise StateError(
                "the profiler is already recording (profiler.set_state('run') outside "
                "pyprof.profile). fix: profiler.set_state('stop') and profiler.dump() first")
        if self.path is None:
            raw_dir = os.environ.get("PYPROF_RAW_DIR") or directory
            self.path = os.path.join(os.path.abspath(raw_dir), f".pyprof-raw-{os.getpid()}.json")
        wanted = dict(options, filename=self.path, continuous_dump="true")
        if profiler.current_config() != config.effective(wanted):
            self._reconfigure(wanted)

    def _reconfigure(self, wanted: dict[str, str]) -> None:
        self.harvest(self.size())  # MXNet deletes the old raw file: keep its metadata events
        profiler.set_config(**wanted)
        self.scanned = 0  # offsets restart at 0 in the new file

    def rotate_if_large(self) -> None:
        """Between windows: start the raw file afresh once it exceeds :data:`ROTATE_BYTES`.

        Reconfiguring with the same options makes MXNet delete the file and append to a new
        one. Skipped with ``aggregate_stats`` on, since reconfiguring also resets MXNet's
        aggregate statistics (``profiler.dumps()``).
        """
        cfg = profiler.current_config()
        if not cfg or cfg.get("aggregate_stats") == "true" or self.size() < ROTATE_BYTES:
            return
        self._reconfigure({k: v for k, v in cfg.items() if k != "profile_process"})

    def size(self) -> int:
        assert self.path is not None
        try:
            return os.path.getsize(self.path)
        except FileNotFoundError:
            return 0

    def harvest(self, end: int) -> None:
        """Remember the metadata events of the bytes not yet scanned, up to ``end``.

        They matter when they fall outside every window: MXNet writes the ``process_name``
        events in its first dump, which may be the one that ends a warm-up.
        """
        assert self.path is not None
        if end > self.scanned:
            _read_range(self.path, self.scanned, end, self.metadata, out=None)
            self.scanned = end

    def cut(self, start: int, end: int, out: str) -> int:
        """Write raw bytes ``[start, end)`` as a valid trace at ``out``; return events written."""
        assert self.path is not None
        self.harvest(start)
        count = _read_range(self.path, start, end, self.metadata, out=out)
        self.scanned = max(self.scanned, end)
        return count

    def finish(self) -> None:
        """At exit: finish the raw file (MXNet's destructor then writes nothing) and delete it."""
        t = TRACKER
        if self.path is None or self.finished or t.finished:
            return
        cfg = profiler.current_config()
        if not cfg or cfg.get("filename") != self.path:
            return  # someone reconfigured to their own file: MXNet's destructor finishes it
        with _owner("exit"):
            if t.running:
                profiler.set_state("stop")
            t.repair_on_finish = False  # the raw file is deleted next: no need to complete it
            profiler.dump(True)
        self.finished = True
        if not os.environ.get("PYPROF_KEEP_RAW"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)


_raw = _RawTrace()
_open_sessions: weakref.WeakSet[profile] = weakref.WeakSet()


def raw_trace_path() -> str | None:
    """Path of this process's raw MXNet trace (None before the first session)."""
    return _raw.path


@contextlib.contextmanager
def _owner(name: str) -> Iterator[None]:
    """Make profiler calls on behalf of the session ``name`` (they pass the ownership check)."""
    t = TRACKER
    with t.lock:
        previous = t.internal
        t.internal = threading.get_ident()
        try:
            yield
        finally:
            t.internal = previous


def _at_exit() -> None:
    """Save the windows of sessions still open, then finish and delete the raw trace."""
    if _capi.forked_error():
        return  # a forked child: the sessions and the raw trace are the parent's
    for session in list(_open_sessions):
        _report_at_exit(session.stop, f"could not save the open window of {session._name}")
    _report_at_exit(_raw.finish, f"could not finish the raw trace {_raw.path}")


def _report_at_exit(fn: Callable[[], Any], what: str) -> None:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - at exit: one line on stderr, never a traceback
        print(f"pyprof: {what}: {exc}", file=sys.stderr)


# --- sessions -------------------------------------------------------------------------------

class profile:  # noqa: N801 - named like torch.profiler.profile, used as a context manager
    """Profile a block, or the windows of a step schedule, one valid trace per window.

    Args (keyword only):
        schedule: ``pyprof.schedule(...)`` or any ``step -> Action`` function. Default: one
            window from ``start()`` to ``stop()``.
        on_trace_ready: called with each saved :class:`Window` (after its file is written).
        path: trace file of each window; ``{window}`` (0, 1, ...), ``{step}`` (first step) and
            ``{pid}`` are filled in. Must contain ``{window}`` when the schedule has more than
            one window. Relative paths are resolved now, against the current directory.
        **options: recording options, as in ``pyprof.profiler.set_config``: profile_symbolic,
            profile_imperative, profile_api, profile_memory, profile_all, aggregate_stats,
            dump_period (seconds between appends to the raw trace: what survives a crash).

    Use as ``with pyprof.profile(...) as prof:`` and call ``prof.step()`` after each step; on
    exit (also when the body raises) the profiler stops and an open window is saved. Or call
    :meth:`start` and :meth:`stop`.

    Attributes:
        windows: the saved :class:`Window` objects, in order.
        step_num: steps taken so far.
    """

    def __init__(self, *, schedule: Callable[[int], Action] | None = None,
                 on_trace_ready: Callable[[Window], Any] | None = None,
                 path: str | os.PathLike[str] = "pyprof_trace_{window}.json",
                 **options: Any) -> None:
        for key in options:
            if key in _RESERVED:
                raise ConfigError(f"pyprof.profile does not take {key!r}: {_RESERVED[key]}")
        self._options = config.validate(options)  # unknown key: ConfigError with nearest match
        self._schedule = schedule or (lambda step: Action.RECORD)
        if not callable(self._schedule):
            raise ConfigError(f"schedule must be callable (pyprof.schedule(...)), got {schedule!r}")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise ConfigError(f"on_trace_ready must be callable, got {on_trace_ready!r}")
        self._on_trace_ready = on_trace_ready
        self._path = os.path.abspath(os.fspath(path))
        if schedule is not None and "{window}" not in self._path and _many_windows(schedule):
            raise ConfigError(
                f"path {os.fspath(path)!r} has no {{window}} placeholder, but the schedule "
                "records several windows, which would overwrite each other. "
                "fix: path='trace_{window}.json'")
        self.windows: list[Window] = []
        self.step_num = 0
        self._action = Action.NONE
        self._state = "new"  # new -> open -> closed
        self._running = False
        self._window: tuple[int, int, str] | None = None  # (start offset, first step, path)
        self._name = f"<pyprof.profile {id(self):#x}>"

    # -- public API --------------------------------------------------------------------------
    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def current_action(self) -> Action:
        return self._action

    def start(self) -> None:
        """Take ownership of the profiler and begin step 0."""
        if self._state != "new":
            raise StateError(f"{self._name} was already started; fix: create a new "
                             "pyprof.profile for each session")
        t = TRACKER
        with t.lock:
            if t.session is not None:
                raise StateError(
                    f"a pyprof.profile session ({t.session}) is already open; sessions do not "
                    "nest. fix: close it first, or use one session with a schedule")
            with _owner(self._name):
                _raw.configure(self._options, os.path.dirname(self._path))
            t.session = self._name
            self._state = "open"
        _open_sessions.add(self)
        atexit.unregister(_at_exit)  # (re)register last, so it runs before mxnet's own atexit
        atexit.register(_at_exit)
        self._transition(Action.NONE, self._action_for(0))

    def step(self) -> None:
        """Mark the end of one step; saves a window when its last active step ends."""
        if self._state != "open":
            raise StateError(f"step() on a session that is {self._state}; fix: call it "
                             "inside the with block (or between start() and stop())")
        self.step_num += 1
        self._transition(self._action, self._action_for(self.step_num))

    def stop(self) -> None:
        """Stop recording, save an open window and give the profiler back. Idempotent."""
        if self._state != "open":
            return
        try:
            self._transition(self._action, Action.NONE, final=True)
        finally:
            self._state = "closed"
            _open_sessions.discard(self)
            with TRACKER.lock:
                if TRACKER.session == self._name:
                    TRACKER.session = None

    def stats(self, **options: Any):
        """Exact statistics of all saved windows together (:func:`pyprof.trace.stats`)."""
        if not self.windows:
            raise StateError("no window was saved yet; fix: profile at least one active step")
        from .trace import stats
        return stats([w.path for w in self.windows], **options)

    # -- the state machine ---------------------------------------------------------------------
    def _action_for(self, step: int) -> Action:
        action = self._schedule(step)
        if not isinstance(action, Action):
            raise ConfigError(f"schedule({step}) returned {action!r}, expected a pyprof.Action")
        return action

    def _transition(self, prev: Action, cur: Action, final: bool = False) -> None:
        """Move from ``prev`` (the last step's action) to ``cur`` (the next step's).

        The profiler calls run as the session's owner; cutting the window's file and the
        ``on_trace_ready`` callback run outside (the callback gets no owner rights).
        """
        want_window = cur in (Action.RECORD, Action.RECORD_AND_SAVE)
        want_run = cur is not Action.NONE
        ending = None
        with _owner(self._name):
            if self._window is not None and (prev is Action.RECORD_AND_SAVE or not want_window):
                ending, self._window = self._window, None
            if self._running and (ending or not want_run or (want_window and self._window is None)):
                self._quiesce()  # also when leaving warm-up: its events stay before the window
        window = None
        if ending is not None:
            start, first_step, path = ending
            end = _raw.size()
            events = _raw.cut(start, end, path)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path + _PARTIAL)
            last_step = self.step_num - (0 if final else 1)
            window = Window(len(self.windows), path, first_step, max(first_step, last_step),
                            events)
            self.windows.append(window)
        with _owner(self._name):
            if want_window and self._window is None:
                path = self._path.format(window=len(self.windows), step=self.step_num,
                                         pid=os.getpid())
                _raw.rotate_if_large()
                self._window = (_raw.size(), self.step_num, path)
                _raw.harvest(self._window[0])
                _write_partial(path, _raw, self._window[0], len(self.windows))
            if want_run and not self._running:
                profiler.set_state("run")
                self._running = True
        self._action = cur
        if window is not None and self._on_trace_ready is not None:
            self._on_trace_ready(window)

    def _quiesce(self) -> None:
        """Wait for queued operators, stop, and append everything to the raw file."""
        try:
            _capi.wait_all()
        finally:
            profiler.set_state("stop")
            self._running = False
            profiler.dump(False)


def _many_windows(sched: Callable[[int], Action]) -> bool:
    """True when ``sched`` saves more than one window within its first 10,000 steps."""
    saves = 0
    for step in range(10_000):
        if sched(step) is Action.RECORD_AND_SAVE:
            saves += 1
            if saves > 1:
                return True
    return False


# --- cutting and recovery -------------------------------------------------------------------

def _read_range(raw: str, start: int, end: int | None, metadata: dict[bytes, dict[str, Any]],
                out: str | None) -> int:
    """Read the events in bytes ``[start, end)`` of ``raw`` (``end`` None: to the end).

    New metadata events are added to ``metadata``. With ``out``, a valid trace is written there:
    all known metadata events first, then the range's other events; returns events written.
    """
    from .trace import TraceReader
    from .trace._writer import TraceWriter

    fd, segment = tempfile.mkstemp(prefix=".pyprof-segment-", suffix=".json",
                                   dir=os.path.dirname(out or raw) or ".")
    try:
        with os.fdopen(fd, "wb") as dst:
            _copy_range(raw, start, end, dst)
        has_events = os.path.getsize(segment) > 0
        if out is None:
            if has_events:
                for ev in TraceReader(segment, progress=False, phases={"M"}):
                    metadata.setdefault(orjson.dumps(ev, option=orjson.OPT_SORT_KEYS), ev)
            return 0
        written = set(metadata)
        with TraceWriter(out, gzip=False) as w:
            for ev in metadata.values():
                w.write(ev)
            for ev in TraceReader(segment, progress=False) if has_events else ():
                if ev.get("ph") == "M":
                    key = orjson.dumps(ev, option=orjson.OPT_SORT_KEYS)
                    if key in written:
                        continue
                    written.add(key)
                    metadata[key] = ev
                w.write(ev)
        return w.count
    finally:
        os.unlink(segment)


def _copy_range(path: str, start: int, end: int | None, dst: IO[bytes]) -> None:
    try:
        src = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return  # nothing was ever flushed
    with src:
        src.seek(start)
        left = None if end is None else max(0, end - start)
        while left is None or left > 0:
            chunk = src.read(1 << 20 if left is None else min(1 << 20, left))
            if not chunk:
                break
            dst.write(chunk)
            if left is not None:
                left -= len(chunk)


def _write_partial(path: str, raw: _RawTrace, start: int, index: int) -> None:
    """Record where a window starts, so that :func:`recover` works after a crash."""
    info = {"raw": raw.path, "start": start, "window": index, "pid": os.getpid(),
            "metadata": list(raw.metadata.values())}
    with open(path + _PARTIAL, "wb") as f:
        f.write(orjson.dumps(info))


def complete_headless_trace(path: str | os.PathLike[str]) -> int:
    """Make a finished trace of a second session in this process valid, with process names.

    MXNet writes only its first dump with the ``{"traceEvents": [`` header and the
    ``process_name`` events; a later session's file starts with a bare comma.
    ``pyprof.profiler.dump`` calls this for such a file: it is rewritten with every metadata
    event this process has seen first. Returns the events written.
    """
    out = os.path.abspath(os.fspath(path))
    return _read_range(out, 0, None, dict(_raw.metadata), out=out)


def recover(path: str | os.PathLike[str], *, remove_raw: bool = True) -> Window:
    """Rebuild the trace of a window whose process died while recording it.

    ``path`` is the window's trace path (``<path>.partial`` must exist beside it). What MXNet
    had appended to the raw trace before the crash (every ``dump_period`` seconds) is written to
    ``path`` as a valid trace; a last event cut mid-way is dropped. The ``.partial`` file, and
    with ``remove_raw`` the raw trace, are deleted afterwards.

    Raises:
        StateError: no ``.partial`` file (nothing to recover), or its raw trace is gone.
    """
    out = os.path.abspath(os.fspath(path))
    try:
        with open(out + _PARTIAL, "rb") as f:
            info = json.load(f)
    except FileNotFoundError as exc:
        raise StateError(f"nothing to recover at {out}: no {out + _PARTIAL} file (windows that "
                         "were saved need no recovery)") from exc
    if not os.path.exists(info["raw"]):
        raise StateError(f"the raw trace {info['raw']} of {out} is gone; nothing to recover. "
                         "fix: keep .pyprof-raw-*.json files until you have recovered")
    metadata = {orjson.dumps(ev, option=orjson.OPT_SORT_KEYS): ev for ev in info["metadata"]}
    events = _read_range(info["raw"], int(info["start"]), None, metadata, out=out)
    os.unlink(out + _PARTIAL)
    if remove_raw and info.get("pid") != os.getpid():
        os.unlink(info["raw"])
    return Window(int(info["window"]), out, -1, -1, events)
