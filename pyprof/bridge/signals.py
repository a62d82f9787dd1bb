"""Ctrl+C in a process whose Python code calls into the JVM through the JPype bridge.

JPype's own SIGINT handler (even with ``interrupt=False``) also interrupts the Java main
thread, which JPype reports as a second KeyboardInterrupt at the next JVM call: the very call
that stops the profiler or writes the trace.

So after the JVM starts, :func:`install` gives SIGINT back to a handler of pyprof's that wraps
the one Python had: outside bridge calls it is that handler; inside one (:func:`jvm_call`) it
only records the signal, and the wrapped handler runs (raising KeyboardInterrupt, for Python's
default) as soon as the outermost bridge call returns, never halfway through a call's argument
or result conversion. SIGTERM gets back the handler Python had; an ignored SIGINT stays ignored.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


_depth = 0  # bridge calls in progress on the main thread
_pending: list[tuple[int, Any]] = []


def saved_handlers() -> dict[int, Any]:
    """Python's handlers of SIGINT and SIGTERM, when this is the main thread (only it may set
    them back); call before the JVM starts."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}


def install(saved: dict[int, Any]) -> None:
    """Take SIGINT and SIGTERM back from the JVM (see the module docstring)."""
    for sig, handler in saved.items():
        if handler is None:
            continue  # set outside Python: leave the JVM's
        if sig == signal.SIGINT and callable(handler):
            signal.signal(sig, _deferring(handler))
        else:
            signal.signal(sig, handler)


def _deferring(handler: Any) -> Any:
    def on_signal(signum: int, frame: Any) -> None:
        if _depth:
            _pending.append((signum, frame))
            return
        handler(signum, frame)

    on_signal.wrapped = handler  # type: ignore[attr-defined]
    return on_signal


@contextlib.contextmanager
def jvm_call() -> Iterator[None]:
    """Around one bridge call: SIGINT waits until the outermost call returns."""
    global _depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if not _depth and _pending:
            signum, frame = _pending[0]
            _pending.clear()
            handler = signal.getsignal(signum)
            handler = getattr(handler, "wrapped", handler)
            if callable(handler):
                handler(signum, frame)  # Python's default raises KeyboardInterrupt here
