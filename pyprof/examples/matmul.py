"""The 4096x4096 ``dot`` example, profiled by MXNet's own profiler.

Mirrors MXNet's Clojure profiler example (``profiler.core``): bind ``dot(A, B)`` to two
uniform [-1, 1) float32 matrices, run ``--iters`` forward passes, record iterations
``[--begin, --end)``, write the Chrome trace and print MXNet's aggregate statistics and
the achieved GFLOP/s (2*N^3 flops per call) from the profiler's own operator time beside
the wall-clock figure, and against this machine's peaks (MXNet's dot, numpy's GEMM) measured
after the run. ``--binding jvm`` runs the same program in the JVM layer, loaded
into this process through JPype (``pyprof.example.matmul``, in ``examples/matmul/src``: the
JVM library has no example; ``jvm/``'s dev classpath, :func:`pyprof.jvm.classpath`, holds it);
``lein run -m pyprof.example.matmul`` in ``examples/matmul/`` runs it in a plain JVM.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any
from dataclasses import dataclass

from ..native import capi as _capi
from .. import context, env, profiler, rules
from ..errors import ConfigError
from . import _cli

#: a dot above this many times the measured peak gets a note (attribution.json roofline.above)
ABOVE: float = float(rules.spec("attribution.json")["roofline"]["above"])
#: default --peak-budget (s), the JVM example's too (attribution.json peaks)
PEAK_BUDGET_S: float = float(rules.spec("attribution.json")["peaks"]["example_budget_s"])

DEFAULT_OUTPUT = "./profile-matmul-20iter.json"


@dataclass
class MatmulResult:
    """What one run of the example measured. Times in ms, rates in GFLOP/s."""

    binding: str
    trace: str
    size: int
    profiled_iters: int
    dot_name: str | None
    dot_calls: int
    dot_ms: float
    gflops: float | None
    wall_ms: float
    wall_gflops: float | None
    stats_table: str
    bulk_note: str | None = None
    peaks: dict | None = None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size", type=int, default=4096, help="N of the NxN matrices (default 4096)")
    p.add_argument("--iters", type=int, default=5, help="forward passes in all (default 5)")
    p.add_argument("--begin", type=int, default=0, help="first profiled iteration (default 0)")
    p.add_argument("--end", type=int, default=1,
                   help="iteration at which profiling stops, exclusive (default 1)")
    p.add_argument("--mode", default="symbolic",
                   help="what to record besides the bound symbol: symbolic, imperative, api, "
                        "memory or all; a comma list combines them (default symbolic)")
    p.add_argument("--output", default=DEFAULT_OUTPUT, help=f"trace path (default {DEFAULT_OUTPUT}; missing directories are made)")
    p.add_argument("--ctx", choices=("cpu", "gpu"), default="cpu", help="device (default cpu)")
    p.add_argument("--device-id", type=int, default=0, help="device id (default 0)")
    p.add_argument("--binding", choices=("python", "jvm"), default="python",
                   help="python: this process's pyprof; jvm: the JVM layer through JPype")
    p.add_argument("--peak-budget", type=float, default=PEAK_BUDGET_S, metavar="S",
                   help="seconds for measuring this machine's peaks (MXNet dot, numpy GEMM) after "
                        f"the run, to compare the dot with (default {PEAK_BUDGET_S:g}; 0: not measured)")
    p.add_argument("--dnnl", action="store_true",
                   help="run in a child process with oneDNN's verbose output on and show the "
                        "oneDNN primitives inside the dot (or that it does not use oneDNN)")


def check_options(o: argparse.Namespace) -> None:
    """Raise ValueError naming the bad option and the accepted range."""
    if o.size <= 0:
        raise rules.error("example.positive", option="--size", value=o.size)
    if o.iters <= 0:
        raise rules.error("example.positive", option="--iters", value=o.iters)
    if not 0 <= o.begin < o.end:
        raise rules.error("example.begin_end", begin=o.begin, end=o.end)
    if not o.peak_budget >= 0:
        raise rules.error("example.non_negative", option="--peak-budget", value=o.peak_budget)
    if o.begin >= o.iters:
        raise rules.error("example.begin_past", begin=o.begin, last=o.iters - 1, iters=o.iters)
    if o.end > o.iters:
        raise rules.error("example.end_past", end=o.end, iters=o.iters, last=o.end - 1)
    try:
        env.parse_mode(o.mode)
    except ConfigError as exc:
        reason = str(exc).removesuffix(f" fix: {exc.fix}").rstrip(".")
        raise rules.error("example.mode", mode=o.mode, reason=reason, fix=exc.fix) from None


def profiler_config(mode: str, output: str) -> dict:
    """The set_config keywords for ``mode`` (see pyprof.env.parse_mode): the bound symbol is
    always recorded, the mode's categories are added and the others switched off."""
    return {**env.parse_mode(mode), "profile_symbolic": True, "filename": output,
            "aggregate_stats": True}


def dot_events(trace_path: str) -> tuple[str | None, list[float]]:
    """The dot operator's name in the trace (``dot``, or ``[dot]`` under bulk execution)
    and the duration in ms of each call: one per B/E pair on a device pid."""
    from ..trace import stats

    calls: dict[str, list[float]] = {}
    for op in stats(trace_path, categories={"operator"}, progress=False).operators:
        if op.name in ("dot", "[dot]") and op.device.split("/")[0] in ("cpu", "gpu"):
            calls.setdefault(op.name, []).extend(d / 1000.0 for d in op.durations_us)
    if not calls:
        return None, []
    name = max(calls, key=lambda k: len(calls[k]))
    return name, calls[name]


def bulk_note(trace_path: str) -> str | None:
    """The summaries' bulk note for the trace's operators, or None when no name is a bulk
    segment: a segment of one operator (``[dot]``, the bound dot's name under bulk execution) is
    named as such, with no advice; merged segments get each one's share of its device's operator
    time and how to avoid them. Both, when both occur, joined by ``"; "``."""
    from ..trace import stats
    from ..trace.naming import (bulk_share_note, bulk_shares, is_one_operator_segment,
                                one_operator_note)

    ops = stats(trace_path, categories={"operator"}, progress=False).operators
    ones = sorted({o.name for o in ops if is_one_operator_segment(o.name)})
    shares = bulk_shares((f"{o.device or 'host'} / {o.category}", o.name, o.total_us) for o in ops)
    notes = ([one_operator_note(ones)] if ones else []) + ([bulk_share_note(shares)] if shares else [])
    return "; ".join(notes) or None


def run(o: argparse.Namespace) -> MatmulResult:
    """Run the example in this process with the Python binding."""
    _capi.load()  # before `import mxnet`: a bad MXNET_LIBRARY_PATH is one clear error
    context.check_context(o.ctx, o.device_id)
    # MXNet reads it at bind: without it every run prints "Subgraph backend MKLDNN is activated"
    os.environ.setdefault("MXNET_SUBGRAPH_VERBOSE", "0")
    import mxnet as mx

    ctx = mx.gpu(o.device_id) if o.ctx == "gpu" else mx.cpu(o.device_id)
    shape = (o.size, o.size)
    a = mx.nd.random.uniform(-1.0, 1.0, shape, ctx=ctx)
    b = mx.nd.random.uniform(-1.0, 1.0, shape, ctx=ctx)
    c = mx.sym.dot(mx.sym.var("A"), mx.sym.var("B"), name="dot")
    exe = c.bind(ctx, {"A": a, "B": b})
    os.makedirs(os.path.dirname(os.path.abspath(o.output)), exist_ok=True)
    profiler.set_config(**profiler_config(o.mode, o.output))

    running = False
    t0 = wall = 0.0
    for i in range(o.iters):
        if i == o.begin:
            profiler.set_state("run")
            running, t0 = True, time.perf_counter()
        if i == o.end:
            wall = time.perf_counter() - t0
            profiler.set_state("stop")
            running = False
        exe.forward()[0].wait_to_read()
    if running:
        wall = time.perf_counter() - t0
        profiler.set_state("stop")
    profiler.dump(True)
    table = profiler.dumps()
    return _result("python", o, table, wall * 1000.0)


def _result(binding: str, o: argparse.Namespace, table: str, wall_ms: float) -> MatmulResult:
    name, durations = dot_events(o.output)
    flops = 2.0 * o.size ** 3
    dot_ms = sum(durations)
    n = o.end - o.begin
    return MatmulResult(
        binding=binding, trace=os.path.abspath(o.output), size=o.size, profiled_iters=n,
        dot_name=name, dot_calls=len(durations), dot_ms=dot_ms,
        gflops=(flops * len(durations) / (dot_ms / 1e3) / 1e9) if dot_ms > 0 else None,
        wall_ms=wall_ms,
        wall_gflops=(flops * n / (wall_ms / 1e3) / 1e9) if wall_ms > 0 else None,
        stats_table=table, bulk_note=bulk_note(o.output), peaks=measure_peaks(o))


def measure_peaks(o: argparse.Namespace) -> dict | None:
    """This machine's peaks (:func:`pyprof.attribution.peaks.measure` in ``--peak-budget``
    seconds, :meth:`~pyprof.attribution.peaks.Peaks.as_dict`: GFLOP/s, GB/s), measured after
    the profiled run, with the profiler stopped; None with a budget of 0 or on a GPU (the peaks
    are the CPU's)."""
    if o.peak_budget <= 0 or o.ctx != "cpu":
        return None
    from ..attribution.peaks import measure

    return measure(budget_s=o.peak_budget).as_dict()


def run_jvm(o: argparse.Namespace) -> MatmulResult:
    """Run the Clojure example (pyprof.example.matmul/run, examples/matmul/src) in a JVM inside
    this process."""
    from .. import jvm

    _capi.load()
    context.check_context(o.ctx, o.device_id)
    os.makedirs(os.path.dirname(os.path.abspath(o.output)), exist_ok=True)
    out = jvm.call("pyprof.example.matmul", "run", {
        "size": o.size, "iters": o.iters, "begin": o.begin, "end": o.end, "mode": o.mode,
        "output": o.output, "ctx": o.ctx, "device-id": o.device_id})
    return _result("jvm", o, out["stats-table"], float(out["wall-ms"]))


def report(r: MatmulResult, file=sys.stdout) -> None:
    """Print what a user wants to see: the trace, MXNet's stats table, the dot figures."""
    p = lambda *a: print(*a, file=file)  # noqa: E731
    p(r.stats_table.rstrip())
    p("")
    p(f"binding:      {r.binding}")
    p(f"trace:        {r.trace}")
    if r.dot_name is None:
        p("dot operator: not found in the trace (was the symbolic mode on?)")
    else:
        bulk = " (bulk execution's name for the bound dot)" if r.dot_name.startswith("[") else ""
        p(f"dot operator: {r.dot_name!r}{bulk}, {r.dot_calls} call(s) in "
          f"{r.profiled_iters} profiled iteration(s)")
        p(f"dot time:     {r.dot_ms:.3f} ms by the profiler "
          f"({r.dot_ms / max(r.dot_calls, 1):.3f} ms/call)")
    fmt = lambda g: "n/a" if g is None else f"{g:.1f}"  # noqa: E731
    p(f"GFLOP/s:      {fmt(r.gflops)} from operator time, {fmt(r.wall_gflops)} wall-clock "
      f"({r.wall_ms:.3f} ms for the profiled iterations; 2*N^3 flops per dot, N={r.size})")
    if r.peaks is not None:
        def pct(peak: float | None) -> str:
            return "n/a" if r.gflops is None or not peak else f"{100 * r.gflops / peak:.0f}%"
        dot = r.peaks["mxnet_dot_gflops"]
        p(f"peak:         MXNet dot {fmt(dot)} GFLOP/s (this dot at {pct(dot)} of it), numpy GEMM "
          f"{fmt(r.peaks['gemm_gflops'])} GFLOP/s ({pct(r.peaks['gemm_gflops'])}); measured in "
          f"{r.peaks['seconds']:.1f} s after the run (pyprof peaks)")
        gemm = r.peaks["gemm_gflops"]
        if r.gflops is not None and dot and r.gflops > ABOVE * dot:
            p(f"note:         this dot ran above {ABOVE:g}x the MXNet dot peak measured after it: "
              f"the machine was busier while measuring (load average {os.getloadavg()[0]:.1f}); "
              f"measure the peaks on a quiet machine (pyprof peaks) or raise --peak-budget")
        elif r.gflops is not None and gemm and r.gflops > ABOVE * gemm:
            p(f"note:         this dot ran above {ABOVE:g}x numpy's GEMM peak: numpy's BLAS is "
              f"not MXNet's, so the MXNet dot peak is the one this dot is held to (a GEMM peak "
              f"measured on a busy machine is low too: load average {os.getloadavg()[0]:.1f})")
    if r.bulk_note:
        p(f"note:         {r.bulk_note}")


def main(argv: list[str] | None = None) -> int:
    return _cli.main(argv, "pyprof matmul", __doc__, add_arguments, execute)


def execute(o: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if o.dnnl:
        check_options(o)
        from ..dnnl.cli import matmul_dnnl
        return matmul_dnnl(o)
    return _cli.execute(o, parser, check_options=check_options, report=report,
                        run=lambda o: run_jvm(o) if o.binding == "jvm" else run(o))


if __name__ == "__main__":
    sys.exit(main())


def register(subparsers: Any) -> None:
    """Add the ``matmul`` command to ``pyprof``'s subparsers (pyprof/cli.py)."""
    p = subparsers.add_parser("matmul", help="profile the NxN dot example (Python or JVM binding)",
                              description=__doc__.split("\n\n")[0])
    add_arguments(p)
    p.set_defaults(func=lambda a, parser=p: execute(a, parser))
