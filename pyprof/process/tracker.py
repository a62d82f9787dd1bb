"""What this process has asked of MXNet's profiler singleton (MXNet has no getters).

``pyprof.profiler`` records every call it makes here, and ``pyprof.session`` reads and
claims the profiler through it; both lock ``TRACKER.lock`` around a check and the call it
guards. It is the one tracker of the process: when JPype hosts the JVM, the JVM layer reads and
writes it too (``pyprof.bridge.tracker``, the ``pyprof.jvm.Tracker`` proxy), under the same lock.
Package-internal: the public view is ``pyprof.profiler.state()``.
"""

from __future__ import annotations

import os
import threading


class Tracker:
    """What this process has asked of the profiler singleton, for errors with a fix.

    MXNet exposes no getters, so pyprof records its own calls (both languages' calls, in a
    process hosting the JVM); it never overrides MXNet's own checks.
    """

    #: The fields, as the JVM's ``pyprof.jvm.Tracker.FIELDS`` names them (the attributes below
    #: except ``lock``).
    FIELDS = ("config", "running", "ever_ran", "paused", "finished", "session", "internal",
              "repair_on_finish", "kept_parts", "steady")

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.config: dict[str, str] | None = None  # effective C strings after set_config
        self.running = False
        self.ever_ran = False
        self.paused = False
        self.finished = False  # a dump(finished=True) happened: no new session possible
        self.session: str | None = None  # a pyprof.profile session owns the profiler (its name)
        # threading.get_ident() of the thread making the session's own calls, while it makes them
        # (a JVM thread's too: it runs the tracker proxy on its own OS thread)
        self.internal: int | None = None
        # Configured after the profiler had run: MXNet may write this file without its header
        # (a second session in one process), so a finished dump repairs it.
        self.repair_on_finish = False
        # Parts of the trace file kept before a config named it again (pyprof.process.keep_file),
        # in order: the finished dump joins them with the file.
        self.kept_parts: list[str] = []
        # Steady mode (pyprof.session.steady, api.json "steady"): who began it ("PYPROF_STEADY",
        # "pyprof.steady.begin()", a session's name, "-Dpyprof.steady", ...), or None. While set
        # the profiler stays running: no call may change MXNet's IsProfiling(kAPI).
        self.steady: str | None = None


TRACKER = Tracker()


def _after_fork_in_child() -> None:
    # A thread of the parent may have held the lock at fork; it does not exist here.
    TRACKER.lock = threading.RLock()


os.register_at_fork(after_in_child=_after_fork_in_child)
