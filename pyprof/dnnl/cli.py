"""``pyprof dnnl`` and ``pyprof run --dnnl``; a thin layer over :mod:`pyprof.dnnl`.

Exit status: 0 ok, 1 an error in the work (one line on stderr, ending in the fix), 2 usage;
``pyprof run`` returns the command's own exit status (128 + N when a signal N killed it, as
shells do: 130 after Ctrl+C), or 130 when a Ctrl+C stopped the merge after a command that
exited 0. Its output paths (--log, --trace) are checked before the command starts.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from ..errors import PyprofError
from . import capture
from .statistics import FORMATS, GROUPINGS, format_stats, stats

if TYPE_CHECKING:
    from . import merge


def _mtime(path: str | None) -> int | None:
    try:
        return os.stat(path).st_mtime_ns if path is not None else None
    except OSError:
        return None


def _merge() -> Any:
    """pyprof.dnnl.merge, imported when a trace is merged (it loads the trace tools)."""
    from . import merge

    return merge


def format_coverage(res: merge.DnnlMergeResult) -> str:
    """Summary line and per-operator coverage table of a merge."""
    from tabulate import tabulate

    rows = [[c.name, c.slices, c.with_primitives, c.primitives, c.total_us / 1e3,
             c.covered_us / 1e3, c.share] for c in res.coverage if c.primitives]
    head = (f"wrote {res.out}: {res.placed} of {res.primitives} primitives inside operators"
            f"{f', {res.outside} outside any operator' if res.outside else ''}"
            f"{f', {res.clamped} moved by at most {_merge().TOLERANCE_US:g} us (clock resolution)' if res.clamped else ''}"
            f"{f'; {res.untimed} without timestamp not placed' if res.untimed else ''}")
    table = tabulate(rows, headers=["operator", "slices", "with primitives", "primitives",
                                    "operator (ms)", "primitives (ms)", "covered (%)"],
                     floatfmt=".3f")
    return f"{head}\n\n{table}\n"


def _dnnl(args: argparse.Namespace) -> int:
    if args.trace is not None and args.output is None:
        args.parser.error("--trace needs -o/--output: the merged trace to write")
    if args.output is not None and args.trace is None:
        args.parser.error("-o/--output needs --trace: the MXNet trace to merge the primitives into")
    if args.trace is not None:
        res = _merge().merge(args.log, args.trace, args.output, progress=False if args.no_progress else None)
        sys.stdout.write(format_coverage(res))
        return 0
    sys.stdout.write(format_stats(stats(args.log, by=args.by), args.format))
    return 0


def _run(args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not args.dnnl:
        args.parser.error("nothing to record: pass --dnnl (pyprof run --dnnl -- python script.py)")
    if not argv:
        args.parser.error("no command: pyprof run --dnnl -- python script.py ...")
    before = _mtime(args.trace)  # a trace the command did not write is not merged
    try:
        code, splitter = capture.run(argv, args.log, trace=args.trace, level=args.level)
    except FileNotFoundError as exc:
        print(f"pyprof run: error: cannot run {argv[0]!r}: {exc.strerror}. fix: give the "
              "command after --, e.g. pyprof run --dnnl -- python script.py", file=sys.stderr)
        return 127
    print(f"pyprof run: {splitter.verbose_lines} oneDNN verbose line(s) -> {args.log}",
          file=sys.stderr)
    if args.trace is not None:
        if _mtime(args.trace) in (None, before):
            print(f"pyprof run: no trace at {args.trace} (the command started no Python process "
                  "that imports pyprof and ran to its end); the log is kept", file=sys.stderr)
        else:
            try:
                res = _merge().merge(args.log, args.trace, args.trace, progress=False)
                sys.stderr.write(format_coverage(res))
            except PyprofError as exc:
                print(f"pyprof run: could not merge: {exc}", file=sys.stderr)
            except KeyboardInterrupt:  # a Ctrl+C after the command ended: the trace is untouched
                print(f"pyprof run: merge interrupted; {args.trace} is the command's trace without "
                      f"the primitives, the log is kept. fix: merge by hand: pyprof dnnl "
                      f"{args.log} --trace {args.trace} -o OUT.json", file=sys.stderr)
                return code if code > 0 else 128 - code if code < 0 else 130
    return code if code >= 0 else 128 - code


def register(subparsers: Any) -> None:
    """Add the ``dnnl`` and ``run`` subcommands (each sets ``func`` and ``command``)."""
    p = subparsers.add_parser(
        "dnnl", help="oneDNN primitives from a DNNL_VERBOSE log: per-primitive table, or "
        "merged into an MXNet trace (--trace)",
        description="Per primitive kind: executions, total/mean/min/max time and share, "
        "creations; or, with --trace and -o, the timestamped primitives as events under the "
        "operators of an MXNet trace and how much of each operator they cover.")
    p.add_argument("log", help="oneDNN verbose log (DNNL_VERBOSE=1 or 2 output; other lines are skipped)")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--by", choices=GROUPINGS, default="primitive",
                   help="rows per primitive kind, per kind and implementation, or per kind "
                        "and problem shape (default primitive)")
    p.add_argument("--trace", help="MXNet trace of the same run to merge the primitives into "
                                   "(needs DNNL_VERBOSE_TIMESTAMP=1 lines)")
    p.add_argument("-o", "--output", help="merged trace to write (with --trace)")
    p.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    p.set_defaults(func=_dnnl, command="dnnl", parser=p)

    p = subparsers.add_parser(
        "run", help="run a command with oneDNN's verbose output split into a log (--dnnl), "
        "optionally with an MXNet trace merged with it",
        description="Run COMMAND with DNNL_VERBOSE=1 and DNNL_VERBOSE_TIMESTAMP=1; its own "
        "output passes through unchanged, oneDNN's lines go to --log. With --trace, its first "
        "Python process records an MXNet trace there (PYPROF_AUTOSTART), merged with the "
        "primitives when the command ends. Exit status: the command's.")
    p.add_argument("--dnnl", action="store_true", help="record oneDNN's verbose output")
    p.add_argument("--log", default="dnnl_verbose.log", help="where the oneDNN lines go "
                   "(default dnnl_verbose.log)")
    p.add_argument("--trace", default=None, help="record an MXNet trace here and merge the "
                   "primitives into it")
    p.add_argument("--level", type=int, choices=(1, 2), default=1,
                   help="DNNL_VERBOSE: 1 executions, 2 creations too (default 1)")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
    p.set_defaults(func=_run, command="run", parser=p)


def matmul_dnnl(o: argparse.Namespace) -> int:
    """``pyprof matmul --dnnl``: the example in a child process with oneDNN's verbose output
    on, then the primitives that ran inside the dot (or that none did). Exit status: the
    child's, or 1 when its trace cannot be merged."""
    child = [sys.executable, "-m", "pyprof", "matmul", "--size", str(o.size), "--iters",
             str(o.iters), "--begin", str(o.begin), "--end", str(o.end), "--mode", o.mode,
             "--output", o.output, "--ctx", o.ctx, "--device-id", str(o.device_id),
             "--binding", o.binding, "--peak-budget", str(o.peak_budget)]
    log = os.path.splitext(o.output)[0] + ".dnnl.log"
    code, splitter = capture.run(child, log)
    if code != 0:
        return code
    if not splitter.verbose_lines:
        print(f"\noneDNN:       this build's dot does not go through oneDNN: with DNNL_VERBOSE=1 "
              f"the whole run printed no oneDNN line (no primitive ran; {log} is empty)")
        return 0
    merged = os.path.splitext(o.output)[0] + ".dnnl.json"
    try:
        res = _merge().merge(log, o.output, merged, progress=False)
    except PyprofError as exc:
        print(f"pyprof matmul: error: {exc}", file=sys.stderr)
        return 1
    dots = [c for c in res.coverage if c.name.strip("[]") == "dot"]
    print("")
    print(f"oneDNN log:   {log}; merged trace: {merged}")
    if not dots:
        print("oneDNN:       no dot operator in the trace")
    for c in dots:
        if not c.primitives:
            print(f"oneDNN:       this build's dot does not go through oneDNN: no oneDNN "
                  f"primitive ran inside its {c.slices} slice(s) ({c.total_us / 1e3:.3f} ms); "
                  f"{res.primitives} primitive(s) ran elsewhere in the run")
            continue
        print(f"oneDNN:       {c.primitives} primitive(s) inside {c.name!r}, "
              f"{c.share:.1f}% of its {c.total_us / 1e3:.3f} ms")
        for kind, us in sorted(c.by_primitive.items(), key=lambda kv: -kv[1]):
            print(f"  {kind:<20} {us / 1e3:10.3f} ms")
    return 0
