"""The roofline view of an HTML report: each (operator, input shape) group with FLOPs of a trace.

The points are :func:`pyprof.attribution.roofline.points` of
:func:`~pyprof.attribution.roofline.shape_groups`, the computation ``pyprof roofline`` draws
(FLOP/byte, GFLOP/s, GB/s; C API calls left out); the roofs are the peaks of a file ``pyprof
peaks --format json`` wrote (``pyprof report --peaks FILE``), or measured in the run with
``--measure-peaks`` (about ``budget_s`` seconds, :func:`pyprof.attribution.peaks.measure`);
without either, the points alone and a note saying how to add the roofs. The page draws them
with the vendored uPlot on log-log axes, with a table of the same values: each group's memory
roof (DRAM or a cache, :func:`pyprof.attribution.roofline.memory_roof`) in its bound, and a
group above ``roofline.above`` times its roof marked, in red on the chart and in the table,
with its note (:func:`pyprof.attribution.roofline.above_note`).
"""

from __future__ import annotations

from typing import Any

from ...attribution.peaks import Peaks, size_text
from ...attribution.roofline import (ABOVE, GEMM, MXNET_DOT, above_points, above_text,
                                     bookkeeping, bookkeeping_text, cache_roofs, placeable,
                                     points, shape_groups)


#: The note a report without peaks shows under its roofline.
NO_PEAKS_NOTE = ("no roofs: this machine's peaks were not given; run `pyprof peaks --format json "
                 "> peaks.json` and then `pyprof report TRACE --peaks peaks.json -o report.html` "
                 "(or `pyprof report --measure-peaks`, a few seconds more)")


def roofline_view(path: str, peaks: Peaks | None, peaks_from: str | None, *,
                  progress: bool | None = None) -> dict[str, Any] | None:
    """The roofline of one trace for the page, or None when no group carries FLOPs and bytes.

    Returns:
        ``{"points": [Point.as_dict()...], "left_out": n, "bookkeeping": [...],
        "bookkeeping_title": str | None, "peaks": Peaks.as_dict() | None, "roofs": [{"name",
        "gflops"}], "cache_roofs": [{"name", "size", "gbs"}], "above_factor": 1.1, "above":
        [str], "peaks_from": str | None, "note": str | None}``; points most time first (each
        with ``above`` and ``above_note``); ``above`` the groups over ``above_factor`` times
        their roof, as ``pyprof roofline`` lists them, most over first;
        the engine's bookkeeping, never a point, apart
        (:func:`pyprof.attribution.roofline.bookkeeping`); FLOP/byte, 1e9 FLOP/s and 1e9 B/s,
        times in microseconds.
    """
    groups = shape_groups(path, progress=progress)
    if not any(placeable(g) for g in groups):
        return None
    pts, left_out = points(groups, peaks)
    roofs = [] if peaks is None else [{"name": GEMM, "gflops": peaks.gemm_gflops}] + (
        [{"name": MXNET_DOT, "gflops": peaks.mxnet_dot_gflops}]
        if peaks.mxnet_dot_gflops is not None else [])
    apart = bookkeeping(groups)
    return {"cache_roofs": [] if peaks is None else [
                {"name": f"{c.name} ({size_text(c.size)})", "size": c.size, "gbs": c.gbs}
                for c in cache_roofs(peaks)],
            "above_factor": ABOVE, "above": [above_text(p) for p in above_points(pts)],
            "points": [p.as_dict() for p in pts], "left_out": left_out, "bookkeeping": apart,
            "bookkeeping_title": bookkeeping_text(apart) if apart else None,
            "peaks": None if peaks is None else peaks.as_dict(), "roofs": roofs,
            "peaks_from": peaks_from, "note": NO_PEAKS_NOTE if peaks is None else None}
