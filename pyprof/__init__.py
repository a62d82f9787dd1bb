"""pyprof: operator-level profiling for Apache MXNet 1.9.1 from Python and the JVM.

``pyprof.profiler`` is a drop-in for ``mxnet.profiler``; its functions are re-exported
here. The JVM binding is reached through ``pyprof.jvm``.
"""

from .errors import (ConfigError, DeviceError, JVMError, LibraryNotFoundError, MXNetError,
                     PyprofError, StateError)
from .profiler import dump, dumps, pause, resume, set_config, set_state

__version__ = "0.1.0"

__all__ = [
    "set_config", "set_state", "dump", "dumps", "pause", "resume",
    "PyprofError", "MXNetError", "LibraryNotFoundError", "ConfigError", "StateError",
    "DeviceError", "JVMError", "__version__",
]
