"""Exceptions raised by :mod:`pyprof.trace`.

Every error carries a one-line message that ends with the fix, so the CLI can print
``str(err)`` as is.  :class:`TraceError` is the base, itself a
:class:`pyprof.errors.PyprofError`.
"""

from __future__ import annotations

from ..errors import PyprofError

__all__ = ["TraceError", "TraceNotFoundError", "TraceFormatError", "AggregateFormatError"]


class TraceError(PyprofError):
    """Base class of every error raised by :mod:`pyprof.trace`."""


class TraceNotFoundError(TraceError, FileNotFoundError):
    """A trace file does not exist or cannot be opened."""


class TraceFormatError(TraceError, ValueError):
    """A file holds no recognisable Chrome/MXNet trace events."""


class AggregateFormatError(TraceError, ValueError):
    """MXNet's aggregate statistics (``profiler.dumps(format='json')``) cannot be read."""
