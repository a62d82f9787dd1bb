"""The bounds of the raw trace and of the sweep of leftovers, and the watchdog of the cap.

The numbers are data (``api.json`` ``raw_trace``), each overridable by an environment variable
that the spec names, read the same way by the JVM layer (``pyprof.session.cap``):

- ``max_bytes`` (``$PYPROF_RAW_MAX_BYTES``): the cap of the raw trace. At each step, and every
  ``watch_seconds`` on a :class:`Watchdog` thread while a session records, a raw trace past the
  cap stops the recording; the window then is saved truncated. The raw trace never holds more
  than the cap plus what MXNet records in ``dump_period + watch_seconds`` seconds.
- ``start_wait_seconds`` (``$PYPROF_RECOVER_WAIT_SECONDS``): the longest a session's
  ``start()`` waits for the sweep of dead processes' leftovers (:mod:`pyprof.session.leftovers`).
- ``recover_max_bytes`` (``$PYPROF_RECOVER_MAX_BYTES``): the largest window range the sweep
  converts; a larger one is reported once instead.

Package-internal.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from .. import rules


SPEC = rules.API["raw_trace"]


def _number(key: str, env_key: str, *, zero_ok: bool, what: str) -> float:
    """The spec's ``key``, else the number in the variable the spec names at ``env_key``.

    Raises:
        ConfigError ``raw.bad_limit``: the variable is not a positive (or, with ``zero_ok``,
        non-negative) number.
    """
    default = SPEC[key]
    env = str(SPEC[env_key])
    text = os.environ.get(env, "").strip()
    if not text:
        return default
    integer = isinstance(default, int)
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        value = -1
    if value < 0 or (value == 0 and not zero_ok) or value != value:
        expected = ("a non-negative" if zero_ok else "a positive") + (
            " integer" if integer else " number")
        raise rules.error("raw.bad_limit", variable=env, value=text, expected=expected,
                          what=what, default=default)
    return value


def max_bytes() -> int:
    """The cap of the raw trace, bytes: ``$PYPROF_RAW_MAX_BYTES``, else ``max_bytes``.

    Raises:
        ConfigError ``raw.bad_limit``: the variable is not a positive integer.
    """
    return int(_number("max_bytes", "max_env", zero_ok=False,
                       what="bytes of raw trace past which a session stops recording"))


def start_wait_seconds() -> float:
    """Seconds ``start()`` waits at most for the sweep of leftovers (0: not at all).

    Raises:
        ConfigError ``raw.bad_limit``: the variable is not a non-negative number.
    """
    return float(_number("start_wait_seconds", "start_wait_env", zero_ok=True,
                         what="seconds a session's start waits for the recovery of leftovers"))


def recover_max_bytes() -> int:
    """The largest window range, bytes, the sweep converts (a larger one is reported).

    Raises:
        ConfigError ``raw.bad_limit``: the variable is not a positive integer.
    """
    return int(_number("recover_max_bytes", "recover_max_env", zero_ok=False,
                       what="bytes of a dead process's window the next start recovers"))


def check(size: int, window: Any, step: int) -> int | None:
    """None while ``size`` (the raw trace's, bytes) is under the cap; else the cap, with
    ``window`` (the :class:`~pyprof.session.windows.OpenWindow` recording, or None) marked
    truncated and, the first time, one line ``truncated_note`` on stderr.

    Raises:
        ConfigError ``raw.bad_limit``: a bad ``$PYPROF_RAW_MAX_BYTES``.
    """
    cap = max_bytes()
    if size < cap:
        return None
    if window is not None and not window.truncated:
        window.truncated = True
        print(rules.render(str(SPEC["truncated_note"]), {
            "index": window.index, "path": window.path, "step": step, "bytes": size,
            "cap": cap, "env": SPEC["max_env"]}), file=sys.stderr)
    return cap


class Watchdog:
    """A daemon thread calling ``check()`` with ``lock`` held every ``watch_seconds`` until
    :meth:`stop`. An exception ``check`` raises ends the thread silently (the step check still
    holds the cap)."""

    def __init__(self, check: Callable[[], object], lock: Any) -> None:
        self._check, self._lock = check, lock
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pyprof-raw-cap", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        period = float(SPEC["watch_seconds"])
        while not self._done.wait(period):
            try:
                with self._lock:
                    if not self._done.is_set():
                        self._check()
            except Exception:  # noqa: BLE001 - a watchdog never raises into a host
                return

    def stop(self) -> None:
        """Stop the thread (it ends within ``watch_seconds``; not waited for)."""
        self._done.set()
