"""Steady mode, the public names: ``pyprof.steady.begin(**options)``, ``end()``, ``active()``.

The profiler switches to run once, at :func:`begin` (before the program's own MXNet threads
start), and nothing changes MXNet's ``IsProfiling`` until :func:`end` or exit, so threads that
call libmxnet through a binding pyprof does not gate (their own ``ctypes.CDLL``) cannot abort.
Windows are taken by pause and resume (``pyprof.profile`` sessions do it). The implementation
and the rules are in :mod:`pyprof.session.steady`; docs/concurrency.md says what it guarantees.
"""

from .session.steady import active, begin, end
