"""Start profiling from environment variables, with readable modes; per-operator mode.

MXNet's own ``MXNET_PROFILER_AUTOSTART=1`` / ``MXNET_PROFILER_MODE=<bitmask>`` records no
imperative operators unless you know that 15 means "everything". pyprof's variables, read when
``pyprof`` is imported (or by :func:`autostart`):

==========================  ===================================================================
``PYPROF_AUTOSTART``        ``1``/``true``: configure and start the profiler; the trace is
                            finished (valid JSON) at interpreter exit.
``PYPROF_MODE``             comma-separated: ``symbolic``, ``imperative``, ``api``, ``memory``,
                            or ``all``; default ``symbolic,imperative``. Unlisted ones are off.
``PYPROF_FILENAME``         trace file, default ``profile.json``.
``PYPROF_AGGREGATE_STATS``  ``1``: keep MXNet's aggregate statistics (``profiler.dumps()``).
``PYPROF_DUMP_PERIOD``      seconds between continuous appends (default 1; what survives a crash).
``PYPROF_PER_OPERATOR``     ``1``: turn off bulk execution, so that every operator is recorded
                            under its own name (see :func:`per_operator`).
==========================  ===================================================================

Example: ``PYPROF_AUTOSTART=1 PYPROF_MODE=all PYPROF_PER_OPERATOR=1 python -c "import pyprof;
import train"``.
"""

from __future__ import annotations

import atexit
import difflib
import os
import sys
import warnings
from collections.abc import Mapping
from typing import Any

from . import _capi, config
from .errors import ConfigError

__all__ = ["MODES", "BULK_VARIABLES", "parse_mode", "config_from_environment", "autostart",
           "per_operator", "libmxnet_loaded"]

#: Readable mode names and the config key each one turns on.
MODES = {
    "symbolic": "profile_symbolic",
    "imperative": "profile_imperative",
    "api": "profile_api",
    "memory": "profile_memory",
    "all": "profile_all",
}
DEFAULT_MODE = "symbolic,imperative"

#: Set to "0" by :func:`per_operator`: MXNet then runs (and records) operators one by one.
BULK_VARIABLES = ("MXNET_EXEC_BULK_EXEC_INFERENCE", "MXNET_EXEC_BULK_EXEC_TRAIN")

_started = False


def parse_mode(text: str) -> dict[str, bool]:
    """``"symbolic,imperative"`` -> the profile_* keys, each True or False.

    Names are case-insensitive and separated by commas (spaces allowed); ``all`` turns on
    everything. Raises ConfigError for an unknown name, naming the nearest one.
    """
    names = [n.strip().lower() for n in str(text).split(",") if n.strip()]
    if not names:
        raise ConfigError(f"empty profiler mode {text!r}: expected a comma-separated list of "
                          f"{', '.join(MODES)}")
    for name in names:
        if name not in MODES:
            near = difflib.get_close_matches(name, list(MODES), n=1, cutoff=0.0)
            raise ConfigError(f"unknown profiler mode {name!r} in {text!r}: did you mean "
                              f"{near[0]!r}? valid modes are {', '.join(MODES)}")
    everything = "all" in names
    return {key: everything or mode in names for mode, key in MODES.items()}


def _flag(environ: Mapping[str, str], name: str) -> bool:
    raw = environ.get(name, "")
    if not raw.strip():
        return False
    try:
        return config.keys()["continuous_dump"].to_c(raw) == "true"  # the spec's bool rules
    except ConfigError:
        raise ConfigError(f"invalid {name}={raw!r}: expected 1/0 or true/false") from None


def config_from_environment(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``set_config`` keywords the PYPROF_* variables ask for (validated)."""
    env = os.environ if environ is None else environ
    kwargs: dict[str, Any] = dict(parse_mode(env.get("PYPROF_MODE") or DEFAULT_MODE))
    kwargs["filename"] = os.path.abspath(env.get("PYPROF_FILENAME") or "profile.json")
    kwargs["aggregate_stats"] = _flag(env, "PYPROF_AGGREGATE_STATS")
    kwargs["continuous_dump"] = True
    if env.get("PYPROF_DUMP_PERIOD"):
        kwargs["dump_period"] = env["PYPROF_DUMP_PERIOD"]
    config.validate(kwargs)
    return kwargs


def libmxnet_loaded() -> bool:
    """True when libmxnet is loaded in this process (by mxnet, pyprof or a JVM)."""
    return _capi.in_process()


def per_operator(environ: dict[str, str] | None = None) -> None:
    """Turn off bulk execution, so the trace and the statistics name every operator.

    With bulk execution on (MXNet's default) a bound symbol's operators run, and are recorded,
    as one segment named ``[dot]`` or ``Activation,Convolution``. This sets
    ``MXNET_EXEC_BULK_EXEC_INFERENCE=0`` and ``MXNET_EXEC_BULK_EXEC_TRAIN=0``. Call it before
    ``import mxnet`` (or use ``PYPROF_PER_OPERATOR=1``): MXNet reads them when an executor is
    bound (observed with 1.9.1), and code that reads them when the engine starts sees them only
    if they were set before; when libmxnet is already loaded this warns, and executors bound
    earlier keep their bulk segments. Operators then cost a little more each, as they do
    without the profiler.
    """
    env = os.environ if environ is None else environ
    if environ is None and libmxnet_loaded():
        warnings.warn("pyprof.env.per_operator(): libmxnet is already loaded; executors bound "
                      "before now keep bulk segments. fix: call it (or set "
                      "PYPROF_PER_OPERATOR=1) before `import mxnet`", stacklevel=2)
    for name in BULK_VARIABLES:
        env[name] = "0"


def autostart(environ: Mapping[str, str] | None = None) -> bool:
    """Start profiling as the PYPROF_* variables say; True when it started (now or before).

    ``environ``: where to read the variables (default ``os.environ``); per-operator mode always
    sets ``os.environ``, which is what MXNet reads.

    The trace is finished at interpreter exit (``set_state('stop')``, ``dump()``), so the file
    is valid JSON then; until then MXNet appends to it every ``PYPROF_DUMP_PERIOD`` seconds.
    """
    global _started
    env = os.environ if environ is None else environ
    if _flag(env, "PYPROF_PER_OPERATOR"):
        per_operator()  # MXNet reads os.environ, whatever mapping the flags came from
    if not _flag(env, "PYPROF_AUTOSTART"):
        return _started
    if _started:
        return True
    from . import profiler
    kwargs = config_from_environment(env)
    profiler.set_config(**kwargs)
    profiler.set_state("run")
    _started = True
    atexit.register(_finish)
    return True


def _finish() -> None:
    from . import _capi, profiler
    from ._tracker import TRACKER
    if _capi.forked_error():
        return  # a forked child: the trace is the parent's
    state = profiler.state()
    if state["finished"] or TRACKER.session is not None:
        return
    cfg = profiler.current_config() or {}
    try:
        if state["running"]:
            profiler.set_state("stop")
        profiler.dump(True)
    except Exception as exc:  # noqa: BLE001 - at exit: report, never raise
        print(f"pyprof: could not finish {cfg.get('filename')}: {exc}", file=sys.stderr)
