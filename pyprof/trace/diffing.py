"""Compare two runs operator by operator, with a noise estimate from the per-call samples.

The comparison works on plain samples (:func:`compare_samples`), so it serves trace files
(:func:`diff`) and any other per-operator measurements, e.g. operator-benchmark result files.

Statistic: the **median** per call (robust to the warm-up outliers typical of operator timings).
Noise: a percentile bootstrap confidence interval of ``median(new) - median(base)``, resampling
each side independently (``n_boot`` resamples, fixed seed so results are reproducible). A side
with more than ``max_boot_samples`` calls is first subsampled (without replacement) to that many
calls to bound time and memory; medians and totals themselves are always computed on all calls.

Verdicts: ``slower`` / ``faster`` when the interval excludes 0 and the relative change of the
median is at least ``min_effect_pct``; ``unchanged`` otherwise, and also when either side has fewer
than ``min_samples`` calls (no noise estimate possible); ``added`` / ``removed`` when the operator
is missing from one side. Rows are sorted by absolute impact ``|new total - base total|``.
A run *fails* (CLI exit 1) when some row is ``slower`` by at least ``threshold_pct``.

For traces, C API calls (``MXNET_C_API``) are left out unless ``include_api=True``, as in
:func:`~pyprof.trace.summarize`; a trace that cannot be read, is empty, is not a trace, or has no
timed events to compare is an error (:class:`~pyprof.trace.errors.TraceFormatError`), never a pass.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from .. import rules
from .naming import bulk_share_note, bulk_shares
from .statistics import API_CATEGORY, TraceStats, stats


VERDICTS = ("slower", "faster", "unchanged", "added", "removed")


@dataclasses.dataclass(frozen=True)
class DiffRow:
    """Change of one operator between a base and a new run; times in ``DiffResult.unit``.

    Attributes:
        key: the operator key (for traces ``(category, name, device)``).
        base_count, new_count: samples (calls) on each side; 0 when absent.
        base_total, new_total: sum of samples.
        base_median, new_median: median per call (``nan`` when absent).
        median_change: ``new_median - base_median``.
        median_change_pct: the same relative to ``base_median``, percent (``nan`` if base is 0).
        ci_low, ci_high: bootstrap interval of ``median_change`` (``nan`` without noise estimate).
        impact: ``new_total - base_total``.
        verdict: one of :data:`VERDICTS`.
    """

    key: Hashable
    base_count: int
    new_count: int
    base_total: float
    new_total: float
    base_median: float
    new_median: float
    median_change: float
    median_change_pct: float
    ci_low: float
    ci_high: float
    impact: float
    verdict: str

    @property
    def name(self) -> str:
        """Display name of the key."""
        if isinstance(self.key, tuple):
            return " / ".join(str(k) for k in self.key if k != "")
        return str(self.key)

    @property
    def count_change(self) -> int:
        return self.new_count - self.base_count

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["key"] = list(self.key) if isinstance(self.key, tuple) else self.key
        d["count_change"] = self.count_change
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}


@dataclasses.dataclass(frozen=True)
class DiffResult:
    """Result of :func:`compare_samples` / :func:`diff`.

    Attributes:
        rows: one :class:`DiffRow` per key, by absolute impact descending.
        threshold_pct: regression threshold used by :attr:`regressions` and :attr:`exit_code`.
        confidence: confidence level of the intervals.
        unit: unit of all times (``"us"`` for traces).
        min_samples: fewest calls per side for a verdict other than ``unchanged``.
    """

    rows: list[DiffRow]
    threshold_pct: float
    confidence: float
    unit: str = "us"
    min_samples: int = 5

    @property
    def too_few(self) -> list[DiffRow]:
        """Rows on both sides with fewer than ``min_samples`` calls on one: ``unchanged`` for
        want of a noise estimate, whatever their change."""
        return [r for r in self.rows if r.base_count and r.new_count
                and min(r.base_count, r.new_count) < self.min_samples]

    @property
    def regressions(self) -> list[DiffRow]:
        """Rows judged ``slower`` with a median change of at least ``threshold_pct`` percent."""
        return [r for r in self.rows if r.verdict == "slower"
                and (math.isnan(r.median_change_pct) or r.median_change_pct >= self.threshold_pct)]

    @property
    def exit_code(self) -> int:
        """0 when no regression crosses the threshold, 1 otherwise (the CLI's exit status)."""
        return 1 if self.regressions else 0


def _bootstrap_ci(a: np.ndarray, b: np.ndarray, *, n_boot: int, confidence: float,
                  max_samples: int, rng: np.random.Generator) -> tuple[float, float]:
    if a.size > max_samples:
        a = rng.choice(a, max_samples, replace=False)
    if b.size > max_samples:
        b = rng.choice(b, max_samples, replace=False)
    ma = np.median(a[rng.integers(0, a.size, (n_boot, a.size))], axis=1)
    mb = np.median(b[rng.integers(0, b.size, (n_boot, b.size))], axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(mb - ma, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def compare_samples(base: Mapping[Hashable, Sequence[float] | np.ndarray],
                    new: Mapping[Hashable, Sequence[float] | np.ndarray], *,
                    threshold_pct: float = 5.0, min_effect_pct: float = 1.0,
                    confidence: float = 0.95, n_boot: int = 1000, min_samples: int = 5,
                    max_boot_samples: int = 5000, seed: int = 0, unit: str = "us") -> DiffResult:
    """Compare per-key sample lists of two runs (see the module docstring for the method).

    Args:
        base, new: ``{key: samples}``; samples are per-call times (any unit, the same on both
            sides), shape ``(n,)``. Keys present on one side only give ``added``/``removed``.
        threshold_pct: regression threshold for :attr:`DiffResult.exit_code`.
        min_effect_pct: smallest relative median change called ``slower``/``faster``.
        confidence: confidence level of the bootstrap interval, in (0, 1).
        n_boot: bootstrap resamples.
        min_samples: fewest samples per side for a verdict other than ``unchanged``.
        max_boot_samples: per-side subsample size for the bootstrap.
        seed: random seed (results are deterministic).
        unit: unit label of the samples, carried into the result.

    Returns:
        :class:`DiffResult`.

    Raises:
        TraceError: ``threshold_pct`` negative or not finite, ``confidence`` outside (0, 1) or
            ``n_boot`` < 10.
    """
    _check_threshold(threshold_pct)
    if not 0.0 < confidence < 1.0:
        raise rules.error("diff.confidence", confidence=confidence)
    if n_boot < 10:
        raise rules.error("diff.n_boot", n_boot=n_boot)
    rng = np.random.default_rng(seed)
    rows = []
    nan = float("nan")
    keys = list(dict.fromkeys([*base.keys(), *new.keys()]))
    for key in keys:
        a = np.asarray(base.get(key, ()), dtype=np.float64)
        b = np.asarray(new.get(key, ()), dtype=np.float64)
        ta, tb = float(a.sum()), float(b.sum())
        ma = float(np.median(a)) if a.size else nan
        mb = float(np.median(b)) if b.size else nan
        change = mb - ma
        pct = change / ma * 100.0 if a.size and ma != 0 else nan
        lo = hi = nan
        if not a.size:
            verdict = "added"
        elif not b.size:
            verdict = "removed"
        elif a.size < min_samples or b.size < min_samples:
            verdict = "unchanged"
        else:
            lo, hi = _bootstrap_ci(a, b, n_boot=n_boot, confidence=confidence,
                                   max_samples=max_boot_samples, rng=rng)
            big = math.isnan(pct) or abs(pct) >= min_effect_pct
            verdict = "slower" if lo > 0 and big else "faster" if hi < 0 and big else "unchanged"
        rows.append(DiffRow(key, int(a.size), int(b.size), ta, tb, ma, mb, change, pct, lo, hi,
                            tb - ta, verdict))
    rows.sort(key=lambda r: -abs(r.impact))
    return DiffResult(rows, float(threshold_pct), confidence, unit, min_samples)


def _check_threshold(threshold: float) -> None:
    if not (math.isfinite(threshold) and threshold >= 0):
        raise rules.error("diff.threshold", threshold=threshold)


def _samples(s: TraceStats, keep: Any) -> dict[Hashable, np.ndarray]:
    return {(o.category, o.name, o.device): o.durations_us for o in s.operators if keep(o.category)}


def _describe(side: Any) -> str:
    if isinstance(side, TraceStats):
        return ", ".join(r.path for r in side.reports) or "statistics"
    if isinstance(side, (str, os.PathLike)):
        return os.fspath(side)
    return ", ".join(os.fspath(p) for p in side)


def diff(base: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | TraceStats,
         new: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | TraceStats, *,
         threshold: float = 5.0, categories: Sequence[str] | None = None,
         include_api: bool = False, progress: bool | None = None, **options: Any) -> DiffResult:
    """Per-operator change between two traces (or two :class:`TraceStats`).

    C API calls (category ``MXNET_C_API``) are left out unless ``include_api=True`` (or
    ``categories`` names ``MXNET_C_API``), as in :func:`~pyprof.trace.summarize`;
    :func:`~pyprof.trace.stats` always includes them.

    Args:
        base, new: trace path(s) or already computed statistics.
        threshold: regression threshold in percent (at least 0) of the base median per call; a
            ``slower`` row at or above it makes :attr:`DiffResult.exit_code` 1.
        categories: restrict to these categories (e.g. ``["operator"]``); default all (but C API
            calls, see ``include_api``).
        include_api: also compare C API calls (``MXNET_C_API``).
        progress: tqdm bars while reading.
        **options: passed to :func:`compare_samples` (``min_effect_pct``, ``confidence``,
            ``n_boot``, ``min_samples``, ``seed``...).

    Returns:
        :class:`DiffResult`, times in microseconds, keys ``(category, name, device)``.

    Raises:
        TraceNotFoundError: a trace cannot be opened.
        TraceFormatError: a trace holds no trace events (an empty file, JSON that is not a
            trace), or no timed events of the compared categories: a crashed run is an error,
            never an all-``removed`` pass.
        TraceError: ``threshold`` negative or not finite.
    """
    _check_threshold(threshold)
    cats = set(categories) if categories is not None else None
    api = include_api or (cats is not None and API_CATEGORY in cats)
    excluded = () if api else (API_CATEGORY,)

    def keep(cat: str) -> bool:
        return (cats is None or cat in cats) and (api or cat != API_CATEGORY)

    def side(what: str, arg: Any) -> dict[Hashable, np.ndarray]:
        s = arg if isinstance(arg, TraceStats) else stats(
            arg, categories=categories, exclude_categories=excluded, progress=progress)
        samples = _samples(s, keep)
        if not samples:
            only = (f" in category {', '.join(sorted(cats))}" if cats is not None
                    else "" if api else " other than C API calls")
            raise rules.error("diff.no_events", what=what, trace=_describe(arg), only=only,
                              or_categories="" if cats is None else " or other categories")
        return samples

    a = side("base", base)
    b = side("new", new)
    return compare_samples(a, b, threshold_pct=threshold, unit="us", **options)


def bulk_note(result: DiffResult) -> str | None:
    """For rows keyed ``(category, name, device)``: the bulk segments' share of their
    ``<device> / <category>`` group's time on each side, and how to avoid them; None without any."""
    keyed = [r for r in result.rows if isinstance(r.key, tuple) and len(r.key) == 3]
    sides = []
    for side in ("base", "new"):
        present = [(r, r.base_total) if side == "base" else (r, r.new_total) for r in keyed
                   if (r.base_count if side == "base" else r.new_count)]
        shares = bulk_shares((f"{r.key[2] or 'host'} / {r.key[0]}", str(r.key[1]), total)
                             for r, total in present)
        if shares:
            sides.append(f"{shares} in {side}")
    return bulk_share_note("; ".join(sides)) if sides else None


def format_diff(result: DiffResult, fmt: str = "table") -> str:
    """Render a :class:`DiffResult` as ``table`` (plain text), ``markdown``, ``csv`` or ``json``.

    Times are in ``result.unit``; the unit is part of every time column header. ``table``,
    ``markdown`` and ``json`` (``notes``) end with :func:`bulk_note` when a side holds bulk
    segments.

    Raises:
        TraceError: unknown format.
    """
    notes = [n for n in (bulk_note(result), _too_few_note(result)) if n]
    if fmt == "json":
        return orjson.dumps({"unit": result.unit, "threshold_pct": result.threshold_pct,
                             "confidence": result.confidence, "exit_code": result.exit_code,
                             "rows": [r.as_dict() for r in result.rows], "notes": notes},
                            option=orjson.OPT_INDENT_2).decode()
    u = result.unit
    headers = ["operator", "verdict", "calls base", "calls new", f"median base ({u})",
               f"median new ({u})", "change (%)", f"CI low ({u})", f"CI high ({u})",
               f"impact ({u})"]
    table = [[r.name, r.verdict, r.base_count, r.new_count, r.base_median, r.new_median,
              r.median_change_pct, r.ci_low, r.ci_high, r.impact] for r in result.rows]
    table = [[None if isinstance(v, float) and math.isnan(v) else v for v in row] for row in table]
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(headers)
        w.writerows(table)
        return buf.getvalue()
    if fmt not in ("table", "markdown"):
        raise rules.error("trace.format", fmt=fmt, choices=["table", "markdown", "csv", "json"])
    from tabulate import tabulate
    text = tabulate(table, headers=headers, tablefmt="github" if fmt == "markdown" else "simple",
                    floatfmt=".1f", missingval="-")
    regs = result.regressions
    tail = (f"\n\n{len(regs)} regression(s) at or above {result.threshold_pct:g}%"
            if regs else f"\n\nno regression at or above {result.threshold_pct:g}%")
    return text + tail + "".join(f"\n\nNote: {n}" for n in notes)


def _too_few_note(result: DiffResult) -> str | None:
    """The rows judged ``unchanged`` only for want of calls, named, or None."""
    few = result.too_few
    if not few:
        return None
    names = ", ".join(r.name for r in few[:5]) + (f" and {len(few) - 5} more" if len(few) > 5 else "")
    return (f"{len(few)} operator(s) have fewer than {result.min_samples} calls on a side ({names}): "
            f"too few for a noise estimate, so their verdict is unchanged whatever their change; "
            f"profile more steps on both sides for a verdict")
