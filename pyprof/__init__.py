"""pyprof: operator-level profiling for Apache MXNet 1.9.1 from Python and the JVM.

``pyprof.profiler`` is a drop-in for ``mxnet.profiler``; its functions and objects are
re-exported here, beside sessions with a step schedule (``pyprof.profile``), exact
statistics from a trace (``pyprof.stats``) and trace repair (``pyprof.repair``). The JVM
binding is reached through ``pyprof.jvm``; the trace tools live in ``pyprof.trace``.
"""

import sys as _sys

from . import rules as _rules
from .native import capi as _capi
from .errors import (ConfigError, DeviceError, JVMError, LibraryNotFoundError, MXNetError,
                     PyprofError, StateError)
from .objects import Counter, Domain, Event, Frame, Marker, Task
from .profiler import dump, dumps, pause, resume, set_config, set_state
from .session import Action, Window, profile, recover, schedule
from . import steady  # noqa: F401 - pyprof.steady.begin(), end(), active()
from . import dist, env  # noqa: F401 - pyprof.dist.launch_local, pyprof.env.per_operator

__version__ = _rules.VERSION

__all__ = [
    "set_config", "set_state", "dump", "dumps", "pause", "resume",
    "PyprofError", "MXNetError", "LibraryNotFoundError", "ConfigError", "StateError",
    "DeviceError", "JVMError", "__version__",
    "Domain", "Task", "Frame", "Event", "Counter", "Marker",
    "profile", "schedule", "Action", "Window", "recover", "stats", "repair", "steady",
]



def __getattr__(name: str):
    # pyprof.stats / pyprof.repair load the trace toolkit (numpy) on first use, so that
    # `from pyprof import profiler` stays as light as mxnet.profiler.
    if name in ("stats", "repair"):
        from . import trace

        return getattr(trace, name)
    raise AttributeError(f"module 'pyprof' has no attribute {name!r}")


# MXNet's own Python calls pass pyprof's API gate, so switching API profiling never aborts a
# thread inside one (now if mxnet is imported, else as soon as mxnet.base loads).
_capi.install_import_hook()

# PYPROF_AUTOSTART / PYPROF_STEADY / PYPROF_MODE / PYPROF_PER_OPERATOR (see pyprof.env); nothing
# when unset.
from .env import autostart as _autostart, unknown_variables as _unknown  # noqa: E402

for _note in _unknown():  # a misspelt PYPROF_* variable has no effect: say so, as the JVM does
    print(_note, file=_sys.stderr)  # (a warning would fail the import under -W error)
_autostart()

# PYPROF_STEADY=1: steady mode from here to exit (pyprof.session.steady); nothing when unset.
from .session.steady import begin_from_environment as _steady_from_environment  # noqa: E402

_steady_from_environment()
