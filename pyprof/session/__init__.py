"""Profiling sessions: ``pyprof.profile`` with a step schedule, many windows per process.

Quick start::

    import pyprof
    with pyprof.profile(schedule=pyprof.schedule(wait=1, warmup=1, active=2, repeat=3),
                        path="trace_{window}.json",
                        on_trace_ready=lambda w: print(w.path, w.summary(top=5))) as prof:
        for batch in data:
            train_step(batch)
            prof.step()

Design: docs/sessions.md (the schedule as data, one raw trace per process, windows as byte
ranges of it, metadata carried into every window, events in flight at a boundary, ownership,
exit and crashes). Steady mode and the bounds of the raw trace: docs/concurrency.md.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

from ..native import capi as _capi
from ..process import claim as _claim, output as _output, rawfile as _rawfile
from .. import config, profiler, rules
from . import cap as _cap
from . import leftovers as _leftovers
from . import template as _template
from .raw import RAW, ROTATE_BYTES, owner  # noqa: F401 - ROTATE_BYTES re-exported
from .recovery import recover
from .scheduling import (DEFAULT_ACTION, FINAL_ACTION, INITIAL_ACTION,
                         STEADY_OPERATIONS, Action, check_action, operations, saves_many,
                         schedule)
from . import steady
from .stepmarks import step_events
from .windows import PARTIAL, EndedWindow, OpenWindow, Window, now_us
from .windows import write_partial
from ..process.tracker import TRACKER

_RAW_SPEC: dict = rules.API["raw_trace"]

__all__ = ["Action", "schedule", "profile", "Window", "recover", "raw_trace_path"]

#: Recording options a session does not take, with why (api.json ``reserved_session_keys``).
_RESERVED: dict[str, str] = rules.API["reserved_session_keys"]
_ATTRIBUTION: dict[str, Any] = rules.spec("attribution.json")["capture"]

_open_sessions: weakref.WeakSet[profile] = weakref.WeakSet()


def raw_trace_path() -> str | None:
    """Path of this process's raw MXNet trace (None before the first session)."""
    return RAW.path


def _at_exit() -> None:
    """Save the windows of sessions still open, then finish and delete the raw trace."""
    if _capi.forked_error():
        return  # a forked child: the sessions and the raw trace are the parent's
    for session in list(_open_sessions):
        _report_at_exit(session._stop_at_exit, f"could not save the open window of {session._name}")
    _report_at_exit(RAW.finish, f"could not finish the raw trace {RAW.path}")


def _report_at_exit(fn: Callable[[], Any], what: str) -> None:  # one line, never a traceback
    try:
        fn()
    except Exception as exc:  # noqa: BLE001
        print(f"pyprof: {what}: {exc}", file=sys.stderr)


def _held_cut() -> Any:
    from ..attribution.matching import held_cut
    return held_cut()


def _serialised(method: Callable[..., Any]) -> Callable[..., Any]:
    """One call of a session at a time, as the JVM's; a forked child waits on no parent's lock."""
    @functools.wraps(method)
    def call(self: profile, *args: Any, **kwargs: Any) -> Any:
        if self._pid != os.getpid():  # a forked child's copy: a parent's thread may hold it
            self._serial = threading.RLock()
        with self._serial:
            return method(self, *args, **kwargs)
    return call


class _Taken:
    """A recorder's :meth:`take` on a thread of its own, begun once MXNet records no more
    (``start``, paused first); :meth:`result` joins it, and raises what it raised."""

    def __init__(self, recorder: Any) -> None:
        self._recorder = recorder
        self._thread: threading.Thread | None = None
        self._got: Any = None

    def start(self) -> None:
        self._recorder.pause()
        thread = threading.Thread(target=self._take, name="pyprof-take", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread to be had: taken after the append
            return
        self._thread = thread

    def _take(self) -> None:
        try:
            self._got = self._recorder.take()
            from ..attribution.matching import expected_bytes  # what the annotation asks first
            expected_bytes(self._got[0])
        except BaseException as exc:  # raised on the stopping thread by result()
            self._got = exc

    def join(self) -> None:
        """Wait for the thread, if begun (a stop that fails: its error is the one raised)."""
        if self._thread is not None:
            self._thread.join()

    def result(self) -> Any:
        if self._thread is None:  # never begun: no thread to be had
            return self._recorder.take()
        self._thread.join()
        if isinstance(self._got, BaseException):
            raise self._got
        return self._got


class profile:  # noqa: N801 - named like torch.profiler.profile, used as a context manager
    """Profile a block, or the windows of a step schedule, one valid trace per window.

    Args (keyword only):
        schedule: ``pyprof.schedule(...)`` or any ``step -> Action`` function. Default: one
            window from ``start()`` to ``stop()``.
        on_trace_ready: called with each saved :class:`Window` (after its file is written).
        path: trace file of each window, a template (grammar.json ``window_path``): the fields
            ``{window}`` (0, 1, ...), ``{step}`` (first step) and ``{pid}`` are filled in, each
            optionally zero-padded to a width (``{window:02d}``); ``{{`` and ``}}`` are literal
            braces. Must contain ``{window}`` when the schedule has more than one window.
            Relative paths are resolved against the current directory of now. An unknown field,
            another format or a lone brace raises ConfigError ``template.*``.
        steady: begin steady mode (:mod:`pyprof.session.steady`) at :meth:`start` unless it
            began; :meth:`start` then comes before your own bindings' MXNet threads start.
        dnnl: ``True`` or a log path: record oneDNN's primitives (``DNNL_VERBOSE``, split out
            of standard output into the log, ``pyprof_dnnl_<pid>.log`` beside the windows by
            default) and merge them into each window (:mod:`pyprof.dnnl.capture`). Raises
            StateError at ``start()`` when oneDNN already read its settings in this process.
        record_shapes, with_stack, with_flops: operator attribution (torch's names; off by
            default, and then nothing is added to any call): record each imperative call at
            the gated ``MXImperativeInvokeEx`` (:mod:`pyprof.attribution.capture`; the nodes
            of hybridized blocks and of bound executors' forwards too) and write
            onto its operator event in the window, as ``args``, the input and output shapes
            and dtypes (``"Input Dims"``, ``"Input type"``), the call site and call stack
            (``with_stack``), FLOPs and bytes (``with_flops``, from ``pyprof/spec/flops.json``)
            and how it was matched (:mod:`pyprof.attribution.matching`); each saved
            :class:`Window`'s ``attribution`` is the match report. docs/attribution.md.
        **options: recording options, as in ``pyprof.profiler.set_config``: profile_symbolic,
            profile_imperative, profile_api, profile_memory, profile_all, aggregate_stats,
            dump_period (seconds between appends to the raw trace: what survives a crash).
            Another name raises ConfigError ``session.unknown_option`` naming the nearest.

    Use as ``with pyprof.profile(...) as prof:`` and call ``prof.step()`` after each step; on
    exit (also when the body raises) the profiler stops and an open window is saved. Or call
    :meth:`start` and :meth:`stop`. Thread safe: one session's calls run one at a time, so
    steps from several threads are each counted.

    Attributes:
        windows: the saved :class:`Window` objects, in order.
        step_num: steps taken so far.
    """

    def __init__(self, *, schedule: Callable[[int], Action] | None = None,
                 on_trace_ready: Callable[[Window], Any] | None = None,
                 path: str | os.PathLike[str] = "pyprof_trace_{window}.json",
                 dnnl: bool | str | os.PathLike[str] = False, steady: bool = False,
                 record_shapes: bool = False, with_stack: bool = False, with_flops: bool = False,
                 **options: Any) -> None:
        self._serial, self._pid = threading.RLock(), os.getpid()  # _pid: start sets it again
        for key in options:
            if key in _RESERVED:
                raise rules.error("session.reserved_option", option=key, why=_RESERVED[key])
            if key not in config.keys():  # the nearest of the own options and recording keys
                raise config.unknown_option_error(key, [*profile.__init__.__kwdefaults__, *(
                    k for k in config.keys() if k not in _RESERVED)])
        self._options = config.validate(options)
        flags = config.flags(steady=steady, record_shapes=record_shapes, with_stack=with_stack,
                             with_flops=with_flops)  # session.not_boolean
        for option, fn in (("schedule", schedule), ("on_trace_ready", on_trace_ready)):
            if fn is not None and not callable(fn):  # the fix: errors.json api fn_<option>
                raise rules.error("session.not_callable", option=option, value=fn,
                                  expected=rules.CATALOGUE["api"][f"fn_{option}"]["python"])
        self._schedule = schedule if schedule is not None else (lambda step: DEFAULT_ACTION)
        self._on_trace_ready = on_trace_ready
        # a template (grammar.json window_path), filled per window, then made absolute against
        # the working directory of now (grammar.json paths)
        if not isinstance(path, (str, os.PathLike)) or not isinstance(os.fspath(path), str):
            raise rules.error("session.path_not_text", value=path)  # was a bare TypeError
        self._template = _template.parse(os.fspath(path))
        if (problem := _output.text_problem(os.fspath(path))) is not None:  # the JVM's order
            raise rules.error("session.bad_path", value=os.fspath(path), **problem)
        self._cwd = os.getcwd()
        self._path = self._window_path(window=0, step=0)  # the first window's file
        problem = _output.file_problem(self._path) or _output.replace_problem(self._path)
        if problem is not None:
            raise rules.error("session.bad_path", value=os.fspath(path), **problem)
        if schedule is not None and self._path == self._window_path(window=1, step=0) \
                and saves_many(schedule):  # no {window}, or one a ".." cancels: w_{window}/../w
            raise rules.error("session.path_needs_window", path=os.fspath(path))
        self.windows: list[Window] = []
        self.step_num = 0
        self._action = INITIAL_ACTION
        self._state = "new"  # new -> open -> closed
        self._running, self._claimed = False, None  # _claimed: the window path start claimed
        self._window: OpenWindow | None = None  # recording
        self._ended: EndedWindow | None = None  # stopped, not cut yet
        self._opened = 0  # windows opened so far
        self._stopped_us: int | None = None  # when the last "stop" operation stopped recording
        self._final, self._saved_now = False, []  # _saved_now: list[Window]
        self._exit_limit: int | None = None  # at exit: api.json raw_trace exit_max_bytes
        self._name = f"<pyprof.profile {id(self):#x}>"
        self._dnnl_log, self._dnnl = dnnl, None
        self._begin_steady, self._steady = flags.pop("steady"), False
        self._watchdog: _cap.Watchdog | None = None
        self._cap_paused = False  # the watchdog paused MXNet at the cap
        a = self._attribution = flags  # record_shapes, with_stack, with_flops
        self._recorder = None  # a pyprof.attribution.capture.Recorder when any option is on
        if any(a.values()):
            from ..attribution.capture import Recorder
            self._recorder = Recorder(shapes=a["record_shapes"] or a["with_flops"],
                                      stack=a["with_stack"])
        self._calls: dict[int, list] = {}  # window index -> its recorded calls, until it is cut
        self._bulk_noted = False  # the bulk segments' line (capture.bulk_note) said

    def _window_path(self, *, window: int, step: int) -> str:
        """The absolute path of the window ``window`` starting at step ``step``."""
        filled = self._template.fill(window=window, step=step, pid=os.getpid())
        return _output.absolute(os.path.join(self._cwd, filled))

    # -- public API --------------------------------------------------------------------------
    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def current_action(self) -> Action:
        return self._action

    @_serialised
    def start(self) -> None:
        """Take ownership of the profiler and begin step 0. A failed start (the schedule's
        first action, another session open, MXNet) leaves the profiler as it was."""
        if self._state != "new":
            raise rules.error("session.already_started", session=self._name)
        if self._dnnl_log and self._dnnl is None:
            from ..dnnl.capture import SessionCapture
            self._dnnl = SessionCapture(self._dnnl_log, self._path)  # StateError when too late
        _cap.max_bytes()  # a bad $PYPROF_RAW_MAX_BYTES fails here, before anything runs
        # what cuts (and annotates) windows, loaded now rather than in the first stop()
        from ..trace import rawcut  # noqa: F401
        if self._recorder is not None:
            from ..attribution import matching  # noqa: F401
        # dead processes' leftovers: waited for at most start_wait_seconds, outside the lock
        _leftovers.start_sweep(os.path.dirname(self._path))
        t = TRACKER
        with t.lock, self._dnnl_undone_on_error():
            if t.session is not None:
                raise rules.error("session.nested", session=t.session)
            with _claim.claiming_window_path(self._template, self._cwd) as self._claimed:
                if self._begin_steady and t.steady is None:
                    steady.begin_as(self._options, None, self._name)
                self._steady = t.steady is not None
                if self._steady:
                    steady.check_session(self._options, self._name)
                else:
                    with owner(self._name):
                        RAW.configure(self._options)
            t.session = self._name
            self._state, self._pid = "open", os.getpid()
        _open_sessions.add(self)
        self._watchdog = _cap.Watchdog(  # every watch_seconds, under TRACKER.lock
            lambda: self._state == "open" and self._enforce_cap(watchdog=True), TRACKER.lock)
        _rawfile.at_exit(_at_exit)  # (re)registered last, so it runs before mxnet's own atexit
        try:
            self._transition(self._action, self._action_for(0))
        except BaseException:
            # a failed start (the schedule's first action, MXNet) gives the profiler back and
            # leaves this session closed, as on the JVM
            with contextlib.suppress(Exception):
                self.stop()
            raise

    @contextlib.contextmanager
    def _dnnl_undone_on_error(self):
        try:
            yield
        except BaseException:
            if self._dnnl is not None:
                self._dnnl.stop()
                self._dnnl = None
            raise

    @_serialised
    def step(self) -> None:
        """Mark the end of one step; saves a window when its last active step ends."""
        if self._state != "open":
            raise rules.error("session.not_open", state=self._state)
        if self._pid != os.getpid():
            _capi.ensure_not_forked()  # the window is the parent's
        self.step_num += 1
        if self._window is not None and self._running:  # a step mark (stepmarks.py)
            self._window.steps.append((self.step_num, now_us()))
        with TRACKER.lock:
            self._enforce_cap(watchdog=False)
        self._transition(self._action, self._action_for(self.step_num))

    @_serialised
    def stop(self) -> None:
        """Stop recording, save an open window and give the profiler back. Idempotent. In a
        forked child (``sys.exit`` inside ``with pyprof.profile()``) it does nothing: the
        window, the profiler and the raw trace stay the parent's."""
        if self._state != "open" or self._pid != os.getpid():
            return
        try:
            self._transition(self._action, FINAL_ACTION, final=True)
        finally:
            self._state = "closed"
            _claim.release(self._claimed)
            _claim.release_window()  # a window not saved (one session at a time)
            for end in (self._watchdog and self._watchdog.stop, self._dnnl and self._dnnl.stop,
                        self._recorder and self._recorder.uninstall):
                if end:
                    end()
            _open_sessions.discard(self)
            with TRACKER.lock:
                if TRACKER.session == self._name:
                    TRACKER.session = None
                    _report_at_exit(RAW.release, f"could not delete the raw trace {RAW.path}")

    def stats(self, **options: Any):
        """Exact statistics of all saved windows together (:func:`pyprof.trace.stats`)."""
        if not self.windows:
            raise rules.error("session.no_window")
        from ..trace import stats
        return stats([w.path for w in self.windows], **options)

    # -- the cap of the raw trace (api.json raw_trace max_bytes, pyprof.session.cap) ----------
    def _enforce_cap(self, *, watchdog: bool) -> None:
        """At the cap (:func:`pyprof.session.cap.check`) MXNet is paused (any thread may:
        ``IsProfiling`` stays; queued operators then run unrecorded); a step also stops it."""
        if not self._running or RAW.path is None or (watchdog and self._cap_paused):
            return
        if _cap.check(RAW.size(), self._window, self.step_num) is None:
            return
        if not self._cap_paused:
            profiler.pause()
            self._cap_paused = True
        if not watchdog:
            if self._recorder is not None:
                self._recorder.pause()  # the window records nothing more
            with owner(self._name):
                self._running, self._cap_paused = False, False
                self._stopped_us = RAW.quiesce_paused() if self._steady else RAW.quiesce()

    # -- the schedule's transitions (pyprof/spec/schedule.json) --------------------------------
    def _action_for(self, step: int) -> Action:
        return check_action(self._schedule(step), step)

    def _transition(self, prev: Action, cur: Action, final: bool = False) -> None:
        """Move from ``prev`` (the last step's action) to ``cur`` (the next step's): perform
        the operations the transition table lists for the pair, in order.

        Profiler calls run as the session's owner; cutting a window's file and the
        ``on_trace_ready`` callback run outside (the callback gets no owner rights).
        """
        self._final = final
        self._saved_now = []
        for op in operations(prev, cur, steady=self._steady):
            if op == "save":
                self._save()
            else:
                with owner(self._name):
                    self._OPERATIONS[op](self)
        self._action = cur
        if self._on_trace_ready is not None:
            for window in self._saved_now:
                self._on_trace_ready(window)

    def _stop(self, quiesce: Callable[[], int] = RAW.quiesce) -> None:
        """Stop (steady mode's ``pause``: pause) recording; the open window ends here."""
        tail = None
        stopping = self._running
        if stopping:
            self._running, self._cap_paused = False, False
            w = self._window  # its cut begins while MXNet appends its last events
            if w is not None and self._exit_limit is None and RAW.path is not None:
                tail = _rawfile.follow(RAW.path, w.start, w.path,
                                       None if self._recorder is None else _held_cut())
        try:
            self._end_window(quiesce if stopping else None, tail)
        except BaseException:
            if tail is not None and (self._ended is None or self._ended.tail is not tail):
                tail.cancel()  # never ended: its thread and file go
            raise

    def _end_window(self, quiesce: Callable[..., int] | None, tail: Any) -> None:
        """:meth:`_stop` once its window's cut may have begun (``tail``)."""
        taken = None
        if quiesce is not None:
            if tail is not None and self._recorder is not None and self._window is not None:
                # a core is free (the cut follows MXNet's append): the recorder's calls are
                # taken on a thread while MXNet appends the window's last events
                taken = _Taken(self._recorder)
                try:
                    self._stopped_us = quiesce(taken.start)
                except BaseException:
                    taken.join()  # no thread outlives the stop; the stop's error stands
                    raise
            else:
                self._stopped_us = quiesce()
        if self._recorder is not None:
            self._recorder.pause()
        if self._window is not None:
            if self._recorder is not None:
                calls, full = taken.result() if taken is not None else self._recorder.take()
                self._calls[self._window.index] = calls
                if full:
                    print(rules.render(_ATTRIBUTION["max_calls_note"], {
                        "index": self._window.index, "path": self._window.path,
                        "calls": len(calls)}), file=sys.stderr)
            if self._ended is not None:  # a table that stops twice before saving
                self._save()
            last_step = self.step_num - (0 if self._final else 1)
            w = self._window
            self._ended = EndedWindow(w, RAW.size(), self._stopped_us or now_us(),
                                      max(w.first_step, last_step), tail)
            if tail is not None:
                e = self._ended
                tail.end_at(e.end, step_events(w.index, w.steps, e.last_step, e.end_us))
            self._window = None
            assert RAW.path is not None  # recovery reads the window's range only
            write_partial(w.path, RAW.path, w.start, w.index, w.start_us, end=self._ended.end)

    def _stop_at_exit(self) -> None:
        """Stop at exit: the windows written (an open one of more raw bytes than api.json
        ``raw_trace.exit_max_bytes`` left for ``pyprof recover``), one line on stderr for each
        window written now."""
        before = len(self.windows)
        self._exit_limit = int(_RAW_SPEC["exit_max_bytes"])
        self.stop()
        for w in self.windows[before:]:
            print(rules.render(_RAW_SPEC["exit_saved_note"],
                               {"index": w.index, "path": w.path, "events": w.events}),
                  file=sys.stderr)

    def _save(self) -> None:
        """Write the window that ended at the last ``stop``: its raw bytes, as a valid trace."""
        ended, self._ended = self._ended, None
        if ended is None:
            return
        w = ended.window
        limit = self._exit_limit
        if limit is not None and ended.end - w.start > limit:  # at exit, too large to cut
            if ended.tail is not None:
                ended.tail.cancel()
            RAW.leave_for_recovery(w.path)
            _claim.release_window(w.path)
            print(rules.render(_RAW_SPEC["exit_left_note"],
                               {"index": w.index, "bytes": ended.end - w.start, "limit": limit,
                                "raw": os.path.join(os.path.dirname(RAW.path or ""),
                                                    str(_RAW_SPEC["exit_kept_file"])),
                                "path": w.path}), file=sys.stderr)
            return
        calls = self._calls.pop(w.index, None)
        kept = None  # annotated: the cut held in memory, written once by the annotation
        if self._recorder is not None and calls is not None:
            kept = ended.tail.keep if ended.tail is not None else _held_cut()
        events = RAW.cut(w.start, ended.end, w.path,
                         step_events(w.index, w.steps, ended.last_step, ended.end_us), keep=kept,
                         tail=ended.tail)
        report = self._annotate(w.index, w.path, calls, kept)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(w.path + PARTIAL)
        _claim.release_window(w.path)  # written: free again, as a finished plain trace
        _claim.window_written(w.path)  # no later session of this process replaces it
        self._note_windows()
        window = Window(w.index, w.path, w.first_step, ended.last_step, events,
                        start_us=w.start_us, end_us=ended.end_us, truncated=w.truncated,
                        attribution=report)
        if self._dnnl is not None:
            self._dnnl.merge_window(window)
        self.windows.append(window)
        self._saved_now.append(window)
        if self._window is not None:  # the window recording now: its .partial gets the
            self._write_partial()      # metadata events of the range just cut

    def _annotate(self, index: int, path: str, calls: list | None, kept: Any = None):
        """Write the recorded calls' args onto their events in the window file just cut (or held
        in ``kept``); the window is kept as cut when that cannot be done (one line on stderr
        says why)."""
        if self._recorder is None or calls is None:
            return None
        from ..attribution.matching import annotate_window, bulk_note
        report = annotate_window(index, path, calls, self._attribution, recorder=self._recorder.kind,
                                 kept=kept)
        if not self._bulk_noted and (line := bulk_note(index, path, report)) is not None:
            self._bulk_noted = True  # once per session: every window of it runs in that mode
            print(line, file=sys.stderr)
        return report

    def _write_partial(self) -> None:
        w = self._window
        assert w is not None and RAW.path is not None
        write_partial(w.path, RAW.path, w.start, w.index, w.start_us)
        self._note_windows()

    def _note_windows(self) -> None:
        RAW.note_windows([w.path for w in (self._ended and self._ended.window, self._window)
                          if w is not None])

    def _open(self) -> None:
        """Open a window at the raw trace's current end (the profiler stopped, drained)."""
        if self._window is not None:
            return
        if self._running:  # only a transition table that opens while recording gets here
            self._OPERATIONS[STEADY_OPERATIONS["stop"] if self._steady else "stop"](self)
        if self._recorder is not None:
            self._recorder.discard()  # a warm-up's calls: their events are in no window
        if RAW.rotation_due():
            self._save()  # a window that ended but is not cut yet lives in the old raw file
            RAW.rotate()
        RAW.drain()
        start = RAW.size()
        ended = self._ended
        RAW.harvest(start, skip=(ended.window.start, ended.end) if ended else None)
        index = self._opened
        self._opened += 1
        path = _claim.claim_window(index, self._window_path(window=index, step=self.step_num))
        self._window = OpenWindow(index, start, self.step_num, path, now_us())
        self._write_partial()

    def _run(self) -> None:
        if self._window is not None and self._window.truncated:
            return  # stopped at the cap: the window's later steps record nothing
        if not self._running:
            if self._recorder is not None:
                self._recorder.resume()
            profiler.set_state("run")
            self._running = True

    def _resume(self) -> None:  # steady mode's "run"
        if not self._running:
            if self._recorder is not None:
                self._recorder.resume()
            profiler.resume()
            self._running = True

    _OPERATIONS: dict[str, Callable[[profile], None]] = {
        "stop": _stop, "open": _open, "run": _run, "resume": _resume,
        "pause": lambda self: self._stop(RAW.quiesce_paused)}

