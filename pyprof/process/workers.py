"""How many worker processes a file reader forks: one rule for the trace tools
(:mod:`pyprof.trace.parallel`) and the oneDNN log reader (:mod:`pyprof.dnnl.statistics`).

A module of its own, without imports of either, so that ``pyprof dnnl`` does not load the trace
package to learn it.
"""

from __future__ import annotations

import multiprocessing
import os


#: Files smaller than this are read sequentially (worker start-up is not worth it).
MIN_BYTES = 64 << 20


def available() -> bool:
    """True where worker processes can be forked."""
    return "fork" in multiprocessing.get_all_start_methods()


def default_workers(size: int) -> int:
    """Workers for a plain file of ``size`` bytes: 1 (sequential) below :data:`MIN_BYTES` or in a
    process that has loaded libmxnet, else ``PYPROF_TRACE_WORKERS`` when set, else
    ``min(2, os.cpu_count())``."""
    if size < MIN_BYTES or _libmxnet_loaded():
        return 1
    env = os.environ.get("PYPROF_TRACE_WORKERS", "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            pass
    return max(1, min(2, os.cpu_count() or 1))


def _libmxnet_loaded() -> bool:
    # MXNet registers pthread_atfork handlers that stop and restart its engine around a fork:
    # forking a process that profiles would disturb the very work being measured.
    from ..native import capi as _capi

    return _capi.in_process()
