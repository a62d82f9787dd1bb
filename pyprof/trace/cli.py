"""``pyprof`` subcommands for trace files; a thin layer over :mod:`pyprof.trace`.

The main CLI calls :func:`register` with its subparsers, then ``args.func(args)``, which returns
the exit status: 0 ok, 1 analysis failure (a regression over the threshold for ``diff``, an
invalid trace for ``validate``, or a :class:`~pyprof.trace.errors.TraceError`, printed on one
line), 2 usage error (argparse).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, Protocol

from . import compact, diff, format_diff, merge, plot, repair, summarize, validate
from .. import rules
from .errors import TraceError
from .html import report_html
from .report import FORMATS, SORT_KEYS
from .slices import SliceCounts


def _guard(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except TraceError as exc:
            print(f"pyprof {args.command}: error: {exc}", file=sys.stderr)
            return 1
    run.__doc__ = fn.__doc__
    return run


def _progress(args: argparse.Namespace) -> bool | None:
    return False if args.no_progress else None


def _summarize(args: argparse.Namespace) -> int:
    sys.stdout.write(summarize(args.trace, top=args.top, sort=args.sort, fmt=args.format,
                               include_api=args.include_api, progress=_progress(args), by=args.by,
                               rank_bookkeeping=args.rank_bookkeeping))
    return 0


def _diff(args: argparse.Namespace) -> int:
    result = diff(args.base, args.new, threshold=args.threshold, progress=_progress(args),
                  categories=args.category or None, include_api=args.include_api)
    print(format_diff(result, args.format))
    return result.exit_code


def _labels(values: list[str] | None, n: int) -> list[str] | None:
    """``--label a --label b`` and ``--label a,b`` (or a mix) as one list, one label per trace."""
    if not values:
        return None
    labels = [part.strip() for v in values for part in v.split(",")]
    if any(not lab for lab in labels):
        raise rules.error("trace.empty_label")
    if len(labels) != n:
        raise rules.error("trace.label_count", labels=len(labels), traces=n)
    return labels


def _merge(args: argparse.Namespace) -> int:
    labels = _labels(args.label, len(args.trace))
    res = merge(args.trace, args.output, labels=labels, align=args.align,
                gzip=args.gzip or None, progress=_progress(args))
    print(f"wrote {res.out}: {res.events} events from {len(res.labels)} traces{_notes(res.slices)}")
    return 0


def _notes(counts: SliceCounts) -> str:
    """``"; <what was moved or left out>"`` for the summary line, or nothing."""
    notes = counts.notes()
    return "; " + "; ".join(notes) if notes else ""


def _repair(args: argparse.Namespace) -> int:
    res = repair(args.trace, args.output, progress=_progress(args))
    if res.out is None:
        print(f"{res.path}: valid, nothing to repair")
    else:
        fixed = "; ".join(res.fixed) or "nothing wrong"
        pairs = res.slices.complete  # the count changes by one per pair: say why
        joined = f"; {pairs} B/E pair(s) written as one X event each" if pairs else ""
        print(f"wrote {res.out}: {res.events} events ({fixed}{joined})")
    return 0


def _compact(args: argparse.Namespace) -> int:
    res = compact(args.trace, args.output, gzip=args.gzip or None, progress=_progress(args))
    print(f"wrote {res.out}: {res.events_out} events from {res.events_in} "
          f"({res.complete} B/E pairs -> X, {res.async_copies_dropped} async copies dropped"
          f"{_notes(res.slices)})")
    return 0


def _validate(args: argparse.Namespace) -> int:
    status = 0
    for path in args.trace:  # each file on its own: exit 1 when any has a problem
        res = validate(path, progress=_progress(args))
        if res.ok:
            print(f"{res.path}: valid ({res.events} events)")
            continue
        status = 1
        print(f"{res.path}: {len(res.problems)} problem(s)")
        for problem in res.problems:
            print(f"  {problem}")
        if not res.events and res.counts.get("no_trace_events"):  # nothing a repair could keep
            print(f"  fix: {rules.error('trace.no_events', path=res.path).fix}")
            continue
        stem = res.path[:-len(".json")] if res.path.endswith(".json") else res.path
        print(f"  fix: pyprof repair {res.path} -o {stem}.repaired.json writes a valid copy "
              f"(without -o it repairs the file in place)")
    return status


def _plot(args: argparse.Namespace) -> int:
    out = plot(args.trace, args.output, top=args.top, progress=_progress(args))
    note = "" if out == args.output else " (no extension given: PNG)"
    print(f"wrote {out}{note}")
    return 0


def _report(args: argparse.Namespace) -> int:
    traces = [args.trace] + ([args.trace2] if args.trace2 else [])
    res = report_html(traces, args.output, labels=_labels(args.label, len(traces)),
                      include_api=args.include_api, threshold=args.threshold,
                      peaks=args.peaks, measure_peaks=args.measure_peaks, progress=_progress(args))
    print(f"wrote {res.out}: {res.bytes / 1e6:.2f} MB, {res.slices} slices, {res.operators} operator rows")
    return 0


def _percent(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}; fix: pass a number such as 5") from None
    if not (v >= 0 and v != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a percentage of at least 0, got {text}; "
                                         "fix: pass 0 or more, e.g. 5")
    return v


def _positive(text: str) -> int:
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}; fix: pass 1 or more")
    return v


class Subparsers(Protocol):
    """What :meth:`argparse.ArgumentParser.add_subparsers` returns, as far as :func:`register` uses it."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...


def register(subparsers: Subparsers) -> None:
    """Add ``summarize``, ``diff``, ``merge``, ``repair``, ``compact``, ``plot``, ``report`` and
    ``validate`` subcommands.

    Each sets ``func`` (returns the exit status) and ``command`` on the parsed namespace.
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--no-progress", action="store_true",
                        help="never show a progress bar (default: on a terminal for big files)")

    def add(name: str, fn: Callable[[argparse.Namespace], int], help_: str) -> argparse.ArgumentParser:
        p = subparsers.add_parser(name, help=help_, description=help_, parents=[common])
        p.set_defaults(func=_guard(fn), command=name)
        return p

    p = add("summarize", _summarize, "per-operator time and memory summary of MXNet traces")
    p.add_argument("trace", nargs="+", help="trace file(s), plain or .gz; several are pooled")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--top", type=_positive, default=None,
                   help="operators shown per device/category group (default all)")
    p.add_argument("--sort", choices=list(SORT_KEYS), default="total",
                   help="row order in each group, descending (name: ascending); ties by total "
                        "time, then name (default total)")
    p.add_argument("--include-api", action="store_true", help="also list C API calls (MXNET_C_API)")
    p.add_argument("--by", choices=["shape"], default=None,
                   help="shape: one row per (operator, input shapes) with GFLOP/s and GB/s, from "
                        "the args of record_shapes/with_flops")
    p.add_argument("--rank-bookkeeping", action="store_true",
                   help="rank the engine's bookkeeping (WaitForVar, DeleteVariable, ...) with "
                        "compute; by default it is listed after compute, in a section of its own")

    p = add("diff", _diff, "per-operator change between two traces; exit 1 on a regression")
    p.add_argument("base")
    p.add_argument("new")
    p.add_argument("--threshold", type=_percent, default=5.0, metavar="PCT",
                   help="fail (exit 1) when an operator's median is slower by at least PCT percent "
                        "beyond noise; PCT >= 0 (default 5)")
    p.add_argument("--category", action="append", help="only this category (repeatable)")
    p.add_argument("--include-api", action="store_true",
                   help="also compare C API calls (MXNET_C_API), left out by default as in summarize")
    p.add_argument("--format", choices=FORMATS, default="table")

    p = add("merge", _merge, "merge traces of several processes into one Chrome trace")
    p.add_argument("trace", nargs="+")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--label", action="append", metavar="L[,L...]",
                   help="label per input, in order: repeat the flag (--label a --label b) or give "
                        "a comma-separated list (--label a,b); default the file names")
    p.add_argument("--align", choices=["absolute", "start"], default="absolute",
                   help="absolute: keep epoch timestamps (default); start: each input starts at 0")
    p.add_argument("--gzip", action="store_true", help="gzip the output (default when -o ends in .gz)")

    p = add("repair", _repair, "make a damaged MXNet trace valid JSON (in place by default)")
    p.add_argument("trace")
    p.add_argument("-o", "--output", default=None)

    p = add("compact", _compact, "B/E pairs to X events, drop async copies, small ids")
    p.add_argument("trace")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--gzip", action="store_true", help="gzip the output (default when -o ends in .gz)")

    p = add("validate", _validate, "check that traces are valid for Perfetto as pyprof writes "
            "them; exit 1 listing the problems of each file that has some")
    p.add_argument("trace", nargs="+", help="trace file(s), plain or .gz, each checked on its own")

    p = add("plot", _plot, "bar chart of top operators and a per-device timeline (PNG)")
    p.add_argument("trace")
    p.add_argument("-o", "--output", required=True,
                   help="image path; the extension picks the format (.png, .svg, .pdf, ...); "
                        "without one, .png is appended")
    p.add_argument("--top", type=_positive, default=15,
                   help="operators shown: the N with the most total time (default 15)")

    p = add("report", _report, "one self-contained HTML report of a trace (timeline, operators, "
            "memory, roofline), or of two with their difference; opens offline from file://")
    p.add_argument("trace", help="trace file, plain or .gz")
    p.add_argument("trace2", nargs="?", default=None,
                   help="a second trace (new) compared with the first (base), as pyprof diff")
    p.add_argument("-o", "--output", required=True, help="the HTML file to write")
    p.add_argument("--label", action="append", metavar="L[,L...]",
                   help="label per trace, in order (default the file names)")
    p.add_argument("--threshold", type=_percent, default=5.0, metavar="PCT",
                   help="regression threshold of the difference, as pyprof diff (default 5)")
    p.add_argument("--include-api", action="store_true", help="also show C API calls (MXNET_C_API)")
    p.add_argument("--peaks", default=None, metavar="FILE",
                   help="roofs for the roofline of a trace with FLOPs: the file `pyprof peaks "
                        "--format json` writes (default: points only, with a note)")
    p.add_argument("--measure-peaks", action="store_true",
                   help="measure the roofs now instead (about 5 s, as pyprof peaks)")


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m pyprof.trace.cli``) for testing without the main CLI."""
    parser = argparse.ArgumentParser(prog="pyprof")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
