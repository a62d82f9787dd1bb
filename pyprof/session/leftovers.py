"""The sweep of dead processes' leftovers: never longer than a bound at start, claimed by one
process, reported once when it cannot be done, and never leaving an empty or cut file.

While a window records, a small ``<window>.partial`` file beside it names the raw file, the
window's start offset and start time, and a note in the raw trace's directory names the window;
MXNet appends the raw file every ``dump_period`` seconds. If the process dies, the first session
started afterwards (in any process, either language) finds the directory of the dead process
(its pid no longer runs, or runs with another start time: :mod:`pyprof.session.rawdir`), writes
what was flushed as the window's trace beside the window's path, as
``<stem>.recovered-<pid><suffix>`` (``loop_0.recovered-12345.json``; ``-1``, ``-2``... added when
that exists; never over a file: the most common next start is a rerun of the same script, which
writes the window's path again), prints one line on stderr naming it, and deletes the directory
and the temporary files the dead process left beside its window. The parts such a process kept
of a trace file are joined into that file. The rules (``api.json`` ``raw_trace``
``about_leftovers``, shared with the JVM's ``pyprof.session.leftovers``):

- **Bounded start.** The sweep runs on one daemon thread per process, started by the first
  session's ``start()``, which waits for it at most ``start_wait_seconds`` (1 s,
  ``$PYPROF_RECOVER_WAIT_SECONDS``); then it goes on in the background and exit never waits
  for it.
- **One recoverer.** A process claims a leftover by making the symbolic link ``recovering`` in
  its directory, pointing to ``<pid>-<start>`` of the claimant (atomic; fails when it exists). A
  directory whose claimant still runs is left to it.
- **Never started over.** A claim whose claimant has ended (killed mid-recovery), a window whose
  range holds more than ``recover_max_bytes`` (1 GiB, ``$PYPROF_RECOVER_MAX_BYTES``) and a
  recovery that failed are *reported*: the first process to make the file ``reported`` in the
  directory (``O_EXCL``) prints one line per window naming the window, the raw trace, its size
  and the command (``pyprof recover <window>``); later starts leave the directory alone.
- **No empty file.** A window is written to ``.pyprof-<pid>-recover-*.tmp`` beside it, then
  hard-linked to its recovered name (which fails rather than replace a file) and unlinked; on
  failure the temporary file is deleted, and a dead recoverer's by the next start.

Package-internal; :func:`recover_beside` is ``pyprof recover``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading

from . import cap as _cap
from . import rawdir as _raw_dir
from .recovery import range_bytes, read_partial, remove_raw_dir, write_window
from .windows import PARTIAL
from .. import rules


SPEC = rules.API["raw_trace"]
_lock = threading.Lock()
_thread: threading.Thread | None = None


def start_sweep(window_dir: str | None) -> threading.Thread:
    """Start the sweep (:func:`sweep`) once per process on a daemon thread, and wait for it the
    first time at most :func:`pyprof.session.cap.start_wait_seconds`. Returns the thread.

    Raises:
        ConfigError ``raw.bad_limit``: a bad ``$PYPROF_RECOVER_WAIT_SECONDS``.
    """
    global _thread
    wait = _cap.start_wait_seconds()
    with _lock:
        first = _thread is None
        if first:
            _thread = threading.Thread(target=sweep, args=(window_dir,), daemon=True,
                                       name="pyprof-leftovers")
            _thread.start()
        thread = _thread
    if first:
        thread.join(wait)
    return thread


def sweep(window_dir: str | None = None) -> list[str]:
    """Recover or report the leftovers of dead processes (:func:`sweep_dir` each), then delete
    the temporary files such processes left in ``window_dir`` and the base directory. Returns
    the directories removed. Never raises: a failure is one line on stderr."""
    removed: list[str] = []
    try:
        base = _raw_dir.base_dir()
        try:
            names = sorted(os.listdir(base))
        except OSError:
            names = []
        for name in names:
            m = _raw_dir.DIR_NAME.match(name)
            path = os.path.join(base, name)
            if m and _raw_dir.owned(path) and not _raw_dir.alive(int(m.group(1)),
                                                                  int(m.group(2))):
                if sweep_dir(path, int(m.group(1))):
                    _raw_dir.remove_dir(path)
                    removed.append(path)
        for directory in {base, window_dir} - {None}:
            _raw_dir.clean_dir_of(str(directory))
    except Exception as exc:  # noqa: BLE001 - a background sweep must never raise
        print(f"pyprof: the sweep of dead processes' leftovers stopped: {exc}", file=sys.stderr)
    return removed


def _windows(path: str) -> list[str]:
    """The windows the dead process's note names whose ``.partial`` still exists."""
    try:
        with open(os.path.join(path, str(SPEC["window_note"])), "rb") as f:
            windows = [str(w) for w in json.load(f)["windows"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []  # no window was recording
    return [w for w in windows if os.path.exists(w + PARTIAL)]


def _me() -> str:
    return rules.render(str(SPEC["claim_target"]),
                        {"pid": os.getpid(), "start": _raw_dir.start_ticks(os.getpid())})


def sweep_dir(path: str, pid: int) -> bool:
    """Recover the windows of the dead process ``pid`` whose raw-trace directory is ``path``,
    or report them (see the module's rules). True when the directory may be deleted."""
    if os.path.lexists(os.path.join(path, str(SPEC["reported_name"]))):
        return False  # reported before: left for `pyprof recover` or the user
    claim = os.path.join(path, str(SPEC["claim_name"]))
    try:
        os.symlink(_me(), claim)
    except FileExistsError:
        try:
            claimant = os.readlink(claim)
            cpid, cstart = (int(x) for x in claimant.split("-"))
        except (OSError, ValueError):
            return False  # not a claim pyprof made
        if _raw_dir.alive(cpid, cstart):
            return False  # being recovered by that process
        windows = _windows(path)
        _report(path, pid, [(w, "interrupted", {"claimant": cpid}) for w in windows])
        for w in windows:  # the temporary files of the interrupted recoverer and the dead
            _raw_dir.clean_dir_of(os.path.dirname(w), cpid)
            _raw_dir.clean_dir_of(os.path.dirname(w), pid)
        return not windows
    reports = []
    for window in _windows(path):
        try:
            size = range_bytes(read_partial(window))
            limit = _cap.recover_max_bytes()
            if size > limit:
                reports.append((window, "too_large",
                                {"bytes": size, "limit": limit, "env": SPEC["recover_max_env"]}))
                continue
            dest = place_beside(window, pid)
            print(rules.render(str(SPEC["recovered_note"]),
                               {"window": window, "pid": pid, "path": dest}), file=sys.stderr)
        except Exception as exc:  # noqa: BLE001 - one window's failure is reported, not raised
            reports.append((window, "failed", {"error": str(exc)}))
        _raw_dir.clean_dir_of(os.path.dirname(window), pid)
    _report(path, pid, reports)
    return not reports


def _report(path: str, pid: int, reports: list[tuple[str, str, dict]]) -> None:
    """Report ``reports`` (window, why, fields) once: only the process that makes the file
    ``reported`` in ``path`` prints them, one line each."""
    if not reports:
        return
    try:
        os.close(os.open(os.path.join(path, str(SPEC["reported_name"])),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError:
        return  # reported by another process (or not writable: nothing more to do)
    raw = os.path.join(path, str(SPEC["file"]))
    size = os.path.getsize(raw) if os.path.exists(raw) else 0
    for window, why, fields in reports:
        print(rules.render(str(SPEC["reported_note"]), {
            "window": window, "pid": pid, "raw": raw, "bytes": size, "dir": path,
            "why": rules.render(str(SPEC["reported_why"][why]), fields)}), file=sys.stderr)


def place_beside(window: str, pid: int) -> str:
    """Write the window ``window`` of dead process ``pid`` beside its path, never over a file:
    ``<stem>.recovered-<pid><suffix>`` (api.json ``raw_trace`` ``recovered_name``; stem and
    suffix as :func:`os.path.splitext` splits the name), else
    ``<stem>.recovered-<pid>-<n><suffix>`` for the first n = 1, 2, ... not taken. Written to a
    temporary file in the same directory first, then linked into place: the recovered name
    never holds an empty or cut file. Deletes the ``.partial``; returns the path written.

    Raises:
        StateError: as :func:`pyprof.recover` (no ``.partial``, raw trace gone);
        OSError: the directory cannot be written.
    """
    directory, name = os.path.split(os.path.abspath(window))
    fd, tmp = tempfile.mkstemp(prefix=f"{SPEC['temp_prefix']}{os.getpid()}-recover-",
                               suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        write_window(window, tmp)
        os.chmod(tmp, 0o644)
        dest = link_beside(tmp, window, pid)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.abspath(window) + PARTIAL)
    return dest


def link_beside(tmp: str, window: str, pid: int) -> str:
    """Link the finished file ``tmp`` (in the directory of ``window``) to the first free
    recovered name of ``window`` (:func:`place_beside`) and return it; ``tmp`` stays. Never
    replaces a file: a hard link fails when the name exists (where the file system has no hard
    links, the name is reserved ``O_EXCL`` and ``tmp`` renamed over it)."""
    directory, name = os.path.split(os.path.abspath(window))
    stem, suffix = os.path.splitext(name)
    n = 0
    while True:
        template = SPEC["recovered_name_taken"] if n else SPEC["recovered_name"]
        dest = os.path.join(directory, rules.render(
            str(template), {"stem": stem, "pid": pid, "suffix": suffix, "n": n}))
        try:
            os.link(tmp, dest)
            return dest
        except FileExistsError:
            n += 1
        except OSError:  # no hard links on this file system: reserve the name, then replace
            try:
                os.close(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            except FileExistsError:
                n += 1
                continue
            os.replace(tmp, dest)
            return dest


def recover_beside(window: str) -> str:
    """``pyprof recover WINDOW``: write a dead process's window beside its path
    (:func:`place_beside`, the pid its ``.partial`` names), then delete its raw trace and
    directory unless another window of it awaits recovery. Returns the path written.

    Raises:
        StateError: as :func:`pyprof.recover`.
    """
    info = read_partial(window)
    dest = place_beside(window, int(info.get("pid", 0)))
    if info.get("pid") != os.getpid():
        remove_raw_dir(info["raw"])
    return dest
