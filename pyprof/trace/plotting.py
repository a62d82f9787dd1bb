"""Headless plots of a trace (matplotlib, Agg backend)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .. import rules
from .reader import TraceReader
from .statistics import API_CATEGORY, ASYNC_COPY_CATEGORIES, TraceStats, stats
from .writer import check_output


_MAX_BARS_PER_LANE = 20000


def _intervals(path: str, names: set[str], progress: bool | None) -> dict[str, dict[str, list[tuple[int, int]]]]:
    """``{device: {name: [(start_us, dur_us), ...]}}`` of operator calls of the given names."""
    pid_names: dict[Any, str] = {}
    open_: dict[tuple[Any, Any, Any], list[int]] = {}
    raw: dict[Any, dict[str, list[tuple[int, int]]]] = {}
    for ev in TraceReader(path, progress=progress, phases={"B", "E", "X", "M"}):
        ph = ev.get("ph")
        if ph == "M":
            if ev.get("name") == "process_name":
                pid_names[ev.get("pid")] = str((ev.get("args") or {}).get("name", ""))
            continue
        name = ev.get("name")
        if name not in names or ev.get("cat") in ASYNC_COPY_CATEGORIES and ph in ("b", "e"):
            continue
        if ph == "X":
            raw.setdefault(ev.get("pid"), {}).setdefault(name, []).append((ev["ts"], ev.get("dur", 0)))
            continue
        key = (ev.get("pid"), ev.get("tid"), name)
        if ph == "B":
            open_.setdefault(key, []).append(ev["ts"])
        elif open_.get(key):
            begin = open_[key].pop()
            raw.setdefault(ev.get("pid"), {}).setdefault(name, []).append((begin, ev["ts"] - begin))
    return {pid_names.get(pid, f"pid {pid}"): lanes for pid, lanes in raw.items()}


def _thin(iv: np.ndarray, gap: float) -> np.ndarray:
    """Merge intervals closer than ``gap`` (a fraction of a pixel) so huge traces plot quickly."""
    iv = iv[np.argsort(iv[:, 0])]
    out = [list(iv[0])]
    for s, d in iv[1:]:
        last = out[-1]
        if s - (last[0] + last[1]) <= gap:
            last[1] = max(last[1], s + d - last[0])
        else:
            out.append([s, d])
    return np.asarray(out)


def image_path(out: str, supported: dict[str, str]) -> str:
    """The path the image goes to (``.png`` appended when ``out`` has no extension, as
    matplotlib would do unasked); fails early, before reading the trace, on an output
    matplotlib cannot write (``supported``: extension -> description, as matplotlib's
    ``FigureCanvasBase.get_supported_filetypes()``). Raises TraceError: ``plot.image_format``,
    or ``trace.bad_output`` (a directory, a missing directory, no permission, ...)."""
    check_output(out, example="plot.png")  # a directory without extension: say so, not beside it
    ext = os.path.splitext(out)[1][1:].lower()
    if not ext:
        out += ".png"
        check_output(out)
    elif ext not in supported:
        raise rules.error("plot.image_format", path=out, ext=ext)
    return out


def plot(path: str | os.PathLike[str], out_png: str | os.PathLike[str], *, top: int = 15,
         category: str = "operator", progress: bool | None = None,
         result: TraceStats | None = None) -> str:
    """Draw the top operators by total time and an operator timeline per device to a PNG.

    Top panel: horizontal bars of total time (ms) of the ``top`` operators of ``category``
    (pooled over devices). Bottom panel: one lane per device, each call of those operators drawn
    at its start time (seconds from the first call) with its duration, one colour per operator;
    on long traces neighbouring calls closer than ~1/4000 of the time span are merged into one bar.
    Uses matplotlib's Agg backend: no display needed. Reads the trace twice (statistics, then the
    calls of the top operators), in bounded memory apart from those calls.

    Args:
        path: trace file.
        out_png: output image path; its extension picks the format (``.png``, ``.svg``, ``.pdf``
            and the others matplotlib writes); without one, ``.png`` is appended.
        top: number of operators shown.
        category: which category's events to rank (``operator`` by default).
        progress: tqdm bars while reading.
        result: statistics already computed for ``path`` (skips the first pass).

    Returns:
        the path written: ``out_png`` as a string, with ``.png`` appended when it had no
        extension.

    Raises:
        TraceError: no events of ``category`` in the trace, ``top`` < 1, or ``out_png`` cannot be
            written (unsupported extension; ``trace.bad_output``: a directory, missing directory,
            no permission, ...); checked before the trace is read.
        TraceNotFoundError / TraceFormatError: the trace cannot be read, is empty or is not a trace.
    """
    if top < 1:
        raise rules.error("plot.top", top=top)
    import matplotlib
    matplotlib.use("Agg", force=False)
    from matplotlib.backend_bases import FigureCanvasBase
    from matplotlib.figure import Figure

    out = image_path(os.fspath(out_png), FigureCanvasBase.get_supported_filetypes())
    res = result if result is not None else stats(
        path, progress=progress, exclude_categories=() if category == API_CATEGORY else (API_CATEGORY,))
    totals: dict[str, int] = {}
    for o in res.operators:
        if o.category == category:
            totals[o.name] = totals.get(o.name, 0) + o.total_us
    if not totals:
        raise rules.error("plot.no_events", category=category, path=os.fspath(path))
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
    names = [n for n, _ in ranked]
    lanes = _intervals(os.fspath(path), set(names), progress)

    fig = Figure(figsize=(12, 4 + 0.3 * len(names) + 0.4 * len(lanes)), constrained_layout=True)
    ax_bar, ax_tl = fig.subplots(2, 1, gridspec_kw={"height_ratios": [max(len(names), 3), max(len(lanes), 1) + 1]})
    cmap = matplotlib.colormaps["tab20"]
    colors = {n: cmap(i % 20) for i, n in enumerate(names)}
    ax_bar.barh(range(len(names))[::-1], [t / 1e3 for _, t in ranked], color=[colors[n] for n in names])
    ax_bar.set_yticks(range(len(names))[::-1], [n if len(n) <= 40 else n[:37] + "..." for n in names])
    ax_bar.set_xlabel("total time (ms)")
    ax_bar.set_title(f"top {len(names)} {category} name{'' if len(names) == 1 else 's'} by total time")

    starts = [s for dev in lanes.values() for iv in dev.values() for s, _ in iv]
    t0 = min(starts) if starts else 0
    t1 = max(s + d for dev in lanes.values() for iv in dev.values() for s, d in iv) if starts else 1
    gap = (t1 - t0) / 4000.0
    devices = sorted(lanes)
    for row, dev in enumerate(devices):
        for name, iv in lanes[dev].items():
            arr = np.asarray(iv, dtype=np.float64)
            if len(arr) > _MAX_BARS_PER_LANE:
                arr = _thin(arr, gap)
            arr[:, 0] = (arr[:, 0] - t0) / 1e6
            arr[:, 1] = np.maximum(arr[:, 1] / 1e6, 0.0)
            ax_tl.broken_barh(arr, (row - 0.4, 0.8), facecolors=colors[name], label=name)
    ax_tl.set_yticks(range(len(devices)), devices or ["-"])
    ax_tl.set_xlabel("time since first call (s)")
    ax_tl.set_title("operator timeline per device")
    handles = {h.get_label(): h for h in ax_tl.collections}
    if handles:
        ax_tl.legend([handles[n] for n in names if n in handles], [n for n in names if n in handles],
                     loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    try:
        fig.savefig(out, dpi=100)
    except OSError as exc:
        raise rules.error("trace.cannot_write", path=out, why=exc.strerror or exc) from exc
    return out
