"""Checks of a trace file's path, before MXNet is told to write there and around each dump.

MXNet 1.9.1 opens its trace file with ``std::ofstream`` at every dump and never checks the
result (src/profiler/profiler.cc ``DumpProfile``): a directory, a place it cannot create a file
in, or a full disk give no error and no trace, and the events of that dump are gone. pyprof
checks the path when it is configured (``set_config``, a session's window path) and again right
before each dump (a failed check leaves MXNet's queued events in place, so they can still go to
another file), and looks at the file after the dump. The rules are api.json ``names`` (text)
and ``output_paths`` (free space); the problems and fixes are errors.json ``path_problems``.
The JVM layer (``pyprof.output``) makes the same checks. Package-internal.
"""

from __future__ import annotations

import os
import stat
import tempfile

from .. import rules


#: Free bytes a trace's file system must have (api.json ``output_paths.min_free_bytes``);
#: ``$PYPROF_MIN_FREE_BYTES`` (``min_free_env``) overrides it, 0 turns the check off.
MIN_FREE_BYTES: int = rules.API["output_paths"]["min_free_bytes"]


def absolute(path: str) -> str:
    """``path`` made absolute against the working directory and normalised lexically, by the
    rule of grammar.json ``paths`` (the JVM: Path.toAbsolutePath().normalize()): os.path.abspath,
    with the leading ``//`` posixpath keeps made ``/``."""
    full = os.path.abspath(path)
    return full[1:] if full.startswith("//") else full


def same_file(a: str, b: str) -> bool:
    """True when the paths ``a`` and ``b`` name the same file by grammar.json ``paths``: their
    :func:`absolute` forms are equal (``"a.json"``, ``"./a.json"``, ``"<cwd>/a.json"``)."""
    return absolute(a) == absolute(b)


def min_free_bytes() -> int:
    """:data:`MIN_FREE_BYTES`, or ``$PYPROF_MIN_FREE_BYTES`` when it holds an integer >= 0."""
    raw = os.environ.get(rules.API["output_paths"]["min_free_env"], "").strip()
    return int(raw) if raw.isdigit() else MIN_FREE_BYTES


def text_problem(text: str) -> dict[str, str] | None:
    """A NUL or a lone surrogate in a path (C would cut it / it has no UTF-8 encoding), or a
    trailing '/' (it names a directory: normalising would write a file named like it)."""
    if "\0" in text:
        return rules.path_problem("nul", index=text.index("\0"))
    bad = rules.lone_surrogate(text)
    if bad is not None:
        return rules.path_problem("not_unicode", index=bad[0], point=bad[1])
    if text.endswith("/"):
        return rules.path_problem("no_file_name", path=text, example=text + "profile.json")
    return None


def name_problem(path: str) -> dict[str, str] | None:
    """A file name (the text after the last '/') longer than api.json ``output_paths``
    ``max_name_bytes`` of UTF-8: pyprof writes beside the file under longer names."""
    size = len(path.rsplit("/", 1)[-1].encode("utf-8"))
    if size > (most := rules.API["output_paths"]["max_name_bytes"]):
        return rules.path_problem("name_too_long", bytes=size, max=most)
    return None


def file_in_the_way(directory: str) -> str | None:
    """The nearest existing ancestor of ``directory`` (itself included) when that is not a
    directory (a file in the way: no 'create it first' can help), else None."""
    d = directory
    while not os.path.lexists(d) and os.path.dirname(d) != d:
        d = os.path.dirname(d)
    return d if os.path.lexists(d) and not os.path.isdir(d) else None


def _missing(directory: str) -> dict[str, str]:
    blocker = file_in_the_way(directory)
    if blocker is not None:
        return rules.path_problem("file_in_the_way", blocker=blocker, directory=directory)
    return rules.path_problem("missing_directory", directory=directory)


def file_problem(path: str, min_free: int | None = None,
                 example: str = "profile.json") -> dict[str, str] | None:
    """What keeps MXNet from writing a trace at ``path``, or None.

    Checked in order: the text (:func:`text_problem`, :func:`name_problem`), the directory
    exists, ``path`` is not a
    directory nor a device, pipe or socket, a file can be created in the directory (a hidden
    probe file, created and deleted at once: permissions alone do not tell, e.g. for root in
    /proc), and the file system has ``min_free`` bytes (default :func:`min_free_bytes`) free.
    ``example`` is the file name the fix for a directory suggests inside it.
    """
    problem = text_problem(path) or name_problem(path)
    if problem is not None:
        return problem
    full = absolute(path)
    directory = os.path.dirname(full)
    if not os.path.isdir(directory):
        return _missing(directory)
    try:
        mode = os.stat(full).st_mode
    except OSError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        return rules.path_problem("is_directory", path=path,
                                  example=os.path.join(path, example))
    if mode is not None and not stat.S_ISREG(mode):
        return rules.path_problem("not_regular", path=path)
    spec = rules.API["output_paths"]
    try:
        fd, probe = tempfile.mkstemp(prefix=spec["probe_prefix"].format(pid=os.getpid()),
                                     suffix=spec["probe_suffix"], dir=directory)
    except OSError as exc:
        return rules.path_problem("not_writable", directory=directory,
                                  reason=exc.strerror or type(exc).__name__)
    try:
        os.close(fd)
    finally:
        os.unlink(probe)
    need = min_free_bytes() if min_free is None else min_free
    try:
        st = os.statvfs(directory)
    except OSError:
        return None  # no statvfs here: the cheap check does not apply
    free = st.f_bavail * st.f_frsize
    if free < need:
        return rules.path_problem("low_space", directory=directory, free=free, min=need)
    return None


def session_raw_trace(path: str | None) -> bool:
    """True for a session raw trace of this process, either language's (api.json ``raw_trace``:
    ``<file>`` in ``<dir_prefix><pid>-...``; a hosted JVM has its own): keep_filename keeps none,
    and a plain run or dump after the session is refused (``state.after_session``)."""
    spec, parent = rules.API["raw_trace"], os.path.basename(os.path.dirname(path or ""))
    return path is not None and os.path.basename(path) == spec["file"] and \
        parent.startswith(f"{spec['dir_prefix']}{os.getpid()}-")


def holds_no_trace(head: bytes) -> bool:
    """True when ``head``, a file's first bytes (api.json ``output_paths``
    ``trace_probe_bytes``), shows it holds no trace (``trace_markers``: not empty, no gzip, no
    marker)."""
    spec = rules.API["output_paths"]
    return bool(head) and not head.startswith(bytes(spec["gzip_magic"])) \
        and not any(m.encode() in head for m in spec["trace_markers"])


def replace_problem(path: str) -> dict[str, str] | None:
    """The path problem ``not_a_trace`` when ``path`` names an existing file that is no regular
    file (a FIFO, a directory) or holds no trace (:func:`holds_no_trace`), which MXNet's config
    or a session's save would replace; else None."""
    spec = rules.API["output_paths"]
    try:  # O_NONBLOCK: opening a FIFO would wait for a writer for ever
        fd = os.open(absolute(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None  # nothing to lose
    except OSError:
        head = b"?"  # there, but unreadable (a directory, no permission): no trace of ours
    else:
        with os.fdopen(fd, "rb") as f:
            head = f.read(spec["trace_probe_bytes"]) if stat.S_ISREG(os.fstat(fd).st_mode) \
                else b"?"
    if not holds_no_trace(head):
        return None
    return rules.path_problem("not_a_trace", path=path, bytes=spec["trace_probe_bytes"])


def check_config_path(key: str, path: str) -> None:
    """Raise ConfigError ``config.missing_directory`` or ``config.bad_path`` for ``path`` given
    as config key ``key``."""
    problem = text_problem(path)
    if problem is None:
        directory = os.path.dirname(absolute(path))
        if not os.path.isdir(directory) and file_in_the_way(directory) is None:
            raise rules.error("config.missing_directory", value=path, key=key,
                              directory=directory)
        problem = file_problem(path) or replace_problem(path)
    if problem is not None:
        raise rules.error("config.bad_path", value=path, key=key, **problem)


def size(path: str) -> int | None:
    """The file's size in bytes, or None when there is no regular file at ``path``."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


_FOOTER = rules.API["output_paths"]["mxnet_footer"].encode()


def check_dumped(path: str, final: bool) -> None:
    """After MXDumpProcessProfile: MXNet reports no failure to write, so look at the file.

    Raises:
        StateError: ``dump.lost``: no file, or a finished one (``final``) without MXNet's
            closing bytes.
    """
    n = size(path)
    problem = None
    if n is None:
        problem = file_problem(path) or rules.path_problem("gone")
    elif final:
        with open(path, "rb") as f:
            f.seek(max(0, n - len(_FOOTER)))
            if f.read() != _FOOTER:
                problem = rules.path_problem("cut")
    if problem is not None:
        raise rules.error("dump.lost", path=path, **problem)
