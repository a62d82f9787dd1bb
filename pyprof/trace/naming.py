"""What MXNet's event categories and names mean to the trace tools.

* :data:`API_CATEGORY`: C API calls, kept by :func:`~pyprof.trace.stats`, left out by default by
  :func:`~pyprof.trace.summarize`, :func:`~pyprof.trace.diff` and :func:`~pyprof.trace.plot`.
* :data:`ASYNC_COPY_CATEGORIES`: async ``b``/``e`` copies MXNet writes of every operator; never
  counted, dropped by :func:`~pyprof.trace.compact`.
* Bulk segments: operators MXNet ran as one segment get one merged name (``A,B`` or ``[op]``);
  :func:`is_bulk_name` recognises them and :data:`BULK_NOTE` tells the user how to avoid them.
* :data:`MEMORY_PREFIX`: counters named ``Memory: <device>`` are memory samples in bytes.
"""

from __future__ import annotations

import re

__all__ = ["API_CATEGORY", "ASYNC_COPY_CATEGORIES", "BULK_NOTE", "MEMORY_PREFIX", "is_bulk_name"]

#: Category of MXNet's C API call events: included by :func:`~pyprof.trace.stats`, excluded by default by
#: :func:`~pyprof.trace.summarize` and :func:`~pyprof.trace.diff` (``include_api=True`` keeps them).
API_CATEGORY = "MXNET_C_API"

#: Async (``b``/``e``) categories that duplicate a ``B``/``E`` pair; never counted.
ASYNC_COPY_CATEGORIES = frozenset({"operator", "Custom Operator"})

BULK_NOTE = ("names like 'A,B' or '[op]' are operators MXNet ran as one bulk segment; for "
             "per-operator numbers set MXNET_EXEC_BULK_EXEC_INFERENCE=0 and "
             "MXNET_EXEC_BULK_EXEC_TRAIN=0 in the environment before MXNet's engine starts "
             "(before `import mxnet`)")

#: Prefix of memory counter names: ``Memory: <device>`` (values in bytes).
MEMORY_PREFIX = "Memory: "

_BULK = re.compile(r"^\[.*\]$|,")


def is_bulk_name(name: str) -> bool:
    """True for names of MXNet bulk segments: ``Activation,Convolution`` or ``[dot]``."""
    return bool(_BULK.search(name))
