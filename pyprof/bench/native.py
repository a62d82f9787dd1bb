"""The native engine's figures: operator events from pyprof's trace reader, per task window.

One profiler session records a whole batch (see :mod:`pyprof.bench._worker`). Every run of a
case is one ``b``/``e`` pair of the task ``<case id>/<phase>`` in the ``pyprof.bench`` domain.
An operator call (a ``B``/``E`` pair on the device's pid) belongs to the window its begin falls
in; the engine is drained inside the window, so it also ends there. Per run, the phase's time is
the sum of its operator calls, what is not the operator's work (:data:`LEFT_OUT`: the engine's
bookkeeping and autograd's head gradient) left out. Each kernel's calls are summarised by
:meth:`pyprof.trace.OpStats.from_durations` (exact percentiles, integer microseconds). Memory:
the ``Memory: <device>`` counter, in bytes, as MXNet's pooled storage manager hands storage out;
a window's figure is the largest rise of the counter above the lowest value it had since the
window opened (the value before the window included).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

import numpy as np

from .. import rules
from ..trace.naming import BOOKKEEPING as _BOOKKEEPING
from ..trace.reader import TraceReader
from ..trace.statistics import OpStats


#: The profiler domain whose tasks mark each run's forward and backward window.
DOMAIN = "pyprof.bench"

#: The engine's bookkeeping, not work of the operator: waits, variable deletion and the like
#: (trace.json ``bookkeeping``, the rule the summaries and attribution read).
BOOKKEEPING = _BOOKKEEPING
#: The head gradient autograd fills with ones before a backward pass (``SetValueOp``,
#: attribution.json ``capture.autograd.head_gradient``): work of the backward, not of the operator.
HEAD_GRADIENT: str = rules.spec("attribution.json")["capture"]["autograd"]["head_gradient"]
#: The operator events a phase's time leaves out: :data:`BOOKKEEPING` and :data:`HEAD_GRADIENT`.
LEFT_OUT: frozenset[str] = BOOKKEEPING | {HEAD_GRADIENT}


@dataclasses.dataclass
class Window:
    """What one (case, phase) recorded over all its runs."""

    runs_us: list[int] = dataclasses.field(default_factory=list)
    kernels: dict[str, list[int]] = dataclasses.field(default_factory=lambda: defaultdict(list))
    peak_bytes: int | None = None

    def kernel_stats(self, device: str) -> list[OpStats]:
        """One record per operator the phase ran (:data:`LEFT_OUT` left out), most time first."""
        out = [OpStats.from_durations("operator", name, device, np.asarray(d, dtype=np.int64))
               for name, d in self.kernels.items() if d and name not in LEFT_OUT]
        return sorted(out, key=lambda o: -o.total_us)


def attribute(trace: str, *, domain: str, device: str) -> dict[tuple[int, str], Window]:
    """Read ``trace`` once and return ``{(case id, phase): Window}`` for ``domain``'s tasks.

    ``device`` is the trace's process name of the measured device, e.g. ``cpu/0``.
    """
    pid_names: dict[Any, str] = {}
    op_begin: list[int] = []
    op_dur: list[int] = []
    op_name: list[str] = []
    op_pid: list[Any] = []
    open_ops: dict[tuple, list[int]] = {}
    open_tasks: dict[tuple, list[int]] = {}
    tasks: list[tuple[int, int, str]] = []
    mem_ts: list[int] = []
    mem_val: list[int] = []
    counter = f"Memory: {device}"
    reader = TraceReader(trace, phases=("B", "E", "b", "e", "C", "M"), progress=False)
    for ev in reader:
        ph = ev["ph"]
        if ph == "B":
            open_ops.setdefault((ev["pid"], ev["tid"], ev["name"]), []).append(ev["ts"])
        elif ph == "E":
            stack = open_ops.get((ev["pid"], ev["tid"], ev["name"]))
            if stack:
                begin = stack.pop()
                op_begin.append(begin)
                op_dur.append(ev["ts"] - begin)
                op_name.append(ev["name"])
                op_pid.append(ev["pid"])
        elif ph in ("b", "e") and ev.get("cat") == domain:
            key = (ev["name"], ev.get("id"))
            if ph == "b":
                open_tasks.setdefault(key, []).append(ev["ts"])
            elif open_tasks.get(key):
                tasks.append((open_tasks[key].pop(), ev["ts"], ev["name"]))
        elif ph == "C" and counter in (ev.get("args") or {}):
            mem_ts.append(ev["ts"])
            mem_val.append(int(ev["args"][counter]))
        elif ph == "M" and ev.get("name") == "process_name":
            pid_names[ev["pid"]] = str((ev.get("args") or {}).get("name", ""))

    device_pids = {pid for pid, name in pid_names.items() if name == device}
    tasks.sort()
    starts = np.array([t[0] for t in tasks], dtype=np.int64)
    ends = np.array([t[1] for t in tasks], dtype=np.int64)
    run_sums = np.zeros(len(tasks), dtype=np.int64)
    windows: dict[tuple[int, str], Window] = {}
    keys = []
    for _, _, name in tasks:
        case_id, _, phase = name.partition("/")
        key = (int(case_id), phase)
        keys.append(key)
        windows.setdefault(key, Window())

    if len(tasks):
        begins = np.asarray(op_begin, dtype=np.int64)
        idx = np.searchsorted(starts, begins, side="right") - 1
        for i, w in enumerate(idx):
            if w < 0 or begins[i] > ends[w] or op_pid[i] not in device_pids:
                continue
            windows[keys[w]].kernels[op_name[i]].append(op_dur[i])
            if op_name[i] not in LEFT_OUT:
                run_sums[w] += op_dur[i]
        for w, key in enumerate(keys):
            windows[key].runs_us.append(int(run_sums[w]))
        _memory_peaks(windows, keys, starts, ends, mem_ts, mem_val)
    return windows


def _memory_peaks(windows: dict[tuple[int, str], Window], keys: list[tuple[int, str]],
                  starts: np.ndarray, ends: np.ndarray, ts: list[int], vals: list[int]) -> None:
    if not ts:
        return
    order = np.argsort(np.asarray(ts, dtype=np.int64), kind="stable")
    t = np.asarray(ts, dtype=np.int64)[order]
    v = np.asarray(vals, dtype=np.int64)[order]
    lo = np.searchsorted(t, starts, side="left")
    hi = np.searchsorted(t, ends, side="right")
    for w, key in enumerate(keys):
        # The largest rise above the lowest level seen so far in the window: storage freed
        # late by the previous run (an asynchronous DeleteVariable) does not hide the phase's
        # own allocations.
        base = v[lo[w] - 1: lo[w]] if lo[w] > 0 else np.zeros(1, dtype=np.int64)
        series = np.concatenate([base, v[lo[w]:hi[w]]])
        rise = int((series - np.minimum.accumulate(series)).max())
        win = windows[key]
        win.peak_bytes = max(win.peak_bytes or 0, rise)
