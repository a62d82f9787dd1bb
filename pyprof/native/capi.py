"""The one module that touches libmxnet through ctypes.

Everything else in pyprof calls the typed wrappers here. The C declarations are not written
here: ``pyprof/spec/capi.json`` lists every function pyprof binds (in both languages), and
:func:`ctype_of` turns its C types into the ctypes argtypes/restype set at load
(tests/test_capi_spec.py checks that file against the wheel's ``c_api.h``). Each wrapper checks the
return code and raises :class:`pyprof.errors.MXNetError` with the C function's name
and ``MXGetLastError()``'s text, read on the calling thread right after the call
(MXNet keeps its last error per thread).

Every call passes the API gate (:mod:`pyprof.native.gate`): a call that can switch API
profiling (config, state, a finished dump) runs alone, the others as readers, and the
profiler-object calls, which MXNet runs outside its API-call records, pass freely.
:func:`guard_mxnet` puts the calls of MXNet's own Python front end behind the same gate.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import sys
import threading
from ctypes import (POINTER, byref, c_char_p, c_int, c_int64, c_size_t, c_uint32, c_uint64,
                    c_void_p)
from typing import Any

from .gate import GATE
from .importhook import AfterImport
from .locate import candidates, in_process as in_process_maps
from .. import rules
from ..errors import MXNetError


EXPECTED_VERSION = 10901  # MXGetVersion() of mxnet 1.9.1

Handle = c_void_p

# The C declarations come from pyprof/spec/capi.json (the JVM's Natives are checked against the
# same file): a C type there maps to ctypes by the grammar in its "grammar" entry.
CAPI: dict[str, Any] = rules.spec("capi.json")
_TYPEDEFS: dict[str, str] = CAPI["typedefs"]
_NUMBERS = {"int": c_int, "uint32_t": c_uint32, "int64_t": c_int64, "uint64_t": c_uint64,
            "size_t": c_size_t}


def c_type(spelled: str) -> tuple[str, int]:
    """A C type as capi.json spells it, as (base type, pointer depth): 'const' dropped,
    typedefs resolved. ``c_type("const char* const*") == ("char", 2)``,
    ``c_type("ProfileHandle*") == ("void", 2)``."""
    flat = re.sub(r"\bconst\b|\s", "", spelled)
    base = flat.rstrip("*")
    depth = len(flat) - len(base)
    if base in _TYPEDEFS:
        inner, more = c_type(_TYPEDEFS[base])
        return inner, depth + more
    return base, depth


def ctype_of(spelled: str) -> Any:
    """The ctypes type of a C type spelled as in capi.json: ``char*`` is c_char_p, ``void*``
    c_void_p, a number its fixed-size ctypes type, each further star a POINTER."""
    base, depth = c_type(spelled)
    if base in ("char", "void") and depth:
        t, depth = (c_char_p if base == "char" else c_void_p), depth - 1
    else:
        t = _NUMBERS[base]
    for _ in range(depth):
        t = POINTER(t)
    return t


# name -> (argtypes, restype) of every function capi.json lists for Python.
_SIGNATURES: dict[str, tuple[list, Any]] = {
    name: ([ctype_of(a[0]) for a in f["args"]], ctype_of(f["returns"]))
    for name, f in CAPI["functions"].items() if "python" in f["languages"]}

# MXNet runs these inside IgnoreProfileCallScope (c_api_profile.cc): they never touch the
# per-thread API-call records, so they need no gate, and profiler objects stay as cheap as in
# mxnet.profiler. MXGetLastError has no API_BEGIN at all.
_UNGATED = frozenset({
    "MXGetLastError", "MXProcessProfilePause", "MXProfileCreateDomain", "MXProfileCreateTask",
    "MXProfileCreateFrame", "MXProfileCreateEvent", "MXProfileCreateCounter",
    "MXProfileDestroyHandle", "MXProfileDurationStart", "MXProfileDurationStop",
    "MXProfileSetCounter", "MXProfileAdjustCounter", "MXProfileSetMarker"})
# These can change IsProfiling(kAPI): they run with the gate closed (a finished dump only;
# an intermediate one only appends to the file).
_SWITCHES = frozenset({"MXSetProcessProfilerConfig", "MXSetProcessProfilerState"})

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_path: str | None = None
_fns: dict[str, ctypes._CFuncPtr] = {}  # name -> declared function, filled at load
_declared: dict[str, ctypes._CFuncPtr] = {}  # name -> the raw ctypes function, ungated
_META: list[Any] = []  # the raw shape and dtype functions (ndarray_meta), set by op_handles()


def load(path: str | None = None) -> ctypes.CDLL:
    """Load libmxnet.so once per process and return it.

    Order: ``path``, ``$MXNET_LIBRARY_PATH`` (each, when given, the only one tried), the
    installed ``mxnet`` package (the file ``import mxnet`` loads). Raises LibraryNotFoundError
    listing every path tried, or PyprofError when the library is not MXNet 1.9.x. A second
    call returns the library loaded; a different file then is an error (a second copy of
    libmxnet aborts the process).
    """
    global _lib, _path
    with _lock:
        if _lib is not None:
            if path and os.path.realpath(path) != os.path.realpath(_path):
                raise rules.error("library.second_copy", loaded=_path, path=path)
            return _lib
        tried: list[tuple[str, str]] = []
        for cand, source in candidates(path):
            full = os.path.abspath(cand)
            if not os.path.isfile(full):
                tried.append((full, f"from {source}: no such file"))
                continue
            try:
                # RTLD_GLOBAL is harmless and lets a JVM in this process bind the same symbols.
                lib = ctypes.CDLL(full, mode=ctypes.RTLD_GLOBAL)
            except OSError as exc:
                tried.append((full, f"from {source}: {exc}"))
                continue
            _declare(lib)
            _check_version(lib, full)
            _lib, _path = lib, os.path.realpath(full)
            return lib
        err = rules.error("library.not_found", count=len(tried), tried="\n".join(
            f"  - {cand}: {why}" for cand, why in tried) or "  (nothing)")
        err.tried = tried
        raise err


def _declare(lib: ctypes.CDLL) -> None:
    for name, (argtypes, restype) in _SIGNATURES.items():
        fn = lib[name]  # a fresh function object: mxnet's own _LIB stays as mxnet set it up
        fn.argtypes = argtypes
        fn.restype = restype
        _declared[name] = fn
        if name in _SWITCHES:
            fn = _switch(fn)
        elif name == "MXDumpProcessProfile":
            fn = _dump(fn)
        elif name not in _UNGATED:
            fn = GATE.wrap(fn)
        _fns[name] = fn


def _switch(fn: Any) -> Any:
    def switch(*args: Any) -> int:
        if _forked:
            raise rules.error("process.forked", **_forked)
        _users.add("MXNet's profiler")
        with GATE.exclusive():
            return fn(*args)
    return switch


def _dump(fn: Any) -> Any:
    switch = _switch(fn)

    def dump(finished: int, *args: Any) -> int:
        if finished or _forked:
            return switch(finished, *args)
        return fn(finished, *args)
    return dump


def _check_version(lib: ctypes.CDLL, path: str) -> None:
    v = c_int()
    if _fns["MXGetVersion"](byref(v)) != 0 or v.value // 100 != EXPECTED_VERSION // 100:
        raise rules.error("library.wrong_version", path=path, version=v.value,
                          expected=EXPECTED_VERSION)


# ---------------------------------------------------------------------- fork

# What used the profiler (or a JVM) in this process; a forked child of such a process must not
# touch the profiler: its dump thread and the JVM's threads stayed in the parent.
_users: set[str] = set()
_forked: dict[str, Any] | None = None  # in such a child: the fields of process.forked


def note_user(what: str) -> None:
    """Record that ``what`` (e.g. "a JVM") runs in this process, for the fork check."""
    _users.add(what)


def forked_error() -> str | None:
    """In a forked child of a process that used the profiler or a JVM: why it cannot be used."""
    return str(rules.error("process.forked", **_forked)) if _forked else None


def ensure_not_forked() -> None:
    """Raise StateError in a forked child of a process that used the profiler or a JVM."""
    if _forked:
        raise rules.error("process.forked", **_forked)


def _after_fork_in_child() -> None:
    global _forked, _lock
    _lock = threading.Lock()  # a parent thread may have held it at fork
    if not _users or _forked:
        return
    _forked = {"parent": os.getppid(), "users": " and ".join(sorted(_users))}
    # At exit MXNet's ~Profiler would dump into the parent's trace and join the parent's timer
    # thread (SIGABRT): glibc's on_exit(_exit), registered last, runs first (concurrency.md).
    with contextlib.suppress(AttributeError):
        libc = ctypes.CDLL(None)
        libc.on_exit(ctypes.cast(libc._exit, c_void_p), None)
    for name in list(_fns):
        if name.startswith(("MXProfile", "MXProcessProfile", "MXSetProcessProfiler",
                            "MXDumpProcess", "MXAggregateProfile")):
            _fns[name] = lambda *_args: ensure_not_forked()  # raises


os.register_at_fork(after_in_child=_after_fork_in_child)


def functions() -> dict[str, Any]:
    """The live table of declared functions (filled at load; a fork child refuses profiler
    calls through it), for modules that look functions up on their hot path."""
    return _fns


def declarations() -> dict[str, tuple[list, Any]]:
    """Every C function pyprof declared, as name -> (argtypes, restype) of the ctypes function
    (loading libmxnet on first use): what tests/test_capi_spec.py checks against capi.json."""
    lib()
    return {name: (list(f.argtypes), f.restype) for name, f in _declared.items()}


def in_process() -> bool:
    """Whether libmxnet is loaded in this process by anyone (:func:`locate.in_process`)."""
    return in_process_maps(_lib is not None)


def lib() -> ctypes.CDLL:
    """The loaded libmxnet (loading it on first use)."""
    return _lib if _lib is not None else load()


def fn(name: str) -> Any:
    """The declared, gated function ``name`` (loading libmxnet on first use)."""
    f = _fns.get(name)
    if f is None:
        lib()
        f = _fns[name]
    return f


def library_path() -> str:
    """Absolute, symlink-free path of the loaded libmxnet.so (loading it on first use)."""
    lib()
    return str(_path)


def last_error() -> str:
    raw = fn("MXGetLastError")()
    return raw.decode("utf-8", "replace") if raw else ""


def check(rc: int, function: str, hint: str | None = None) -> None:
    """Raise MXNetError for a failed call (rc != 0), naming ``function``."""
    if rc != 0:
        raise MXNetError(function, last_error(), hint)


def call(function: str, *args, hint: str | None = None) -> None:
    """Call ``function`` in libmxnet with ``args`` and check its return code."""
    check(fn(function)(*args), function, hint)


def _str_array(items: list[str]) -> ctypes.Array:
    return (c_char_p * len(items))(*(s.encode("utf-8") for s in items))


def handle(value: int | None = None) -> Handle:
    """A ``void*`` handle (NULL by default), e.g. a kvstore handle for server profiling."""
    return Handle(value)


def set_process_profiler_config(c_values: dict[str, str], kvstore: Handle) -> None:
    """Configure MXNet's profiler with C key/value strings (a switch: runs with the gate
    closed). C: MXSetProcessProfilerConfig."""
    keys = list(c_values)
    call("MXSetProcessProfilerConfig", len(keys), _str_array(keys),
         _str_array([c_values[k] for k in keys]), kvstore)


def aggregate_profile_stats(reset: bool, fmt: int, sort_by: int, ascending: bool) -> str:
    """MXNet's aggregate statistics text ('' when it has none).
    C: MXAggregateProfileStatsPrintEx."""
    out = c_char_p()
    call("MXAggregateProfileStatsPrintEx", byref(out), int(reset), fmt, sort_by, int(ascending))
    return out.value.decode("utf-8", "replace") if out.value else ""


def create_profile_object(function: str, *args: Any) -> Handle:
    """A new profiler handle: ``function`` is MXProfileCreateDomain/Task/Frame/Event/Counter,
    ``args`` its arguments before the out-pointer (a domain handle, the name as bytes)."""
    out = Handle()
    call(function, *args, byref(out))
    return out


def gpu_count() -> int:
    """Number of GPUs visible to this MXNet build (0 on a CPU build). C: MXGetGPUCount."""
    n = c_int()
    call("MXGetGPUCount", byref(n))
    return n.value


def cuda_device(ordinal: int) -> tuple[str, int, int] | None:
    """(name, major, minor) of CUDA device ``ordinal`` as the NVIDIA driver numbers it (as
    MXNet's gpu(N) does); None without a driver or device. C (libcuda): cuDeviceGetName,
    cuDeviceGetAttribute (75, 76: compute capability major, minor)."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
        dev, major, minor, name = c_int(), c_int(), c_int(), ctypes.create_string_buffer(256)
        if (cu.cuInit(0) or cu.cuDeviceGet(byref(dev), ordinal)
                or cu.cuDeviceGetName(name, 256, dev)
                or cu.cuDeviceGetAttribute(byref(major), 75, dev)
                or cu.cuDeviceGetAttribute(byref(minor), 76, dev)):
            return None
    except (OSError, AttributeError):
        return None
    return name.value.decode("utf-8", "replace"), major.value, minor.value


def version() -> int:
    """MXNet's version as an int, 10901 for 1.9.1. C: MXGetVersion."""
    v = c_int()
    call("MXGetVersion", byref(v))
    return v.value


def list_all_op_names() -> list[str]:
    """Every operator in MXNet's registry. C: MXListAllOpNames."""
    n = c_uint32()
    names = POINTER(c_char_p)()
    call("MXListAllOpNames", byref(n), byref(names))
    return [names[i].decode() for i in range(n.value)]


def wait_all() -> None:
    """Block until every operation pushed to MXNet's engine has finished. C: MXNDArrayWaitAll."""
    call("MXNDArrayWaitAll")


# ---------------------------------------------------------------------- mxnet's own calls

class _GatedCDLL(ctypes.CDLL):
    """mxnet.base._LIB after :func:`guard_mxnet`: every function it hands out is gated.

    MXNet's Python front end looks functions up on this one object at each call (every module
    shares it through ``from .base import _LIB``), so changing the object's class and its
    cached functions covers them all, including functions first used later.
    """

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        func = self[name]
        setattr(self, name, func)
        return func

    def __getitem__(self, name_or_ordinal: Any) -> Any:
        func = super().__getitem__(name_or_ordinal)
        return func if name_or_ordinal in _UNGATED else _gated_function(func)


def _gated_function(func: Any) -> Any:
    name = getattr(func, "__name__", "")
    if name in _SWITCHES or name == "MXDumpProcessProfile":
        # mxnet.profiler's own switches: alone, as pyprof's are.
        return _dump(func) if name == "MXDumpProcessProfile" else _switch(func)
    return GATE.wrap(func)


def guard_mxnet() -> bool:
    """Put every call through ``mxnet.base._LIB`` behind the API gate; idempotent.

    Returns True when mxnet is imported and guarded, False when it is not imported yet (then
    :func:`install_import_hook` guards it as soon as ``mxnet.base`` has loaded).
    """
    base = sys.modules.get("mxnet.base")
    mxlib = getattr(base, "_LIB", None)
    if not isinstance(mxlib, ctypes.CDLL):
        return False
    with _lock:
        if isinstance(mxlib, _GatedCDLL):
            return True
        cached = {k: v for k, v in vars(mxlib).items()
                  if isinstance(v, ctypes._CFuncPtr) and k not in _UNGATED}
        mxlib.__class__ = _GatedCDLL
        for k, v in cached.items():
            setattr(mxlib, k, _gated_function(v))
    return True


_HOOK = AfterImport("mxnet.base", lambda _module: guard_mxnet())


def install_import_hook() -> None:
    """Guard mxnet now if it is imported, else when ``mxnet.base`` loads (idempotent)."""
    if not guard_mxnet():
        _HOOK.install()


# ---------------------------------------------------------------------- attribution's hooks

def hook_mxnet(name: str, make: Any = None) -> bool:
    """Route ``mxnet.base._LIB.<name>`` through ``make(raw)`` inside the gate (None: the plain
    gated function again); False when mxnet is not guarded yet."""
    mxlib = getattr(sys.modules.get("mxnet.base"), "_LIB", None)
    if not isinstance(mxlib, _GatedCDLL):
        return False
    raw = ctypes.CDLL.__getitem__(mxlib, name)
    setattr(mxlib, name, GATE.wrap(raw if make is None else make(raw)))
    return True


def invoke_io(a: tuple) -> tuple[int, tuple, tuple, tuple, tuple]:
    """(op, input handles, output handles, keys, vals) of MXImperativeInvokeEx's ctypes args (tuples)."""
    n, k = a[1].value, a[5].value
    return a[0].value, tuple(a[2][:n]), tuple(a[4]._obj[:a[3]._obj.value]), tuple(a[6][:k]), tuple(a[7][:k])


def ndarray_meta(h: int) -> tuple[tuple[int, ...] | None, int]:
    """(shape or None when unknown, MXNet dtype code) of NDArray handle ``h``, through the raw
    functions (after :func:`op_handles`): inside a gated call only. C: MXNDArrayGetShapeEx64 (int64
    dims: MXNDArrayGetShapeEx's int ones wrap past 2**31 - 1), MXNDArrayGetDType."""
    nd, pd, dt = c_int(), POINTER(c_int64)(), c_int()
    if _META[0](h, byref(nd), byref(pd)) or _META[1](h, byref(dt)):
        raise MXNetError("MXNDArrayGetShapeEx64", last_error())
    return (tuple(pd[:nd.value]) if nd.value >= 0 else None), dt.value


def op_handles() -> dict[str, int]:
    """Every operator name's handle, as MXImperativeInvokeEx gets it. C: NNGetOpHandle."""
    _META[:] = [fn("MXNDArrayGetShapeEx64").__wrapped__, fn("MXNDArrayGetDType").__wrapped__]
    out, h = {}, Handle()
    for name in list_all_op_names():
        call("NNGetOpHandle", name.encode(), byref(h))
        out[name] = h.value
    return out
