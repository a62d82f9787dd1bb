"""Steady mode: the profiler runs once, and nothing changes MXNet's ``IsProfiling`` again.

Why: MXNet pushes and pops a per-thread API call record only while
``Profiler::IsProfiling(kAPI)`` holds (state running and the ``profile_api`` mode bit); a C
call that spans a change of it aborts the process (``c_api_profile.cc:140``). pyprof's API gate
protects the calls that pass through it, but not a binding of the program's own (a
``ctypes.CDLL`` of libmxnet, another extension, a JVM library's own JNA or JNI). Steady mode
protects those too, by never making such a change while they may be inside a call:

- :func:`begin` (before the program's MXNet threads start) configures the profiler and switches
  it to run, then pauses it. ``pyprof.profile(..., steady=True)`` begins it at the session's
  ``start()`` when it has not begun; ``PYPROF_STEADY=1`` begins it at ``import pyprof``
  (:func:`begin_from_environment`).
- While steady, sessions (every session, with ``steady=True`` or not) take their windows with
  pause and resume (``schedule.json`` ``steady``: ``stop`` becomes ``pause``, ``run`` becomes
  ``resume``; pause keeps the profiler running). ``set_state`` and ``dump(finished=True)`` are
  refused (StateError ``steady.set_state``, ``steady.finished_dump``), and so is a
  ``set_config`` that changes a mode key's value (``steady.config_mode``, api.json
  ``steady.mode_keys``); ``pause``, ``resume``, ``dump(finished=False)`` and ``dumps`` work.
- :func:`end` (the caller says its MXNet threads have ended) stops the profiler and finishes
  the trace. At interpreter exit, steady mode that was not ended is finished *without* a stop:
  pause, then a finished dump, which leaves ``IsProfiling`` as it is (MXNet's finished dump only
  disables output), so even daemon threads still inside MXNet cannot abort.

Two places to record into: without ``filename``, pyprof's raw trace, which sessions cut into
windows (:mod:`pyprof.session`); with ``filename``, the caller's own trace file, where
``pyprof.resume()``/``pause()`` mark what is recorded (sessions are refused there,
``steady.own_file``).

The one fact "steady mode is on, begun by X" lives in the process's tracker (``TRACKER.steady``),
which a JPype-hosted JVM shares: a steady mode begun in either language holds for both.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from ..native import capi as _capi
from .. import config, profiler, rules
from ..process.tracker import TRACKER
from ..process import output as _output, rawfile as _rawfile
from .raw import RAW, owner


#: api.json ``steady``: the mode keys, the environment variable, the JVM's system property.
SPEC: dict[str, Any] = rules.API["steady"]

#: Recording options steady mode does not take on the raw trace (api.json
#: ``reserved_session_keys``): they are pyprof's.
_RESERVED: dict[str, str] = rules.API["reserved_session_keys"]


def active() -> str | None:
    """Who began steady mode (``"pyprof.steady.begin()"``, ``"PYPROF_STEADY"``, a session's
    name, the JVM's ``-Dpyprof.steady``), or None when the process is not in steady mode."""
    return TRACKER.steady


def begin(*, filename: str | os.PathLike[str] | None = None, **options: Any) -> None:
    """Begin steady mode now, before the program's MXNet threads start.

    Configures the profiler with ``options`` (as ``pyprof.profiler.set_config``: profile_api,
    profile_imperative, ..., aggregate_stats, dump_period in seconds) and switches it to run,
    then pauses it: from here on nothing changes MXNet's ``IsProfiling`` until :func:`end` (or
    exit). Without ``filename`` it records into pyprof's raw trace for sessions
    (``pyprof.profile``: their windows are taken by pause and resume; a session's options must
    equal these); with ``filename``, into that file (continuous dump), recorded while resumed.
    C: MXSetProcessProfilerConfig, MXSetProcessProfilerState(1), MXProcessProfilePause(1).

    Raises:
        StateError: ``steady.already`` (begun before), ``steady.session_open`` (a session owns
            the profiler), ``steady.profiler_running`` (something started the profiler
            already), ``session.profiler_finished`` (a finished dump happened).
        ConfigError: a bad option (as set_config), ``session.reserved_option`` without
            ``filename`` (filename, continuous_dump, profile_process are pyprof's).
        MXNetError: MXNet rejected a call.
    """
    begin_as(options, None if filename is None else os.fspath(filename), "pyprof.steady.begin()")


def begin_as(options: Mapping[str, Any], filename: str | None, by: str) -> None:
    """:func:`begin` on behalf of ``by`` (a session's name, ``PYPROF_STEADY``), raising the same."""
    _capi.ensure_not_forked()
    if filename is None:
        for key in options:
            if key in _RESERVED:
                raise rules.error("session.reserved_option", option=key, why=_RESERVED[key])
    c_options = config.validate(dict(options))
    t = TRACKER
    with t.lock:
        if t.steady is not None:
            raise rules.error("steady.already", steady=t.steady)
        if t.session is not None:
            raise rules.error("steady.session_open", call="pyprof.steady.begin()",
                              session=t.session)
        if t.finished or RAW.finished:
            raise rules.error("session.profiler_finished")
        if t.running:
            raise rules.error("steady.profiler_running")
        with owner("steady"):
            if filename is None:
                RAW.configure(c_options)
            else:
                profiler.set_config(**dict(options, filename=os.path.abspath(filename)))
            profiler.set_state("run")
            profiler.pause()
        t.steady = by
    _rawfile.at_exit(_at_exit)  # registered last: runs before mxnet's own exit handler


def begin_from_environment(environ: Mapping[str, str] | None = None) -> bool:
    """``PYPROF_STEADY=1`` (api.json ``steady.env``; read at ``import pyprof``): begin steady
    mode, True when it began. Recording options from ``PYPROF_MODE`` (readable modes, see
    :mod:`pyprof.env`; unset: MXNet's defaults, which sessions without options use),
    ``PYPROF_AGGREGATE_STATS`` and ``PYPROF_DUMP_PERIOD``; into pyprof's raw trace for sessions,
    or, with ``PYPROF_AUTOSTART=1`` too, into ``PYPROF_FILENAME`` (finished at exit), recording
    from here on (resumed: autostart records the program, as without steady mode).

    Raises ConfigError for a bad variable (``env.bad_flag``, ``env.unknown_mode``, ...)."""
    from .. import env as _env

    e = os.environ if environ is None else environ
    if not _env.flag(e, str(SPEC["env"])) or TRACKER.steady is not None:
        return TRACKER.steady is not None
    kwargs = _env.config_from_environment(e)
    if _env.flag(e, "PYPROF_AUTOSTART"):
        filename = kwargs.pop("filename")
        begin_as(kwargs, filename, str(SPEC["env"]))
        from .. import profiler  # (a new user's find: paused, the file held no event)
        profiler.resume()
        return True
    options = {k: v for k, v in kwargs.items() if k not in _RESERVED}
    if not e.get("PYPROF_MODE"):
        options = {k: v for k, v in options.items() if k not in _env.MODES.values()}
    begin_as(options, None, str(SPEC["env"]))
    return True


def check_session(options: dict[str, str], session: str) -> None:
    """Package-internal (``pyprof.profile.start``, under the tracker lock, in steady mode): a
    session records in steady mode only on the raw trace and with steady mode's options.

    Raises StateError ``steady.own_file``, ``steady.other_layer``, ConfigError
    ``steady.options_differ``."""
    t = TRACKER
    current = t.config or config.effective({})
    _check_layer(current.get("filename"), "pyprof.profile(...).start()")
    if RAW.path is None or current.get("filename") != RAW.path:
        raise rules.error("steady.own_file", steady=t.steady, trace=current.get("filename"))
    wanted = config.effective(dict(options, filename=RAW.path, continuous_dump="true"))
    differ = sorted(k for k in wanted if wanted[k] != current.get(k))
    if differ:
        raise rules.error("steady.options_differ", steady=t.steady,
                          wanted={k: wanted[k] for k in differ},
                          current={k: current.get(k) for k in differ})


def _check_layer(trace: str | None, call: str) -> None:
    """StateError ``steady.other_layer`` when steady mode records on the raw trace of the JVM
    layer of this process (begun there): its windows and its end are the JVM's."""
    if trace != RAW.path and _output.session_raw_trace(trace):
        raise rules.error("steady.other_layer", call=call, steady=TRACKER.steady,
                          layer="the JVM layer", trace=trace,
                          end=" or ".join(rules.CATALOGUE["api"]["steady_end"][language]
                                          for language in ("java", "clojure")))


def end() -> None:
    """End steady mode: the caller says its MXNet threads have ended (none is inside a call).

    Waits for queued operators, stops the profiler and, with a ``filename`` of :func:`begin`,
    finishes that trace (a valid JSON file); on the raw trace, deletes it when no session is
    open (the next session starts afresh, not steady unless asked). Idempotent: nothing when
    steady mode is not on. C: MXNDArrayWaitAll, MXSetProcessProfilerState(0),
    MXDumpProcessProfile(1).

    Raises:
        StateError: ``steady.session_open`` while a session is open (stop it first);
            ``steady.other_layer`` when the JVM layer began it on its raw trace.
        MXNetError: MXNet rejected a call.
    """
    _capi.ensure_not_forked()
    t = TRACKER
    with t.lock:
        if t.steady is None:
            return
        if t.session is not None:
            raise rules.error("steady.session_open", call="pyprof.steady.end()",
                              session=t.session)
        _check_layer((t.config or {}).get("filename"), "pyprof.steady.end()")
        on_raw = RAW.path is not None and (t.config or {}).get("filename") == RAW.path
        with owner("steady"):
            try:
                _capi.wait_all()
            finally:
                if t.running:
                    profiler.set_state("stop")
                t.steady = None
            if not on_raw and not t.finished:
                profiler.dump(True)
    if on_raw:
        RAW.release()


def _at_exit() -> None:
    """At exit, steady mode not ended: finish the trace without a stop (pause, then a finished
    dump: IsProfiling stays as it was, so threads still inside MXNet cannot abort). Open
    sessions were closed before (their handler was registered later)."""
    if _capi.forked_error():
        return  # a forked child: the trace is the parent's
    t = TRACKER
    on_raw = RAW.path is not None and (t.config or {}).get("filename") == RAW.path
    if t.finished or (t.steady is None and not on_raw):
        return
    try:
        with t.lock, owner("exit"):
            if on_raw:  # (also when the JVM ended steady mode on it: Python's raw trace)
                RAW.finish()  # finishes and deletes it (no stop in steady mode)
            else:
                profiler.pause()
                profiler.dump(True)
    except Exception as exc:  # noqa: BLE001 - at exit: one line on stderr, never a traceback
        print(f"pyprof: could not finish the steady trace at exit: {exc}", file=sys.stderr)
