"""Build the one-file HTML report of one trace, or of two with their difference.

The page's figures are not computed here: the operator table is
:func:`~pyprof.trace.summarize` ``fmt="json"`` and the difference :func:`~pyprof.trace.diff`
rendered by :func:`~pyprof.trace.format_diff` ``"json"``, on the same statistics
(:func:`~pyprof.trace.stats`, read once per trace, so a trace summarize cannot read fails here
with the same error). The timeline's events (:func:`~pyprof.trace.html.columns.timeline`) are
gzip-compressed and base64-encoded in the file; the page inflates them with the browser's
``DecompressionStream``. Scripts and styles (the page's own and the vendored uPlot, see
``assets/vendor/README.md``) are inlined, and a Content-Security-Policy allows nothing but inline
code and ``data:`` images: opened from ``file://`` the page makes no request.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import html
import os
from collections.abc import Sequence
from importlib import resources

import orjson

from ... import rules
from ..diffing import diff, format_diff
from ..naming import API_CATEGORY, BOOKKEEPING_LABEL, BOOKKEEPING_NOTE
from ..report import summarize
from ..statistics import stats
from ..writer import check_output
from ...attribution.peaks import Peaks, measure, read_peaks
from .columns import timeline
from .roofview import roofline_view


#: The page's Content-Security-Policy: inline scripts and styles and ``data:`` images only.
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data:; base-uri 'none'; form-action 'none'")

#: A session's step marks (schedule.json ``step_marks``): instants of this category with a step.
_STEP_MARKS: dict[str, str] = rules.spec("schedule.json")["step_marks"]

#: The arg of an operator event that holds its FLOPs (attribution.json ``trace_args``).
_FLOPS_ARG: str = rules.spec("attribution.json")["trace_args"]["flops"]

#: The vendored uPlot (memory chart), pinned; its licence is ``assets/vendor/uPlot-LICENSE.txt``.
UPLOT_VERSION = "1.6.32"


@dataclasses.dataclass(frozen=True)
class ReportResult:
    """What :func:`report_html` wrote.

    Attributes:
        out: the HTML file.
        bytes: its size in bytes.
        slices: timeline slices over all traces.
        operators: operator rows over all traces (as ``summarize`` lists them).
    """

    out: str
    bytes: int
    slices: int
    operators: int


def _asset(name: str) -> str:
    return (resources.files(__package__) / "assets" / name).read_text(encoding="utf-8")


def _script_json(value: object) -> str:
    """JSON safe inside ``<script>``: every ``<`` escaped (it can only occur in strings)."""
    return orjson.dumps(value).decode().replace("<", "\\u003c")


def report_html(traces: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                out: str | os.PathLike[str], *, labels: Sequence[str] | None = None,
                include_api: bool = False, threshold: float = 5.0,
                peaks: Peaks | str | os.PathLike[str] | None = None, measure_peaks: bool = False,
                progress: bool | None = None) -> ReportResult:
    """Write one self-contained HTML report of one trace, or of two (base, new) with the
    per-operator difference.

    The page holds: the repairs and notes ``pyprof summarize`` reports; a timeline per device
    (pid) and thread (tid) with zoom and pan (oneDNN primitives merged by ``pyprof dnnl
    --trace`` nested under their operators, instant events as marks, and a session window's
    steps, its ``ProfilerStep#N`` instants, as a line per step over the window's span shaded); the
    ``Memory: <device>`` counters over time; the operator table (``summarize --format json``,
    times in microseconds there, milliseconds on the page) with share bars, sortable, the
    engine's bookkeeping (``WaitForVar``, ``DeleteVariable``, ...) after compute under a
    ``bookkeeping`` title row, whatever the column sorted, a click on a row highlighting the
    operator's slices; with two traces the ``pyprof diff`` table; the
    arguments of a clicked slice (shapes, types, call site, FLOPs, whatever the trace carries);
    when a trace carries FLOPs, or the shapes and attributes to derive them
    (``record_shapes=True``; :func:`pyprof.attribution.flops.counted`), its roofline: each
    (operator, input shape) group as ``pyprof roofline`` places it (:mod:`.roofview`), against
    the roofs of ``peaks``.

    Args:
        traces: one trace path, or two (base, new); plain or gzip, valid or damaged.
        out: the HTML file to write (replaced atomically enough: written whole, then renamed).
        labels: a label per trace (default the file names).
        include_api: also show C API calls (``MXNET_C_API``), as ``summarize --include-api``.
        threshold: regression threshold of the difference, percent (as ``pyprof diff``).
        peaks: the roofline's roofs: :class:`~pyprof.attribution.peaks.Peaks` or a file
            ``pyprof peaks --format json`` wrote; None: points only, with a note, unless
            ``measure_peaks`` (measured now, about 5 s, only when a trace carries FLOPs).
        progress: tqdm bars while reading.

    Returns:
        :class:`ReportResult`.

    Raises:
        TraceError: ``out`` cannot be written (``trace.bad_output``, checked first), not one or
            two traces (``report.trace_count``), labels not one per trace
            (``trace.label_count``); PyprofError ``roofline.bad_peaks`` for a peaks file that
            cannot be read (checked before any trace is read); the errors of
            :func:`~pyprof.trace.summarize`
            (TraceNotFoundError, TraceFormatError: empty, damaged beyond repair, not a trace)
            and, with two traces, of :func:`~pyprof.trace.diff` (``diff.no_events``).
    """
    paths = [os.fspath(traces)] if isinstance(traces, (str, os.PathLike)) else [os.fspath(p) for p in traces]
    if not 1 <= len(paths) <= 2:
        raise rules.error("report.trace_count", traces=len(paths))
    names = list(labels) if labels is not None else [os.path.basename(p) for p in paths]
    if len(names) != len(paths):
        raise rules.error("trace.label_count", labels=len(names), traces=len(paths))
    out = os.fspath(out)
    check_output(out, example="report.html", inputs=paths)
    given_peaks = peaks if isinstance(peaks, Peaks) or peaks is None else read_peaks(peaks)
    excluded = () if include_api else (API_CATEGORY,)
    results = [stats(p, progress=progress, exclude_categories=excluded) for p in paths]
    summaries = [summarize(r, fmt="json", include_api=include_api) for r in results]
    diff_json = (format_diff(diff(results[0], results[1], threshold=threshold,
                                  include_api=include_api), "json") if len(paths) == 2 else None)
    files, blobs, n_slices = [], [], 0
    for i, p in enumerate(paths):
        tl = timeline(p, exclude_categories=excluded, progress=progress)
        n_slices += len(tl["slices"]["track"])
        notes = ([f"{tl['unmatched']} begin/end event(s) without their pair left off the timeline"]
                 if tl["unmatched"] else [])
        files.append({"label": names[i], "path": p, "notes": notes})
        if any(_FLOPS_ARG in a for a in tl["args"] if isinstance(a, dict)):
            if given_peaks is None and measure_peaks:
                given_peaks = measure()
            view = roofline_view(p, given_peaks, _peaks_from(peaks, measure_peaks), progress=progress)
            if view is not None:
                blobs.append(f'<script type="application/json" id="pyprof-roofline-{i}">'
                             f'{_script_json(view)}</script>')
        packed = base64.b64encode(gzip.compress(orjson.dumps(tl), compresslevel=9, mtime=0)).decode()
        blobs.append(f'<script type="application/json" id="pyprof-summary-{i}">'
                     f'{summaries[i].strip().replace("<", chr(92) + "u003c")}</script>\n'
                     f'<script type="text/plain" id="pyprof-timeline-{i}">{packed}</script>')
    if diff_json is not None:
        blobs.append(f'<script type="application/json" id="pyprof-diff">'
                     f'{diff_json.replace("<", chr(92) + "u003c")}</script>')
    title = "pyprof report: " + " vs ".join(names)
    page = _page(title, files, blobs, diff_json is not None)
    tmp = f"{out}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(page)
        os.replace(tmp, out)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise rules.error("trace.cannot_write", path=out, why=exc.strerror or exc) from exc
    n_ops = sum(len(orjson.loads(s)["operators"]) for s in summaries)
    return ReportResult(out, os.path.getsize(out), n_slices, n_ops)


def _peaks_from(peaks: object, measure_peaks: bool) -> str | None:
    if isinstance(peaks, (str, os.PathLike)):
        return os.fspath(peaks)
    return "measured" if peaks is None and measure_peaks else None


def _page(title: str, files: list[dict[str, object]], blobs: list[str], has_diff: bool) -> str:
    subtitle = " &middot; ".join(html.escape(  # a label that is the file's name is not repeated
        str(f["path"]) if f["label"] == os.path.basename(str(f["path"])) else f"{f['label']}: {f['path']}")
        for f in files)
    parts = {
        "@CSP@": html.escape(CSP, quote=True),
        "@TITLE@": html.escape(title),
        "@SUBTITLE@": subtitle,
        "@FOOTER@": html.escape(f"written by pyprof {rules.VERSION}; memory and roofline charts: uPlot "
                                f"{UPLOT_VERSION} (MIT licence, (c) Leon Sorokin)"),
        "@META@": _script_json({"files": files, "diff": has_diff, "steps": {"cat": _STEP_MARKS["cat"]},
                                "bookkeeping": {"label": BOOKKEEPING_LABEL, "note": BOOKKEEPING_NOTE}}),
        "@UPLOT_CSS@": _asset(f"vendor/uPlot-{UPLOT_VERSION}.min.css"),
        "@STYLE@": _asset("report.css"),
        "@UPLOT_JS@": _asset(f"vendor/uPlot-{UPLOT_VERSION}.iife.min.js"),
        "@TIMELINE_JS@": _asset("timeline.js"),
        "@ROOFLINE_JS@": _asset("roofline.js"),
        "@APP_JS@": _asset("app.js"),
        "@DATA@": "\n".join(blobs),
    }
    page = _asset("template.html")
    # One pass over the template: text put in is never searched for placeholders again.
    out, i = [], 0
    while True:
        j = page.find("@", i)
        if j < 0:
            out.append(page[i:])
            break
        k = page.find("@", j + 1)
        key = page[j:k + 1] if k > 0 else ""
        if key in parts:
            out.append(page[i:j])
            out.append(parts[key])
            i = k + 1
        else:
            out.append(page[i:j + 1])
            i = j + 1
    return "".join(out)
