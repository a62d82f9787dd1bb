"""One trace file, one process: the claims of the trace files this process configured.

Two processes configured with one filename overwrite each other's file at every dump (MXNet
#16702), without a word. So a process claims the trace file it configures before MXNet is told
(and deletes the file): a POSIX record lock on a small claim file in a private per-user
directory, named by a hash of the absolute path, holding the owner's pid. The rule is data,
api.json ``trace_claims``, which the JVM layer implements the same way (``pyprof.claim`` and
``pyprof.jvm.LocalTracker``); Python's ``fcntl.lockf`` and Java's ``FileChannel.tryLock`` are
both fcntl F_SETLK locks, so each sees the other's. The OS drops a lock when its process ends,
even by SIGKILL: no stale claim outlives its owner.

POSIX locks belong to the process: a second claim in the same process succeeds (a JVM hosted
through JPype claims through Python's tracker, ``pyprof.bridge.tracker``), and closing any
descriptor of a claim file drops the process's lock on it, so one descriptor per claimed path
is kept here and the file is never opened again while claimed. Package-internal.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import itertools
import os
import stat
import sys
import threading
import time
from typing import Any, Iterator

from .. import rules
from . import output as _output


SPEC: dict = rules.API["trace_claims"]
_BLOCKED = (errno.EACCES, errno.EAGAIN)
_NOT_PRIVATE = "not a private directory of this user (mode 0700)"  # config.claim_failed's reason

_lock = threading.Lock()
_held: dict[str, int] = {}  # absolute trace path -> the descriptor of its locked claim file
_windows: set[str] = set()  # session windows' files claimed anew (claim_window)
_written: set[str] = set()  # window files this process's sessions wrote (window_written)


def base_dir() -> str:
    """``$PYPROF_CLAIM_DIR``, else ``$TMPDIR``, else ``/tmp`` (api.json ``trace_claims``)."""
    for name in SPEC["base_env"]:
        if os.environ.get(name):
            return _output.absolute(os.environ[name])
    return str(SPEC["base_default"])


def claim_dir() -> str:
    """The private directory of this user's claim files, ``<base>/pyprof-claims-<uid>``."""
    return os.path.join(base_dir(), SPEC["dir"].format(uid=os.getuid()))


def claim_file(path: str) -> str:
    """The claim file of trace path ``path`` (made absolute by grammar.json ``paths``)."""
    digest = hashlib.sha256(_output.absolute(path).encode("utf-8")).hexdigest()
    return os.path.join(claim_dir(), SPEC["file"].format(hash=digest[:SPEC["hash_chars"]]))


def _private_dir(directory: str) -> None:
    """Make ``directory`` (mode 0700) or check it: a directory of this user, no symlink."""
    os.makedirs(os.path.dirname(directory), exist_ok=True)
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o777 != 0o700:
        raise OSError(errno.EPERM, _NOT_PRIVATE)


def _read_pid(fd: int) -> int:
    """The pid written in a claim file another process holds; -1 while still unwritten."""
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else -1


def owner(path: str) -> int:
    """Claim trace file ``path`` for this process: 0 when this process holds the claim now,
    else the pid of the process holding it (-1 when it has not written its pid yet). What
    ``pyprof.jvm.Tracker.claim`` does, for a JVM hosted through JPype.

    Raises:
        OSError: the claim directory or file cannot be made or locked (no POSIX locks there).
    """
    full = _output.absolute(path)
    with _lock:
        if full in _held:
            return 0  # never opened again: closing a second descriptor would drop the lock
        target = claim_file(full)
        _private_dir(os.path.dirname(target))
        fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            try:
                if exc.errno in _BLOCKED:
                    return _read_pid(fd)
                raise
            finally:
                os.close(fd)  # this process holds no lock on that file: closing drops nothing
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        _held[full] = fd
        return 0


def claim(key: str, path: str, code: str = "config.filename_claimed",
          example: str | None = None) -> bool:
    """Claim ``path``, the value of config key ``key``, before MXNet is told to write there.
    Returns True when the claim is new (the caller gives it back if its config then fails).

    Raises:
        ConfigError: ``code`` (another process holds it: names its pid and ``example``, by
            default ``path`` with this process's pid in its name) or ``config.claim_failed``
            (no claim can be taken: the directory or the locks fail).
    """
    full = _output.absolute(path)
    new = full not in held()
    pid = _owner_waiting(path)
    if pid != 0:
        raise rules.error(code, path=path, key=key, pid=pid if pid > 0 else "(not known yet)",
                          example=example or _with_pid(path, os.getpid()))
    return new


def _owner_waiting(path: str) -> int:
    """:func:`owner` of ``path``, waiting up to ``pid_wait_s`` for a pid not written yet.
    Raises ConfigError ``config.claim_failed``."""
    full = _output.absolute(path)
    deadline = time.monotonic() + float(SPEC["pid_wait_s"])
    try:
        # -1: the owner has locked but not yet written its pid (or it just gave the claim back)
        while (pid := owner(full)) == -1 and time.monotonic() < deadline:
            time.sleep(0.01)
    except OSError as exc:
        raise rules.error("config.claim_failed", path=path, claim=claim_file(full),
                          reason=exc.strerror or type(exc).__name__,
                          env=SPEC["base_env"][0]) from exc
    return pid


def claim_window(index: int, path: str) -> str:
    """The file session window ``index`` is written to, claimed while the window records
    (api.json ``trace_claims``): ``path`` (absolute), or ``path`` with this process's pid in its
    name when another process's trace or session holds it (``window_claimed_note``) or when it
    holds no trace (api.json ``output_paths``, ``window_not_a_trace_note``), said in one line
    on stderr. :func:`release_window` gives it back once the window is saved.

    Raises:
        ConfigError: ``config.claim_failed``; StateError ``session.path_claimed`` when the
            file with this process's pid is claimed too.
    """
    full = _beside_written(index, _output.absolute(path))
    new = full not in held()
    pid = _owner_waiting(full)
    if pid == 0 and _output.replace_problem(full) is not None:
        if new:
            release(full)
        pid, note = None, SPEC["window_not_a_trace_note"]
    else:
        note = SPEC["window_claimed_note"]
    if pid != 0:
        instead = _with_pid(full, os.getpid())
        print(rules.render(note, {"index": index, "path": full, "instead": instead,
                                  "pid": pid if pid and pid > 0 else "(not known yet)"}),
              file=sys.stderr)
        full, new = instead, claim("path", instead, "session.path_claimed", instead)
    if new:  # else the session's template claim (a path without fields), given back at its end
        with _lock:
            _windows.add(full)
    return full


def release_window(path: str | None = None) -> None:
    """Give back the claim :func:`claim_window` took anew for ``path`` (None: for every window
    of this process: one session at a time)."""
    with _lock:
        paths = set(_windows) if path is None else {path} & _windows
        _windows.difference_update(paths)
    for p in paths:
        release(p)


def window_written(path: str) -> None:
    """Record that a session of this process wrote window file ``path`` (absolute): a later
    window never replaces it (api.json ``trace_claims.written_about``)."""
    with _lock:
        _written.add(path)


def was_written(path: str) -> bool:
    """True when a session of this process wrote window file ``path`` (:func:`window_written`;
    the JVM's too when JPype hosts it: ``pyprof.jvm.Tracker.wasWritten``)."""
    with _lock:
        return path in _written


def _beside_written(index: int, full: str) -> str:
    """``full``, or where window ``index`` goes instead when an earlier session of this process
    wrote ``full`` and it is still there (``written_example``, said by ``window_written_note``)."""
    with _lock:
        if full not in _written:
            return full
    if not os.path.lexists(full):  # moved away: nothing is replaced
        return full
    stem, suffix = os.path.splitext(os.path.basename(full))
    for n in itertools.count(1):
        instead = os.path.join(os.path.dirname(full),
                               SPEC["written_example"].format(stem=stem, n=n, suffix=suffix))
        with _lock:
            taken = instead in _written
        if not taken and not os.path.lexists(instead):
            break
    print(rules.render(SPEC["window_written_note"], {"index": index, "path": full,
                                                    "instead": instead}), file=sys.stderr)
    return instead


def _with_pid(path: str, pid: int | str) -> str:
    """``path`` with ``pid`` in its file name (api.json ``trace_claims.pid_example``)."""
    stem, suffix = os.path.splitext(os.path.basename(path))
    return os.path.join(os.path.dirname(path),
                        SPEC["pid_example"].format(stem=stem, pid=pid, suffix=suffix))


@contextlib.contextmanager
def claiming_window_path(template: Any, cwd: str) -> Iterator[str | None]:
    """A session's claim of its window path, around its start: the window-path ``template``
    (``pyprof.session.template.Template``) made absolute against ``cwd``, in its canonical
    text (``{window:1d}`` is ``{window}``);
    none for a template with ``{pid}``. Yields the path claimed anew (None when none), given
    back when the body raises.

    Raises:
        StateError: ``session.path_claimed``; ConfigError ``config.claim_failed``.
    """
    path = None if template.has("pid") else \
        _output.absolute(os.path.join(cwd, template.canonical()))
    new = path is not None and claim("path", path, "session.path_claimed",
                                     _with_pid(template.text, "{pid}"))
    try:
        yield path if new else None
    except BaseException:
        release(path if new else None)
        raise


@contextlib.contextmanager
def claiming(key: str, path: str, enabled: bool = True) -> Iterator[None]:
    """:func:`claim` ``path`` (when ``enabled``) around the config that follows: a claim it
    made is given back when the body raises (nothing was configured)."""
    new = enabled and claim(key, path)
    try:
        yield
    except BaseException:
        if new:
            release(path)
        raise


@contextlib.contextmanager
def all_given_back_after(when: bool) -> Iterator[None]:
    """Give every claim of this process back after the body (raising or not), ``when`` true:
    around the end of a finished dump."""
    try:
        yield
    finally:
        if when:
            release_all()


def release(path: str | None) -> None:
    """Give the claim of ``path`` back (emptied, not deleted); nothing when not held or None."""
    if path is None:
        return
    with _lock:
        fd = _held.pop(_output.absolute(path), None)
        if fd is not None:
            _give_back(fd)


def release_all() -> None:
    """Give every claim of this process back (after its finished dump)."""
    with _lock:
        fds = list(_held.values())
        _held.clear()
        for fd in fds:
            _give_back(fd)


def _give_back(fd: int) -> None:
    try:
        os.ftruncate(fd, 0)  # no stale pid; still locked, so no other claimant writes meanwhile
    except OSError:
        pass
    os.close(fd)  # drops the lock


def held() -> list[str]:
    """The absolute trace paths this process holds claims on."""
    with _lock:
        return sorted(_held)


def _after_fork_in_child() -> None:
    # A forked child holds none of its parent's POSIX locks (and profiles nothing: capi refuses).
    global _lock
    _lock = threading.Lock()
    for fd in _held.values():
        try:
            os.close(fd)  # the child's copy: the parent's lock stays
        except OSError:
            pass
    _held.clear()
    _windows.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
