"""Crash recovery: rebuild the trace of a window whose process died while recording it.

While a window records, ``<window>.partial`` beside it names the raw trace, the window's start
offset and the metadata events known then (written by Python and by the JVM layer alike).
Package-internal: :func:`recover` is public as ``pyprof.recover`` (it writes at the window's
path, which its caller names); the sweep of a dead process's leftovers (:mod:`pyprof.session.rawdir`)
uses :func:`recover_to`, to write beside that path instead.
"""

from __future__ import annotations

import contextlib
import json
import os

from .windows import PARTIAL, Window, metadata_key, read_range
from .. import rules

__all__ = ["recover", "recover_to"]


def recover(path: str | os.PathLike[str], *, remove_raw: bool = True) -> Window:
    """Rebuild the trace of a window whose process died while recording it.

    ``path`` is the window's trace path (``<path>.partial`` must exist beside it). What MXNet
    had appended to the raw trace before the crash (every ``dump_period`` seconds), from the
    window's start to its end (or to the end of the raw trace while it recorded), is written to
    ``path`` as a valid trace; a last event cut mid-way is dropped. The ``.partial`` file, and
    with ``remove_raw`` the raw trace, are deleted afterwards.

    Raises:
        StateError: no ``.partial`` file (nothing to recover), or its raw trace is gone.
    """
    return recover_to(path, path, remove_raw=remove_raw)


def recover_to(path: str | os.PathLike[str], dest: str | os.PathLike[str], *,
               remove_raw: bool = True) -> Window:
    """:func:`recover` the window whose trace path is ``path``, writing its trace at ``dest``
    (replaced if it exists) instead; the returned window's ``path`` is ``dest``. Same errors."""
    out = os.path.abspath(os.fspath(path))
    try:
        with open(out + PARTIAL, "rb") as f:
            info = json.load(f)
    except FileNotFoundError as exc:
        raise rules.error("session.nothing_to_recover", path=out, partial=out + PARTIAL) from exc
    if not os.path.exists(info["raw"]):
        raise rules.error("session.raw_trace_gone", raw=info["raw"], path=out)
    metadata = {metadata_key(ev): ev for ev in info["metadata"]}
    end = info.get("end")  # a window that ended but was not cut yet
    target = os.path.abspath(os.fspath(dest))
    events = read_range(info["raw"], int(info["start"]), None if end is None else int(end),
                        metadata, out=target)
    os.unlink(out + PARTIAL)
    if remove_raw and info.get("pid") != os.getpid():
        os.unlink(info["raw"])
        directory = os.path.dirname(info["raw"])  # the dead process's private directory
        if os.path.basename(directory).startswith(rules.API["raw_trace"]["dir_prefix"]):
            for name in os.listdir(directory):
                if name == rules.API["raw_trace"]["window_note"]:
                    os.unlink(os.path.join(directory, name))
            with contextlib.suppress(OSError):  # other windows of it may still be recovered
                os.rmdir(directory)
    return Window(int(info["window"]), target, -1, -1, events, start_us=info.get("start_us"))
