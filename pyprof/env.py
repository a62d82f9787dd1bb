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
``PYPROF_STEADY``           ``1``: begin steady mode (:mod:`pyprof.session.steady`): the
                            profiler runs from import to exit, windows by pause and resume;
                            with ``PYPROF_AUTOSTART=1`` into ``PYPROF_FILENAME``, recording
                            from import (``pyprof.pause()`` leaves parts out), else into
                            the raw trace that sessions cut (``PYPROF_MODE`` unset: MXNet's
                            default modes).
``PYPROF_PER_OPERATOR``     ``1``: turn off every kind of bulk execution, so that every operator
                            is recorded under its own name (see :func:`per_operator`); set it
                            before ``import mxnet``.
==========================  ===================================================================

Example: ``PYPROF_AUTOSTART=1 PYPROF_MODE=all PYPROF_PER_OPERATOR=1 python -c "import pyprof;
import train"``.

MXNet's own ``MXNET_PROFILER_AUTOSTART=1`` without the imperative bit in ``MXNET_PROFILER_MODE``
(or without that variable: mode 13) records no imperative operator; importing pyprof then warns
with the fix (:func:`mxnet_autostart_problem`).
"""

from __future__ import annotations

import difflib
import gc
import os
import sys
import warnings
from collections.abc import Mapping
from typing import Any, Callable

from .native import capi as _capi
from . import config, rules
from .native.importhook import AfterImport
from .errors import ConfigError


#: Readable mode names and the config key each one turns on.
MODES = {
    "symbolic": "profile_symbolic",
    "imperative": "profile_imperative",
    "api": "profile_api",
    "memory": "profile_memory",
    "all": "profile_all",
}
DEFAULT_MODE = "symbolic,imperative"


#: Set to "0" by :func:`per_operator`: MXNet then runs (and records) operators one by one. The
#: list, and what each variable controls, is ``pyprof/spec/trace.json``'s ``bulk.variables``.
BULK_VARIABLES: tuple[str, ...] = tuple(rules.spec("trace.json")["bulk"]["variables"])

_started = False


def parse_mode(text: str) -> dict[str, bool]:
    """``"symbolic,imperative"`` -> the profile_* keys, each True or False.

    Names are case-insensitive and separated by commas (spaces allowed); ``all`` turns on
    everything. Raises ConfigError for an unknown name, naming the nearest one.
    """
    names = [n.strip().lower() for n in str(text).split(",") if n.strip()]
    if not names:
        raise rules.error("env.empty_mode", text=text, modes=", ".join(MODES))
    for name in names:
        if name not in MODES:
            near = difflib.get_close_matches(name, list(MODES), n=1, cutoff=0.0)
            raise rules.error("env.unknown_mode", name=name, text=text, nearest=near[0],
                              modes=", ".join(MODES))
    everything = "all" in names
    return {key: everything or mode in names for mode, key in MODES.items()}


def flag(environ: Mapping[str, str], name: str) -> bool:
    """The variable ``name`` of ``environ`` as a flag: unset or blank is False; else the spec's
    boolean spellings (ConfigError ``env.bad_flag`` for another)."""
    return _flag(environ, name)


def _flag(environ: Mapping[str, str], name: str) -> bool:
    raw = environ.get(name, "")
    if not raw.strip():
        return False
    try:
        return config.keys()["continuous_dump"].to_c(raw) == "true"  # the spec's bool rules
    except ConfigError:
        raise rules.error("env.bad_flag", name=name, raw=raw) from None


def config_from_environment(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``set_config`` keywords the PYPROF_* variables ask for (validated)."""
    env = os.environ if environ is None else environ

    def read(name: str, keys: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
        raw = env.get(name) or ""
        try:
            out = keys(raw)
            config.validate(out)
            return out
        except ConfigError as exc:  # the error names the variable the value came from
            problem = str(exc).split(" fix: ", 1)[0].removesuffix(".")
            raise rules.error("env.bad_variable", name=name, raw=raw, problem=problem,
                              variable_fix=exc.fix) from None

    kwargs: dict[str, Any] = read("PYPROF_MODE", lambda v: parse_mode(v or DEFAULT_MODE))
    kwargs.update(read("PYPROF_FILENAME",
                       lambda v: {"filename": os.path.abspath(v or "profile.json")}))
    kwargs["aggregate_stats"] = _flag(env, "PYPROF_AGGREGATE_STATS")
    kwargs["continuous_dump"] = True
    kwargs.update(read("PYPROF_DUMP_PERIOD", lambda v: {"dump_period": v} if v else {}))
    return kwargs  # each variable's keys checked once above (the filename's probe file too)


def libmxnet_loaded() -> bool:
    """True when libmxnet is loaded in this process (by mxnet, pyprof or a JVM)."""
    return _capi.in_process()


def per_operator(environ: dict[str, str] | None = None) -> list[str]:
    """Turn off every kind of bulk execution, so the trace and the statistics name every operator.

    With bulk execution on (MXNet's default) operators run, and are recorded, as one segment
    under one name: ``ImperativeBulk`` (Gluon blocks hybridized without ``static_alloc``,
    forward and backward, training and inference; autograd backward; ``mx.engine.bulk``
    scopes), ``[A,B]`` (bound symbols) or ``A,B`` (blocks hybridized with ``static_alloc``).
    This sets each of :data:`BULK_VARIABLES` to ``"0"`` (0, not 1: a bulk size of 1 still
    records one-operator ``ImperativeBulk`` segments) and makes ``mx.engine.bulk(n)`` and
    ``mx.engine.set_bulk_size(n)`` use 0 (now, or when ``mxnet.engine`` is imported).

    When MXNet reads them (MXNet 1.9.1): a Gluon block's ``CachedOp`` takes its segment sizes
    from ``MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN*`` when libmxnet loads; an executor reads
    ``MXNET_EXEC_BULK_EXEC_INFERENCE``/``_TRAIN`` when it is bound; autograd reads its backward
    size when it first runs. So call this before ``import mxnet`` (or set
    ``PYPROF_PER_OPERATOR=1``). Called later, it warns with what stays bulked and the fix
    (:func:`per_operator_too_late`). Operators then cost a little more each, as they do without
    the profiler.

    Args:
        environ: the mapping to set (default ``os.environ``, which MXNet reads); with another
            mapping only the variables are set there.

    Returns:
        What stays bulked in this process, each with its fix (empty when nothing does).
    """
    env = os.environ if environ is None else environ
    for name in BULK_VARIABLES:
        env[name] = "0"
    if environ is not None:
        return []
    _engine_bulk_off()
    late = per_operator_too_late()
    if late:
        warnings.warn("pyprof.env.per_operator(): " + "; ".join(late), stacklevel=2)
    return late


def per_operator_requested(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``PYPROF_PER_OPERATOR`` asks for per-operator mode (applied at ``import pyprof``)."""
    return _flag(os.environ if environ is None else environ, "PYPROF_PER_OPERATOR")


def per_operator_too_late() -> list[str]:
    """What per-operator mode can no longer change in this process, each ending in its fix."""
    if not libmxnet_loaded():
        return []
    late = ["libmxnet is already loaded: MXNet set the segment sizes of hybridized Gluon blocks "
            "(CachedOp forward_bulk_size and backward_bulk_size) when it loaded, and autograd "
            "sets its backward size when it first runs, so these still record 'ImperativeBulk'. "
            "fix: import pyprof before mxnet (it applies PYPROF_PER_OPERATOR=1 at its import), "
            "or call pyprof.env.per_operator() before `import mxnet`, or set the "
            "MXNET_EXEC_BULK_EXEC_* variables to 0 in the environment; in this process, "
            "hybridize each block again after this call with "
            "block.hybridize(forward_bulk_size=0, backward_bulk_size=0)"]
    executors = _live_instances("mxnet.executor", "Executor")
    if executors:
        late.append(f"{executors} executor(s) bound before now keep their bulk segments "
                    "('[A,B]' names). fix: bind them again after this call")
    return late


def _live_instances(module: str, cls: str) -> int:
    kind = getattr(sys.modules.get(module), cls, None)
    if not isinstance(kind, type):
        return 0
    return sum(1 for obj in gc.get_objects() if isinstance(obj, kind))


def _engine_bulk_off() -> None:
    """``mxnet.engine.set_bulk_size`` (and so ``mx.engine.bulk``) sets 0: now if
    ``mxnet.engine`` is imported, else as soon as it is."""
    engine = sys.modules.get("mxnet.engine")
    if engine is not None:
        _no_bulk_scope(engine)
    else:
        _ENGINE_HOOK.install()


def _no_bulk_scope(engine: Any) -> None:
    original = engine.set_bulk_size
    if getattr(original, "pyprof_per_operator", False):
        return

    def set_bulk_size(size: int) -> int:
        """``mxnet.engine.set_bulk_size`` in pyprof's per-operator mode: the bulk size stays 0
        (every operator recorded under its own name), whatever ``size``; returns the previous."""
        return original(0)

    set_bulk_size.pyprof_per_operator = True  # type: ignore[attr-defined]
    engine.set_bulk_size = set_bulk_size


_ENGINE_HOOK = AfterImport("mxnet.engine", _no_bulk_scope)


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """A note (api.json ``environment`` ``unknown_note``) for each ``PYPROF_*`` variable of
    ``environ`` (default ``os.environ``) that pyprof does not read: a misspelling, without
    effect. ``import pyprof`` warns with each."""
    spec = rules.API["environment"]
    known = sorted(spec["variables"])  # ties: the first in alphabetical order
    env = os.environ if environ is None else environ
    return [rules.render(spec["unknown_note"], {
        "name": name, "nearest": min(known, key=lambda k: config.edit_distance(name, k))})
        for name in sorted(env) if name.startswith(spec["prefix"]) and name not in known]


def mxnet_autostart_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """What MXNet's own ``MXNET_PROFILER_AUTOSTART=1`` will miss, with the fix; None when fine.

    MXNet starts its profiler when libmxnet loads, with ``MXNET_PROFILER_MODE`` (a bitmask:
    symbolic 1, imperative 2, api 4, memory 8) or, without it, mode 13: no imperative bit, so
    NDArray operators and Gluon blocks, hybridized or not, record nothing (observed with 1.9.1;
    bound symbols are recorded whatever the mode). Checked when pyprof is imported.
    """
    env = os.environ if environ is None else environ
    try:
        if not int(env.get("MXNET_PROFILER_AUTOSTART", "").strip() or 0):
            return None
        raw = env.get("MXNET_PROFILER_MODE", "").strip()
        mode = int(raw) if raw else None
    except ValueError:
        return None  # MXNet itself rejects or ignores such values
    if mode is not None and mode & 2:
        return None
    why = ("without MXNET_PROFILER_MODE, MXNet profiles with its default mode 13 (symbolic, api, "
           "memory)" if mode is None else f"MXNET_PROFILER_MODE={raw} has no imperative bit (2)")
    return (f"MXNET_PROFILER_AUTOSTART=1: {why}, so imperative code (NDArray operators, Gluon "
            "blocks, hybridized or not) records no operator. fix: use PYPROF_AUTOSTART=1 instead "
            "(PYPROF_MODE=symbolic,imperative by default, and the trace is finished at exit), or "
            "set MXNET_PROFILER_MODE=15")


def autostart(environ: Mapping[str, str] | None = None) -> bool:
    """Start profiling as the PYPROF_* variables say; True when it started (now or before).

    ``environ``: where to read the variables (default ``os.environ``); per-operator mode always
    sets ``os.environ``, which is what MXNet reads.

    The trace is finished at interpreter exit (``set_state('stop')``, ``dump()``), so the file
    is valid JSON then; until then MXNet appends to it every ``PYPROF_DUMP_PERIOD`` seconds.
    """
    global _started
    env = os.environ if environ is None else environ
    problem = mxnet_autostart_problem(env)
    if problem and not _started:
        warnings.warn(f"pyprof: {problem}", stacklevel=2)
    if per_operator_requested(env):
        per_operator()  # MXNet reads os.environ, whatever mapping the flags came from
    steady = _flag(env, str(rules.API["steady"]["env"]))
    if not _flag(env, "PYPROF_AUTOSTART") and not steady:
        return _started
    if _started:
        return True
    if steady:  # PYPROF_STEADY: pyprof.session.steady.begin_from_environment's (at import)
        return False
    from . import profiler
    kwargs = config_from_environment(env)
    profiler.set_config(**kwargs)
    profiler.set_state("run")
    _started = True
    from .process.rawfile import at_exit
    at_exit(_finish)
    return True


def _finish() -> None:
    from .native import capi as _capi
    from . import profiler
    from .process.tracker import TRACKER
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
