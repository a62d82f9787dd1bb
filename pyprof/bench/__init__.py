"""Operator benchmarks for MXNet built on pyprof's profiler and trace statistics.

An improvement on MXNet's opperf (``benchmark/opperf`` in MXNet's source tree) that runs from
an installed package: operators come from MXNet's registry through the C API, inputs from one
table (:mod:`pyprof.bench.inputs`), and figures from pyprof's own trace statistics (the
``native`` engine) or from wall-clock timing of each run (the ``python`` engine), with median,
p90, p99 and IQR, memory in bytes, every failure recorded and the run carried on.

Quick start::

    from pyprof import bench
    rep = bench.run_performance_test("dot", inputs=[{"lhs": (512, 512), "rhs": (512, 512)}],
                                     runs=20, warmup=5)
    rep.find("dot")[0]["forward"]["median_ms"]
    bench.run_benchmarks(["gemm"], runs=10).save("gemm.md")
    bench.compare("base.json", "new.json")            # per-case verdicts with a noise estimate

See ``docs/operator-benchmarks.md``.
"""

from .comparison import compare, compare_namespaces
from .registry import CATEGORIES, by_category, operators, without_benchmark
from .report import Report, load
from .runner import ENGINES, Case, plan, run_benchmarks, run_cases, run_performance_test, summarize

# The facade (docs/operator-benchmarks.md); the other names imported above (run_cases, plan,
# Case, summarize, ENGINES, CATEGORIES, the registry's queries) stay importable, as
# package-internal.
__all__ = ["run_performance_test", "run_benchmarks", "compare", "compare_namespaces", "load",
           "Report"]
