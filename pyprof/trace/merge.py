"""Merge traces of several processes into one, and compact a trace for viewers.

MXNet writes 64-bit hashes as pids, tids and async ids. JavaScript viewers (chrome://tracing,
Perfetto's JSON importer) hold numbers as doubles and round anything above 2**53, merging unrelated
threads; both tools here renumber them to small integers (1, 2, ...), in order of first appearance.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from .errors import TraceError
from .naming import ASYNC_COPY_CATEGORIES
from .reader import ReadReport, TraceReader
from .writer import TraceWriter

__all__ = ["MergeResult", "CompactResult", "merge", "compact"]


class _Ids:
    """Map arbitrary hashable keys to 1, 2, 3, ... in order of first use."""

    def __init__(self) -> None:
        self.map: dict[Any, int] = {}

    def __call__(self, key: Any) -> int:
        v = self.map.get(key)
        if v is None:
            v = self.map[key] = len(self.map) + 1
        return v


@dataclasses.dataclass(frozen=True)
class MergeResult:
    """What :func:`merge` wrote.

    Attributes:
        out: the merged trace.
        events: events written.
        labels: the label of each input, in input order.
        pids: per input label, ``{original pid: new pid}``.
        offsets_us: per input label, microseconds added to every ``ts``.
        reports: the reader's report of each input.
    """

    out: str
    events: int
    labels: list[str]
    pids: dict[str, dict[Any, int]]
    offsets_us: dict[str, int]
    reports: list[ReadReport]


def _first_ts(path: str, progress: bool | None) -> int:
    first = None
    for ev in TraceReader(path, progress=progress):
        ts = ev.get("ts")
        if ts is not None and ev.get("ph") != "M" and (first is None or ts < first):
            first = ts
    return int(first or 0)


def merge(paths: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], *,
          labels: Sequence[str] | None = None,
          align: Literal["absolute", "start"] | Mapping[str, int] = "absolute",
          gzip: bool | None = None, progress: bool | None = None) -> MergeResult:
    """Merge traces of several processes or ranks into one Chrome trace.

    Every input keeps its processes and threads, renumbered to small integers: pids 1, 2, ... over
    all inputs in order, tids likewise (both far below 2**53), async ids per input and category.
    Process names become ``"<label>: <name>"`` (e.g. ``worker 0: cpu/0``), a ``process_sort_index``
    keeps each input's processes together, and thread names are kept.

    Time alignment: MXNet's ``ts`` are microseconds since the Unix epoch from the system clock,
    so traces of processes on one host (or on hosts synchronised by NTP/PTP) are already on a
    common time base. ``align="absolute"`` (default) keeps ``ts`` unchanged. ``align="start"``
    shifts each input so that its first timed event is at 0 (to compare runs taken at different
    times side by side; reads each input twice). A mapping ``{label: offset_us}`` adds explicit
    offsets (e.g. measured clock skew between hosts).

    Args:
        paths: input traces (plain or gzip, damaged ones are repaired on the fly).
        out: output path; gzip when it ends in ``.gz`` or ``gzip=True``. Written atomically.
        labels: one label per input; default the file names. Must be unique.
        align: see above.
        gzip: compress the output.
        progress: tqdm bar per input.

    Returns:
        :class:`MergeResult`.

    Raises:
        TraceError: no inputs, labels of the wrong length or not unique, unknown ``align``.
        TraceNotFoundError / TraceFormatError: an input cannot be read.
    """
    srcs = [os.fspath(p) for p in paths]
    if not srcs:
        raise TraceError("merge needs at least one trace; pass the input paths")
    labs = list(labels) if labels is not None else [os.path.basename(p) for p in srcs]
    if len(labs) != len(srcs):
        raise TraceError(f"{len(labs)} labels for {len(srcs)} traces; give one label per trace")
    if len(set(labs)) != len(labs):
        raise TraceError("merge labels must be unique; pass distinct labels (e.g. 'worker 0', 'worker 1')")
    if align == "absolute":
        offsets = {lab: 0 for lab in labs}
    elif align == "start":
        offsets = {lab: -_first_ts(p, progress) for lab, p in zip(labs, srcs)}
    elif isinstance(align, Mapping):
        offsets = {lab: int(align.get(lab, 0)) for lab in labs}
    else:
        raise TraceError(f"unknown align {align!r}; use 'absolute', 'start' or a {{label: offset_us}} mapping")

    new_pid, new_tid = _Ids(), _Ids()
    pid_maps: dict[str, dict[Any, int]] = {}
    reports = []
    named: set[int] = set()
    with TraceWriter(out, gzip=gzip) as w:
        for index, (lab, src) in enumerate(zip(labs, srcs)):
            ids = _Ids()
            off = offsets[lab]
            pmap: dict[Any, int] = {}
            reader = TraceReader(src, progress=progress)
            for ev in reader:
                ev = dict(ev)
                if "pid" in ev:
                    pid = pmap.get(ev["pid"])
                    if pid is None:
                        pid = pmap[ev["pid"]] = new_pid((index, ev["pid"]))
                        w.write({"ph": "M", "name": "process_sort_index", "pid": pid,
                                 "args": {"sort_index": pid}})
                    ev["pid"] = pid
                    if "tid" in ev:
                        ev["tid"] = new_tid((index, ev["tid"]))
                    if ev.get("ph") == "M" and ev.get("name") == "process_name":
                        args = dict(ev.get("args") or {})
                        args["name"] = f"{lab}: {args.get('name', '')}"
                        ev["args"] = args
                        named.add(pid)
                _renumber_async(ev, ids)
                if off and "ts" in ev:
                    ev["ts"] += off
                w.write(ev)
            for orig, pid in pmap.items():
                if pid not in named:
                    w.write({"ph": "M", "name": "process_name", "pid": pid,
                             "args": {"name": f"{lab}: pid {orig}"}})
            pid_maps[lab] = pmap
            reports.append(reader.report)
    return MergeResult(os.fspath(out), w.count, labs, pid_maps, offsets, reports)


def _renumber_async(ev: dict[str, Any], ids: _Ids) -> None:
    if "id" in ev:
        ev["id"] = ids((ev.get("cat"), ev["id"]))
    if "bind_id" in ev:
        ev["bind_id"] = ids(("bind", ev["bind_id"]))


@dataclasses.dataclass(frozen=True)
class CompactResult:
    """What :func:`compact` did.

    Attributes:
        out: the file written.
        events_in: events read.
        events_out: events written.
        complete: ``B``/``E`` pairs turned into ``X`` events.
        async_copies_dropped: async operator copies (``b``/``e`` in :data:`ASYNC_COPY_CATEGORIES`).
        unmatched_begin: begins without an end, kept as ``B`` events.
        unmatched_end: ends without a begin, dropped.
        report: the reader's report.
    """

    out: str
    events_in: int
    events_out: int
    complete: int
    async_copies_dropped: int
    unmatched_begin: int
    unmatched_end: int
    report: ReadReport


def _compact_events(reader: TraceReader, counts: dict[str, int]) -> Iterator[dict[str, Any]]:
    pids, tids, ids = _Ids(), _Ids(), _Ids()
    open_: dict[tuple[Any, Any, Any], list[dict[str, Any]]] = {}
    for ev in reader:
        counts["in"] += 1
        ph = ev.get("ph")
        if ph in ("b", "e") and ev.get("cat") in ASYNC_COPY_CATEGORIES:
            counts["copies"] += 1
            continue
        ev = dict(ev)
        if "pid" in ev:
            ev["pid"] = pids(ev["pid"])
        if "tid" in ev:
            ev["tid"] = tids(ev["tid"])
        _renumber_async(ev, ids)
        if ph == "B":
            open_.setdefault((ev.get("pid"), ev.get("tid"), ev.get("name")), []).append(ev)
            continue
        if ph == "E":
            stack = open_.get((ev.get("pid"), ev.get("tid"), ev.get("name")))
            if not stack:
                counts["unmatched_end"] += 1
                continue
            begin = stack.pop()
            x = {k: v for k, v in begin.items() if k != "ph"}
            x["ph"] = "X"
            x["dur"] = ev["ts"] - begin["ts"]
            if ev.get("args"):
                x["args"] = {**begin.get("args", {}), **ev["args"]}
            counts["complete"] += 1
            yield x
            continue
        yield ev
    for stack in open_.values():
        for begin in stack:
            counts["unmatched_begin"] += 1
            yield begin


def compact(path: str | os.PathLike[str], out: str | os.PathLike[str], *, gzip: bool | None = None,
            progress: bool | None = None) -> CompactResult:
    """Rewrite a trace for viewers: smaller, valid, and with ids JavaScript can hold.

    * Each ``B``/``E`` pair (matched per ``(pid, tid, name)``) becomes one ``X`` event with ``dur``
      in microseconds, written when its end is read (viewers do not need sorted events).
    * MXNet's async duplicates of operators are dropped; other async pairs (C API calls, domain
      tasks) are kept with small ids.
    * pids, tids and async ids are renumbered 1, 2, ... (below 2**53); metadata follows.
    * A begin with no end (a trace cut short) is kept as a ``B`` event; an end with no begin is
      dropped. Damaged inputs are repaired on the fly. Output is one compact event per line,
      written atomically; ``.json.gz`` (or ``gzip=True``) gives gzip, which Perfetto and
      chrome://tracing open directly.

    Args:
        path: input trace.
        out: output path.
        gzip: compress; default when ``out`` ends in ``.gz``.
        progress: tqdm bar.

    Returns:
        :class:`CompactResult`.

    Raises:
        TraceNotFoundError / TraceFormatError: the input cannot be read.
        TraceError: the output cannot be written.
    """
    counts = {"in": 0, "copies": 0, "complete": 0, "unmatched_begin": 0, "unmatched_end": 0}
    reader = TraceReader(path, progress=progress)
    with TraceWriter(out, gzip=gzip) as w:
        for ev in _compact_events(reader, counts):
            w.write(ev)
    return CompactResult(os.fspath(out), counts["in"], w.count, counts["complete"], counts["copies"],
                         counts["unmatched_begin"], counts["unmatched_end"], reader.report)
