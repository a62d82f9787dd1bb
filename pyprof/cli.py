"""``pyprof`` command line: a thin layer over the public Python API.

Exit status: 0 ok, 1 an error in the work (one line on stderr with the fix), 2 usage.
"""

from __future__ import annotations

import argparse
import sys

from . import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pyprof", description="Operator-level profiling for Apache MXNet 1.9.1.")
    parser.add_argument("--version", action="version", version=f"pyprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    from .examples import matmul
    p = sub.add_parser("matmul", help="profile the NxN dot example (Python or JVM binding)",
                       description=matmul.__doc__.split("\n\n")[0])
    matmul.add_arguments(p)
    p.set_defaults(func=lambda a, parser=p: matmul.execute(a, parser))

    from .examples import gluon_cnn
    p = sub.add_parser("train-demo", help="train the tutorial's Gluon CNN on synthetic data and "
                       "print each profiled window's per-operator table",
                       description=gluon_cnn.__doc__.split("\n\n")[0])
    gluon_cnn.add_arguments(p)
    p.set_defaults(func=lambda a, parser=p: gluon_cnn.execute(a, parser))

    p = sub.add_parser("config", help="list the profiler configuration keys (the shared spec)")
    p.add_argument("--format", choices=("markdown", "json"), default="markdown")
    p.set_defaults(func=_config)

    from .bench import cli as bench_cli
    from .dnnl import cli as dnnl_cli
    from .trace import cli as trace_cli
    trace_cli.register(sub)
    bench_cli.register(sub)
    dnnl_cli.register(sub)
    return parser


def _config(args: argparse.Namespace) -> int:
    from . import config

    if args.format == "json":
        print(config.SPEC_PATH.read_text().strip())
    else:
        print(config.markdown_table())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
