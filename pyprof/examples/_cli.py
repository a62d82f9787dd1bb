"""The command-line scaffolding every example shares: options checked, run, report, and the
result written as JSON to ``PYPROF_RESULT_JSON`` when set (what tests and scripts read)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from ..errors import PyprofError


def main(argv: list[str] | None, prog: str, doc: str | None,
         add_arguments: Callable[[argparse.ArgumentParser], None],
         run: Callable[[argparse.Namespace, argparse.ArgumentParser], int]) -> int:
    """Parse ``argv`` with the example's options (``doc``'s first paragraph as description)
    and hand them to ``run`` (the example's ``execute``)."""
    p = argparse.ArgumentParser(prog=prog, description=(doc or "").split("\n\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv), p)


def execute(o: argparse.Namespace, parser: argparse.ArgumentParser, *,
            check_options: Callable[[argparse.Namespace], None],
            run: Callable[[argparse.Namespace], Any], report: Callable[[Any], None]) -> int:
    """``check_options`` (a ValueError is a usage error), ``run`` (a PyprofError is printed
    after the program's name, exit status 1), then ``report`` the result (a dataclass)."""
    try:
        check_options(o)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        r = run(o)
    except PyprofError as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 1
    report(r)
    path = os.environ.get("PYPROF_RESULT_JSON")
    if path:
        with open(path, "w") as f:
            json.dump(dataclasses.asdict(r), f, indent=1)
    return 0
