"""Plan benchmark cases, run them in worker processes, and collect one :class:`Report`.

Batches: the cases of one category (and one namespace) run in one worker process
(:mod:`pyprof.bench._worker`); for the native engine that is one profiler session, read back
with :func:`pyprof.bench.native.attribute` when the worker has finished. A worker that dies
(an operator crashed the process) marks the case it was running as failed; the cases it had not
finished are run again in a fresh worker. Nothing a single operator does stops the run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..native import capi as _capi
from .. import context, rules
from . import native, registry
from .native import DOMAIN
from .inputs import Tensor, cases_for, describe
from .report import Report, environment


ENGINES = ("native", "python")
#: IQR above this fraction of the median earns a high-spread warning.
SPREAD_WARNING = 0.25
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass
class Case:
    """One operator with one input set. ``inputs`` maps argument -> Tensor / value."""

    op: str
    inputs: dict[str, Any]
    category: str = "custom"
    namespace: str = "nd"


def summarize(samples_ms: Sequence[float]) -> dict[str, Any] | None:
    """Mean, median, p90, p99, IQR, min, max and count of per-run times (ms)."""
    a = np.asarray(samples_ms, dtype=np.float64)
    if not a.size:
        return None
    q25, p50, q75, p90, p99 = np.percentile(a, [25, 50, 75, 90, 99])
    return {"count": int(a.size), "mean_ms": float(a.mean()), "median_ms": float(p50),
            "p90_ms": float(p90), "p99_ms": float(p99), "iqr_ms": float(q75 - q25),
            "min_ms": float(a.min()), "max_ms": float(a.max())}


def _spread_warning(phase: str, s: dict[str, Any] | None) -> str | None:
    if not s or s["median_ms"] <= 0 or s["iqr_ms"] / s["median_ms"] <= SPREAD_WARNING:
        return None
    return (f"high spread in {phase}: IQR is {100 * s['iqr_ms'] / s['median_ms']:.0f}% of the "
            f"median (p99 {s['p99_ms'] / s['median_ms']:.1f}x the median); rerun on an idle "
            "machine or raise --runs")


def _encode(value: Any) -> Any:
    if isinstance(value, Tensor):
        return {"__tensor__": dataclasses.asdict(value)}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def parse_ctx(ctx: Any) -> tuple[str, int]:
    """``'cpu'``, ``'gpu'``, ``'gpu(1)'``, ``'gpu:1'`` or an ``mx.Context`` -> (kind, id)."""
    if hasattr(ctx, "device_type"):
        return str(ctx.device_type).replace("cpu_pinned", "cpu"), int(ctx.device_id)
    text = str(ctx).strip().lower().replace("(", ":").rstrip(")")
    kind, _, dev = text.partition(":")
    if kind not in ("cpu", "gpu") or (dev and not dev.isdigit()):
        raise rules.error("bench.bad_context", ctx=ctx)
    return kind, int(dev or 0)


def plan(ops: Iterable[str] | None = None, categories: Iterable[str] | None = None, *,
         large_tensor: bool = False) -> list[Case]:
    """Default-input cases for ``ops`` and/or ``categories`` (everything when both are None)."""
    by_cat = registry.by_category()
    wanted_cats = list(categories) if categories is not None else ([] if ops else list(by_cat))
    for c in wanted_cats:
        if c not in by_cat:
            raise rules.error("bench.unknown_category", category=c, choices=list(by_cat))
    cat_of = {op: c for c, names in by_cat.items() for op in names}
    names: list[str] = [op for c in wanted_cats for op in by_cat[c]]
    regs = registry.operators()
    for op in ops or ():
        if op not in regs:
            raise rules.error("bench.not_an_operator", op=op)
        if op not in names:
            names.append(op)
    out = []
    for op in names:
        arg_names = regs[op].arg_names
        for inputs in cases_for(op, arg_names, large_tensor=large_tensor):
            out.append(Case(op, inputs, cat_of.get(op, "custom")))
    return out


def _user_cases(ops: Sequence[Any], inputs: Sequence[Mapping[str, Any]] | None,
                large_tensor: bool) -> list[Case]:
    """opperf's convention: the same input dicts for every op; shapes become tensors."""
    if inputs is None:
        return plan([registry.resolve(o) for o in ops], [], large_tensor=large_tensor)
    regs = registry.operators()
    cat_of = {op: c for c, names in registry.by_category().items() for op in names}
    out = []
    for o in ops:
        name = registry.resolve(o)
        arrays = set(regs[name].array_args) if name in regs else set()
        for given in inputs:
            case = {k: (Tensor(tuple(v)) if k in arrays and isinstance(v, (tuple, list))
                        and all(isinstance(x, int) for x in v) else v) for k, v in given.items()}
            out.append(Case(name, case, cat_of.get(name, "custom")))
    return out


def run_performance_test(ops: Any, inputs: Sequence[Mapping[str, Any]] | None = None,
                         run_backward: bool = True, dtype: str = "float32", ctx: Any = "cpu",
                         profiler: str = "native", warmup: int = 10, runs: int = 50, *,
                         large_tensor: bool = False, progress: bool | None = None,
                         trace_dir: str | None = None) -> Report:
    """Benchmark one operator or a list of them, like opperf's ``run_performance_test``.

    Args:
        ops: an operator name (``"dot"``), an ``mx.nd`` function (``mx.nd.dot``) or a list.
        inputs: list of input dicts (``{"lhs": (1024, 1024), "rhs": (1024, 1024)}``), each one
            case for every op; shapes of array arguments become random arrays. None: the
            defaults of :mod:`pyprof.bench.inputs`.
        run_backward: also time the backward pass under autograd where the op has a gradient.
        dtype: array dtype (``float32``, ``float16``, ``float64``).
        ctx: ``"cpu"``, ``"gpu"``, ``"gpu(1)"`` or an ``mx.Context``.
        profiler: ``"native"`` (operator time from the profiler's trace, memory in bytes) or
            ``"python"`` (wall time per run, engine drained).
        warmup, runs: untimed and timed passes per case.
        large_tensor: use the large-tensor input variants (int64-tensor builds).
        progress: tqdm bar; None = when stderr is a terminal.
        trace_dir: keep the native engine's trace files there (default: deleted).

    Returns:
        :class:`~pyprof.bench.report.Report`. Failures are recorded in it, never raised.

    Raises:
        DeviceError: a GPU context on a machine or build without GPU.
        PyprofError: bad arguments (unknown engine, operator or context).
    """
    ops = list(ops) if isinstance(ops, (list, tuple)) else [ops]
    return run_cases(_user_cases(ops, inputs, large_tensor), run_backward=run_backward,
                     dtype=dtype, ctx=ctx, profiler=profiler, warmup=warmup, runs=runs,
                     progress=progress, trace_dir=trace_dir, large_tensor=large_tensor)


def run_benchmarks(categories: Iterable[str] | None = None, ops: Iterable[str] | None = None,
                   **options: Any) -> Report:
    """Benchmark whole categories (default: all) and/or named operators with default inputs.

    ``options`` are those of :func:`run_performance_test` (no ``inputs``). The report lists the
    registered operators no benchmark covers.
    """
    cases = plan(ops, categories, large_tensor=options.get("large_tensor", False))
    report = run_cases(cases, **options)
    if categories is None and not ops:
        report.no_benchmark = registry.without_benchmark()
    return report


def run_cases(cases: Sequence[Case], *, run_backward: bool = True, dtype: str = "float32",
              ctx: Any = "cpu", profiler: str = "native", warmup: int = 10, runs: int = 50,
              progress: bool | None = None, trace_dir: str | None = None,
              large_tensor: bool = False,
              on_result: Callable[[dict[str, Any]], None] | None = None) -> Report:
    """Run prepared :class:`Case` objects; see :func:`run_performance_test`."""
    if profiler not in ENGINES:
        raise rules.error("bench.engine", profiler=profiler)
    if runs < 1 or warmup < 0:
        raise rules.error("bench.runs", runs=runs, warmup=warmup)
    kind, device_id = parse_ctx(ctx)
    context.check_context(kind, device_id)
    settings = {"profiler": profiler, "ctx": f"{kind}/{device_id}", "dtype": dtype,
                "warmup": warmup, "runs": runs, "run_backward": run_backward,
                "large_tensor": large_tensor}
    job = {"engine": profiler, "ctx": kind, "device_id": device_id, "dtype": dtype,
           "warmup": warmup, "runs": runs, "run_backward": run_backward}
    started = time.time()
    results: list[dict[str, Any] | None] = [None] * len(cases)
    batches: dict[tuple[str, str], list[int]] = {}
    for i, c in enumerate(cases):
        batches.setdefault((c.category, c.namespace), []).append(i)
    bar = _progress_bar(len(cases), progress)
    try:
        with tempfile.TemporaryDirectory(prefix="pyprof-bench-") as tmp:
            for (category, namespace), ids in batches.items():
                bar.set_description(category)
                _run_batch(cases, ids, job, results, bar, trace_dir or tmp,
                           trace_dir is not None, f"{kind}/{device_id}", on_result)
    finally:
        bar.close()
    return Report(results=[r for r in results if r is not None], settings=settings,
                  environment=environment(), started=started,
                  duration_s=time.time() - started)


def _progress_bar(total: int, progress: bool | None):
    from tqdm import tqdm
    disable = (not sys.stderr.isatty()) if progress is None else not progress
    return tqdm(total=total, unit="case", disable=disable, dynamic_ncols=True)


def _base_record(case: Case) -> dict[str, Any]:
    return {"operator": case.op, "namespace": case.namespace, "category": case.category,
            "inputs": describe(case.inputs)}


def _run_batch(cases: Sequence[Case], ids: list[int], job: dict[str, Any],
               results: list[dict[str, Any] | None], bar: Any, trace_dir: str, keep_traces: bool,
               device: str, on_result: Callable[[dict[str, Any]], None] | None) -> None:
    pending = list(ids)
    attempt = 0
    while pending:
        attempt += 1
        trace = os.path.join(trace_dir, f"bench-{cases[pending[0]].category}-{pending[0]}-"
                                        f"{attempt}.json")
        worker_job = dict(job, trace=trace, cases=[
            {"id": i, "op": cases[i].op, "namespace": cases[i].namespace,
             "inputs": {k: _encode(v) for k, v in cases[i].inputs.items()}} for i in pending])
        records, began, stderr, rc = _spawn(worker_job, bar, cases)
        windows: Mapping[tuple[int, str], native.Window] = {}
        if job["engine"] == "native" and records and os.path.exists(trace):
            windows = native.attribute(trace, domain=DOMAIN, device=device)
        if not keep_traces and os.path.exists(trace):
            os.unlink(trace)
        for i, rec in records.items():
            _store(results, i, _finish(cases[i], rec, windows, device), on_result)
        if rc == 0:
            break
        why = " | ".join(stderr.strip().splitlines()[-3:])[-300:]
        victim = began[-1] if began and results[began[-1]] is None else None
        if victim is None:  # died outside any case (start-up): nothing to retry
            for i in pending:
                if results[i] is None:
                    _store(results, i, dict(_base_record(cases[i]), status="failed",
                                            error=f"worker process failed (exit {rc}): {why}"),
                           on_result)
            break
        # The operator that was running killed the process: record it, rerun the rest.
        _store(results, victim, dict(_base_record(cases[victim]), status="failed",
                                     error=f"worker process died (exit {rc}) while running "
                                           f"this case: {why}"), on_result)
        bar.update(1)
        pending = [i for i in pending if results[i] is None]


def _store(results: list[dict[str, Any] | None], i: int, record: dict[str, Any],
           on_result: Callable[[dict[str, Any]], None] | None) -> None:
    results[i] = record
    if on_result is not None:
        on_result(record)


def _spawn(job: dict[str, Any], bar: Any, cases: Sequence[Case]):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
    if "MXNET_LIBRARY_PATH" not in env:
        env["MXNET_LIBRARY_PATH"] = _capi.library_path()
    proc = subprocess.Popen([sys.executable, "-m", "pyprof.bench._worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdin and proc.stdout and proc.stderr
    proc.stdin.write(json.dumps(job))
    proc.stdin.close()
    records: dict[int, dict[str, Any]] = {}
    began: list[int] = []
    ran: set[int] = set()
    err_chunks: list[str] = []
    t = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True)
    t.start()
    for line in proc.stdout:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if "begin" in msg:
            began.append(msg["begin"])
            bar.set_postfix_str(cases[msg["begin"]].op, refresh=True)
        elif "ran" in msg:
            ran.add(msg["ran"])
            bar.update(1)
            records.setdefault(msg["ran"], {})["wall_s"] = msg["wall_s"]
        elif "result" in msg:
            records.setdefault(msg["result"], {}).update(msg)
    rc = proc.wait()
    t.join()
    complete = {i: r for i, r in records.items() if "status" in r}
    lost = len(ran - set(complete))  # ran, but the worker died before their results came
    if lost:
        bar.update(-lost)
    return complete, began, "".join(err_chunks), rc


def _finish(case: Case, rec: dict[str, Any], windows: Mapping[tuple[int, str], native.Window],
            device: str) -> dict[str, Any]:
    out = _base_record(case)
    out.update(status=rec["status"], wall_s=round(rec.get("wall_s", 0.0), 4))
    if rec["status"] != "ok":
        out["error"] = rec.get("error", "unknown error")
        return out
    if "samples_ms" in rec:
        samples = rec["samples_ms"]
        memory = None
        kernels = None
    else:
        case_id = rec["result"]
        samples, kernels, memory = {}, {}, {"unit": "bytes", "device": device}
        for phase in ("forward", "backward"):
            w = windows.get((case_id, phase))
            if w is None:
                samples[phase] = []
                continue
            samples[phase] = [us / 1000.0 for us in w.runs_us]
            kernels[phase] = [{"name": o.name, "calls": o.count, "mean_us": o.mean_us,
                               "p50_us": o.p50_us, "p99_us": o.p99_us}
                              for o in w.kernel_stats(device)]
            memory[f"{phase}_peak_bytes"] = w.peak_bytes
    out["forward"] = summarize(samples.get("forward", []))
    out["backward"] = summarize(samples.get("backward", [])) if rec.get("backward") else None
    if rec.get("backward_note"):
        out["backward_note"] = rec["backward_note"]
    if memory is not None:
        out["memory"] = memory
    if kernels is not None:
        out["kernels"] = kernels
    out["samples_ms"] = {k: [round(x, 6) for x in v] for k, v in samples.items() if v}
    warnings = [w for w in (_spread_warning("forward", out["forward"]),
                            _spread_warning("backward", out["backward"])) if w]
    if kernels is not None and not kernels.get("forward"):
        warnings.append("the profiler recorded no operator in the forward window")
    if warnings:
        out["warnings"] = warnings
    return out
