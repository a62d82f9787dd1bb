"""oneDNN primitives on an MXNet trace's timeline: one ``X`` event per timestamped execution.

Clocks: oneDNN 2.4.4 stamps a line (``DNNL_VERBOSE_TIMESTAMP=1``) with the *start* of the
execution in milliseconds since the epoch, from ``gettimeofday`` (microsecond resolution, printed
with six decimals), and its duration from the same clock. MXNet's trace ``ts`` are microseconds
since the epoch from the system clock (truncated to whole microseconds). Both are the same
realtime clock, so a primitive run by an operator lies inside that operator's slice up to the
resolution: :data:`TOLERANCE_US` on either side. Checked on real merged traces
(tests/dnnl/test_dnnl_mxnet.py).
"""

from __future__ import annotations

import bisect
import dataclasses
import os
from collections.abc import Iterator
from typing import Any

from .. import rules
from ..trace.ids import IdMap
from ..trace.reader import TraceReader
from ..trace.slices import Rewriter, plan_slices
from ..trace.writer import TraceWriter, check_output, kept_top_level
from .parse import Primitive, ScanResult, iter_primitives


#: How far (microseconds) a primitive may stick out of its operator's slice and still be placed
#: in it: MXNet truncates to whole microseconds, oneDNN's clock has microsecond resolution.
TOLERANCE_US = 2.0
#: The category of the primitive events.
CATEGORY = "dnnl"
_OPERATOR_CATEGORY = "operator"
_LOOKBACK = 64  # operator slices examined before a primitive's start


@dataclasses.dataclass(frozen=True)
class OperatorCoverage:
    """How much of one operator's time (all its slices) its primitives cover.

    Attributes:
        name: the operator (``Convolution``, ...).
        slices: its slices in the trace; ``with_primitives``: how many hold a primitive.
        total_us: their total duration; ``covered_us``: the primitives' total inside them.
        primitives: primitives placed in them.
        by_primitive: ``{primitive kind: microseconds}`` inside them.
    """

    name: str
    slices: int
    with_primitives: int
    total_us: float
    covered_us: float
    primitives: int
    by_primitive: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def share(self) -> float:
        """Percent of ``total_us`` covered by primitives."""
        return 100.0 * self.covered_us / self.total_us if self.total_us else 0.0


@dataclasses.dataclass(frozen=True)
class DnnlMergeResult:
    """What :func:`merge` wrote.

    Attributes:
        out: the merged trace.
        events: events written.
        primitives: timestamped executions read from the log.
        placed: of them, placed inside an operator slice.
        outside: placed on the ``oneDNN (outside operators)`` track.
        clamped: primitives whose start or end was moved (by at most :data:`TOLERANCE_US`) to
            lie inside their operator or not to overlap the previous primitive of their track.
        coverage: per operator, by covered time, descending.
        untimed: exec lines without a timestamp (not placed).
        other_lines: foreign lines of the log.
    """

    out: str
    events: int
    primitives: int
    placed: int
    outside: int
    clamped: int
    coverage: list[OperatorCoverage]
    untimed: int
    other_lines: int


def read_primitives(log: str | os.PathLike[str]) -> tuple[list[Primitive], ScanResult]:
    """The timestamped executions of ``log``, by start time, and the line counts.

    Raises:
        LogFormatError: missing, empty or foreign file; exec lines but none with a timestamp.
    """
    p = os.fspath(log)
    counts = ScanResult()
    try:
        with open(p, "rb") as f:
            prims = list(iter_primitives(f, counts))
    except FileNotFoundError:
        raise rules.error("dnnl.log_not_found", path=p) from None
    except OSError as exc:
        raise rules.error("dnnl.log_unreadable", path=p, reason=exc.strerror) from None
    if not prims:
        if counts.malformed:
            raise rules.error("dnnl.no_timestamps", path=p, count=counts.malformed)
        if not counts.other and not counts.info:
            raise rules.error("dnnl.log_empty", path=p)
        if not counts.info:
            with open(p, "rb") as f:
                first = next((ln.strip() for ln in f if ln.strip()), b"")[:80]
            raise rules.error("dnnl.log_foreign", path=p, lines=counts.other,
                              first=first.decode("utf-8", "replace"))
    prims.sort(key=lambda q: q.ts_us)
    return prims, counts


class _Op:
    __slots__ = ("ts", "end", "pid", "tid", "name", "covered", "count", "kinds")

    def __init__(self, ts: float, end: float, pid: Any, tid: Any, name: str) -> None:
        self.ts, self.end, self.pid, self.tid, self.name = ts, end, pid, tid, name
        self.covered = 0.0
        self.count = 0
        self.kinds: dict[str, float] = {}


def merge(log: str | os.PathLike[str], trace: str | os.PathLike[str],
          out: str | os.PathLike[str], *, gzip: bool | None = None,
          progress: bool | None = None,
          time_range: tuple[float, float] | None = None) -> DnnlMergeResult:
    """Write ``trace`` with the timestamped primitives of ``log`` as ``X`` events.

    The trace is rewritten as :func:`pyprof.trace.compact` would (``B``/``E`` pairs as ``X``,
    small pids and tids, damage repaired) but keeps all its events. Each primitive goes into the
    innermost ``operator`` slice that contains it (within :data:`TOLERANCE_US`), on a track of
    its own in that operator's process: ``oneDNN (<operator thread name or tid>)``, one per
    operator thread, so Perfetto shows it right under the operators. Its ``args``: ``operator``,
    ``impl``, ``prop_kind``, ``mds`` (memory descriptors: data types and layouts), ``attrs``,
    ``aux``, ``problem`` (the shape), ``time_ms`` and ``ts_ms`` as oneDNN printed them.
    Primitives inside no operator go to a process ``oneDNN (outside operators)``.

    Args:
        log: oneDNN verbose log recorded with ``DNNL_VERBOSE_TIMESTAMP=1``.
        trace: MXNet trace of the same process and time (plain or gzip, damage repaired).
        out: output path (gzip when it ends in ``.gz``); written atomically.
        gzip, progress: as in :func:`pyprof.trace.merge`.
        time_range: ``(start_us, end_us)``: only primitives starting in it (a session window).

    Returns:
        :class:`DnnlMergeResult` (with per-operator coverage).

    Raises:
        LogFormatError: see :func:`read_primitives`.
        TraceNotFoundError / TraceFormatError / TraceError: the trace cannot be read, or the
            output cannot be written (``trace.bad_output``, checked first).
    """
    check_output(out)
    prims, counts = read_primitives(log)
    if time_range is not None:
        prims = [q for q in prims if time_range[0] <= q.ts_us <= time_range[1]]
    first = TraceReader(trace, progress=progress)
    plan = plan_slices(first)
    ids = IdMap(renumber_all=True)
    rewriter = Rewriter(plan, ids)
    reader = TraceReader(trace, progress=progress)
    ops: list[_Op] = []
    thread_names: dict[tuple[Any, Any], str] = {}
    top = kept_top_level(first.report.top_level)
    top.pop("displayTimeUnit", None)
    with TraceWriter(out, gzip=gzip, display_time_unit=first.report.display_time_unit or "ms",
                     top_level=top) as w:
        for ev in rewriter.rewrite(reader):
            ph = ev.get("ph")
            if ph == "X" and ev.get("cat") == _OPERATOR_CATEGORY:
                ts = float(ev["ts"])
                ops.append(_Op(ts, ts + float(ev.get("dur", 0)), ev.get("pid"), ev.get("tid"),
                               str(ev.get("name"))))
            elif ph == "M" and ev.get("name") == "thread_name":
                thread_names[(ev.get("pid"), ev.get("tid"))] = str((ev.get("args") or {}).get("name"))
            w.write(ev)
        placed, clamped, outside = 0, 0, 0
        for ev in _primitive_events(prims, ops, ids, thread_names):
            if ev.get("ph") == "X":
                args = ev["args"]
                placed += "operator" in args
                outside += "operator" not in args
                clamped += bool(args.pop("_clamped", False))
            w.write(ev)
    coverage = _coverage(ops)
    return DnnlMergeResult(os.fspath(out), w.count, len(prims), placed, outside, clamped,
                           coverage, counts.malformed, counts.other)


def _container(prim: Primitive, ops: list[_Op], starts: list[float]) -> _Op | None:
    """The innermost (shortest) operator slice holding ``prim`` within the tolerance."""
    end = prim.ts_us + prim.dur_us
    i = bisect.bisect_right(starts, prim.ts_us + TOLERANCE_US)
    best = None
    for op in reversed(ops[max(0, i - _LOOKBACK):i]):
        if op.ts - TOLERANCE_US <= prim.ts_us and end <= op.end + TOLERANCE_US:
            if best is None or op.end - op.ts < best.end - best.ts:
                best = op
    return best


def _primitive_events(prims: list[Primitive], ops: list[_Op], ids: IdMap,
                      thread_names: dict[tuple[Any, Any], str]) -> Iterator[dict[str, Any]]:
    ops.sort(key=lambda o: o.ts)
    starts = [o.ts for o in ops]
    tracks: dict[tuple[Any, Any], int] = {}
    last_end: dict[tuple[Any, Any], float] = {}
    outside_pid = None
    for prim in prims:
        op = _container(prim, ops, starts)
        ts, end = prim.ts_us, prim.ts_us + prim.dur_us
        clamped = False
        if op is not None:
            key = (op.pid, op.tid)
            if ts < op.ts or end > op.end:
                ts, end, clamped = max(ts, op.ts), min(end, op.end), True
        else:
            if outside_pid is None:
                outside_pid = ids.fresh("pid")
                yield {"ph": "M", "name": "process_name", "pid": outside_pid,
                       "args": {"name": "oneDNN (outside operators)"}}
            key = (outside_pid, None)
        tid = tracks.get(key)
        if tid is None:
            tid = tracks[key] = ids.fresh("tid")
            label = "oneDNN" if op is None else \
                f"oneDNN ({thread_names.get(key, f'thread {op.tid}')})"
            yield {"ph": "M", "name": "thread_name", "pid": key[0], "tid": tid,
                   "args": {"name": label}}
            yield {"ph": "M", "name": "thread_sort_index", "pid": key[0], "tid": tid,
                   "args": {"sort_index": 1_000_000 + tid}}
        prev = last_end.get(key)
        if prev is not None and ts < prev:  # rounding: the previous one ends a little late
            ts, clamped = prev, True
            end = max(end, ts)
        last_end[key] = end
        sig = prim.sig
        args: dict[str, Any] = {"impl": sig.impl, "prop_kind": sig.prop_kind, "mds": sig.mds,
                                "attrs": sig.attrs, "aux": sig.aux, "problem": sig.problem,
                                "time_ms": round(prim.dur_us / 1e3, 6),
                                "ts_ms": round(prim.ts_us / 1e3, 6)}
        if op is not None:
            args["operator"] = op.name
            op.covered += end - ts
            op.count += 1
            op.kinds[sig.primitive] = op.kinds.get(sig.primitive, 0.0) + (end - ts)
        if clamped:
            args["_clamped"] = True
        yield {"ph": "X", "name": sig.primitive, "cat": CATEGORY, "pid": key[0], "tid": tid,
               "ts": round(ts, 3), "dur": round(end - ts, 3), "args": args}


def _coverage(ops: list[_Op]) -> list[OperatorCoverage]:
    by: dict[str, list[Any]] = {}
    for op in ops:
        acc = by.setdefault(op.name, [0, 0, 0.0, 0.0, 0, {}])
        acc[0] += 1
        acc[1] += op.count > 0
        acc[2] += op.end - op.ts
        acc[3] += op.covered
        acc[4] += op.count
        for kind, us in op.kinds.items():
            acc[5][kind] = acc[5].get(kind, 0.0) + us
    rows = [OperatorCoverage(name, int(a[0]), int(a[1]), a[2], a[3], int(a[4]), a[5])
            for name, a in by.items()]
    rows.sort(key=lambda r: (-r.covered_us, r.name))
    return rows
