"""One tracker in a process: the JVM layer's ``pyprof.jvm.Tracker`` is Python's ``TRACKER``.

When JPype hosts the JVM, :func:`install` (called by ``pyprof.jvm.start``) makes a JPype proxy over
:data:`pyprof.process.tracker.TRACKER` the JVM's tracker (``Tracker.use``). Every JVM-side read and write
then goes to Python's record, under Python's lock (``TRACKER.lock``, an RLock): session ownership,
the kept trace file, pause, running and finished are the same facts whichever language asks, and
nothing is copied between two records.

A Java thread that calls the proxy runs it on its own OS thread, attached to Python, so
``threading.get_ident()`` there is that thread's identity as Python's lock and the session owner
check (``TRACKER.internal``) see it: a thread holding the lock in one language holds it in the
other. Lock order stays one: the tracker lock, then Python's API gate, then the JVM's
(docs/concurrency.md).
"""

from __future__ import annotations

import threading
from typing import Any

from .values import to_python
from ..process import claim as _claim, output as _output
from ..process.tracker import TRACKER, Tracker


_BOOLEAN_FIELDS = ("running", "ever_ran", "paused", "finished", "repair_on_finish")


def _to_java(name: str, value: Any) -> Any:
    """A tracker field as the JVM reads it (Tracker's javadoc): a config a Map of C strings,
    kept parts a List, Booleans the canonical ones, the owner identity a Long."""
    import jpype

    J = jpype.JClass
    if value is None:
        return None
    if name in _BOOLEAN_FIELDS:
        return J("java.lang.Boolean").TRUE if value else J("java.lang.Boolean").FALSE
    if name == "config":
        m = J("java.util.HashMap")()
        for k, v in value.items():
            m.put(jpype.JString(k), jpype.JString(v))
        return m
    if name == "kept_parts":
        return J("java.util.ArrayList")([jpype.JString(p) for p in value])
    if name == "internal":
        return J("java.lang.Long").valueOf(int(value))
    return jpype.JString(value)


def _from_java(name: str, value: Any) -> Any:
    v = to_python(value)
    if v is None:
        return [] if name == "kept_parts" else None
    if name in _BOOLEAN_FIELDS:
        return bool(v)
    if name == "config":
        return {str(k): str(x) for k, x in v.items()}
    if name == "kept_parts":
        return [str(p) for p in v]
    if name == "internal":
        return int(v)
    return str(v)


def _snapshot(jpype: Any) -> Any:
    m = jpype.JClass("java.util.HashMap")()
    for name in Tracker.FIELDS:
        m.put(jpype.JString(name), _to_java(name, getattr(TRACKER, name)))
    return m


def _proxy(jpype: Any) -> Any:
    @jpype.JImplements("pyprof.jvm.Tracker")
    class PythonTracker:
        """pyprof.jvm.Tracker over Python's TRACKER (read at each call: a forked child makes a
        new lock)."""

        @jpype.JOverride
        def read(self) -> Any:  # never waits for the lock, as Python's own reads
            return _snapshot(jpype)

        @jpype.JOverride
        def write(self, changes: Any) -> None:
            items = [(str(e.getKey()), e.getValue()) for e in changes.entrySet()]
            unknown = [n for n, _ in items if n not in Tracker.FIELDS]
            if unknown:
                raise jpype.JClass("java.lang.IllegalArgumentException")(
                    f"no tracker field {unknown[0]} (the fields are {list(Tracker.FIELDS)}). "
                    "fix: name one of Tracker.FIELDS")
            values = [(n, _from_java(n, v)) for n, v in items]
            with TRACKER.lock:
                for name, value in values:
                    setattr(TRACKER, name, value)
            if any(n == "kept_parts" and v for n, v in values):
                from .. import profiler  # the JVM kept the trace file: Python finishes it at exit
                profiler.finish_kept_file_at_exit()

        @jpype.JOverride
        def lock(self) -> None:
            TRACKER.lock.acquire()

        @jpype.JOverride
        def unlock(self) -> None:
            TRACKER.lock.release()

        @jpype.JOverride
        def owner(self) -> int:
            return threading.get_ident()

        # The process's trace-file claims are Python's (POSIX locks are per process: one holder)
        @jpype.JOverride
        def claim(self, path: Any, claim_file: Any) -> int:
            # Python's claim file (the same by api.json trace_claims, unless Python changed
            # $PYPROF_CLAIM_DIR or $TMPDIR after the JVM read its environment at start)
            try:
                return _claim.owner(str(path))
            except OSError as exc:
                # the reason of the JVM's config.claim_failed, which gives the fix
                raise jpype.JClass("java.io.IOException")(
                    exc.strerror or type(exc).__name__) from exc

        @jpype.JOverride
        def holds(self, path: Any) -> bool:
            return _output.absolute(str(path)) in _claim.held()

        # One record of the windows this process wrote, whichever language wrote them
        @jpype.JOverride
        def windowWritten(self, path: Any) -> None:  # noqa: N802 (Java's name)
            _claim.window_written(str(path))

        @jpype.JOverride
        def wasWritten(self, path: Any) -> bool:  # noqa: N802
            return _claim.was_written(str(path))

        @jpype.JOverride
        def release(self, path: Any) -> None:
            if path is None:
                _claim.release_all()
            else:
                _claim.release(str(path))

    return PythonTracker()


def install() -> None:
    """Make Python's TRACKER the JVM layer's tracker (``pyprof.jvm.Tracker.use``). The two
    languages name the same fields (``Tracker.FIELDS``; tests/test_bridge_tracker.py checks)."""
    import jpype

    jpype.JClass("pyprof.jvm.Tracker").use(_proxy(jpype))


def uninstall() -> None:
    """At interpreter exit, before JPype shuts the JVM down: the JVM keeps a local tracker that
    starts as Python's is now, so no late JVM call (an exit hook, a JMX thread) calls into a
    Python that is exiting."""
    import jpype

    if not jpype.isJVMStarted():
        return
    jpype.JClass("pyprof.jvm.Tracker").use(jpype.JClass("pyprof.jvm.LocalTracker")(_snapshot(jpype)))
