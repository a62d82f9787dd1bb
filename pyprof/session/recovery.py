"""Crash recovery: rebuild the trace of a window whose process died while recording it.

While a window records, ``<window>.partial`` beside it names the raw trace, the window's start
offset and the metadata events known then (written by Python and by the JVM layer alike).
Package-internal: :func:`recover` is public as ``pyprof.recover`` (it writes at the window's
path, which its caller names); the sweep of dead processes' leftovers (:mod:`pyprof.session.leftovers`)
uses :func:`write_window`, to write beside that path instead.
"""

from __future__ import annotations

import contextlib
import json
import os

from ..process.rawfile import metadata_key, read_range
from .windows import PARTIAL, Window
from .. import rules


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


def read_partial(path: str | os.PathLike[str]) -> dict:
    """The ``<path>.partial`` of a window (its raw trace, start, end, metadata, pid).

    Raises:
        StateError: no ``.partial`` file (nothing to recover), or its raw trace is gone.
    """
    out = os.path.abspath(os.fspath(path))
    try:
        with open(out + PARTIAL, "rb") as f:
            info = json.load(f)
    except FileNotFoundError as exc:
        raise rules.error("session.nothing_to_recover", path=out, partial=out + PARTIAL) from exc
    if not os.path.exists(info["raw"]):
        raise rules.error("session.raw_trace_gone", raw=info["raw"], path=out)
    return info


def range_bytes(info: dict) -> int:
    """Bytes of raw trace a window's ``.partial`` (:func:`read_partial`) spans."""
    end = info.get("end")
    size = os.path.getsize(info["raw"]) if end is None else int(end)
    return max(0, size - int(info["start"]))


def write_window(path: str | os.PathLike[str], dest: str | os.PathLike[str]) -> Window:
    """Write the window whose trace path is ``path`` as a valid trace at ``dest`` (replaced if
    it exists), leaving its ``.partial`` and raw trace as they are. Errors of
    :func:`read_partial`."""
    info = read_partial(path)
    metadata = {metadata_key(ev): ev for ev in info["metadata"]}
    end = info.get("end")  # a window that ended but was not cut yet
    target = os.path.abspath(os.fspath(dest))
    events = read_range(info["raw"], int(info["start"]), None if end is None else int(end),
                        metadata, out=target)
    return Window(int(info["window"]), target, -1, -1, events, start_us=info.get("start_us"))


def recover_to(path: str | os.PathLike[str], dest: str | os.PathLike[str], *,
               remove_raw: bool = True) -> Window:
    """:func:`recover` the window whose trace path is ``path``, writing its trace at ``dest``
    (replaced if it exists) instead; the returned window's ``path`` is ``dest``. Same errors."""
    out = os.path.abspath(os.fspath(path))
    info = read_partial(out)
    window = write_window(out, dest)
    os.unlink(out + PARTIAL)
    if remove_raw and info.get("pid") != os.getpid():
        remove_raw_dir(info["raw"])
    return window


def remove_raw_dir(raw: str) -> None:
    """Delete a dead process's raw trace ``raw``, and its private directory with the files
    pyprof made in it (the window note, the sweep's claim and report), unless a window of it
    still awaits recovery (its ``.partial`` exists)."""
    spec = rules.API["raw_trace"]
    directory = os.path.dirname(raw)
    if not os.path.basename(directory).startswith(spec["dir_prefix"]):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(raw)
        return
    note = os.path.join(directory, spec["window_note"])
    try:
        with open(note, "rb") as f:
            windows = [str(w) for w in json.load(f)["windows"]]
    except (OSError, ValueError, KeyError, TypeError):
        windows = []
    if any(os.path.exists(w + PARTIAL) for w in windows):
        return  # another window of it may still be recovered
    for name in (spec["file"], spec["window_note"], spec["claim_name"], spec["reported_name"]):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(directory, name))
    with contextlib.suppress(OSError):
        os.rmdir(directory)
