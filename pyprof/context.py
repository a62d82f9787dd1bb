"""Device contexts checked before MXNet sees them, so a missing GPU is one clear line."""

from __future__ import annotations

import os

from . import _capi
from .errors import DeviceError

CUDA_HINT = ("install a CUDA build of MXNet matching your driver, e.g. "
             "pip install 'mxnet-cu112==1.9.1' (cu102 ... cu117 exist), in place of 'mxnet'")


def cpu_device_count() -> int:
    """CPU devices MXNet's profiler has tables for: the processors this process may use
    (what ``omp_get_num_procs`` reports)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_context(kind: str, device_id: int = 0) -> None:
    """Raise DeviceError unless ``kind`` ('cpu' or 'gpu') with ``device_id`` can run here.

    C: MXGetGPUCount (0 on a CPU build of MXNet, or with no visible GPU).
    """
    if kind == "cpu":
        n = cpu_device_count()
        if not 0 <= device_id < n:
            # MXNet's profiler indexes its per-device tables by this id and aborts past the end.
            raise DeviceError(
                f"cpu device id {device_id} is out of range: MXNet's profiler knows cpu/0 to "
                f"cpu/{n - 1} on this machine. fix: use a device id from 0 to {n - 1} (CPU "
                "contexts share the same cores; the id only labels the trace)")
        return
    if kind != "gpu":
        raise DeviceError(f"invalid context {kind!r}: expected 'cpu' or 'gpu'")
    try:
        n = _capi.gpu_count()
    except Exception:  # a CPU build can fail here rather than return 0
        n = 0
    if n == 0:
        raise DeviceError(f"GPU context requested, but this MXNet build "
                          f"({_capi.library_path()}) sees no GPU. fix: {CUDA_HINT}; "
                          "or use --ctx cpu")
    if not 0 <= device_id < n:
        raise DeviceError(f"GPU {device_id} requested, but MXNet sees {n} GPU(s): "
                          f"use a device id from 0 to {n - 1}")
