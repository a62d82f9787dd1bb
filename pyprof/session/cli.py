"""``pyprof recover``: write a dead process's window that the next start reported, not recovered.

The sweep of leftovers (:mod:`pyprof.session.leftovers`) reports a window it leaves (too large,
an interrupted recovery, a failure) with this command in the line it prints.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``recover`` subcommand (it sets ``func`` and ``command``)."""
    p = subparsers.add_parser(
        "recover", help="write the window of a dead process beside its path",
        description="Write what a dead process had flushed of a window (its WINDOW.partial names "
        "the raw trace) as a valid trace beside WINDOW, as <stem>.recovered-<pid><suffix>, never "
        "over a file; then delete that raw trace. Prints the path written.")
    p.add_argument("window", help="the window's trace path (WINDOW.partial exists beside it)")
    p.set_defaults(func=_recover, command="recover")


def _recover(args: argparse.Namespace) -> int:
    from .leftovers import recover_beside
    print(recover_beside(args.window))
    return 0
