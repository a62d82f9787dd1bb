"""``pyprof flamegraph``, ``pyprof peaks`` and ``pyprof roofline``: a thin layer over
:mod:`pyprof.attribution`.

The main CLI calls :func:`register` with its subparsers, then ``args.func(args)``, which returns
the exit status: 0 ok, 1 an error (one line on stderr ending in its fix), 2 usage (argparse).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def _flamegraph(args: argparse.Namespace) -> int:
    from .flamegraph import folded, write_folded

    progress = False if args.no_progress else None
    if args.output == "-":  # the stacks on stdout, for a pipe into flamegraph.pl; the summary on stderr
        fs = folded(args.trace, progress=progress)
        sys.stdout.write(fs.text())
        print(f"{len(fs.lines())} stacks, {fs.events} operator events, "
              f"{fs.total_us / 1000:.3f} ms of operator time", file=sys.stderr)
        return 0
    res = write_folded(args.trace, args.output, progress=progress)
    print(f"wrote {res.out}: {res.stacks} stacks, {res.events} operator events, "
          f"{res.total_us / 1000:.3f} ms of operator time")
    return 0


def _peaks(args: argparse.Namespace) -> int:
    from .peaks import format_peaks, measure

    p = measure(budget_s=args.budget, mxnet=not args.no_mxnet)
    sys.stdout.write(json.dumps(p.as_dict(), indent=2) + "\n" if args.format == "json"
                     else format_peaks(p))
    return 0


def _roofline(args: argparse.Namespace) -> int:
    from ..trace.shapes import dims_text
    from .roofline import ABOVE, render, roofline

    r = roofline(args.trace, args.output, peaks=args.peaks, budget_s=args.budget,
                 mxnet=not args.no_mxnet, top=args.top, progress=False if args.no_progress else None)
    sys.stdout.write(render(r, args.format))
    over = r.above()
    if over:
        worst = "; ".join(f"{p.group.name} {dims_text(p.group.input_dims)}: "
                          f"{p.gflops / p.roof_gflops:.2f}x of {p.roof_gflops:.3g} GFLOP/s"
                          + (f" ({p.memory} roof)" if p.bound == "memory" else "")
                          for p in over[:5])
        notes = "; or ".join(dict.fromkeys(p.note for p in over[:5]))
        print(f"pyprof roofline: warning: {len(over)} group(s) above {ABOVE}x the roof at their "
              f"intensity ({worst}{'; ...' if len(over) > 5 else ''}): {notes}", file=sys.stderr)
    if args.format != "json":
        print(f"wrote {r.image}: {len(r.points)} (operator, shape) groups")
    return 0


def _count(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}; fix: pass e.g. 10") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}; fix: pass e.g. 10")
    return v


def _budget(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}; fix: pass seconds, e.g. 5") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}; fix: pass e.g. "
                                         f"5 (roofline can read peaks measured before: --peaks FILE)")
    return v


def register(subparsers: Any) -> None:
    """Add the ``flamegraph``, ``peaks`` and ``roofline`` subcommands (each sets ``func`` and
    ``command``)."""
    p = subparsers.add_parser(
        "flamegraph", help="folded stacks of a trace (device;thread;[frames;]operator N, N in "
        "microseconds of operator time) for flamegraph.pl and speedscope",
        description="Write folded stacks ('a;b;c N', one line per stack, N whole microseconds "
        "of operator time) that flamegraph.pl, inferno and speedscope read.")
    p.add_argument("trace", nargs="+", help="trace file(s), plain or .gz; several are pooled")
    p.add_argument("-o", "--output", required=True, help="the folded-stacks file to write; - for stdout")
    p.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    p.set_defaults(func=_flamegraph, command="flamegraph")

    p = subparsers.add_parser(
        "peaks", help="this machine's GEMM peak (numpy), copy bandwidth and MXNet dot peak",
        description="Measure the peaks a roofline needs, in about --budget seconds: numpy "
        "float32 GEMM (GFLOP/s), a stream-like copy (GB/s) and MXNet's own dot (GFLOP/s).")
    p.add_argument("--budget", type=_budget, default=5.0, metavar="S",
                   help="seconds for the whole measurement (default 5)")
    p.add_argument("--no-mxnet", action="store_true", help="skip MXNet's dot")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(func=_peaks, command="peaks")

    p = subparsers.add_parser(
        "roofline", help="each (operator, input shape) group of a trace against this machine's "
        "GEMM, MXNet dot and copy roofs (an image, and a table on stdout)",
        description="Place each (operator, input shape) group of a trace recorded with "
        "record_shapes=True, with_flops=True at (FLOP/byte, achieved GFLOP/s) on log-log axes "
        "against roofs measured now (as pyprof peaks) or read with --peaks; print a table and "
        "warn about groups above their roof (by attribution.json roofline.above, 1.1x).")
    p.add_argument("trace", nargs="+", help="trace file(s), plain or .gz; several are pooled")
    p.add_argument("-o", "--output", required=True,
                   help="image path; the extension picks the format (.png, .svg, .pdf, ...); "
                        "without one, .png is appended")
    p.add_argument("--peaks", default=None, metavar="FILE",
                   help="peaks written by `pyprof peaks --format json`, instead of measuring")
    p.add_argument("--budget", type=_budget, default=5.0, metavar="S",
                   help="seconds for measuring the peaks (default 5), as pyprof peaks")
    p.add_argument("--no-mxnet", action="store_true", help="measure no MXNet dot peak")
    p.add_argument("--top", type=_count, default=10, metavar="N",
                   help="label the N groups with the most time (default 10)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    p.set_defaults(func=_roofline, command="roofline")
