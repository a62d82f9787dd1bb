"""Atomic, streaming writer of Chrome trace files (object form, optionally gzip).

Package-internal: used by :func:`~pyprof.trace.merge`, :func:`~pyprof.trace.compact`,
:func:`~pyprof.trace.repair` and the saving of sessions (:func:`pyprof.profile`); not in
:mod:`pyprof.trace`'s ``__all__``.
"""

from __future__ import annotations

import gzip as _gzip
import os
import tempfile
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import IO, Any

import orjson

from ..process import output as _output
from .. import rules
from .phases import TOP_LEVEL


#: The top-level keys of an input every writer keeps (``displayTimeUnit``, ``otherData``,
#: ``metadata``: ``spec/trace.json``).
KEPT_TOP_LEVEL: tuple[str, ...] = tuple(TOP_LEVEL["kept_by_writers"])

_HEAD = b'{"traceEvents":[\n'


class TraceWriter:
    """Write ``{"traceEvents": [...], "displayTimeUnit": "ms", ...}`` one event at a time.

    The file is written to a temporary file in ``path``'s own directory and renamed over it on a clean exit
    from the ``with`` block (atomic on POSIX); on an exception the temporary file is removed and
    ``path`` is untouched. Each event is one compact JSON line.

    Args:
        path: destination.
        gzip: compress; ``None`` = when ``path`` ends in ``.gz``.
        display_time_unit: the trace's ``displayTimeUnit``.
        top_level: more top-level keys, written after ``traceEvents`` (e.g. the input's
            ``otherData`` and ``metadata``); ``traceEvents`` and ``displayTimeUnit`` in it are
            ignored. May be set until the ``with`` block ends.

    Raises:
        TraceError: the destination is a directory or cannot be written (on entering the
            ``with`` block, before any file is created), or the rename fails.
    """

    def __init__(self, path: str | os.PathLike[str], *, gzip: bool | None = None,
                 display_time_unit: str = "ms", top_level: dict[str, Any] | None = None):
        self.path = os.fspath(path)
        self.gzip = self.path.endswith(".gz") if gzip is None else gzip
        self.display_time_unit = display_time_unit
        self.top_level: dict[str, Any] = dict(top_level or {})
        self.count = 0
        self._tmp: str | None = None
        self._f: IO[bytes] | None = None

    def __enter__(self) -> TraceWriter:
        full = os.path.abspath(self.path)
        if os.path.isdir(full):  # the temp file would go to its parent, the rename then fail
            raise rules.error("trace.bad_output", path=self.path,
                              **_output.file_problem(self.path, example="trace.json"))
        directory = os.path.dirname(full)
        try:
            # named with the pid: a dead process's file is recognised and deleted
            fd, self._tmp = tempfile.mkstemp(prefix=f".pyprof-{os.getpid()}-", suffix=".tmp",
                                             dir=directory)
        except OSError as exc:
            raise rules.error("trace.cannot_write", path=self.path, why=exc.strerror) from exc
        raw = os.fdopen(fd, "wb", buffering=1 << 20)
        self._f = _gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if self.gzip else raw
        self._raw = raw
        self._f.write(_HEAD)
        return self

    def write(self, event: dict[str, Any]) -> None:
        """Append one event."""
        assert self._f is not None, "use TraceWriter in a with block"
        if self.count:
            self._f.write(b",\n")
        self._f.write(orjson.dumps(event))
        self.count += 1

    def write_all(self, events: list[dict[str, Any]]) -> None:
        """Append ``events``, in one write: as :meth:`write` would one at a time, each on a line
        of its own unless it holds a list of objects (whose objects then start lines too)."""
        assert self._f is not None, "use TraceWriter in a with block"
        if not events:
            return
        # one call for the list (a call an event costs 3x); no string holds },{" unescaped
        data = orjson.dumps(events)[1:-1].replace(b'},{"', b'},\n{"')
        self._f.write(b",\n" + data if self.count else data)
        self.count += len(events)

    def write_serialized(self, data: bytes | list, count: int, lined: bool = False) -> None:
        """Append ``count`` events already written as ``orjson.dumps`` writes a list's items
        (compact, joined by ``,``: pyprof.native.cutter's), on lines as :meth:`write_all` puts
        them; ``lined``: ``data`` is already so, as chunks (bytes-like) written in order."""
        assert self._f is not None, "use TraceWriter in a with block"
        if not count:
            return
        if self.count:
            self._f.write(b",\n")
        if lined:
            self._f.writelines(data)
        else:
            self._f.write(data.replace(b'},{"', b'},\n{"'))  # as write_all
        self.count += count

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        assert self._f is not None and self._tmp is not None
        try:
            if exc_type is None:
                tail = b'\n],"displayTimeUnit":' + orjson.dumps(self.display_time_unit)
                for key, value in self.top_level.items():
                    if key not in ("traceEvents", "displayTimeUnit"):
                        tail += b"," + orjson.dumps(key) + b":" + orjson.dumps(value)
                self._f.write(tail + b"}\n")
            self._f.close()
            if self._raw is not self._f:
                self._raw.close()
            if exc_type is None:
                mode = 0o666 & ~_umask()
                os.chmod(self._tmp, mode)
                try:
                    os.replace(self._tmp, self.path)
                except OSError as exc:
                    raise rules.error("trace.cannot_write", path=self.path,
                                      why=exc.strerror or type(exc).__name__) from exc
                self._tmp = None
        finally:
            if self._tmp is not None and os.path.exists(self._tmp):
                os.unlink(self._tmp)


def check_output(path: str | os.PathLike[str], example: str = "trace.json",
                 inputs: Sequence[str | os.PathLike[str]] = ()) -> None:
    """Check an output path before any work, with the checks pyprof makes on trace paths
    (:func:`pyprof.process.output.file_problem`: text, directory exists, not a directory nor a device,
    a file can be created there, free space), and that it is none of ``inputs`` (a command
    that writes another kind of file, such as a report, would replace the trace it reads).

    Raises:
        TraceError: ``trace.bad_output``, naming the problem and its fix (errors.json
            ``path_problems``).
    """
    text = os.fspath(path)
    problem = _output.file_problem(text, example=example)  # the file a directory's fix names
    if problem is None and any(_output.same_file(text, os.fspath(i)) or _same_inode(text, i)
                               for i in inputs):
        problem = rules.path_problem("is_input", path=text, example=example)
    if problem is not None:
        raise rules.error("trace.bad_output", path=text, **problem)


def _same_inode(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def kept_top_level(top_level: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of an input's top level (:attr:`ReadReport.top_level`) a writer keeps, in
    :data:`KEPT_TOP_LEVEL` order."""
    return {k: top_level[k] for k in KEPT_TOP_LEVEL if k in top_level}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
