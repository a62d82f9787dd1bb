"""Trace analysis for MXNet profiler output: read, repair, summarise, compare, merge, plot.

Everything streams (bounded memory on traces larger than RAM) and copes with the files MXNet
really writes: pretty-printed events, 64-bit pids/tids, unescaped names, async duplicates of every
operator, and damage from crashes or repeated sessions (missing tail, leading comma, missing head).

Quick start::

    from pyprof import trace
    print(trace.summarize("profile.json", top=10))
    s = trace.stats("profile.json")              # exact, microseconds
    s.find("dot")[0].p99_us
    trace.diff("base.json", "new.json", threshold=5).exit_code
    trace.repair("crashed.json")                 # in place, atomically
    trace.merge(["w0.json", "w1.json"], "all.json", labels=["worker 0", "worker 1"])
    trace.compact("profile.json", "small.json.gz")
    trace.validate("small.json.gz").ok           # what every written trace guarantees
    trace.plot("profile.json", "ops.png")
    trace.report_html(["base.json", "new.json"], "report.html")   # offline HTML, one file

Modules: :mod:`~pyprof.trace.reader` (with :mod:`~pyprof.trace.framing`,
:mod:`~pyprof.trace.bodyparser`, :mod:`~pyprof.trace.readreport`) reads traces;
:mod:`~pyprof.trace.statistics` computes statistics (with :mod:`~pyprof.trace.accumulate`,
:mod:`~pyprof.trace.fastpath`, :mod:`~pyprof.trace.parallel`) into :mod:`~pyprof.trace.records`;
:mod:`~pyprof.trace.crosscheck`, :mod:`~pyprof.trace.report`, :mod:`~pyprof.trace.diffing`,
:mod:`~pyprof.trace.merging`, :mod:`~pyprof.trace.repairing`, :mod:`~pyprof.trace.plotting` and
:mod:`~pyprof.trace.html` (the HTML report) build on
them; :mod:`~pyprof.trace.writer` writes traces, whose slices and ids
:mod:`~pyprof.trace.slices` and :mod:`~pyprof.trace.ids` make valid and
:mod:`~pyprof.trace.validation` checks; :mod:`~pyprof.trace.naming` holds what MXNet's
categories and names mean, :mod:`~pyprof.trace.cli` the command line.
"""

from .crosscheck import CrossCheck, Mismatch, cross_check, load_aggregate
from .diffing import DiffResult, DiffRow, compare_samples, diff, format_diff
from .errors import AggregateFormatError, TraceError, TraceFormatError, TraceNotFoundError
from .merging import CompactResult, MergeResult, compact, merge
from .naming import API_CATEGORY, ASYNC_COPY_CATEGORIES, BULK_NOTE, is_bulk_name
from .plotting import plot
from .reader import ReadReport, TraceReader, iter_events
from .records import CounterStats, MemoryStats, OpStats, TraceStats
from .repairing import RepairResult, repair
from .report import summarize
from .slices import SliceCounts
from .statistics import stats
from .validation import ValidationResult, validate
from .html import ReportResult, report_html

# The facade (docs/architecture.md, "A small surface"): the tools of docs/trace-tools.md and the
# types its pages name. The other names imported above stay importable, as package-internal.
__all__ = [
    "stats", "summarize", "diff", "compare_samples", "merge", "compact", "repair", "validate",
    "plot", "report_html", "cross_check", "iter_events", "TraceReader",
    "TraceStats", "OpStats", "DiffRow", "SliceCounts",
    "TraceError", "TraceNotFoundError", "TraceFormatError",
]
