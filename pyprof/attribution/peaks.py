"""This machine's peaks for a roofline, measured in the running process.

* GEMM peak: numpy float32 matrix products (sgemm of the BLAS numpy links) of a few square
  sizes, best of ``repeats``: ``2*n^3`` FLOPs per product.
* Copy bandwidth: ``numpy.copyto`` of a large float32 array, best of ``repeats``: bytes read
  plus bytes written (twice the array) per copy, stream-like.
* MXNet's ``dot`` peak: ``mx.nd.dot`` of square float32 matrices (1024, 2048), :data:`DOT_BATCH`
  products queued back to back and waited on once with ``wait_to_read``, after one warm-up
  batch: MXNet's own kernels, which can be far below numpy's (the pip wheel is built without
  AVX). One product waited on alone also timed the engine's and Python's wake-ups, up to a
  scheduler quantum each on a busy machine: 14% below the operator time the profiler gave the
  same 1024 dot beside a running test suite.

Everything is bounded by ``budget_s`` (about 5 s): a stage stops repeating once its share is
spent, and skips a larger size whose predicted time does not fit (each stage measures its
smallest size at least once). Units: GFLOP/s (1e9) and GB/s (1e9 bytes).
The MXNet stage calls ``MXImperativeInvokeEx`` through ``mx.nd.dot`` (traced when a profiler is
running).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import rules

_SPEC = rules.spec("attribution.json")["peaks"]
#: ``mx.nd.dot`` products per timed run of the MXNet stage (their wake-ups amortised;
#: attribution.json peaks, which the JVM's example reads too)
DOT_BATCH: int = int(_SPEC["dot_batch"])
#: square sizes of MXNet's dot stage
DOT_SIZES: tuple[int, ...] = tuple(int(n) for n in _SPEC["mxnet_dot_sizes"])
#: timed runs per size
REPEATS: int = int(_SPEC["repeats"])


@dataclasses.dataclass(frozen=True)
class Peaks:
    """Measured peaks.

    Attributes:
        gemm_gflops: best numpy sgemm rate over ``gemm`` (GFLOP/s).
        copy_gbs: best copy bandwidth, read + write bytes (GB/s).
        mxnet_dot_gflops: best ``mx.nd.dot`` rate over ``mxnet_dot`` (GFLOP/s); None when
            not measured.
        gemm, mxnet_dot: size -> best GFLOP/s of that size.
        copy_bytes: bytes of the copied array.
        seconds: wall time the measurement took.
    """

    gemm_gflops: float
    copy_gbs: float
    mxnet_dot_gflops: float | None
    gemm: dict[int, float]
    mxnet_dot: dict[int, float]
    copy_bytes: int
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        """The peaks as plain JSON-ready values (sizes as string keys)."""
        d = dataclasses.asdict(self)
        d["gemm"] = {str(k): v for k, v in self.gemm.items()}
        d["mxnet_dot"] = {str(k): v for k, v in self.mxnet_dot.items()}
        return d


def read_peaks(path: str | os.PathLike[str]) -> Peaks:
    """The peaks in a file written by ``pyprof peaks --format json`` (:meth:`Peaks.as_dict`).

    Raises:
        PyprofError: ``roofline.bad_peaks`` when the file cannot be read, is not JSON, or lacks a
            positive ``gemm_gflops`` or ``copy_gbs`` (``mxnet_dot_gflops`` may be null).
    """
    try:
        with open(path, "rb") as f:
            got: Peaks | str = _parse(f.read())
    except OSError as exc:
        got = str(exc.strerror or exc)
    if isinstance(got, str):
        raise rules.error("roofline.bad_peaks", path=os.fspath(path), why=got)
    return got


def _parse(data: bytes) -> Peaks | str:
    """:class:`Peaks` from the JSON of :meth:`Peaks.as_dict`, or what is wrong with it."""
    try:
        d = json.loads(data)
    except ValueError as exc:
        return f"not JSON ({exc})"
    if not isinstance(d, dict):
        return "not a JSON object"
    rates: dict[str, float | None] = {}
    for key in ("gemm_gflops", "copy_gbs", "mxnet_dot_gflops"):
        v = d.get(key)
        if v is None and key == "mxnet_dot_gflops":
            rates[key] = None
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
            return f"{key} is {v!r}, not a positive number"
        else:
            rates[key] = float(v)
    try:
        sizes = [{int(k): float(x) for k, x in (d.get(key) or {}).items()}
                 for key in ("gemm", "mxnet_dot")]
        extra = int(d.get("copy_bytes") or 0), float(d.get("seconds") or 0.0)
    except (AttributeError, TypeError, ValueError):
        return ("gemm, mxnet_dot (size -> GFLOP/s), copy_bytes or seconds is not as pyprof peaks "
                "writes it")
    return Peaks(rates["gemm_gflops"], rates["copy_gbs"], rates["mxnet_dot_gflops"], *sizes, *extra)


def _best(run: Callable[[], None], work: float, repeats: int, until: float) -> float:
    """Best rate (``work`` per second / 1e9) of ``run`` over up to ``repeats`` timed calls,
    stopping early once ``until`` (a perf_counter time) is passed; at least one call."""
    best = 0.0
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        run()
        dt = time.perf_counter() - t0
        best = max(best, work / max(dt, 1e-9) / 1e9)
        if time.perf_counter() + dt > until:
            break
    return best


def _sizes(sizes: Sequence[int], until: float, make: Callable[[int], Callable[[], None]],
           work: Callable[[int], float], repeats: int) -> dict[int, float]:
    """Best rate per size, smallest first; the first size always runs (after a warm-up call),
    a later one only when its predicted time (from the best rate so far) fits before ``until``."""
    rates: dict[int, float] = {}
    for n in sorted(sizes):
        run = make(n)
        if rates and time.perf_counter() + work(n) / (max(rates.values()) * 1e9) > until:
            break
        if not rates:
            run()  # warm-up: threads, pages, kernels
        rates[n] = _best(run, work(n), repeats, until)
    return rates


def measure(*, gemm_sizes: Sequence[int] = (256, 512, 1024), copy_mib: int = 64,
            dot_sizes: Sequence[int] = DOT_SIZES, repeats: int = REPEATS, budget_s: float = 5.0,
            mxnet: bool = True) -> Peaks:
    """Measure the GEMM peak, copy bandwidth and (``mxnet=True``) MXNet's ``dot`` peak.

    Args:
        gemm_sizes: square sizes of the numpy sgemm products.
        copy_mib: size of the copied array in MiB.
        dot_sizes: square sizes of the ``mx.nd.dot`` products.
        repeats: timed runs per size (best is kept).
        budget_s: seconds for the whole measurement (importing mxnet not counted), shared by
            the stages (the GEMM 35%, the copy 15%, MXNet's dot the rest); each stage measures
            its smallest size at least once, and a larger one only when its predicted time fits.
        mxnet: measure MXNet's dot too (imports mxnet).

    Returns:
        :class:`Peaks` (GFLOP/s, GB/s).
    """
    if mxnet:
        import mxnet as mx  # before the clock: the import is not part of the budget
    start = time.perf_counter()
    rng = np.random.default_rng(0)

    def gemm_run(n: int) -> Callable[[], None]:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        out = np.empty((n, n), dtype=np.float32)
        return lambda: np.matmul(a, b, out=out)

    def cube(n: int) -> float:
        return 2.0 * n ** 3

    gemm = _sizes(gemm_sizes, start + 0.35 * budget_s, gemm_run, cube, repeats)
    src = np.ones(max(copy_mib, 1) * (1 << 20) // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    copy_gbs = _best(lambda: np.copyto(dst, src), 2.0 * src.nbytes,
                     repeats, time.perf_counter() + 0.15 * budget_s)
    dots: dict[int, float] = {}
    if mxnet:
        def dot_run(n: int) -> Callable[[], None]:
            x = mx.nd.random.uniform(shape=(n, n), dtype="float32")
            y = mx.nd.random.uniform(shape=(n, n), dtype="float32")

            def run() -> None:  # queued back to back on the device's worker, waited on once
                for _ in range(DOT_BATCH - 1):
                    mx.nd.dot(x, y)
                mx.nd.dot(x, y).wait_to_read()
            return run

        dots = _sizes(dot_sizes, start + budget_s, dot_run, lambda n: DOT_BATCH * cube(n), repeats)
    return Peaks(max(gemm.values(), default=0.0), copy_gbs,
                 max(dots.values()) if dots else None, gemm, dots, int(src.nbytes),
                 time.perf_counter() - start)


def format_peaks(p: Peaks) -> str:
    """The peaks as a few lines of text (what ``pyprof peaks`` prints)."""
    sizes = ", ".join(f"{n}: {g:.1f}" for n, g in p.gemm.items())
    lines = [f"GEMM peak (numpy float32): {p.gemm_gflops:.1f} GFLOP/s  (by size {sizes})",
             f"copy bandwidth (numpy, {p.copy_bytes >> 20} MiB, read + write): {p.copy_gbs:.1f} GB/s"]
    if p.mxnet_dot_gflops is not None:
        dots = ", ".join(f"{n}: {g:.1f}" for n, g in p.mxnet_dot.items())
        lines.append(f"MXNet dot peak (mx.nd.dot float32): {p.mxnet_dot_gflops:.1f} GFLOP/s  "
                     f"(by size {dots})")
    lines.append(f"measured in {p.seconds:.1f} s")
    return "\n".join(lines) + "\n"
