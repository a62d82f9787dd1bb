"""``pyprof flamegraph`` and ``pyprof peaks``: a thin layer over :mod:`pyprof.attribution`.

The main CLI calls :func:`register` with its subparsers, then ``args.func(args)``, which returns
the exit status: 0 ok, 1 an error (one line on stderr ending in its fix), 2 usage (argparse).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


__all__ = ["register"]


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


def _budget(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}; fix: pass seconds, e.g. 5") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}; fix: pass e.g. 5")
    return v


def register(subparsers: Any) -> None:
    """Add the ``flamegraph`` and ``peaks`` subcommands (each sets ``func`` and ``command``)."""
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
