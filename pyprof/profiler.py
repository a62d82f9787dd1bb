"""The reference profiler API, named and defaulted like ``mxnet.profiler`` 1.9.1.

Code written for ``mxnet.profiler`` runs unchanged with ``import pyprof.profiler as
profiler`` (or ``from pyprof import profiler``). Differences are deliberate and make
misuse loud: keys and values are validated against the shared spec before C sees them,
and a call MXNet would reject, or silently ignore, raises a pyprof error that names the
fix. Collected data is never dropped by an error: a failed call leaves the profiler as
it was.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import warnings
from typing import Any

from .native import capi as _capi
from .process import claim as _claim, keep_file as _keep_file, output as _output, rawfile as _rawfile
from .process import steady_checks as _steady
from . import config, rules
from .process.tracker import TRACKER
from .errors import MXNetError

__all__ = [
    "set_config", "set_state", "dump", "dumps", "pause", "resume",
    "set_kvstore_handle", "state", "current_config",
    "profiler_set_config", "profiler_set_state", "dump_profile",
    "Domain", "Task", "Frame", "Event", "Counter", "Marker",
]

# C codes, from pyprof/spec/api.json (shared with the JVM layer).
STATES = rules.STATES
PROCESSES = rules.PROCESSES
FORMATS = rules.DUMPS_FORMATS
SORT_KEYS = rules.DUMPS_SORT_KEYS

_kvstore_handle = _capi.handle()  # NULL unless set_kvstore_handle() was called


_t = TRACKER  # this module's short name for the process's one tracker (the JVM's too, through
#               the bridge: pyprof.bridge.tracker)


def _trace_name() -> str:  # for messages: MXNet's default file when none was configured
    return (_t.config or config.effective({}))["filename"]


def _check_owner(call: str, process_code: int = 0, arg: Any = None) -> None:
    """Refuse calls that would break an open pyprof.profile session (it owns the trace file).

    Calls for the kvstore servers (``profile_process='server'``) go to other processes.
    ``call`` names the function; ``arg``, when given, its argument (formatted only on error).
    """
    if process_code == 0 and _t.session is not None and _t.internal != threading.get_ident():
        if arg is not None:
            call = f"{call}({arg!r})"
        raise rules.error("state.session_owns", call=call, session=_t.session)


def _check_not_after_session(call: str) -> None:
    """Refuse a plain run or dump while MXNet still names a closed session's raw trace."""
    if _t.steady is None and _t.internal != threading.get_ident() and \
            _output.session_raw_trace(_trace_name()):
        raise rules.error("state.after_session", call=call, trace=_trace_name())


def _process_code(profile_process: str) -> int:
    if profile_process not in PROCESSES:
        raise rules.error("process.invalid", value=profile_process, choices=list(PROCESSES))
    if profile_process == "server" and not _kvstore_handle:
        _adopt_mxnet_kvstore_handle()
    if profile_process == "server" and not _kvstore_handle:
        raise rules.error("process.server_needs_kvstore")
    return PROCESSES[profile_process]


def _adopt_mxnet_kvstore_handle() -> None:
    """Use the handle ``mx.kv.create('dist_*')`` gave mxnet.profiler, as mxnet.profiler does."""
    handle = getattr(sys.modules.get("mxnet.profiler"), "profiler_kvstore_handle", None)
    if handle is not None and getattr(handle, "value", None):
        set_kvstore_handle(handle)


def set_kvstore_handle(handle: Any) -> None:
    """Use this kvstore handle (``mx.kv.KVStore.handle``) for server profiling calls."""
    global _kvstore_handle
    _kvstore_handle = _capi.handle(getattr(handle, "value", handle))


#: Warned by :func:`set_config` when ``profile_symbolic`` is off (and ``profile_all`` too):
#: observed with MXNet 1.9.1, the mode key that does not keep its events out of the trace.
SYMBOLIC_OFF_WARNING = (
    "pyprof: profile_symbolic is off, but MXNet 1.9.1 records the operators of bound symbols "
    "(executors) whatever the mode: they still appear in the trace and the statistics, with no "
    "mark that tells them from imperative operators. fix: to leave them out, run executors "
    "while the profiler is paused (pyprof.profiler.pause()/resume()) or stopped")


def set_config(**kwargs: Any) -> None:
    """Configure the profiler. C: MXSetProcessProfilerConfig.

    Keys (see ``pyprof.config.keys()``): profile_all, profile_symbolic, profile_imperative,
    profile_memory, profile_api (bool), filename (str), continuous_dump (bool),
    dump_period (float, seconds, > 0), aggregate_stats (bool), profile_process
    ('worker' | 'server'). Keys left out return to their C defaults, as in MXNet, except
    ``filename`` once the profiler has run (until the finished dump): it is kept (api.json
    ``keep_filename``). This deviates from MXNet on purpose: MXNet would send the rest of the
    trace to ./profile.json and leave the configured file unfinished. Since MXNet's config
    deletes the file it names, the events already dumped there are kept first in a hidden
    part beside it (``.pyprof-<pid>-kept-<n>-<name>.json``: a hard link; without hard links,
    continuous dumps are stopped by a config to a scratch file and the file is renamed), and
    the finished dump, or pyprof's exit handler when the program makes none, joins the parts
    and the file into one valid trace and deletes the parts.
    Configuring deletes an existing file at ``filename``, which is checked first (its directory
    exists and takes a new file, it is no directory, its file system has
    ``api.json output_paths.min_free_bytes`` free). A new ``filename`` while profiling runs,
    or stopped once it has run (a session's start too), loses nothing: the
    events so far end in the old file, finished as a valid trace; later ones go to the new one.

    With ``profile_imperative``, ``profile_api`` or ``profile_memory`` off, MXNet 1.9.1 records
    none of that mode's events. With ``profile_symbolic`` off it still records bound symbols'
    operators: this warns (:data:`SYMBOLIC_OFF_WARNING`).

    Raises:
        ConfigError: unknown key (with the nearest valid key) or bad value.
        StateError: after ``dump(finished=True)``: MXNet cannot start a second trace
            session in one process.
        ConfigError: ``config.missing_directory``, ``config.bad_path``: a filename MXNet
            could not write (MXNet itself would write no trace, silently); another process's
            (``config.filename_claimed``, ``config.claim_failed``: api.json ``trace_claims``).
        MXNetError: MXNet rejected the call.
    """
    _capi.ensure_not_forked()
    c_values = config.validate(kwargs)
    process = kwargs.get("profile_process", "worker")
    _process_code(process)
    with _t.lock:
        _check_owner("set_config()", PROCESSES[process])
        if process == "worker":
            _steady.check_config(c_values)
        if _t.finished:
            raise rules.error("state.finished_config", trace=_trace_name())
        current = (_t.config or config.effective({}))["filename"]
        # api.json keep_filename (never a session's raw trace: internal, and deleted by now)
        keeps = process == "worker" and _t.ever_ran and not _output.session_raw_trace(current)
        if keeps and "filename" not in c_values:
            c_values = {**c_values, "filename": current}
        # another file, by grammar.json paths ("./a.json" is "a.json")
        moves = not _output.same_file(c_values.get("filename", current), current)
        effective = config.effective(c_values)  # its filename claimed before MXNet deletes it
        private = _output.session_raw_trace(effective["filename"])  # a session's: no claim
        with _claim.claiming("filename", effective["filename"],
                             process == "worker" and not private):
            if process == "worker" and moves and (_t.running or keeps):  # finish the old file
                _switch_file(c_values)  # (which joins its kept parts: none stay elsewhere)
            elif keeps and not moves:
                _configure_same_file(c_values)
            else:
                _send_config(c_values)
        if process == "worker":
            _claim.release(current if moves and not _t.ever_ran else None)  # none of ours in it
            _t.config = effective
            _t.repair_on_finish = _t.ever_ran
    if effective.get("profile_symbolic") == "false" and effective.get("profile_all") != "true":
        warnings.warn(SYMBOLIC_OFF_WARNING, stacklevel=2)


def _switch_file(c_values: dict[str, str]) -> None:
    """A new filename while profiling runs, or stopped once it has run (a session's start too;
    under the tracker lock): as in MXNet, later events go to the new file; unlike
    MXNet, the old file is finished as a valid trace.

    The events so far are appended to the old file first (an intermediate dump), unless it can
    no longer be written: then they stay queued and go to the new file. MXNet never writes the
    old file again once configured away from it, so pyprof then finishes it: rewritten as a
    valid trace (as a finished dump of a file MXNet wrote without its header is), with this
    process's metadata events, which the new file gets too. With continuous_dump off, MXNet's
    dump stopped output: running again (and, stopped, stopping again) restores it.
    """
    from .process.rawfile import METADATA, read_range

    old_cfg = dict(_t.config or config.effective({}))  # never configured: MXNet's default
    old = old_cfg["filename"]
    # False too when MXNet finished the old file already (continuous_dump off)
    dumped = _output.file_problem(old) is None and _dump_intermediate()
    _send_config(c_values)
    if old_cfg.get("continuous_dump") == "false":  # output back on: run (and stop again)
        _capi.call("MXSetProcessProfilerState", STATES["run"], 0, _kvstore_handle)
        if not _t.running:
            _capi.call("MXSetProcessProfilerState", STATES["stop"], 0, _kvstore_handle)
        elif _t.paused:
            _capi.call("MXProcessProfilePause", 1, 0, _kvstore_handle)
    # parts of the old file kept by earlier configs are joined with it; else it is rewritten
    if not _keep_file.join(old) and dumped and _output.size(old) is not None:
        full = os.path.abspath(old)
        read_range(full, 0, None, METADATA, out=full)  # METADATA: for the new file's finish


def _dump_intermediate() -> bool:
    """MXDumpProcessProfile(0); False when MXNet answers that it has not run (it finished its
    file already, or never ran)."""
    try:
        _capi.call("MXDumpProcessProfile", 0, 0, _kvstore_handle)
        return True
    except MXNetError as exc:
        if "hasn't been run" not in exc.mxnet_message:
            raise
        return False


def _configure_same_file(c_values: dict[str, str]) -> None:
    """A config naming the file the profiler has been writing (kept or given again; under the
    tracker lock). MXNet's config unlinks it, so its events are kept in a part first
    (``pyprof.process.keep_file``), joined with the file by the finished dump, or at exit."""
    path = c_values["filename"]
    if (_t.config or {}).get("continuous_dump") != "false" and not os.path.exists(path) \
            and _output.file_problem(path) is None:
        _dump_intermediate()  # nothing dumped yet: so no timer write lands between link and config

    def stop_timer(scratch: str) -> None:  # no hard links: stop continuous dumps first
        _capi.set_process_profiler_config(
            {**(_t.config or {}), "filename": scratch, "continuous_dump": "false"},
            _kvstore_handle)

    part = _keep_file.keep(path, len(_t.kept_parts), stop_timer)
    if part is not None:
        _t.kept_parts.append(part)
    finish_kept_file_at_exit()
    _send_config(c_values)  # retried while a dump timer (stopped here or before) exits


def _send_config(c_values: dict[str, str]) -> None:
    """MXSetProcessProfilerConfig with ``c_values``, retried while MXNet's dump timer that an
    earlier config stopped is still exiting (api.json ``timer_exit``: "auto_remove_ == false"
    until it exits, up to one dump_period): for up to the larger dump_period of the config in
    force and the one sent, plus extra_s. The JVM's pyprof.trace-file/send-config! does the same."""
    periods = [float(c.get("dump_period", 1.0)) for c in (_t.config or {}, c_values)]
    _keep_file.retry_while_timer_exits(
        lambda: _capi.set_process_profiler_config(c_values, _kvstore_handle),
        max(periods) + float(rules.API["timer_exit"]["extra_s"]))


def finish_kept_file_at_exit() -> None:
    """Package-internal: have the trace file finished at exit if the program makes no finished
    dump, because a config kept it (its parts are joined by the finished dump). Called by the
    config that keeps it, in Python or, through the bridge's tracker, in the JVM (a JPype-hosted
    JVM leaves MXNet's shutdown to Python). Registered last, so it runs before mxnet's atexit."""
    _rawfile.at_exit(_finish_at_exit)


def _finish_at_exit() -> None:
    """At exit, after a config kept the file and with no finished dump: stop, dump finished
    (which joins the parts and the file, or rewrites a file MXNet wrote without its header),
    before MXNet's own exit would finish the file without them."""
    if _capi.forked_error():
        return  # a forked child: the trace is the parent's
    with _t.lock:
        if _t.finished or _t.session is not None or not _t.ever_ran or _t.steady is not None \
                or _output.session_raw_trace(_trace_name()):  # pyprof.session.raw finishes it
            return  # (steady mode finishes its trace at exit itself: pyprof.session.steady)
    try:
        if _t.running:
            set_state("stop")
        dump(True)
    except Exception as exc:  # noqa: BLE001 - at exit: one line on stderr, never a traceback
        print(f"pyprof: could not finish {_trace_name()}: {exc}", file=sys.stderr)


def set_state(state: str = "stop", profile_process: str = "worker") -> None:
    """Start ('run') or stop ('stop') recording. C: MXSetProcessProfilerState.

    'run' also resumes a paused profiler. Raises StateError for an unknown state or
    process, StateError ``steady.set_state`` in steady mode (:mod:`pyprof.session.steady`:
    use pause/resume), StateError ``state.after_session`` for 'run' after a session, before a
    set_config (MXNet still names the session's deleted raw trace; so does ``dump``),
    MXNetError when MXNet rejects the call.
    """
    _capi.ensure_not_forked()
    if state not in STATES:
        raise rules.error("state.invalid", state=state, choices=list(STATES))
    code = _process_code(profile_process)
    with _t.lock:
        _check_owner("set_state", code, state)
        _steady.check_switch(f"set_state({state!r})", code)
        if state == "run" and _t.finished:
            raise rules.error("state.finished_run", trace=_trace_name())
        if state == "run" and code == 0:
            _check_not_after_session(f"set_state({state!r})")
        _capi.call("MXSetProcessProfilerState", STATES[state], code, _kvstore_handle)
        if code == 0:
            _t.running = state == "run"
            _t.ever_ran |= _t.running
            _t.paused = False if _t.running else _t.paused


def dump(finished: bool = True, profile_process: str = "worker") -> None:
    """Write collected events to the trace file. C: MXDumpProcessProfile.

    With ``finished=True`` the file is closed as valid JSON and the profiler stops for good in
    this process; ``False`` is an intermediate dump. Any other value is ConfigError
    ``state.dump_finished_arg`` (mxnet.profiler took anything but the literal True, 1 too, as
    an intermediate dump, the retired Clojure package 1 as finished: pyprof and its JVM layer
    refuse both readings). Raises StateError before the profiler has ever run, StateError
    ``steady.finished_dump`` for a finished dump in steady mode (``pyprof.steady.end()``
    finishes it), MXNetError when MXNet rejects the call.

    MXNet reports no failure to write the file, so pyprof checks the path first (StateError
    ``dump.unwritable``: nothing was dumped, the events are kept; configure another filename
    and dump again) and the file afterwards (StateError ``dump.lost``: MXNet wrote nothing, or
    a finished file lacks its closing bytes).
    """
    _capi.ensure_not_forked()
    code = _process_code(profile_process)
    if type(finished) is not bool:
        raise rules.error("state.dump_finished_arg", value=finished)
    fin = 1 if finished else 0
    with _t.lock:
        _check_owner("dump()", code)
        if fin:
            _steady.check_switch("dump(finished=True)", code)
        if code == 0 and _t.finished:
            raise rules.error("state.finished_dump", trace=_trace_name())
        if code == 0:
            _check_not_after_session("dump()")
        path = (_t.config or {}).get("filename") if code == 0 else None
        problem = _output.file_problem(path) if path is not None else None
        if problem is not None:  # nothing dumped: MXNet keeps its queued events
            raise rules.error("dump.unwritable", path=path, **problem)
        if code == 0 and not fin and _t.ever_ran and _t.config \
                and _t.config["continuous_dump"] == "false":  # MXNet would close the file
            raise rules.error("dump.intermediate_finishes", call="dump(finished=False)",
                              trace=_trace_name())
        try:
            _capi.call("MXDumpProcessProfile", fin, code, _kvstore_handle)
        except MXNetError as exc:
            # MXNet itself knows whether anything ran (the JVM may have started it).
            if "hasn't been run" in exc.mxnet_message:
                if _t.ever_ran:  # dumps() finished the file (continuous_dump off)
                    _t.finished = True
                    _claim.release_all()
                    if _t.config:
                        _keep_file.join(_t.config["filename"])
                    raise rules.error("state.trace_finished_by_dumps",
                                      trace=_trace_name()) from exc
                raise rules.error("state.dump_before_run") from exc
            raise
        if code == 0 and fin:
            _t.finished = True
            _t.running = False
        try:  # (an intermediate dump never finishes: with continuous_dump off it is refused)
            if path is not None:
                _output.check_dumped(path, fin)
        finally:  # kept parts are joined even when the check reports a lost dump
            with _claim.all_given_back_after(code == 0 and fin):  # the trace is finished
                if code == 0 and fin and _t.config:
                    _keep_file.finish(_t.config["filename"])


def dumps(reset: bool = False, format: str = "table", sort_by: str = "total",
          ascending: bool = False) -> str:
    """MXNet's aggregate statistics as text. C: MXAggregateProfileStatsPrintEx.

    ``format`` 'table' gives fixed-width text, 'json' the text of a JSON object (MXNet's,
    its unescaped names escaped, but for a name with a line break)
    ``{"Time": {category: {name: {Count, Total, Min, Max, Avg}}}, "Memory": {...},
    "Unit": {"Time": "ms", "Memory": "kB"}}`` (4 significant digits; times in ms,
    memory in kB). ``sort_by`` is total, avg, min, max or count. ``reset`` clears the
    statistics after reading. For exact statistics use ``pyprof.stats`` on the trace.

    Raises ConfigError for a bad format/sort key, StateError when aggregate_stats is off.
    """
    _capi.ensure_not_forked()
    if format not in FORMATS:
        raise rules.error("dumps.format", value=format, choices=list(FORMATS))
    if sort_by not in SORT_KEYS:
        raise rules.error("dumps.sort_by", value=sort_by, choices=list(SORT_KEYS))
    if not isinstance(ascending, bool):
        raise rules.error("dumps.ascending", value=ascending)
    with _t.lock:
        if _t.config is not None and _t.config.get("aggregate_stats") != "true":
            raise rules.error("dumps.no_aggregate_stats")
        if _t.ever_ran and not _t.finished and (_t.config or {}).get("continuous_dump") == "false":
            raise rules.error("dumps.finishes_trace", trace=_trace_name())  # MXNet would
        try:
            text = _capi.aggregate_profile_stats(bool(reset), FORMATS[format], SORT_KEYS[sort_by],
                                                 ascending)
        except MXNetError as exc:
            reason = exc.mxnet_message.splitlines()[0] if exc.mxnet_message else ""
            raise rules.error("dumps.failed", reason=reason) from exc
    if not text:
        raise rules.error("dumps.empty")
    if format == "json":  # MXNet writes the keys unescaped (api.json dumps_json_key_line)
        text = re.sub(rules.API["dumps_json_key_line"],
                      lambda m: f"{m[1]}{json.dumps(m[2], ensure_ascii=False)}: {{", text)
    return text


def pause(profile_process: str = "worker") -> None:
    """Pause recording without ending the session. C: MXProcessProfilePause(1, ...)."""
    _capi.ensure_not_forked()
    code = _process_code(profile_process)
    _capi.call("MXProcessProfilePause", 1, code, _kvstore_handle)
    if code == 0:
        _t.paused = True


def resume(profile_process: str = "worker") -> None:
    """Resume after pause(). C: MXProcessProfilePause(0, ...)."""
    _capi.ensure_not_forked()
    code = _process_code(profile_process)
    _capi.call("MXProcessProfilePause", 0, code, _kvstore_handle)
    if code == 0:
        _t.paused = False


def state() -> dict[str, bool]:
    """What this process has asked of the profiler: running, paused, finished, ever_ran."""
    with _t.lock:
        return {"running": _t.running, "paused": _t.paused,
                "finished": _t.finished, "ever_ran": _t.ever_ran}


def current_config() -> dict[str, str] | None:
    """The effective configuration (C strings) after the last worker set_config, or None."""
    with _t.lock:
        return dict(_t.config) if _t.config is not None else None


# Deprecated mxnet.profiler names, kept so old scripts run.
def profiler_set_config(mode: str = "symbolic", filename: str = "profile.json") -> None:
    """Deprecated mxnet.profiler spelling: ``mode`` 'symbolic' or 'all'."""
    if mode not in rules.API["legacy_modes"]:
        raise rules.error("config.legacy_mode", mode=mode, choices=rules.API["legacy_modes"])
    set_config(profile_symbolic=True, profile_all=(mode == "all"), filename=filename)


def profiler_set_state(state: str = "stop") -> None:
    """Deprecated alias of set_state(state)."""
    set_state(state)


def dump_profile() -> None:
    """Deprecated alias of dump(True)."""
    dump(True)


# The custom objects live in pyprof.objects; re-exported here as in mxnet.profiler.
from .objects import Counter, Domain, Event, Frame, Marker, Task  # noqa: E402
