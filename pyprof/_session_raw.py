"""The raw trace: the one MXNet trace file profiling sessions append to, for the whole process.

See :mod:`pyprof.session` for the design. This module makes the profiler calls that keep the
raw file's size an exact boundary between events (:meth:`RawTrace.quiesce`,
:meth:`RawTrace.drain`), configures and rotates the file, and cuts byte ranges of it into
window traces (through :mod:`pyprof._session_windows`). Package-internal.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

from . import _capi, config, profiler, rules
from ._session_windows import METADATA, now_us, read_range
from ._tracker import TRACKER

__all__ = ["ROTATE_BYTES", "RawTrace", "RAW", "owner"]

#: Size above which the raw trace is started afresh between windows (see
#: :meth:`RawTrace.rotation_due`).
ROTATE_BYTES = 256 << 20


@contextlib.contextmanager
def owner(name: str) -> Iterator[None]:
    """Make profiler calls on behalf of the session ``name`` (they pass the ownership check)."""
    t = TRACKER
    with t.lock:
        previous = t.internal
        t.internal = threading.get_ident()
        try:
            yield
        finally:
            t.internal = previous


class RawTrace:
    """The one MXNet trace file pyprof appends to for the life of the process.

    Its metadata events are remembered in :data:`pyprof._session_windows.METADATA`.
    """

    def __init__(self) -> None:
        self.path: str | None = None
        self.scanned = 0  # bytes of the raw file whose metadata events are in METADATA
        self.finished = False

    def configure(self, options: dict[str, str], directory: str) -> None:
        """Make MXNet record with ``options`` into the raw file (reconfiguring only if needed).

        Called as the session's owner."""
        t = TRACKER
        if t.finished or self.finished:
            raise rules.error("session.profiler_finished")
        if t.running:
            raise rules.error("session.profiler_running")
        if self.path is None:
            raw_dir = os.environ.get("PYPROF_RAW_DIR") or directory
            self.path = os.path.join(os.path.abspath(raw_dir), f".pyprof-raw-{os.getpid()}.json")
        wanted = dict(options, filename=self.path, continuous_dump="true")
        if profiler.current_config() != config.effective(wanted):
            self.reconfigure(wanted)

    def reconfigure(self, wanted: dict[str, str]) -> None:
        """Configure MXNet with ``wanted``: it deletes the raw file and starts a new one."""
        self.harvest(self.size())  # MXNet deletes the old raw file: keep its metadata events
        profiler.set_config(**wanted)
        self.scanned = 0  # offsets restart at 0 in the new file

    def rotation_due(self) -> bool:
        """True once the raw file exceeds :data:`ROTATE_BYTES`, unless ``aggregate_stats`` is
        on: reconfiguring also resets MXNet's aggregate statistics (``profiler.dumps()``)."""
        cfg = profiler.current_config()
        return bool(cfg) and cfg.get("aggregate_stats") != "true" and self.size() >= ROTATE_BYTES

    def rotate(self) -> None:
        """Between windows (stopped, every window cut): start the raw file afresh.

        Reconfiguring with the same options makes MXNet delete the file and append to a new
        one."""
        cfg = profiler.current_config() or {}
        self.reconfigure({k: v for k, v in cfg.items() if k != "profile_process"})

    # -- boundaries (called as the session's owner) -----------------------------------------
    @staticmethod
    def quiesce() -> int:
        """Wait for queued operators, stop, and append everything to the raw file; return
        when recording stopped (microseconds since the epoch).

        Afterwards nothing more is appended until the profiler runs again: the raw file's size
        is an exact boundary between events."""
        try:
            _capi.wait_all()
        finally:
            profiler.set_state("stop")
            stopped = now_us()
            profiler.dump(False)
        return stopped

    @staticmethod
    def drain() -> None:
        """With the profiler stopped: make the raw file's size a boundary before recording.

        Operators queued before now run to their end unrecorded (the profiler is stopped).
        MXNet records custom objects (tasks, counters, ...) whenever it is not *paused*, and
        before its first run it is neither running nor paused: a first start and stop pauses it
        (stopping pauses, running un-pauses). Whatever MXNet queued meanwhile is appended now,
        so that it falls before the boundary, never into the next window."""
        _capi.wait_all()
        if not TRACKER.ever_ran:
            profiler.set_state("run")
            profiler.set_state("stop")
        profiler.dump(False)

    # -- reading ---------------------------------------------------------------------------
    def size(self) -> int:
        assert self.path is not None
        try:
            return os.path.getsize(self.path)
        except FileNotFoundError:
            return 0

    def harvest(self, end: int, skip: tuple[int, int] | None = None) -> None:
        """Remember the metadata events of the bytes not yet scanned, up to ``end``.

        They matter when they fall outside every window: MXNet writes the ``process_name``
        events in its first dump, which may be the one that ends a warm-up. ``skip`` is a range
        left to :meth:`cut` (a window that ended and is not cut yet), read only once.
        """
        assert self.path is not None
        if skip is not None and self.scanned < skip[1] <= end:
            if self.scanned < skip[0]:
                read_range(self.path, self.scanned, skip[0], METADATA, out=None)
            self.scanned = skip[1]
        if end > self.scanned:
            read_range(self.path, self.scanned, end, METADATA, out=None)
            self.scanned = end

    def cut(self, start: int, end: int, out: str) -> int:
        """Write raw bytes ``[start, end)`` as a valid trace at ``out``; return events written."""
        assert self.path is not None
        self.harvest(start)
        count = read_range(self.path, start, end, METADATA, out=out)
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
        with owner("exit"):
            if t.running:
                profiler.set_state("stop")
            t.repair_on_finish = False  # the raw file is deleted next: no need to complete it
            profiler.dump(True)
        self.finished = True
        if not os.environ.get("PYPROF_KEEP_RAW"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)


#: This process's raw trace.
RAW = RawTrace()
