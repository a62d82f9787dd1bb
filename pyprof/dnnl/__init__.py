"""oneDNN primitives inside MXNet operators: statistics of ``DNNL_VERBOSE`` logs, and the
primitives placed on an MXNet trace's timeline.

Quick start::

    from pyprof import dnnl
    s = dnnl.stats("dnnl.log", by="impl")       # per primitive kind and implementation
    print(dnnl.format_stats(s, "table"))
    dnnl.merge("dnnl.log", "profile.json", "merged.json").coverage   # per operator

Modules: :mod:`~pyprof.dnnl.parse` (the verbose line layouts), :mod:`~pyprof.dnnl.statistics`,
:mod:`~pyprof.dnnl.merge` (primitives as trace events), :mod:`~pyprof.dnnl.capture`
(``pyprof run --dnnl`` and ``pyprof.profile(dnnl=True)``), :mod:`~pyprof.dnnl.cli`.
"""

from .parse import Primitive, Signature
from .statistics import DnnlStats, LogInfo, Row, format_stats, stats
