"""Exceptions raised by :mod:`pyprof.trace`.

Every error carries a message that ends with the fix (``"... fix: ..."``, from the catalogue
``pyprof/spec/errors.json``), so the CLI can print ``str(err)`` as is. :class:`TraceError` is
the base, itself a :class:`pyprof.errors.PyprofError`. The classes live in :mod:`pyprof.errors`
(one exception tree, which :func:`pyprof.rules.error` builds from); this module names them for
the trace tools.
"""

from __future__ import annotations

from ..errors import AggregateFormatError, TraceError, TraceFormatError, TraceNotFoundError
