"""Result records of :func:`pyprof.trace.stats`, and their output formats.

Units: every time field is in **microseconds** (``*_us``); ``ts`` in MXNet traces is integer
microseconds since the epoch, so counts, totals, minima and maxima are exact integers. Memory
fields are in **bytes** (``*_bytes``); MXNet's aggregate table prints them in kB = 1000 bytes
(``*_kb`` properties do the same).

* :class:`OpStats`: one operator (or API call, task, frame) on one device, exact percentiles.
* :class:`MemoryStats`: the ``Memory: <device>`` counter of one device.
* :class:`CounterStats`: any other counter.
* :class:`TraceStats`: all of them for one or more files, with notes for the user and
  JSON / CSV / Markdown / pandas output.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
from array import array
from typing import Any

import numpy as np
import orjson

from .. import rules
from .naming import BULK_NOTE, is_bulk_name, is_one_operator_segment, one_operator_note
from .phases import PHASES, note
from .readreport import ReadReport


_PCTS = (50.0, 90.0, 99.0)


@dataclasses.dataclass(frozen=True)
class OpStats:
    """Statistics of one operator (or API call, task, frame) on one device.

    Attributes:
        category: trace category, e.g. ``operator``, ``MXNET_C_API`` or a domain name.
        name: operator name as written by MXNet (bulk segments keep their merged name).
        device: process name of the event's pid, e.g. ``cpu/0``; empty for events that live on a
            category pid (API calls, tasks).
        count: calls (matched pairs).
        total_us, min_us, max_us: microseconds, integers (floats when a duration in the trace
            is not a whole number of microseconds, or beyond 64 bits).
        mean_us, p50_us, p90_us, p99_us: microseconds (float); percentiles are exact.
        durations_us: every call's duration, int64 (or float64, as above) array of shape
            ``(count,)`` in file order.
    """

    category: str
    name: str
    device: str
    count: int
    total_us: int | float
    min_us: int | float
    max_us: int | float
    mean_us: float
    p50_us: float
    p90_us: float
    p99_us: float
    durations_us: np.ndarray = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_durations(cls, category: str, name: str, device: str,
                       durations_us: np.ndarray) -> OpStats:
        """Build the record from an int64 array of per-call durations (microseconds, ``n >= 1``)."""
        d = np.asarray(durations_us)
        if d.dtype.kind != "f":
            d = d.astype(np.int64, copy=False)
        p50, p90, p99 = (float(x) for x in np.percentile(d, _PCTS))
        num = int if d.dtype.kind != "f" else float
        total = num(d.sum())
        return cls(category, name, device, int(d.size), total, num(d.min()), num(d.max()),
                   total / d.size, p50, p90, p99, d)

    @property
    def total_ms(self) -> float:
        """Total time in milliseconds."""
        return self.total_us / 1000.0

    @property
    def mean_ms(self) -> float:
        """Mean time per call in milliseconds."""
        return self.mean_us / 1000.0

    @property
    def bulk(self) -> bool:
        """True when the name is a bulk segment (see :data:`BULK_NOTE`)."""
        return is_bulk_name(self.name)

    def as_dict(self) -> dict[str, Any]:
        """The record as a flat dict (no per-call durations), units in the keys."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
             if f.name != "durations_us"}
        d["bulk"] = self.bulk
        return d


@dataclasses.dataclass(frozen=True)
class MemoryStats:
    """Memory counter (``Memory: <device>``) of one device, in bytes.

    Attributes:
        device: e.g. ``cpu/0``.
        samples: number of counter samples.
        min_bytes, max_bytes: smallest and largest value; ``max_bytes`` is the high-water mark.
        mean_bytes: arithmetic mean over samples.
        time_weighted_mean_bytes: mean over time, each value held until the next sample (samples
            sorted by ``ts``); equals ``mean_bytes`` when all samples share one timestamp.
        last_bytes: value of the latest sample (by ``ts``).
        first_ts_us, last_ts_us: time span of the samples, epoch microseconds.
    """

    device: str
    samples: int
    min_bytes: int
    max_bytes: int
    mean_bytes: float
    time_weighted_mean_bytes: float
    last_bytes: int
    first_ts_us: int
    last_ts_us: int

    @classmethod
    def from_samples(cls, device: str, ts: array, values: array) -> MemoryStats:
        """Build the record from the samples' ``ts`` and values (``array('q')``, same length >= 1)."""
        t = np.frombuffer(ts, dtype=np.int64)
        v = np.frombuffer(values, dtype=np.int64)
        order = np.argsort(t, kind="stable")
        t, v = t[order], v[order]
        span = int(t[-1] - t[0])
        if span > 0:
            twm = float(np.dot(v[:-1].astype(np.float64), np.diff(t).astype(np.float64)) / span)
        else:
            twm = float(v.mean())
        return cls(device, int(v.size), int(v.min()), int(v.max()), float(v.mean()), twm,
                   int(v[-1]), int(t[0]), int(t[-1]))

    @property
    def high_water_bytes(self) -> int:
        """Peak value (same as ``max_bytes``)."""
        return self.max_bytes

    @property
    def max_kb(self) -> float:
        """High-water mark in kB (1000 bytes), MXNet's aggregate unit."""
        return self.max_bytes / 1000.0

    def as_dict(self) -> dict[str, Any]:
        """The record as a flat dict, units in the keys."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class CounterStats:
    """A non-memory counter (``C`` events), e.g. ``MXNet C API Calls``; values unitless."""

    category: str
    name: str
    count: int
    min: float
    max: float
    mean: float
    last: float

    def as_dict(self) -> dict[str, Any]:
        """The record as a flat dict."""
        return dataclasses.asdict(self)


_OP_COLUMNS = ("category", "name", "device", "count", "total_us", "min_us", "max_us", "mean_us",
               "p50_us", "p90_us", "p99_us", "bulk")


@dataclasses.dataclass
class TraceStats:
    """Result of :func:`~pyprof.trace.stats`.

    Attributes:
        operators: one :class:`OpStats` per ``(category, name, device)``, by ``total_us`` descending.
        memory: one :class:`MemoryStats` per device.
        counters: other counters.
        reports: one :class:`~pyprof.trace.reader.ReadReport` per file read.
        unmatched_begin: begin events with no end (a trace cut short).
        unmatched_end: end events with no begin.
        phase_counts: events parsed per ``ph`` (async operator copies and excluded categories
            are skipped before parsing and not counted).
        negative_durations: slices left out because they end before they begin (or ``dur < 0``).
        no_timestamp: events of a timed phase left out for want of a numeric ``ts`` (or ``dur``).
        bad_counter_values: counter values left out (not numbers, or memory beyond 64 bits).
    """

    operators: list[OpStats]
    memory: list[MemoryStats]
    counters: list[CounterStats]
    reports: list[ReadReport]
    unmatched_begin: int = 0
    unmatched_end: int = 0
    phase_counts: dict[str, int] = dataclasses.field(default_factory=dict)
    negative_durations: int = 0
    no_timestamp: int = 0
    bad_counter_values: int = 0

    @property
    def unknown_phases(self) -> dict[str, int]:
        """Events per phase the Trace Event Format does not define (ignored)."""
        return {str(ph): n for ph, n in self.phase_counts.items() if ph not in PHASES}

    @property
    def bulk_names(self) -> list[str]:
        """Operator names that are bulk segments (``A,B`` or ``[op]``)."""
        return sorted({o.name for o in self.operators if o.bulk})

    @property
    def notes(self) -> list[str]:
        """Warnings worth showing the user: damage repaired, unmatched events, bulk names."""
        out = []
        for r in self.reports:
            out.extend(f"{os.path.basename(r.path)}: {p}" for p in r.problems())
        counts = [("unmatched_begin", self.unmatched_begin), ("unmatched_end", self.unmatched_end),
                  ("negative_duration", self.negative_durations), ("no_timestamp", self.no_timestamp),
                  ("non_numeric_counter", self.bad_counter_values)]
        out.extend(note(kind, n=n) for kind, n in counts if n)
        unknown = self.unknown_phases
        if unknown:
            out.append(note("unknown_phase", n=sum(unknown.values()),
                            phases=", ".join(repr(p) for p in sorted(unknown))))
        merged = [n for n in self.bulk_names if not is_one_operator_segment(n)]
        if merged:
            out.append(f"{len(merged)} bulk-merged name(s) ({', '.join(merged[:3])}"
                       f"{', ...' if len(merged) > 3 else ''}): {BULK_NOTE}")
        ones = [n for n in self.bulk_names if is_one_operator_segment(n)]
        if ones:
            out.append(one_operator_note(ones))
        return out

    def find(self, name: str, *, category: str | None = None,
             device: str | None = None) -> list[OpStats]:
        """All records with this name (optionally restricted to a category and device)."""
        return [o for o in self.operators if o.name == name
                and (category is None or o.category == category)
                and (device is None or o.device == device)]

    def records(self) -> list[dict[str, Any]]:
        """Operator records as flat dicts (keys as in :class:`OpStats`, units in the keys)."""
        return [o.as_dict() for o in self.operators]

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain JSON-able data: ``operators``, ``memory``, ``counters``, ``notes``."""
        return {
            "units": {"time": "us", "memory": "bytes"},
            "operators": self.records(),
            "memory": [m.as_dict() for m in self.memory],
            "counters": [c.as_dict() for c in self.counters],
            "notes": self.notes,
        }

    def to_json(self, path: str | os.PathLike[str] | None = None) -> str:
        """Serialise :meth:`to_dict` (indented); also write it to ``path`` when given."""
        text = orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2).decode()
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        return text

    def to_csv(self, path: str | os.PathLike[str] | None = None) -> str:
        """Operator records as CSV (header row, ``*_us`` columns); also written to ``path``."""
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=_OP_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(self.records())
        if path is not None:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(buf.getvalue())
        return buf.getvalue()

    def to_markdown(self, path: str | os.PathLike[str] | None = None) -> str:
        """Operator records as a GitHub Markdown table; also written to ``path``."""
        from tabulate import tabulate
        text = tabulate([[r[c] for c in _OP_COLUMNS] for r in self.records()],
                        headers=list(_OP_COLUMNS), tablefmt="github")
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        return text

    def to_dataframe(self):
        """Operator records as a ``pandas.DataFrame``.

        Raises:
            TraceError: pandas is not installed.
        """
        try:
            import pandas as pd
        except ImportError as exc:
            raise rules.error("trace.needs_pandas") from exc
        return pd.DataFrame(self.records(), columns=list(_OP_COLUMNS))
