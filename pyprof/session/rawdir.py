"""The private directory of this process's raw trace, and the temporary files of dead processes.

The naming rule is data (``api.json`` ``raw_trace``), shared with the JVM layer
(``pyprof.session.rawdir``): ``<base>/pyprof-raw-<pid>-<start>-<random>``, where ``<start>`` is
the process's start time (field 22 of ``/proc/<pid>/stat``, clock ticks since boot; 0 without
``/proc``). A directory whose pid no longer runs, or runs with another start time (a reused
pid), is a leftover: its open window is recovered beside the window's path, never over a file,
then it is deleted; the sweep is :mod:`pyprof.session.leftovers`. Package-internal.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import sys
import tempfile
import threading
import time

from ..process import keep_file as _keep_file
from .. import rules


SPEC: dict[str, str | int] = rules.API["raw_trace"]
#: A raw-trace directory's name: groups pid and start ticks.
DIR_NAME = re.compile(re.escape(str(SPEC["dir_prefix"])) + r"(\d+)-(\d+)-[A-Za-z0-9_]+\Z")
_LEGACY = re.compile(re.escape(str(SPEC["legacy_file_prefix"])) + r"(\d+)\.json\Z")
_TEMP = re.compile(re.escape(str(SPEC["temp_prefix"])) + r"(\d+)-.*\.(tmp|json)\Z")


def base_dir() -> str:
    """Where raw-trace directories are made: ``$PYPROF_RAW_DIR``, else the system temp dir."""
    return os.path.abspath(os.environ.get(str(SPEC["dir_env"])) or tempfile.gettempdir())


def start_ticks(pid: int) -> int:
    """Field 22 of ``/proc/<pid>/stat`` (start time, clock ticks since boot); 0 if unknown,
    -1 when the process is a zombie (it has ended)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return 0
    fields = data[data.rindex(b")") + 2:].split()  # the name (field 2) may hold spaces
    return -1 if fields[0] == b"Z" else int(fields[19])


def alive(pid: int, ticks: int) -> bool:
    """True while the process that recorded ``(pid, ticks)`` may still run."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    now = start_ticks(pid)
    return now != -1 and (ticks == 0 or now == 0 or now == ticks)


def make_dir() -> str:
    """A new private directory for this process's raw trace (mode 0700)."""
    base = base_dir()
    os.makedirs(base, exist_ok=True)
    prefix = f"{SPEC['dir_prefix']}{os.getpid()}-{start_ticks(os.getpid())}-"
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def recreate(path: str) -> bool:
    """Make ``path`` again (it was deleted between sessions); False if someone else made it."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return False
    return True


def remove_dir(path: str) -> None:
    """Delete the directory and its files. MXNet's dump timer may create the raw file again
    (it opens it in append mode every ``dump_period``), so removal is retried."""
    for _ in range(50):
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(path):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(path, name))
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            continue  # the timer made the file again: once more
    shutil.rmtree(path, ignore_errors=True)


_removing: list[threading.Thread] = []  # remove_dir_later's threads not joined yet
#: How long the exit waits for them (a hung file system never holds the exit): a directory
#: still there is this process's, deleted by the next start's sweep.
EXIT_WAIT_SECONDS = 10.0


def remove_dir_later(path: str) -> None:
    """:func:`remove_dir` on a thread of its own (``pyprof-raw-delete``): deleting a raw trace
    takes milliseconds a MB of it on some file systems, none of them the caller's. The
    directory is renamed first, so its path is free at once for the next session; the new
    name (``<path>_gone<n>``) is still a raw directory of this process (:data:`DIR_NAME`), so
    the next start's sweep deletes it should the process die first. :func:`wait_removed`
    joins the threads (at exit). Where the rename or the thread fails: removed here."""
    for n in itertools.count():
        gone = f"{path}_gone{n}"
        if not os.path.lexists(gone):
            break
    try:
        os.rename(path, gone)
    except FileNotFoundError:
        return
    except OSError:
        remove_dir(path)
        return
    thread = threading.Thread(target=remove_dir, args=(gone,), name="pyprof-raw-delete",
                              daemon=True)
    try:
        thread.start()
    except RuntimeError:  # no thread to be had (interpreter shutdown)
        remove_dir(gone)
        return
    _removing[:] = [t for t in _removing if t.is_alive()] + [thread]


def wait_removed(timeout: float = EXIT_WAIT_SECONDS) -> None:
    """Join :func:`remove_dir_later`'s threads, ``timeout`` seconds in all at most: their
    directories are gone, or left to the next start's sweep."""
    deadline = time.monotonic() + timeout
    while _removing:
        _removing.pop().join(max(0.0, deadline - time.monotonic()))


def owned(path: str) -> bool:
    """True for a file or directory of this user that is no symbolic link."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return not os.path.islink(path) and st.st_uid == os.geteuid()


def clean_dir_of(directory: str, pid: int | None = None) -> list[str]:
    """Delete the ``.pyprof-<pid>-*.tmp`` files (a window or trace being written) and the
    ``.pyprof-raw-<pid>.json`` raw traces of older versions in ``directory`` whose process no
    longer exists (only ``pid``'s when given). The parts such a process kept of a trace file
    (``api.json`` ``keep_filename``) are joined into that file first, not lost."""
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    dead: dict[int, bool] = {}

    def gone(owner: int) -> bool:
        if owner not in dead:
            dead[owner] = owner == pid or (pid is None and not alive(owner, 0))
        return dead[owner]

    unjoined = _join_kept_parts(directory, names, gone)
    for name in names:
        m = _TEMP.match(name) or _LEGACY.match(name)
        if not m or name in unjoined:
            continue
        owner = int(m.group(1))
        path = os.path.join(directory, name)
        if gone(owner) and owned(path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                removed.append(path)
    return removed


def _join_kept_parts(directory: str, names: list[str], gone) -> set[str]:
    """Join the kept parts of dead processes (``gone(pid)``) in ``directory`` into the files
    they were kept of. Returns the names of the parts that could not be joined (kept for a
    later start; one warning line each file)."""
    groups: dict[tuple[int, str], list[tuple[int, str]]] = {}
    for name in names:
        part = _keep_file.parse_part(name)
        path = os.path.join(directory, name)
        if part and gone(part[0]) and owned(path):
            groups.setdefault((part[0], part[2]), []).append((part[1], name))
    failed: set[str] = set()
    for (owner, target), parts in sorted(groups.items()):
        parts.sort()
        try:
            _keep_file.join_leftover([os.path.join(directory, n) for _, n in parts],
                                     os.path.join(directory, target))
        except OSError as exc:
            failed.update(n for _, n in parts)
            print(f"pyprof: could not join the parts of {target!r} kept by dead process "
                  f"{owner}: {exc}", file=sys.stderr)
    return failed
