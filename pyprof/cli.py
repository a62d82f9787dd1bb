"""``pyprof`` command line: a thin layer over the public Python API.

Exit status: 0 ok, 1 an error in the work (one line on stderr with the fix), 2 usage.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys

from . import __version__


#: The command groups and their commands. A group's module is imported only when the parser
#: needs it: ``pyprof dnnl`` then skips the ~0.2 s of imports of the trace and bench tools.
#: tests/test_cli.py checks that each group registers exactly these commands.
GROUPS: dict[str, tuple[str, ...]] = {
    "pyprof.examples.matmul": ("matmul",),
    "pyprof.examples.gluon_cnn": ("train-demo",),
    "pyprof.trace.cli": ("summarize", "diff", "merge", "repair", "compact", "plot", "report",
                         "validate"),
    "pyprof.bench.cli": ("bench",),
    "pyprof.attribution.cli": ("flamegraph", "peaks", "roofline"),
    "pyprof.dnnl.cli": ("dnnl", "run"),
    "pyprof.session.cli": ("recover",),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``pyprof`` parser: every command, or with ``command`` only the group that holds it
    (all of them when no group does, so argparse lists the valid choices)."""
    parser = argparse.ArgumentParser(
        prog="pyprof", description="Operator-level profiling for Apache MXNet 1.9.1.")
    parser.add_argument("--version", action="version", version=f"pyprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    groups = [g for g, names in GROUPS.items() if command in names] or list(GROUPS)
    for group in groups:
        importlib.import_module(group).register(sub)
    parser.set_defaults(_commands=sub.choices)  # each command's parser, for _unrecognized
    if command in (None, "config") or len(groups) == len(GROUPS):
        p = sub.add_parser("config", help="list the profiler configuration keys (the shared spec)")
        p.add_argument("--format", choices=("markdown", "json"), default="markdown")
        p.set_defaults(func=_config)
    return parser


def _unrecognized(parser: argparse.ArgumentParser, extra: list[str]) -> None:
    """Exits 2 with the command's own usage (argparse gives the top level's), naming the
    nearest option of each misspelt one."""
    options = [o for a in parser._actions for o in a.option_strings]  # noqa: SLF001
    near = [m[0] for arg in extra if arg.startswith("-")
            for m in [difflib.get_close_matches(arg.split("=", 1)[0], options, n=1)] if m]
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    parser.error(f"unrecognized arguments: {' '.join(extra)}{hint}")


def _config(args: argparse.Namespace) -> int:
    from . import config

    if args.format == "json":
        print(config.SPEC_PATH.read_text().strip())
    else:
        print(config.markdown_table())
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    args, extra = build_parser(command).parse_known_args(argv)
    if extra:
        _unrecognized(args._commands[args.command], extra)
    from .errors import PyprofError

    try:
        return int(args.func(args) or 0)
    except PyprofError as exc:  # every command's errors: one line with the fix, exit 1
        print(f"pyprof {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `pyprof summarize t.json | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
