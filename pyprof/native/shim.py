"""The one module that owns pyprof's own native library: the imperative recorder
(``recorder.c`` beside this file), which :mod:`pyprof.attribution.capture` puts in mxnet's
``_LIB`` for ``MXImperativeInvokeEx`` and ``MXNDArrayFree`` when shapes are recorded without
stacks (issue 22: the Python wrappers cost about 9 µs an operator).

The source is compiled at first use with ``$CC`` (default ``cc``) ``-O2 -shared -fPIC`` into
``$XDG_CACHE_HOME/pyprof`` (default ``~/.cache/pyprof``), named by the source's hash, under a
file lock and renamed into place whole; without a compiler, or with ``PYPROF_RECORDER=python``,
:func:`store` returns None and the Python recorder runs. libmxnet's functions reach the library
as addresses: it is not linked against it. ctypes releases the GIL around each call into it,
and nothing there touches Python.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import weakref
from ctypes import POINTER, byref, c_int, c_int64, c_uint32, c_void_p
from pathlib import Path
from typing import Any

from . import capi
from ..errors import MXNetError


_SOURCE = Path(__file__).with_name("recorder.c")
#: ``PYPROF_RECORDER=python`` forces the Python recorder (``native``, the default: the C one
#: where it builds; ``native-api``: the C one asking MXNet for every shape, as before
#: :data:`LAYOUT`).
ENV = "PYPROF_RECORDER"
_MAX_DIMS = 64
_lib: Any = None
_why: str | None = None  # why the library is not there (built once per process)
_owner: Any = None  # weakref to the recorder whose windows the C state holds
#: Byte offsets in MXNet 1.9.1's ``NDArray`` (include/mxnet/ndarray.h, mxnet/tuple.h; x86-64 and
#: aarch64 alike): ``ptr_`` (a shared_ptr, 16 bytes), ``shape_``'s ``ndim_``, its 4 stack dims
#: (int64) and its heap pointer (past 4 dims), ``dtype_``. recorder.c reads shapes there instead
#: of asking MXNet, whose shape queries profile_api traces (about 1.4 µs and a trace event each),
#: once :func:`check_layout` has found them right.
LAYOUT = {"chunk": 0, "ndim": 16, "stack": 24, "heap": 56, "dtype": 72}
# Arrays check_layout makes (shape, dtype code): stack dims first, then heap ones; codes 0-6.
_CHECKS = (((3,), 0), ((2, 5), 1), ((7, 1, 3), 2), ((2, 3, 4, 5), 3), ((1, 4), 4), ((9,), 5),
           ((3, 2), 6), ((6, 5, 4, 3, 2), 0), ((1, 2, 3, 1, 2, 3, 2, 1), 4))
_checked: bool | None = None  # check_layout's verdict on LAYOUT, once per process


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pyprof"


def build(source: Path = _SOURCE) -> Path:
    """The shared library of one of pyprof's C sources, compiled at first use (the module's
    docstring says how); raises OSError without a working compiler."""
    src = source.read_bytes()
    out = _cache_dir() / f"{source.stem}-{hashlib.sha256(src).hexdigest()[:16]}.so"
    if out.is_file():
        return out
    cc = os.environ.get("CC") or "cc"
    if shutil.which(cc) is None:
        raise OSError(f"no C compiler ({cc}) on PATH; fix: install gcc (scripts/setup.sh does) or set CC")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / "recorder.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may build the same file now
        if out.is_file():
            return out
        fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".so")
        os.close(fd)
        try:
            proc = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", tmp, str(source), "-lpthread"],
                                  capture_output=True, text=True, timeout=120)
            if proc.returncode:
                raise OSError(f"{cc} failed (fix: a working C compiler as CC): {proc.stderr.strip()[:500]}")
            os.replace(tmp, out)  # whole or not at all
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return out


def library() -> Any:
    """The loaded recorder library, built at first use; None when it cannot be (see
    :func:`unavailable`)."""
    global _lib, _why
    if _lib is None and _why is None:
        try:
            lib = ctypes.CDLL(str(build()))
        except (OSError, subprocess.SubprocessError) as e:
            _why = str(e)
            return None
        for name, args, res in (
                ("rec_set", [c_void_p] * 4, None), ("rec_configure", [c_int64, c_int64], None),
                ("rec_reserve", [c_int64], c_int64), ("rec_release", [c_int64], None),
                ("rec_seq", [], c_int64), ("rec_get", [c_void_p, POINTER(c_int64), c_int], c_int),
                ("rec_put", [c_void_p, c_int64, c_int, c_int, c_int, POINTER(c_int64)], c_int),
                ("rec_pop", [c_void_p], None), ("rec_clear", [], None),
                ("rec_peek", [c_void_p, POINTER(c_int64), c_int, POINTER(c_int64), c_int], c_int),
                ("rec_layout", [POINTER(c_int64), c_int], c_int),
                ("rec_read", [c_void_p, POINTER(c_int64), c_int], c_int),
                ("rec_drain", [POINTER(c_void_p), POINTER(c_void_p), POINTER(c_int64), c_int], None),
                ("rec_free_log", [c_void_p, c_void_p], None),
                ("rec_link", [c_int64, POINTER(c_int64), POINTER(c_int64), POINTER(ctypes.c_int32)], c_int64),
                ("rec_chunk", [c_void_p], c_int64)):
            f = getattr(lib, name)  # (lib[name] would be a fresh, undeclared object)
            f.argtypes, f.restype = args, res
        _lib = lib
    return _lib


def unavailable() -> str | None:
    """Why the native recorder does not run (forced off, or it did not build); None when it can."""
    if os.environ.get(ENV, "native") == "python":
        return f"{ENV}=python"
    library()
    return _why


def _offsets(layout: dict[str, int]) -> Any:  # (in recorder.c's L_* order)
    return (c_int64 * 5)(*(layout[k] for k in ("chunk", "ndim", "stack", "heap", "dtype")))


def check_layout(layout: dict[str, int] | None = None) -> bool:
    """Whether ``layout`` (default :data:`LAYOUT`) reads the shape and dtype of arrays made now
    (1 to 8 dims, dtype codes 0-6; delay-allocated on the CPU: no memory) as they were made.
    Arrays with heap dims are read only once every stack-dim array read right, so a wrong
    layout follows no pointer. Needs the library (:func:`library`). C: MXNDArrayCreateEx,
    MXNDArrayFree."""
    lib = library()
    off, out = _offsets(LAYOUT if layout is None else layout), (c_int64 * 10)()
    for shape, code in _CHECKS:
        h = capi.handle()
        try:
            capi.call("MXNDArrayCreateEx", (c_uint32 * len(shape))(*shape), len(shape), 1, 0, 1, code, byref(h))
        except MXNetError:  # no array to read: MXNet is asked instead
            return False
        try:
            nd = lib.rec_peek(h, off, int(len(shape) > 4), out, len(out))
        finally:
            with contextlib.suppress(MXNetError):
                capi.call("MXNDArrayFree", h)
        if nd != len(shape) or out[0] != code or tuple(out[2:2 + nd]) != shape:
            return False
    return True


def layout_checked() -> bool:
    """Whether :data:`LAYOUT` was found right in this process (:func:`check_layout`, made once,
    here if not yet; False without the library): then an NDArray's ``Chunk*`` (its engine
    variable) can be read in place. C: as check_layout."""
    global _checked
    if _checked is None:
        _checked = library() is not None and check_layout()
    return bool(_checked)


def chunk_of(h: int) -> int | None:
    """The ``Chunk*`` of NDArray handle ``h`` (what its engine variable is kept by: views,
    ``.grad`` and ``detach`` handles share it), read in place by :data:`LAYOUT`; None unless
    :func:`layout_checked` found the layout right, or for an array without one."""
    if not _checked:
        return None
    return ctypes.c_void_p.from_address(h + LAYOUT["chunk"]).value or None


def reads_in_place() -> bool:
    """Whether the native recorder reads shapes in place now (:data:`LAYOUT`; set when a session
    installs it, from :func:`check_layout` and ``PYPROF_RECORDER``); False without the library."""
    lib = library()
    return bool(lib.rec_layout(None, 0)) if lib is not None else False


def _address(fn: Any) -> int:
    return ctypes.cast(fn, c_void_p).value or 0


class _Flag:
    """``flag[0]``: the C library's ``rec_active`` (a list's interface, as the Python store's)."""

    def __init__(self, lib: Any) -> None:
        self._v = c_int.in_dll(lib, "rec_active")

    def __getitem__(self, _i: int) -> bool:
        return bool(self._v.value)

    def __setitem__(self, _i: int, on: bool) -> None:
        self._v.value = int(bool(on))


class NativeCache:
    """The C handle cache with the dict interface the Python hooks use: handle -> (shape or
    None, dtype code, producer seq, output slot)."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        self._local = threading.local()  # each thread's buffer: the view hooks run unlocked

    def get(self, h: int, default: Any = None) -> Any:
        b = getattr(self._local, "buf", None)
        if b is None:
            b = self._local.buf = (c_int64 * (4 + _MAX_DIMS))()
        if not self._lib.rec_get(h, b, len(b)):
            return default
        nd = b[3]
        if nd > len(b) - 4:  # more dimensions than the buffer holds: once more, whole
            b = (c_int64 * (4 + nd))()
            if not self._lib.rec_get(h, b, len(b)):
                return default
        return (None if nd < 0 else tuple(b[4:4 + nd]), b[2], b[0], b[1])

    def __setitem__(self, h: int, e: tuple) -> None:
        shape, d, p, k = e
        dims = (c_int64 * max(1, len(shape or ())))(*(shape or ()))
        if self._lib.rec_put(h, p, k, d, -1 if shape is None else len(shape), dims):
            raise MemoryError("the recorder's handle cache is out of memory; "
                              "fix: free memory, or PYPROF_RECORDER=python")

    def pop(self, h: int, default: Any = None) -> Any:
        e = self.get(h)
        self._lib.rec_pop(h)
        return default if e is None else e

    def clear(self) -> None:
        self._lib.rec_clear()


class NativeStore:
    """The C recorder's state, as :class:`pyprof.attribution.store.PyStore`'s interface: the
    handle cache, the active flag, the seq counter and the window's bound, and the log."""

    kind = "native"

    def __init__(self, lib: Any, seq: int, max_calls: int) -> None:
        self._lib = lib
        self._local = threading.local()  # each thread's buffer for meta
        self.cache = NativeCache(lib)
        self.active = _Flag(lib)
        self.cache.clear()
        self._total = self._base = 0
        self.drain(True)  # a log an earlier recorder left: dropped
        self._base = self._total  # (the C library counts for the process)
        lib.rec_configure(max_calls, seq)

    def configure(self, max_calls: int) -> None:
        self._lib.rec_configure(max_calls, -1)  # (-1: the seqs go on)

    def seq(self) -> int:
        return self._lib.rec_seq()

    def reserve(self, n: int) -> int:
        return self._lib.rec_reserve(n)

    def release(self, n: int) -> None:
        self._lib.rec_release(n)

    @property
    def unrecorded(self) -> int:
        """Calls whose shape query MXNet refused (counted at each drain)."""
        return self._total - self._base

    def meta(self, h: int) -> tuple[tuple[int, ...] | None, int]:
        """(shape or None, dtype code) of NDArray handle ``h``, as
        :func:`pyprof.native.capi.ndarray_meta` gives it: read in place where the layout is
        checked, asked of MXNet otherwise."""
        b = getattr(self._local, "meta", None)
        if b is None:
            b = self._local.meta = (c_int64 * (2 + _MAX_DIMS))()
        nd = self._lib.rec_read(h, b, len(b))
        if 0 <= nd <= _MAX_DIMS:
            return tuple(b[2:2 + nd]), b[0]
        return capi.ndarray_meta(h)

    def chunk(self, h: int) -> int | None:
        """The engine variable of NDArray ``h`` (its ``Chunk*``, :data:`LAYOUT` ``chunk``), or
        None when NDArrays are not read in place (the layout unchecked)."""
        return self._lib.rec_chunk(h) or None

    def link(self, links: dict[int, tuple[int, int]]) -> bool:
        """Gradients autograd's backward writes: chunk -> (writer seq, output slot). Each
        cached handle of such a chunk gets the writer as producer now, one first seen later
        when it is read. False when no chunk can be read (the layout unchecked)."""
        n = len(links)
        chunks = (c_int64 * max(1, n))(*links)
        seqs = (c_int64 * max(1, n))(*(v[0] for v in links.values()))
        slots = (ctypes.c_int32 * max(1, n))(*(v[1] for v in links.values()))
        return self._lib.rec_link(n, chunks, seqs, slots) >= 0

    def make_invoke(self, raw: Any) -> Any:
        """The C ``MXImperativeInvokeEx`` recorder around ``raw`` (mxnet's ctypes function)."""
        global _checked
        in_place = os.environ.get(ENV) != "native-api"  # (read at each install, as "python" is)
        if in_place and _checked is None:
            _checked = check_layout()
        self._lib.rec_layout(_offsets(LAYOUT) if in_place and _checked else None, 1)
        lib = capi.lib()
        self._lib.rec_set(_address(raw), None, _address(lib.MXNDArrayGetShapeEx64), _address(lib.MXNDArrayGetDType))
        return self._lib["rec_invoke"]  # no argtypes: mxnet passes ctypes objects, as to raw

    def make_free(self, raw: Any) -> Any:
        self._lib.rec_set(None, _address(raw), None, None)
        return self._lib["rec_free"]

    def drain(self, reset: bool) -> tuple[tuple[bytes, bytes], bool]:
        """The log since the last drain (:meth:`records` parses it) and whether the window
        filled; with ``reset`` the window's count and flag start again."""
        wp, sp, info = c_void_p(), c_void_p(), (c_int64 * 4)()
        self._lib.rec_drain(byref(wp), byref(sp), info, int(reset))
        try:
            words = ctypes.string_at(wp, info[0]) if info[0] else b""
            strs = ctypes.string_at(sp, info[1]) if info[1] else b""
        finally:
            self._lib.rec_free_log(wp, sp)
        self._total = info[3]
        return (words, strs), bool(info[2])

    def records(self, log: tuple[bytes, bytes]) -> list[tuple]:
        """The records (calls.RECORD tuples, in seq order) of a drained log."""
        return parse(*log)


def parse(raw: bytes, ss: bytes) -> list[tuple]:
    """recorder.c's log (its words as bytes, its strings) as capture's records (calls.RECORD):
    each distinct signature (operator, shapes, dtypes, attributes) parsed once."""
    ws = memoryview(raw).cast("q").tolist() if raw else []
    out, sigs, i, so, n = [], {}, 0, 0, len(ws)
    append, get = out.append, sigs.get
    while i < n:
        seq, t, pushed, thread, nin, nout, nsig, nstr = ws[i:i + 8]
        nout, given = nout & 0xFFFFFFFF, nout >> 32  # (out=: the caller's arrays)
        j = i + 8 + nin
        k = j + 2 * nin
        e = k + nout
        key = raw[8 * e:8 * (e + nsig)] + ss[so:so + nstr]
        sig = get(key)
        if sig is None:
            sig = sigs[key] = _signature(ws[e:e + nsig], ss[so:so + nstr], nin, nout)
        append((seq, t, pushed, sig[0], tuple(ws[i + 8:j]), tuple(ws[k:e]), sig[1], sig[2], sig[3],
                sig[4], tuple(ws[j:j + nin]), thread if thread >= 0 else thread + (1 << 64), None,
                tuple(ws[j + nin:k]), given))
        i, so = e + nsig, so + nstr
    return out


def _signature(ws: list[int], ss: bytes, nin: int, nout: int) -> tuple:
    """(op, in_meta, out_meta, keys, vals) of one signature's words and strings."""
    op, nkv = ws[0], ws[1]
    metas, i = [], 2
    for _ in range(nin + nout):
        d, nd = ws[i:i + 2]
        i += 2
        metas += (None if nd < 0 else tuple(ws[i:i + nd])), d
        i += max(nd, 0)
    keys, vals, so = [], [], 0
    for _ in range(nkv):
        for into, ln in ((keys, ws[i]), (vals, ws[i + 1])):
            into.append(None if ln < 0 else ss[so:so + ln])
            so += max(ln, 0)
        i += 2
    return op, tuple(metas[:2 * nin]), tuple(metas[2 * nin:]), tuple(keys), tuple(vals)


def store(owner: Any, seq: int, max_calls: int) -> NativeStore | None:
    """The native store for recorder ``owner`` (its seqs going on from ``seq``), or None when
    the library is unavailable or another live recorder holds it (one C state per process)."""
    global _owner
    if unavailable() is not None:
        return None
    held = _owner() if _owner is not None else None
    if held is not None and held is not owner and getattr(held, "hooked", False):
        return None
    _owner = weakref.ref(owner)
    return NativeStore(_lib, seq, max_calls)
