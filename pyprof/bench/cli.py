"""``pyprof bench``: opperf's command line on pyprof (a thin layer over :mod:`pyprof.bench`).

Exit status: 0 ok (failed operators are recorded in the report, not errors), 1 an error in the
work or a regression found by ``--compare``, 2 usage.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import PyprofError

HELP = "benchmark MXNet operators (opperf on pyprof): time, percentiles, memory in bytes"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help=HELP, description=HELP + ".",
                       epilog="examples: pyprof bench --category gemm --runs 10 | "
                              "pyprof bench --ops dot,sin --output-format md | "
                              "pyprof bench --compare-np dot | "
                              "pyprof bench --compare base.json new.json")
    add_arguments(p)
    p.set_defaults(func=lambda a: execute(a, p))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ctx", default="cpu", help="cpu, gpu or gpu(N) (default cpu)")
    p.add_argument("--dtype", default="float32", choices=("float32", "float16", "float64"),
                   help="array dtype (default float32)")
    p.add_argument("--profiler", default="native", choices=("native", "python"),
                   help="native: operator time from pyprof's trace statistics, memory in bytes; "
                        "python: wall time per run (default native)")
    p.add_argument("-w", "--warmup", type=int, default=10, help="untimed runs (default 10)")
    p.add_argument("-r", "--runs", type=int, default=50, help="timed runs (default 50)")
    p.add_argument("--category", action="append", metavar="NAME",
                   help="benchmark a category; repeat or comma-separate (default: all)")
    p.add_argument("--ops", metavar="OP[,OP...]", help="benchmark these operators")
    p.add_argument("--no-backward", dest="run_backward", action="store_false",
                   help="time the forward pass only")
    p.add_argument("--large-tensor", action="store_true",
                   help="large-tensor input variants (opperf's --int64-tensor on)")
    p.add_argument("--output-format", choices=("json", "md"), default=None,
                   help="json or md (default: from --output-file's suffix, else md)")
    p.add_argument("--output-file", metavar="PATH", help="write the report here")
    p.add_argument("--trace-dir", metavar="DIR", help="keep the native engine's traces here")
    p.add_argument("--compare-np", metavar="OP", help="run OP in mx.nd and in mx.np/npx and compare")
    p.add_argument("--compare", nargs=2, metavar=("BASE", "NEW"),
                   help="compare two JSON result files case by case (exit 1 on a regression)")
    p.add_argument("--threshold", type=float, default=5.0,
                   help="with --compare: regression threshold in percent (default 5)")
    p.add_argument("--list", action="store_true",
                   help="list categories and operators, and operators without a benchmark")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar with time estimate (default: when stderr is a terminal)")


def _emit(text: str, o: argparse.Namespace) -> None:
    if o.output_file:
        with open(o.output_file, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        print(f"wrote {o.output_file}", file=sys.stderr)
    else:
        print(text)


def execute(o: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from . import comparison as cmp
    from . import registry, runner
    from ..trace.diffing import format_diff

    fmt = o.output_format or ("json" if (o.output_file or "").endswith(".json") else "md")
    try:
        if o.output_file:  # before the work, which a bad path would throw away at the end
            from ..trace.writer import check_output
            check_output(o.output_file, example="bench.json" if fmt == "json" else "bench.md")
        if o.compare:
            result = cmp.compare(*o.compare, threshold=o.threshold)
            _emit(format_diff(result, "json" if fmt == "json" else "markdown"), o)
            return result.exit_code
        if o.list:
            lines = [f"{c} ({len(ops)}): {', '.join(ops)}" for c, ops in registry.by_category().items()]
            lines += ["", "without a benchmark:"]
            lines += [f"  {op}: {why}" for op, why in registry.without_benchmark().items()]
            print("\n".join(lines))
            return 0
        if o.runs < 1 or o.warmup < 0:
            parser.error(f"need --runs >= 1 and --warmup >= 0, got {o.runs} and {o.warmup}")
        options = dict(run_backward=o.run_backward, dtype=o.dtype, ctx=o.ctx,
                       profiler=o.profiler, warmup=o.warmup, runs=o.runs,
                       large_tensor=o.large_tensor, progress=o.progress)
        if o.compare_np:
            report, result = cmp.compare_namespaces(o.compare_np, **options)
            text = report.to_json() if fmt == "json" else (
                report.to_markdown() + "\n\n## nd (base) vs np (new)\n\n"
                + format_diff(result, "markdown"))
            _emit(text, o)
            return 0
        cats = [c for arg in (o.category or []) for c in arg.split(",") if c] or None
        ops = [x for x in (o.ops or "").split(",") if x] or None
        report = runner.run_benchmarks(cats, ops, trace_dir=o.trace_dir, **options)
        _emit(report.to_json() if fmt == "json" else report.to_markdown(), o)
        s = report.summary()
        print(f"{s['operators']} operators, {s['cases']} cases, {s['failed_cases']} failed, "
              f"{s['duration_s']} s", file=sys.stderr)
        return 0
    except PyprofError as exc:
        print(f"pyprof bench: {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"pyprof bench: {exc}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pyprof bench", description=HELP)
    add_arguments(p)
    return execute(p.parse_args(argv), p)


if __name__ == "__main__":
    sys.exit(main())
