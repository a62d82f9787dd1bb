"""``pyprof roofline``: each (operator, input shape) group of a trace against this machine's roofs.

The groups are those of ``pyprof summarize --by shape`` (:func:`pyprof.trace.stats` with
``by="shape"``, C API calls left out, read as ``summarize`` reads), from the ``"pyprof.flops"``
and ``"pyprof.bytes"`` args that ``pyprof.profile(..., record_shapes=True, with_flops=True)``
writes. A group with FLOPs, bytes and time is a point at

* x: arithmetic intensity, its FLOPs over its bytes (FLOP/byte), and
* y: achieved GFLOP/s, its FLOPs over its operator time (1e9 FLOP/s),

drawn on log-log axes (matplotlib, Agg backend) against roofs ``min(P, x * B)``: ``P`` numpy's
GEMM peak and MXNet's dot peak, ``B`` the copy bandwidth (DRAM's, and each measured cache's),
all from :func:`pyprof.attribution.peaks.measure` (``pyprof peaks``) or a file it wrote. A
group's own roof uses the machine's best compute peak, except for the operators of
``attribution.json roofline.mxnet_dot_operators`` (MXNet's ``dot``), held to MXNet's dot peak:
the kernel that peak measures; and the best bandwidth measured at a working set at least as
large as the group's (its bytes per call): DRAM's, or a cache's (:func:`memory_roof`).
Groups above ``roofline.above`` (1.1) times their roof are listed by :meth:`Roofline.above`,
each with a note (:func:`above_note`): likely cache residency when the group is memory-bound
and its working set fits a cache whose bandwidth was not measured at that size, else a FLOP or byte count
too high, or peaks measured under load. The engine's
bookkeeping (``WaitForVar``, ``DeleteVariable``, ...: ``trace.json`` ``bookkeeping``) is never a
point: :attr:`Roofline.bookkeeping` lists its time apart, per operator.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from .. import rules
from ..trace.naming import BOOKKEEPING_LABEL, BOOKKEEPING_NOTE, is_bookkeeping
from ..trace.shapes import ShapeGroup, dims_text
from .peaks import Cache, Peaks, size_text


_SPEC: dict[str, Any] = rules.spec("attribution.json")
_ROOF = _SPEC["roofline"]
#: A group above this many times its roof is reported (``attribution.json roofline.above``).
ABOVE: float = float(_ROOF["above"])
_MXNET_DOT = frozenset(_ROOF["mxnet_dot_operators"])
_NOTES = _ROOF["above_notes"]
#: the name of the memory roof measured on the large copy (``Peaks.copy_gbs``)
DRAM = "DRAM"
_OPERATOR_CATEGORIES = frozenset(_SPEC["matching"]["categories"])
GEMM, MXNET_DOT = "numpy GEMM", "MXNet dot"
#: the mark of a group above its roof in :func:`render`'s table
ABOVE_MARK = "ABOVE"


@dataclasses.dataclass(frozen=True)
class Point:
    """One (operator, input shape) group on the roofline.

    Attributes:
        group: the :class:`~pyprof.trace.shapes.ShapeGroup` (calls, time, FLOPs, bytes).
        intensity: FLOPs per byte moved.
        gflops, gbs: achieved GFLOP/s and GB/s over the group's operator time (1e9/s).
        peak_name, peak_gflops: the compute peak the group is held to (``"numpy GEMM"`` or
            ``"MXNet dot"``) and its GFLOP/s.
        roof_gflops: the roof at this intensity, ``min(peak_gflops, intensity * memory_gbs)``.
        bound: ``"compute"`` when the roof is the compute peak, else ``"memory"``.
        memory, memory_gbs: the memory roof (:func:`memory_roof`): ``"DRAM"`` or a cache
            (``"L2"``, ``"L3"``, ...) and its copy bandwidth (GB/s).
        note: what the group says when above its roof (:func:`above_note`).

    ``working_set`` is the group's bytes per call. The peak and roof fields and ``note`` are None
    for a point placed without peaks (:func:`points` ``peaks=None``).
    """

    group: ShapeGroup
    intensity: float
    gflops: float
    gbs: float
    peak_name: str | None
    peak_gflops: float | None
    roof_gflops: float | None
    bound: str | None
    memory: str | None = None
    memory_gbs: float | None = None
    note: str | None = None

    @property
    def working_set(self) -> float:
        """The group's bytes per call (inputs + outputs, ``pyprof.bytes``)."""
        return (self.group.bytes or 0) / max(self.group.count, 1)

    def is_above(self, factor: float = ABOVE) -> bool:
        """True when the achieved GFLOP/s is over ``factor`` times the roof."""
        return self.roof_gflops is not None and self.gflops > factor * self.roof_gflops

    @property
    def roof_pct(self) -> float | None:
        """Achieved GFLOP/s as a percentage of the roof at this intensity (None without one)."""
        return None if self.roof_gflops is None else 100.0 * self.gflops / self.roof_gflops

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.group.name, "device": self.group.device,
                "category": self.group.category, "input_dims": self.group.input_dims,
                "input_type": self.group.input_type, "count": self.group.count,
                "total_us": self.group.total_us, "flops": self.group.flops,
                "bytes": self.group.bytes, "intensity": self.intensity, "gflops_per_s": self.gflops,
                "gb_per_s": self.gbs, "peak": self.peak_name, "peak_gflops": self.peak_gflops,
                "roof_gflops": self.roof_gflops, "roof_pct": self.roof_pct, "bound": self.bound,
                "working_set": self.working_set, "memory_roof": self.memory,
                "memory_gbs": self.memory_gbs, "above": self.is_above(),
                "above_note": self.note if self.is_above() else None}


@dataclasses.dataclass
class Roofline:
    """What :func:`roofline` placed and against what.

    Attributes:
        points: the groups with FLOPs, bytes and time, most time first.
        peaks: the roofs' :class:`~pyprof.attribution.peaks.Peaks`.
        peaks_from: the file the peaks were read from; None when measured in this run.
        left_out: operator groups, not bookkeeping, without FLOPs or bytes (copies, which count 0
            FLOPs, operators ``flops.json`` has no formula for), or no time.
        image: the image written.
        bookkeeping: the engine's bookkeeping (``WaitForVar``, ``DeleteVariable``, ...), never
            placed: one ``{"name", "device", "count", "total_us"}`` per operator and device,
            most time first (:func:`bookkeeping`).
    """

    points: list[Point]
    peaks: Peaks
    peaks_from: str | None
    left_out: int
    image: str
    bookkeeping: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def above(self, factor: float = ABOVE) -> list[Point]:
        """The points above ``factor`` times their roof, most over first."""
        return above_points(self.points, factor)

    def as_dict(self) -> dict[str, Any]:
        return {"units": {"intensity": "FLOP/byte", "rates": "1e9/s", "time": "us"},
                "peaks": self.peaks.as_dict(), "peaks_from": self.peaks_from,
                "image": self.image, "left_out": self.left_out,
                BOOKKEEPING_LABEL: self.bookkeeping, "above_factor": ABOVE,
                "groups": [p.as_dict() for p in self.points],
                "above": [p.as_dict() for p in self.above()]}


def above_points(pts: Sequence[Point], factor: float = ABOVE) -> list[Point]:
    """The points of ``pts`` above ``factor`` times their roof, most over first."""
    return sorted((p for p in pts if p.is_above(factor)),
                  key=lambda p: -p.gflops / (p.roof_gflops or 1.0))


def _peak(name: str, peaks: Peaks) -> tuple[str, float]:
    if name in _MXNET_DOT and peaks.mxnet_dot_gflops is not None:
        return MXNET_DOT, peaks.mxnet_dot_gflops
    if peaks.mxnet_dot_gflops is not None and peaks.mxnet_dot_gflops > peaks.gemm_gflops:
        return MXNET_DOT, peaks.mxnet_dot_gflops
    return GEMM, peaks.gemm_gflops


def memory_roof(working_set: float, peaks: Peaks) -> tuple[str, float]:
    """The memory roof of a working set of ``working_set`` bytes: the best copy bandwidth
    measured at a working set at least as large, DRAM's (``peaks.copy_gbs``, whatever the
    size) or that of a cache measured at a working set (:func:`measured_at`) that holds it; its
    name (``"DRAM"``, ``"L2"``, ...) and GB/s. The best, not the smallest level's: a roof is an
    upper bound, and under load a cache's copy can measure below DRAM's. On ties, the smallest
    level."""
    best = (DRAM, peaks.copy_gbs)
    for c in sorted(peaks.caches, key=lambda c: -c.size):
        if c.gbs is not None and measured_at(c) >= working_set and c.gbs >= best[1]:
            best = (c.name, c.gbs)
    return best


def measured_at(c: Cache) -> int:
    """The working set a cache's bandwidth was measured at: source and destination, twice
    ``copy_bytes`` (0 when not measured)."""
    return 2 * c.copy_bytes if c.gbs is not None else 0


def fitting_cache(working_set: float, peaks: Peaks) -> Cache | None:
    """The smallest cache listed in ``peaks`` that holds ``working_set`` bytes, or None."""
    return min((c for c in peaks.caches if c.size >= working_set),
               key=lambda c: c.size, default=None)


def above_note(working_set: float, bound: str, memory: str, memory_gbs: float,
               peaks: Peaks) -> str:
    """What a group above its roof says (``attribution.json roofline.above_notes``). A
    memory-bound group: likely cache residency when the smallest cache holding its working set
    has no bandwidth measured, or measured at a smaller working set only; unknown cache
    residency when the peaks list no caches. Else, and for a compute-bound group: a FLOP or
    byte count too high, or peaks measured under load."""
    if bound != "memory":
        return _NOTES["counts"]
    if not peaks.caches:
        return _NOTES["no_caches"]
    fit = fitting_cache(working_set, peaks)
    if fit is None or measured_at(fit) >= working_set:
        return _NOTES["counts"]
    return _NOTES["cache_smaller" if fit.gbs is not None else "cache_unmeasured"].format(
        working_set=size_text(working_set), cache=fit.name, size=size_text(fit.size),
        measured=size_text(measured_at(fit)), roof=memory, gbs=memory_gbs)


def shape_groups(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
                 progress: bool | None = None) -> list[ShapeGroup]:
    """The (operator, input shape) groups a roofline places: those of ``pyprof summarize --by
    shape`` (:func:`pyprof.trace.stats` ``by="shape"``, C API calls left out) of ``paths``,
    pooled. Raises as :func:`pyprof.trace.summarize` (TraceNotFoundError, TraceFormatError)."""
    from ..trace.naming import API_CATEGORY
    from ..trace.statistics import stats

    names = [os.fspath(p) for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths)]
    return list(stats(names, by="shape", exclude_categories={API_CATEGORY},
                      progress=progress).groups)


def placeable(g: ShapeGroup) -> bool:
    """True when ``g`` goes on a roofline: it has FLOPs, bytes and time."""
    return bool(g.flops and g.bytes and g.total_us > 0)


def bookkeeping(groups: Sequence[ShapeGroup]) -> list[dict[str, Any]]:
    """The engine's bookkeeping among ``groups`` (operator groups named in ``trace.json``
    ``bookkeeping``: ``WaitForVar``, ``DeleteVariable``, ...), which a roofline never places:
    ``{"name", "device", "count", "total_us"}`` per operator and device, most time first."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for g in groups:
        if g.category in _OPERATOR_CATEGORIES and is_bookkeeping(g.name):
            r = out.setdefault((g.name, g.device), {"name": g.name, "device": g.device,
                                                    "count": 0, "total_us": 0})
            r["count"] += g.count
            r["total_us"] += g.total_us
    return sorted(out.values(), key=lambda r: (-r["total_us"], r["name"], r["device"]))


def points(groups: Sequence[ShapeGroup], peaks: Peaks | None) -> tuple[list[Point], int]:
    """The groups that go on a roofline as :class:`Point` (most time first), and how many
    operator groups, not the engine's bookkeeping (:func:`bookkeeping`), were left out (no
    FLOPs, no bytes, 0 FLOPs, or no time). With ``peaks`` None, the points carry no roof
    (FLOP/byte, GFLOP/s and GB/s only)."""
    out: list[Point] = []
    left_out = 0
    for g in sorted(groups, key=lambda g: (-g.total_us, g.name, str(g.input_dims))):
        if is_bookkeeping(g.name) and g.category in _OPERATOR_CATEGORIES:
            continue
        if not placeable(g):
            left_out += g.category in _OPERATOR_CATEGORIES
            continue
        intensity = g.flops / g.bytes
        if peaks is None:
            out.append(Point(g, intensity, g.flops / g.total_us / 1e3, g.bytes / g.total_us / 1e3,
                             None, None, None, None))
            continue
        name, peak = _peak(g.name, peaks)
        working_set = g.bytes / max(g.count, 1)
        level, gbs = memory_roof(working_set, peaks)
        bound = "compute" if peak <= intensity * gbs else "memory"
        out.append(Point(g, intensity, g.flops / g.total_us / 1e3, g.bytes / g.total_us / 1e3,
                         name, peak, min(peak, intensity * gbs), bound, level, gbs,
                         above_note(working_set, bound, level, gbs, peaks)))
    return out, left_out


def roofline(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
             out: str | os.PathLike[str], *, peaks: Peaks | str | os.PathLike[str] | None = None,
             budget_s: float = 5.0, mxnet: bool = True, top: int = 10,
             progress: bool | None = None) -> Roofline:
    """Place every (operator, shape) group of ``paths`` on a roofline and draw it to ``out``.

    Args:
        paths: trace file(s), plain or gzip, read as ``pyprof summarize`` reads them (several
            are pooled; damaged files are read as far as possible).
        out: image path; its extension picks the format (``.png``, ``.svg``, ...; none: ``.png``
            is appended); checked before the trace is read.
        peaks: :class:`~pyprof.attribution.peaks.Peaks`, or the path of a file written by
            ``pyprof peaks --format json``; None: measured now, after the trace is read, by
            :func:`~pyprof.attribution.peaks.measure` in about ``budget_s`` seconds
            (``mxnet=False`` skips MXNet's dot: ``mx.nd.dot`` through ``MXImperativeInvokeEx``).
        top: the ``top`` groups with the most time are labelled on the plot (0: none).
        progress: tqdm bars while reading.

    Returns:
        :class:`Roofline` (FLOP/byte, GFLOP/s, GB/s).

    Raises:
        TraceError: ``roofline.no_flops`` when no group carries FLOPs and bytes (a trace recorded
            without ``record_shapes=True, with_flops=True``); ``plot.image_format`` or
            ``trace.bad_output`` for ``out``.
        TraceNotFoundError / TraceFormatError: as :func:`pyprof.trace.summarize` (a missing,
            empty or foreign file).
        PyprofError: ``roofline.bad_peaks`` for a peaks file that cannot be read.
    """
    from ..trace.plotting import image_path
    from .peaks import measure, read_peaks

    import matplotlib
    matplotlib.use("Agg", force=False)
    from matplotlib.backend_bases import FigureCanvasBase

    image = image_path(os.fspath(out), FigureCanvasBase.get_supported_filetypes())
    names = [os.fspath(p) for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths)]
    got = peaks if isinstance(peaks, Peaks) else read_peaks(peaks) if peaks is not None else None
    groups = shape_groups(names, progress=progress)
    if not any(placeable(g) for g in groups):
        raise rules.error("roofline.no_flops", path=", ".join(names),
                          flops=_SPEC["trace_args"]["flops"], bytes=_SPEC["trace_args"]["bytes"])
    if got is None:
        got = measure(budget_s=budget_s, mxnet=mxnet)
    pts, left_out = points(groups, got)
    r = Roofline(pts, got, None if peaks is None or isinstance(peaks, Peaks) else os.fspath(peaks),
                 left_out, image, bookkeeping(groups))
    _draw(r, top)
    return r


def _label(p: Point) -> str:
    return f"{p.group.name} {dims_text(p.group.input_dims)}"


def _draw(r: Roofline, top: int) -> None:
    import matplotlib
    import numpy as np
    from matplotlib.figure import Figure

    pk = r.peaks
    roofs = [(GEMM, pk.gemm_gflops, "-")] + (
        [(MXNET_DOT, pk.mxnet_dot_gflops, "--")] if pk.mxnet_dot_gflops is not None else [])
    xs = np.array([p.intensity for p in r.points])
    ys = np.array([p.gflops for p in r.points])
    ridges = [peak / pk.copy_gbs for _, peak, _ in roofs]
    lo, hi = min(xs.min(), *ridges) / 4, max(xs.max(), *ridges) * 4
    line = np.geomspace(lo, hi, 256)
    fig = Figure(figsize=(11, 7), constrained_layout=True)
    ax = fig.subplots()
    for name, peak, style in roofs:
        ax.plot(line, np.minimum(peak, line * pk.copy_gbs), style, color="black", linewidth=1.2,
                label=f"{name} peak {peak:.1f} GFLOP/s, copy {pk.copy_gbs:.1f} GB/s")
    best = max(peak for _, peak, _ in roofs)
    for c in cache_roofs(pk):  # the memory roofs of cache-resident working sets
        ax.plot(line, np.minimum(best, line * c.gbs), ":", color="dimgray", linewidth=1.2,
                label=f"{c.name} ({size_text(c.size)}) copy {c.gbs:.1f} GB/s")
    total = sum(p.group.total_us for p in r.points) or 1
    sizes = [20 + 400 * (p.group.total_us / total) ** 0.5 for p in r.points]
    ops = list(dict.fromkeys(p.group.name for p in r.points))[:10]
    cmap = matplotlib.colormaps["tab10"]
    colors = [cmap(ops.index(p.group.name)) if p.group.name in ops else (0.6, 0.6, 0.6, 1.0)
              for p in r.points]
    above = {id(p) for p in r.above()}
    handles, labels = ax.get_legend_handles_labels()
    for p, size, color in zip(r.points, sizes, colors):  # one legend entry per top operator
        dot = ax.scatter([p.intensity], [p.gflops], s=size, color=[color], alpha=0.75, zorder=3,
                         edgecolors="red" if id(p) in above else "black",
                         linewidths=2 if id(p) in above else 0.5)
        if p.group.name in ops and p.group.name not in labels:  # (given here: "_plus_scalar"
            handles.append(dot)                                # as a label would be dropped)
            labels.append(p.group.name)
    for p in r.points[:max(top, 0)]:
        ax.annotate(_label(p), (p.intensity, p.gflops), textcoords="offset points", xytext=(6, 4),
                    fontsize=7, color="red" if id(p) in above else "black")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(min(ys.min(), lo * pk.copy_gbs) / 3, max(ys.max(), *(p for _, p, _ in roofs)) * 3)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved GFLOP/s (operator time)")
    where = f"peaks from {r.peaks_from}" if r.peaks_from else f"peaks measured in {pk.seconds:.1f} s"
    ax.set_title(f"roofline: {len(r.points)} (operator, input shape) groups; {where}")
    ax.grid(True, which="both", alpha=0.3)
    # beside the axes, not over them: a point in the lower right stays visible
    leg = ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    for h in leg.legend_handles:  # one marker size in the legend: a point's size is its time
        if hasattr(h, "set_sizes"):
            h.set_sizes([40])
    try:
        fig.savefig(r.image, dpi=100)
    except OSError as exc:
        raise rules.error("trace.cannot_write", path=r.image, why=exc.strerror or exc) from exc


def cache_roofs(pk: Peaks) -> list[Cache]:
    """The caches of ``pk`` with a measured bandwidth, smallest first: each a memory roof."""
    return [c for c in pk.caches if c.gbs is not None]


def roofs_text(r: Roofline) -> str:
    """``roofs: numpy GEMM 127.0 GFLOP/s, MXNet dot 128.3 GFLOP/s, copy 45.7 GB/s, L2 (1 MiB)
    209.1 GB/s, ... (from peaks.json)``: the head line of :func:`render`."""
    pk = r.peaks
    dot = f", {MXNET_DOT} {pk.mxnet_dot_gflops:.1f} GFLOP/s" if pk.mxnet_dot_gflops is not None else ""
    caches = "".join(f", {c.name} ({size_text(c.size)}) {c.gbs:.1f} GB/s" for c in cache_roofs(pk))
    where = f"from {r.peaks_from}" if r.peaks_from else f"measured in {pk.seconds:.1f} s"
    return (f"roofs: {GEMM} {pk.gemm_gflops:.1f} GFLOP/s{dot}, copy {pk.copy_gbs:.1f} GB/s"
            f"{caches} ({where})")


def above_text(p: Point) -> str:
    """``relu 2048x2048: 1.93x of its roof 5.717 GFLOP/s (memory, DRAM 45.7 GB/s; 32 MiB a
    call): ...note``: one group above its roof, as :func:`render` lists it."""
    assert p.roof_gflops is not None
    roof = (f"memory, {p.memory} {p.memory_gbs:.1f} GB/s" if p.bound == "memory"
            else f"compute, {p.peak_name}")
    return (f"{_label(p)}: {p.gflops / p.roof_gflops:.2f}x of its roof {p.roof_gflops:.3f} GFLOP/s "
            f"({roof}; {size_text(p.working_set)} a call): {p.note}")


def render(r: Roofline, fmt: str = "table") -> str:
    """``pyprof roofline``'s report: ``"json"`` (:meth:`Roofline.as_dict`), or a line of the
    roofs and a table (tabulate, as ``pyprof summarize``): operator, input dims, calls, GFLOP/s,
    GB/s, FLOP/byte, roof GFLOP/s at that intensity, % of it, bound (compute and its peak, or
    memory and its level: DRAM, L2, ...) and a mark, ``ABOVE``, on a group over ``ABOVE`` times
    its roof; then the groups above, each with its note (:func:`above_text`), the operator
    groups left out, and the engine's bookkeeping, never placed, apart (its operators, calls
    and time)."""
    if fmt == "json":
        import orjson
        return orjson.dumps(r.as_dict(), option=orjson.OPT_INDENT_2).decode() + "\n"
    from tabulate import tabulate

    head = roofs_text(r)
    devices = len({p.group.device for p in r.points}) > 1
    rows = [[p.group.name] + ([p.group.device or "host"] if devices else []) +
            [dims_text(p.group.input_dims), p.group.count, p.gflops, p.gbs, p.intensity,
             p.roof_gflops, p.roof_pct, f"{p.bound} ({p.peak_name if p.bound == 'compute' else p.memory})",
             ABOVE_MARK if p.is_above() else ""] for p in r.points]
    table = tabulate(rows, headers=["operator"] + (["device"] if devices else []) + [
        "input dims", "calls", "GFLOP/s", "GB/s", "FLOP/byte", "roof (GFLOP/s)", "roof (%)",
        "bound", "mark"], tablefmt="simple", floatfmt=".3f")
    over = r.above()
    tail = [f"above the roof ({len(over)} group{'' if len(over) == 1 else 's'} over {ABOVE}x):\n" +
            "\n".join(f"  {above_text(p)}" for p in over)] if over else []
    tail += [f"{r.left_out} operator group(s) without FLOPs or bytes left out (copies, "
            "operators flops.json has no formula for)"] if r.left_out else []
    if r.bookkeeping:
        tail.append(bookkeeping_text(r.bookkeeping) + "\n\n" + tabulate(
            [[b["name"]] + ([b["device"] or "host"] if devices else []) + [b["count"], b["total_us"] / 1e3]
             for b in r.bookkeeping],
            headers=["operator"] + (["device"] if devices else []) + ["calls", "total (ms)"],
            tablefmt="simple", floatfmt=".3f"))
    return "\n\n".join([head, table, *tail]) + "\n"


def bookkeeping_text(rows: Sequence[dict[str, Any]]) -> str:
    """``bookkeeping, not placed: 1.234 ms in 40 calls; the engine's own work ...``: the title
    of the engine's bookkeeping under a roofline (``rows`` from :func:`bookkeeping`)."""
    total = sum(b["total_us"] for b in rows)
    calls = sum(b["count"] for b in rows)
    return (f"{BOOKKEEPING_LABEL}, not placed: {total / 1e3:.3f} ms in {calls} call"
            f"{'' if calls == 1 else 's'}; {BOOKKEEPING_NOTE}")
