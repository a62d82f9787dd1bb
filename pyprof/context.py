"""Device contexts checked before MXNet sees them, so a missing GPU is one clear line."""

from __future__ import annotations

import os

from .native import capi as _capi
from . import gpu, rules

#: How to get a GPU build (errors.json's API names, as Python says it).
CUDA_HINT = rules.CATALOGUE["api"]["cuda_build"]["python"]


def cpu_device_count() -> int:
    """CPU devices MXNet's profiler has tables for: the processors this process may use
    (what ``omp_get_num_procs`` reports)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_context(kind: str, device_id: int = 0) -> None:
    """Raise DeviceError unless ``kind`` ('cpu' or 'gpu') with ``device_id`` can run here.

    C: MXGetGPUCount (0 on a CPU build of MXNet, or with no visible GPU). A GPU must also be
    one the build has kernels for (:func:`check_gpu_arch`).
    """
    if kind == "cpu":
        n = cpu_device_count()
        if not 0 <= device_id < n:
            # MXNet's profiler indexes its per-device tables by this id and aborts past the end.
            raise rules.error("device.cpu_out_of_range", device_id=device_id, last=n - 1)
        return
    if kind != "gpu":
        raise rules.error("device.invalid", kind=kind, choices=["cpu", "gpu"])
    try:
        n = _capi.gpu_count()
    except Exception:  # a CPU build can fail here rather than return 0
        n = 0
    if n == 0:
        raise rules.error("device.no_gpu", library=_capi.library_path())
    if not 0 <= device_id < n:
        raise rules.error("device.gpu_out_of_range", device_id=device_id, count=n, last=n - 1)
    check_gpu_arch(device_id)


def check_gpu_arch(device_id: int) -> None:
    """Raise DeviceError (device.gpu_unsupported) when the MXNet build in use has no kernels for
    GPU ``device_id``'s compute capability, instead of CUDA's "no kernel image is available"
    at the first operator. The card comes from the NVIDIA driver, the kernels from
    libmxnet.so (see :mod:`pyprof.gpu`); when either is unknown nothing is claimed.
    ``PYPROF_GPU_ARCH_CHECK=0`` turns the check off."""
    if os.environ.get("PYPROF_GPU_ARCH_CHECK", "1").strip() == "0":
        return
    card = _capi.cuda_device(device_id)
    if card is None:
        return
    name, major, minor = card
    fields = gpu.unsupported(name, (major, minor), gpu.describe_build(_capi.library_path()))
    if fields:
        raise rules.error("device.gpu_unsupported", device_id=device_id, **fields)
