"""The raw trace: the one MXNet trace file profiling sessions append to, for the whole process.

See :mod:`pyprof.session` for the design. This module makes the profiler calls that keep the
raw file's size an exact boundary between events (:meth:`RawTrace.quiesce`,
:meth:`RawTrace.drain`), configures and rotates the file, and cuts byte ranges of it into
window traces (through :mod:`pyprof.session.windows`). Package-internal.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..native import capi as _capi
from . import cap as _cap
from . import rawdir as _raw_dir
from .. import config, profiler, rules
from ..process.rawfile import METADATA, read_range
from .windows import now_us
from ..process.tracker import TRACKER


#: Size above which the raw trace is started afresh between windows (see
#: :meth:`RawTrace.rotation_due`); ``$PYPROF_RAW_ROTATE_BYTES`` overrides it. None: api.json's.
ROTATE_BYTES: int | None = None


def rotate_bytes() -> int:
    """:data:`ROTATE_BYTES`, else ``$PYPROF_RAW_ROTATE_BYTES``, else api.json ``raw_trace``.

    Raises:
        ConfigError: the variable is not a positive integer.
    """
    if ROTATE_BYTES is not None:
        return ROTATE_BYTES
    env = str(_raw_dir.SPEC["rotate_env"])
    text = os.environ.get(env)
    if not text:
        return int(_raw_dir.SPEC["rotate_bytes"])
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise rules.error("raw.bad_rotate_bytes", variable=env, value=text)
    return value


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

    Its metadata events are remembered in :data:`pyprof.process.rawfile.METADATA`.
    """

    def __init__(self) -> None:
        self.path: str | None = None  # <private dir>/raw.json
        self.scanned = 0  # bytes of the raw file whose metadata events are in METADATA
        self.finished = False
        self.left_for_recovery: list[str] = []  # .partial files of windows left at exit

    @property
    def directory(self) -> str | None:
        """The raw trace's private directory (deleted while no session is open)."""
        return None if self.path is None else os.path.dirname(self.path)

    def _ensure_directory(self) -> None:
        """Make the private directory: the first time, or again after :meth:`release` deleted
        it (dead processes' leftovers are swept by :mod:`pyprof.session.leftovers`)."""
        if self.path is not None and (os.path.isdir(self.directory or "")
                                      or _raw_dir.recreate(self.directory or "")):
            return
        # first use, or someone else made our old name: a new directory (MXNet reconfigures)
        self.path = os.path.join(_raw_dir.make_dir(), str(_raw_dir.SPEC["file"]))
        self.scanned = 0

    def configure(self, options: dict[str, str]) -> None:
        """Make MXNet record with ``options`` into the raw file (reconfiguring only if needed).

        Called as the session's owner."""
        t = TRACKER
        if t.finished or self.finished:
            raise rules.error("session.profiler_finished")
        if t.running:
            raise rules.error("session.profiler_running")
        rotate_bytes()  # a bad $PYPROF_RAW_ROTATE_BYTES fails here, before anything runs
        self._ensure_directory()
        assert self.path is not None
        wanted = dict(options, filename=self.path, continuous_dump="true")
        if profiler.current_config() != config.effective(wanted):
            self.reconfigure(wanted)

    def reconfigure(self, wanted: dict[str, str]) -> None:
        """Configure MXNet with ``wanted``: it deletes the raw file and starts a new one."""
        self.harvest(self.size())  # MXNet deletes the old raw file: keep its metadata events
        profiler.set_config(**wanted)
        self.scanned = 0  # offsets restart at 0 in the new file

    def rotation_due(self) -> bool:
        """True once the raw file holds :func:`rotate_bytes` bytes or more, or half the cap
        (:func:`pyprof.session.cap.max_bytes`) when that is less: a window has at least half
        the cap to record."""
        return self.size() >= min(rotate_bytes(), _cap.max_bytes() // 2)

    def rotate(self) -> None:
        """Between windows (stopped, drained, every window cut): start the raw file afresh.

        MXNet opens the file by name in append mode at every dump, so deleting it makes the
        next dump start a new one (offsets restart at 0); the configuration, and with it
        MXNet's aggregate statistics, stay as they are."""
        assert self.path is not None
        self.harvest(self.size())  # keep the metadata events of the bytes deleted
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self.scanned = 0

    # -- the window recording now (its path, for recovery after this process died) ----------
    def note_windows(self, windows: list[str]) -> None:
        """Name the windows not saved yet (recording, or ended and not cut) in the private
        directory, for recovery after this process died (see :mod:`pyprof.session.rawdir`)."""
        assert self.directory is not None
        note = os.path.join(self.directory, str(_raw_dir.SPEC["window_note"]))
        with open(note + ".tmp", "w", encoding="utf-8") as f:
            json.dump({"windows": windows}, f)
        os.replace(note + ".tmp", note)

    def release(self) -> None:
        """When the last session closed (stopped, every window cut): delete the private
        directory (renamed at once, deleted on a thread: :func:`rawdir.remove_dir_later`). The
        next session makes it again; MXNet's next dump then starts a new file."""
        if self.path is None or TRACKER.running or os.environ.get(str(_raw_dir.SPEC["keep_env"])):
            return
        if self.left_for_recovery:  # at exit: kept for pyprof recover
            self._move_kept()
            return
        self.harvest(self.size())
        _raw_dir.remove_dir_later(os.path.dirname(self.path))
        self.scanned = 0

    # -- boundaries (called as the session's owner) -----------------------------------------
    @staticmethod
    def quiesce(stopped: Callable[[], None] | None = None) -> int:
        """Wait for queued operators, stop, and append everything to the raw file; return
        when recording stopped (microseconds since the epoch). ``stopped``: called once MXNet
        records no more, before the append.

        Afterwards nothing more is appended until the profiler runs again: the raw file's size
        is an exact boundary between events."""
        return RawTrace._quiesce(lambda: profiler.set_state("stop"), stopped)

    @staticmethod
    def quiesce_paused(stopped: Callable[[], None] | None = None) -> int:
        """Steady mode's :meth:`quiesce`: wait for queued operators, *pause* (the profiler stays
        running, so MXNet's IsProfiling does not change), append everything to the raw file;
        return when recording paused (microseconds since the epoch). Paused, MXNet adds no
        event, so the raw file's size is an exact boundary too."""
        return RawTrace._quiesce(profiler.pause, stopped)

    @staticmethod
    def _quiesce(halt: Callable[[], Any], stopped: Callable[[], None] | None) -> int:
        try:
            _capi.wait_all()
        finally:
            halt()
            at = now_us()
            try:
                if stopped is not None:
                    stopped()
            finally:
                profiler.dump(False)
        return at

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
                read_range(self.path, self.scanned, skip[0], METADATA, out=None,
                           scratch=self.directory)
            self.scanned = skip[1]
        if end > self.scanned:
            read_range(self.path, self.scanned, end, METADATA, out=None, scratch=self.directory)
            self.scanned = end

    def cut(self, start: int, end: int, out: str, extra: Sequence[dict[str, Any]] = (),
            keep: Any = None, tail: Any = None) -> int:
        """Write raw bytes ``[start, end)`` as a valid trace at ``out``, then ``extra`` events
        (the step marks); return events written. ``keep``, ``tail``: see ``read_range``."""
        assert self.path is not None
        self.harvest(start)
        os.makedirs(os.path.dirname(out), exist_ok=True)  # removed while it ran: made again
        count = read_range(self.path, start, end, METADATA, out=out, scratch=self.directory,
                           extra=extra, keep=keep, tail=tail)
        self.scanned = max(self.scanned, end)
        return count

    def leave_for_recovery(self, window_path: str) -> None:
        """At exit: the window of file ``window_path`` is left for ``pyprof recover``: the raw
        trace is kept (renamed first by :meth:`finish`: api.json ``raw_trace.exit_kept_about``)."""
        self.left_for_recovery.append(window_path + ".partial")

    def _move_kept(self) -> None:
        """Rename the raw trace to ``exit_kept_file`` and point the left windows' .partial
        files there (MXNet's finished dump truncates the file it writes)."""
        kept = os.path.join(os.path.dirname(self.path or ""), str(_raw_dir.SPEC["exit_kept_file"]))
        if not self.left_for_recovery or self.path is None or os.path.exists(kept):
            return  # nothing left, or moved already
        os.replace(self.path, kept)
        for p in self.left_for_recovery:
            with open(p, encoding="utf-8") as f:
                info = json.load(f)
            info["raw"] = kept
            tmp = p + f".{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(info, f)
            os.replace(tmp, p)

    def finish(self) -> None:
        """At exit: finish the raw file (MXNet's destructor then writes nothing) and delete it
        with its directory (kept, renamed, when a window was left for recovery)."""
        t = TRACKER
        _raw_dir.wait_removed()  # a closed session's directory is gone before the exit
        if self.path is None or self.finished or t.finished:
            return
        self._move_kept()
        cfg = profiler.current_config()
        if not cfg or cfg.get("filename") != self.path:
            self.finished = True  # someone reconfigured to their own file: MXNet's destructor
            if not os.environ.get(str(_raw_dir.SPEC["keep_env"])):  # finishes that one
                _raw_dir.remove_dir(os.path.dirname(self.path))
            return
        if not os.path.isdir(os.path.dirname(self.path)) and not _raw_dir.recreate(
                os.path.dirname(self.path)):
            return  # someone else made our old name: write nothing there
        with owner("exit"):
            if t.steady is not None:  # steady mode: no stop (IsProfiling stays as it is); the
                profiler.pause()      # finished dump below only disables MXNet's output
            elif t.running:
                profiler.set_state("stop")
            t.repair_on_finish = False  # the raw file is deleted next: no need to complete it
            profiler.dump(True)
        self.finished = True
        if not (os.environ.get(str(_raw_dir.SPEC["keep_env"])) or self.left_for_recovery):
            _raw_dir.remove_dir(os.path.dirname(self.path))


#: This process's raw trace.
RAW = RawTrace()
