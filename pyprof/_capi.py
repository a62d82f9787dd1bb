"""The one module that touches libmxnet through ctypes.

Everything else in pyprof calls the typed wrappers here. Each wrapper checks the
return code and raises :class:`pyprof.errors.MXNetError` with the C function's name
and ``MXGetLastError()``'s text, read on the calling thread right after the call
(MXNet keeps its last error per thread).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import threading
from ctypes import POINTER, byref, c_char_p, c_int, c_int64, c_uint64, c_void_p

from .errors import LibraryNotFoundError, MXNetError, PyprofError

__all__ = ["lib", "library_path", "check", "Handle"]

EXPECTED_VERSION = 10901  # MXGetVersion() of mxnet 1.9.1

Handle = c_void_p

# C signatures, checked against mxnet/include/mxnet/c_api.h of 1.9.1. All return int.
_SIGNATURES: dict[str, list] = {
    "MXGetLastError": [],
    "MXGetVersion": [POINTER(c_int)],
    "MXGetGPUCount": [POINTER(c_int)],
    "MXSetProcessProfilerConfig": [c_int, POINTER(c_char_p), POINTER(c_char_p), Handle],
    "MXSetProcessProfilerState": [c_int, c_int, Handle],
    "MXDumpProcessProfile": [c_int, c_int, Handle],
    "MXAggregateProfileStatsPrintEx": [POINTER(c_char_p), c_int, c_int, c_int, c_int],
    "MXProcessProfilePause": [c_int, c_int, Handle],
    "MXProfileCreateDomain": [c_char_p, POINTER(Handle)],
    "MXProfileCreateTask": [Handle, c_char_p, POINTER(Handle)],
    "MXProfileCreateFrame": [Handle, c_char_p, POINTER(Handle)],
    "MXProfileCreateEvent": [c_char_p, POINTER(Handle)],
    "MXProfileCreateCounter": [Handle, c_char_p, POINTER(Handle)],
    "MXProfileDestroyHandle": [Handle],
    "MXProfileDurationStart": [Handle],
    "MXProfileDurationStop": [Handle],
    "MXProfileSetCounter": [Handle, c_uint64],
    "MXProfileAdjustCounter": [Handle, c_int64],
    "MXProfileSetMarker": [Handle, c_char_p, c_char_p],
    "MXListAllOpNames": [POINTER(ctypes.c_uint), POINTER(POINTER(c_char_p))],
    "MXNDArrayWaitAll": [],
}

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_path: str | None = None
_fns: dict[str, ctypes._CFuncPtr] = {}  # name -> declared function, filled at load


def _candidates(explicit: str | None) -> list[tuple[str, str]]:
    """Where libmxnet.so may be, in the documented order, with the source of each.

    An explicit path or ``$MXNET_LIBRARY_PATH`` is the only candidate when given: falling
    back to another file would hide the mistake (and risk two copies in one process).
    """
    if explicit:
        return [(explicit, "argument")]
    env = os.environ.get("MXNET_LIBRARY_PATH")
    if env:
        return [(env, "MXNET_LIBRARY_PATH")]
    out: list[tuple[str, str]] = []
    mx = sys.modules.get("mxnet")
    loaded = getattr(getattr(getattr(mx, "base", None), "_LIB", None), "_name", None)
    if loaded:
        # mxnet is imported already: bind to exactly the file it loaded.
        out.append((loaded, "the imported mxnet package"))
    try:
        spec = importlib.util.find_spec("mxnet")
    except (ImportError, ValueError):
        spec = None
    if spec and spec.submodule_search_locations:
        for d in spec.submodule_search_locations:
            out.append((os.path.join(d, "libmxnet.so"), "the installed mxnet package"))
    return out


def load(path: str | None = None) -> ctypes.CDLL:
    """Load libmxnet.so once per process and return it.

    Order: ``path``, ``$MXNET_LIBRARY_PATH`` (each, when given, the only one tried), the
    installed ``mxnet`` package (the same file ``import mxnet`` loads). Raises :class:`LibraryNotFoundError` listing every path
    tried, or :class:`PyprofError` when the library is not MXNet 1.9.x. A second call
    returns the library already loaded; asking for a different file then is an error,
    since a second copy of libmxnet aborts the process.
    """
    global _lib, _path
    with _lock:
        if _lib is not None:
            if path and os.path.realpath(path) != os.path.realpath(_path):
                raise PyprofError(
                    f"libmxnet is already loaded from {_path}; refusing to load a second copy "
                    f"from {path} (two copies abort the process). "
                    "fix: set MXNET_LIBRARY_PATH before the first pyprof call")
            return _lib
        tried: list[tuple[str, str]] = []
        for cand, source in _candidates(path):
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
        raise LibraryNotFoundError(tried)


def _declare(lib: ctypes.CDLL) -> None:
    for name, argtypes in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = c_char_p if name == "MXGetLastError" else c_int
        _fns[name] = fn


def _check_version(lib: ctypes.CDLL, path: str) -> None:
    v = c_int()
    if lib.MXGetVersion(byref(v)) != 0 or v.value // 100 != EXPECTED_VERSION // 100:
        raise PyprofError(
            f"{path} is MXNet version {v.value}, pyprof needs 1.9.x ({EXPECTED_VERSION}). "
            "fix: pip install 'mxnet==1.9.1' or point MXNET_LIBRARY_PATH at a 1.9 build")


def lib() -> ctypes.CDLL:
    """The loaded libmxnet (loading it on first use)."""
    return _lib if _lib is not None else load()


def library_path() -> str:
    """Absolute, symlink-free path of the loaded libmxnet.so (loading it on first use)."""
    lib()
    assert _path is not None
    return _path


def last_error() -> str:
    raw = lib().MXGetLastError()
    return raw.decode("utf-8", "replace") if raw else ""


def check(rc: int, function: str, hint: str | None = None) -> None:
    """Raise MXNetError for a failed call (rc != 0), naming ``function``."""
    if rc != 0:
        raise MXNetError(function, last_error(), hint)


def call(function: str, *args, hint: str | None = None) -> None:
    """Call ``function`` in libmxnet with ``args`` and check its return code."""
    fn = _fns.get(function)
    if fn is None:
        lib()
        fn = _fns.get(function) or getattr(_lib, function)
    if fn(*args) != 0:
        raise MXNetError(function, last_error(), hint)


def str_array(items: list[str]) -> ctypes.Array:
    arr = (c_char_p * len(items))()
    arr[:] = [s.encode("utf-8") for s in items]
    return arr


def gpu_count() -> int:
    """Number of GPUs visible to this MXNet build (0 on a CPU build). C: MXGetGPUCount."""
    n = c_int()
    call("MXGetGPUCount", byref(n))
    return n.value


def version() -> int:
    """MXNet's version as an int, 10901 for 1.9.1. C: MXGetVersion."""
    v = c_int()
    call("MXGetVersion", byref(v))
    return v.value


def list_all_op_names() -> list[str]:
    """Every operator in MXNet's registry. C: MXListAllOpNames."""
    n = ctypes.c_uint()
    names = POINTER(c_char_p)()
    call("MXListAllOpNames", byref(n), byref(names))
    return [names[i].decode() for i in range(n.value)]


def wait_all() -> None:
    """Block until every operation pushed to MXNet's engine has finished. C: MXNDArrayWaitAll."""
    call("MXNDArrayWaitAll")
