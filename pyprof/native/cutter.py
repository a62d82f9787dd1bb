"""The window cut's byte work in C (``cutter.c`` beside this file), for
:mod:`pyprof.trace.rawcut`: a run of whole events in MXNet's layout read as columns
(:func:`scan`), then written compact with some ids replaced (:func:`emit`). Every rule and all
state stay in Python; the C code reads and writes bytes only, and refuses (None) a run it would
not read exactly as orjson does.

Built at first use as :mod:`pyprof.native.shim` builds the recorder; without a compiler, or
with ``PYPROF_CUTTER=python``, :func:`available` is False and the cut reads every run in Python.
ctypes releases the GIL around each call.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from ctypes import c_int64, c_void_p
from pathlib import Path
from typing import Any

import numpy as np

from .shim import build

_SOURCE = Path(__file__).with_name("c") / "cutter.c"  # also the JVM's (its classpath)
#: ``PYPROF_CUTTER=python`` reads every run in Python (the reference the C code is tested against).
ENV = "PYPROF_CUTTER"
_lib: Any = None
_why: str | None = None


def _library() -> Any:
    global _lib, _why
    if _lib is None and _why is None:
        try:
            lib = ctypes.CDLL(str(build(_SOURCE)))
        except (OSError, subprocess.SubprocessError) as e:
            _why = str(e)
            return None
        lib.cut_run.argtypes = [c_void_p, c_int64, c_int64] + [c_void_p] * 12
        lib.cut_run.restype = c_int64
        lib.cut_patch.argtypes = [c_void_p, c_int64, c_int64, c_int64, c_int64, c_void_p, c_int64] \
            + [c_void_p] * 6 \
            + [c_void_p, c_void_p, c_int64] * 3
        lib.cut_patch.restype = c_int64
        lib.cut_patch_at.argtypes = lib.cut_patch.argtypes + [c_void_p]
        lib.cut_patch_at.restype = c_int64
        _lib = lib
    return _lib


def available() -> bool:
    """Whether the C code runs (built, and not turned off by ``PYPROF_CUTTER=python``)."""
    return os.environ.get(ENV, "native") != "python" and _library() is not None


class Run:
    """A run of events read by the C code: ``n`` events, ``out`` (their compact bytes, ids as
    read) and columns: ``ph`` (uint8, the phase's letter, 0 when absent), ``ts`` (int64) with
    ``ts_ok`` (bool: a plain integer), ``ids`` (uint64, n x 3: pid, tid, id) with ``has``
    (bool, n x 3: present), ``same`` (bool: a slice event whose string name equals that of the
    slice event before it in the run); ``skip`` (bool, all False: events :meth:`patched`
    leaves out) and ``metadata`` (the indices of the ``M`` events with their bytes in the run)."""

    __slots__ = ("n", "out", "ph", "ts", "ts_ok", "ids", "has", "same", "skip", "_at", "_starts",
                 "_run", "_lo", "_hi")

    def __init__(self, n: int, out: bytes, run: bytes, cols: dict[str, np.ndarray]) -> None:
        self.n, self.out, self._run = n, out, run
        self.ph, self.ts, self.ts_ok = cols["ph"][:n], cols["ts"][:n], cols["ts_ok"][:n].view(bool)
        self.ids = cols["ids"][:n * 3].reshape(n, 3)
        self.has = cols["has"][:n * 3].reshape(n, 3).view(bool)
        self.same = cols["same"][:n].view(bool)
        self._at, self._starts = cols["at"][:n * 3], cols["starts"][:n]
        self._lo, self._hi = cols["in_lo"][:n], cols["in_hi"][:n]
        self.skip = np.zeros(n, bool)

    def release(self) -> None:
        """Let the run's raw bytes go (:meth:`metadata` reads them: called before)."""
        self._run = b""

    def metadata(self) -> list[tuple[int, bytes]]:
        """``(index, bytes)`` of each ``M`` event, in order."""
        return [(i, self._run[self._lo[i]:self._hi[i]])
                for i in np.flatnonzero(self.ph == ord("M")).tolist()]

    def lines(self) -> bytes:
        """The separator that puts each event on a line of its own as a writer's ``},{"`` to
        ``},\n{"`` does (the events joined by it, that replace then finds only what is inside
        events): ``b",\n"``, or ``b","`` when an event is empty (``{}``: no line for it)."""
        if not self.n:
            return b","
        sizes = np.diff(self._starts, append=len(self.out) + 1)  # each event and its ","
        return b"," if (sizes <= 3).any() else b",\n"

    def patched(self, changed: list[dict[int, int]], sep: bytes = b",") -> bytes:
        """The events but those :attr:`skip` marks, joined by ``sep`` (``,``: as
        ``orjson.dumps`` writes a list's items), with each id of kind ``k`` (pid, tid, id) that
        ``changed[k]`` holds written as its new number."""
        return self._patch(changed, None, sep)

    def patched_at(self, changed: list[dict[int, int]], sep: bytes = b","
                   ) -> tuple[bytes, np.ndarray]:
        """:meth:`patched`, and where each event starts in those bytes (int64, one per event;
        -1 for one :attr:`skip` marks)."""
        where = np.empty(self.n, np.int64)
        return self._patch(changed, where, sep), where

    def _patch(self, changed: list[dict[int, int]], where: np.ndarray | None,
               sep: bytes = b",") -> bytes:
        if not any(changed) and not self.skip.any() and sep == b",":
            if where is not None:
                where[:] = self._starts
            return self.out
        args = []
        tables = []  # kept alive through the call
        for m in changed:
            old = np.fromiter(sorted(m), np.uint64, len(m))
            new = np.fromiter((m[int(v)] for v in old), np.int64, len(m))
            tables.append((old, new))
            args += [old.ctypes.data, new.ctypes.data, len(old)]
        skip = self.skip.view(np.uint8)
        dst = np.empty(len(self.out) + 64 + (60 + len(sep)) * self.n, np.uint8)  # not zeroed
        common = (self.out, len(self.out), self.n, 0, self.n, sep, len(sep), self.ids.ctypes.data,
                  self.has.ctypes.data, self._at.ctypes.data, self._starts.ctypes.data,
                  skip.ctypes.data, dst.ctypes.data, *args)
        if where is None:
            size = _lib.cut_patch(*common)
        else:
            size = _lib.cut_patch_at(*common, where.ctypes.data)
        return dst[:size].tobytes()


_COLUMNS = (("ph", np.uint8, 1), ("ts", np.int64, 1), ("ts_ok", np.uint8, 1), ("ids", np.uint64, 3),
            ("has", np.uint8, 3), ("at", np.int64, 3), ("same", np.uint8, 1), ("starts", np.int64, 1),
            ("in_lo", np.int64, 1), ("in_hi", np.int64, 1))


def read(run: bytes) -> Run | None:
    """``run`` (bytes of whole events in MXNet's layout separated by commas, no header) read,
    or None when the C code does not read it as orjson does (Python reads it then)."""
    # room for the events: MXNet's take 64 bytes at least (each a key per line); a run of
    # smaller ones is read again with room for as many events as it holds braces
    got = _read(run, len(run) // 64 + 16)
    if got is None and (cap := run.count(b"{") + 1) > len(run) // 64 + 16:
        got = _read(run, cap)
    return got


def _read(run: bytes, cap: int) -> Run | None:
    lib = _library()
    out = np.empty(len(run) + 2 * cap + 16, np.uint8)  # not zeroed: only what is written is read
    size = c_int64(0)
    cols = {name: np.empty(cap * width, dtype) for name, dtype, width in _COLUMNS}
    n = lib.cut_run(run, len(run), cap, out.ctypes.data, ctypes.byref(size),
                    *(cols[name].ctypes.data for name, _, _ in _COLUMNS))
    if n < 0:
        return None
    return Run(n, out[:size.value].tobytes(), run, cols)
