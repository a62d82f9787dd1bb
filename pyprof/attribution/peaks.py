"""This machine's peaks for a roofline, measured in the running process.

* GEMM peak: numpy float32 matrix products (sgemm of the BLAS numpy links) of a few square
  sizes, best of ``repeats``: ``2*n^3`` FLOPs per product.
* Copy bandwidth: ``numpy.copyto`` of a large float32 array, best of ``repeats``: bytes read
  plus bytes written (twice the array) per copy, stream-like. The DRAM roof: 64 MiB, or
  ``dram_over`` times the largest cache when that is larger.
* Cache bandwidths: the same copy at cache-sized working sets. The data and unified caches of
  cpu0 are read from sysfs (:func:`read_caches`); each cache whose level is in
  ``attribution.json peaks.caches.levels`` (L2, L3) is measured on an array of ``fraction``
  (1/4) of its size, so that source and destination fit it together; copies run back to back
  until a timed run moves ``run_bytes`` (numpy's call overhead amortised). The other caches
  (L1d) are listed with no bandwidth: a roofline names them when a group above its roof fits one.
* MXNet's ``dot`` peak: ``mx.nd.dot`` of square float32 matrices (1024, 2048), :data:`DOT_BATCH`
  products queued back to back and waited on once with ``wait_to_read``, after one warm-up
  batch: MXNet's own kernels, which can be far below numpy's (the pip wheel is built without
  AVX). One product waited on alone also timed the engine's and Python's wake-ups, up to a
  scheduler quantum each on a busy machine: 14% below the operator time the profiler gave the
  same 1024 dot beside a running test suite.

Everything is bounded by ``budget_s`` (about 5 s): a stage stops repeating once its share is
spent, and skips a larger size whose predicted time does not fit (each stage measures its
smallest size, and every cache, at least once). Units: GFLOP/s (1e9) and GB/s (1e9 bytes).
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
_CACHES = _SPEC["caches"]
#: cache levels whose copy bandwidth is measured (L2, L3)
CACHE_LEVELS: tuple[int, ...] = tuple(int(n) for n in _CACHES["levels"])
#: where cpu0's caches are listed (index*/level, type, size)
SYSFS_CACHES = "/sys/devices/system/cpu/cpu0/cache"


@dataclasses.dataclass(frozen=True)
class Cache:
    """One data or unified cache of cpu0 and, when measured, its copy bandwidth.

    Attributes:
        name: ``"L1d"``, ``"L2"``, ``"L3"``, ... (``d``/``i`` only for a split level).
        level: 1, 2, 3, ...
        size: its capacity in bytes (sysfs ``size``).
        copy_bytes: bytes of the copied array (source and destination: twice this); 0 when
            not measured.
        gbs: the best copy bandwidth at that working set, read + write (GB/s); None when not
            measured (a level not in ``CACHE_LEVELS``).
    """

    name: str
    level: int
    size: int
    copy_bytes: int = 0
    gbs: float | None = None


def size_text(n: float) -> str:
    """``n`` bytes as ``"48 KiB"``, ``"1.4 MiB"``, ``"32 MiB"`` (binary units)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if v == int(v) or v >= 100 else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


def _size(text: str) -> int:
    """sysfs's ``48K``, ``1024K``, ``32M`` (binary multiples) as bytes."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text[:-1] if scale > 1 else text) * scale


def read_caches(root: str | os.PathLike[str] = SYSFS_CACHES) -> tuple[Cache, ...]:
    """cpu0's data and unified caches, smallest level first (instruction caches left out), as
    sysfs lists them under ``root`` (``index*/level``, ``type``, ``size``); () where there is
    none or they cannot be read (not Linux, a container hiding them)."""
    found: dict[tuple[int, str], Cache] = {}
    try:
        entries = sorted(e for e in os.listdir(root) if e.startswith("index"))
    except OSError:
        return ()
    split = set()
    for e in entries:
        try:
            def read(key: str) -> str:
                with open(os.path.join(root, e, key)) as f:
                    return f.read().strip()
            level, kind, size = int(read("level")), read("type"), _size(read("size"))
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            split.add(level)
        elif kind in ("Data", "Unified") and size > 0:
            found.setdefault((level, kind), Cache(f"L{level}", level, size))
    return tuple(dataclasses.replace(c, name=c.name + "d") if c.level in split else c
                 for _, c in sorted(found.items()))


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
        caches: cpu0's data and unified caches, smallest first, each with its copy bandwidth
            when measured (:class:`Cache`); () where sysfs lists none, or in a file an older
            ``pyprof peaks`` wrote.
    """

    gemm_gflops: float
    copy_gbs: float
    mxnet_dot_gflops: float | None
    gemm: dict[int, float]
    mxnet_dot: dict[int, float]
    copy_bytes: int
    seconds: float
    caches: tuple[Cache, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The peaks as plain JSON-ready values (sizes as string keys)."""
        d = dataclasses.asdict(self)
        d["gemm"] = {str(k): v for k, v in self.gemm.items()}
        d["mxnet_dot"] = {str(k): v for k, v in self.mxnet_dot.items()}
        d["caches"] = [dataclasses.asdict(c) for c in self.caches]
        return d


def read_peaks(path: str | os.PathLike[str]) -> Peaks:
    """The peaks in a file written by ``pyprof peaks --format json`` (:meth:`Peaks.as_dict`).

    Raises:
        PyprofError: ``roofline.bad_peaks`` when the file cannot be read, is not JSON, or lacks a
            positive ``gemm_gflops`` or ``copy_gbs`` (``mxnet_dot_gflops`` may be null), or has
            ``caches`` that are not as :meth:`Peaks.as_dict` writes them (none: no caches).
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
    caches = d.get("caches") or []
    if not isinstance(caches, list) or not all(_is_cache(c) for c in caches):
        return ("caches is not a list of {name, level, size, copy_bytes, gbs} with a positive "
                "size and gbs (or null)")
    return Peaks(rates["gemm_gflops"], rates["copy_gbs"], rates["mxnet_dot_gflops"], *sizes, *extra,
                 tuple(Cache(c["name"], c["level"], c["size"], int(c.get("copy_bytes") or 0),
                             None if c.get("gbs") is None else float(c["gbs"])) for c in caches))


def _is_cache(c: Any) -> bool:
    def positive(v: Any) -> bool:
        return not isinstance(v, bool) and isinstance(v, (int, float)) and 0 < v < float("inf")
    return (isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("level"), int)
            and isinstance(c.get("size"), int) and positive(c["size"])
            and (c.get("gbs") is None or positive(c["gbs"])))


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


def _copy_run(nbytes: int) -> tuple[Callable[[], None], int, float]:
    """A run of ``numpy.copyto`` of a float32 array of about ``nbytes``, repeated back to back
    until the run moves ``run_bytes`` (at least once); the array's bytes; the bytes a run reads
    and writes."""
    src = np.ones(max(nbytes // 4, 1), dtype=np.float32)
    dst = np.empty_like(src)
    times = max(1, -(-int(_CACHES["run_bytes"]) // src.nbytes))

    def run() -> None:
        for _ in range(times):
            np.copyto(dst, src)
    return run, int(src.nbytes), 2.0 * src.nbytes * times


def measure(*, gemm_sizes: Sequence[int] = (256, 512, 1024), copy_mib: int | None = None,
            dot_sizes: Sequence[int] = DOT_SIZES, repeats: int = REPEATS, budget_s: float = 5.0,
            mxnet: bool = True, caches: Sequence[Cache] | None = None,
            cache_levels: Sequence[int] = CACHE_LEVELS) -> Peaks:
    """Measure the GEMM peak, copy bandwidths and (``mxnet=True``) MXNet's ``dot`` peak.

    Args:
        gemm_sizes: square sizes of the numpy sgemm products.
        copy_mib: size of the DRAM copy's array in MiB; None: 64, or ``dram_over`` (2) times
            the largest cache when that is larger.
        caches: the caches to list (None: :func:`read_caches`); those whose level is in
            ``cache_levels`` are measured at a working set of half their size.
        dot_sizes: square sizes of the ``mx.nd.dot`` products.
        repeats: timed runs per size (best is kept).
        budget_s: seconds for the whole measurement (importing mxnet not counted), shared by
            the stages (the GEMM 35%, the copies 15%, MXNet's dot the rest); each stage measures
            its smallest size (and every cache) at least once, and a larger one only when its
            predicted time fits.
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
    listed = tuple(read_caches() if caches is None else caches)
    copy_until = time.perf_counter() + 0.15 * budget_s
    measured = []
    for c in listed:  # the caches first: a few milliseconds each
        if c.level in cache_levels:
            run, nbytes, moved = _copy_run(int(c.size * float(_CACHES["fraction"])))
            run()  # warm-up: pages, and the arrays into the cache
            c = Cache(c.name, c.level, c.size, nbytes, _best(run, moved, repeats, copy_until))
        measured.append(c)
    if copy_mib is None:
        largest = max((c.size for c in listed), default=0)
        copy_mib = max(64, -(-int(_CACHES["dram_over"]) * largest // (1 << 20)))
    src = np.ones(max(copy_mib, 1) * (1 << 20) // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    copy_gbs = _best(lambda: np.copyto(dst, src), 2.0 * src.nbytes, repeats, copy_until)
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
                 time.perf_counter() - start, tuple(measured))


def format_peaks(p: Peaks) -> str:
    """The peaks as a few lines of text (what ``pyprof peaks`` prints)."""
    sizes = ", ".join(f"{n}: {g:.1f}" for n, g in p.gemm.items())
    lines = [f"GEMM peak (numpy float32): {p.gemm_gflops:.1f} GFLOP/s  (by size {sizes})",
             f"copy bandwidth (numpy, {p.copy_bytes >> 20} MiB, read + write): {p.copy_gbs:.1f} GB/s"
             " (the DRAM roof)"]
    for c in p.caches:
        lines.append(f"  {c.name} ({size_text(c.size)}): " + (
            "not measured" if c.gbs is None else
            f"{c.gbs:.1f} GB/s (copy of {size_text(c.copy_bytes)}, read + write)"))
    if p.mxnet_dot_gflops is not None:
        dots = ", ".join(f"{n}: {g:.1f}" for n, g in p.mxnet_dot.items())
        lines.append(f"MXNet dot peak (mx.nd.dot float32): {p.mxnet_dot_gflops:.1f} GFLOP/s  "
                     f"(by size {dots})")
    lines.append(f"measured in {p.seconds:.1f} s")
    return "\n".join(lines) + "\n"
