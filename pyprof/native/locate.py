"""Where libmxnet.so may be: the candidates :func:`pyprof.native.capi.load` tries, in order.

No ctypes here (that is :mod:`pyprof.native.capi`): only paths and their sources.
"""

from __future__ import annotations

import importlib.util
import os
import sys


def candidates(explicit: str | None) -> list[tuple[str, str]]:
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


def in_process(loaded_here: bool) -> bool:
    """Whether libmxnet is loaded in this process by anyone (mxnet, pyprof or a JVM), without
    loading it: the process's memory maps on Linux, else what Python knows (``loaded_here``:
    pyprof loaded it)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            return any("libmxnet" in line for line in f)
    except OSError:
        return loaded_here or "mxnet" in sys.modules
