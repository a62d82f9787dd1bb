"""Record oneDNN's verbose lines without shell plumbing: ``pyprof run --dnnl`` and
``pyprof.profile(dnnl=True)``.

oneDNN prints its verbose lines on the process's standard output (``printf`` and ``fflush``
per line), among the program's own output. :class:`Splitter` takes that stream as it comes and
sends each verbose line to the log and every other byte, unchanged and in order, to the real
standard output: a line is held back only while it may still turn out to be a verbose line
(its bytes so far are a prefix of a marker), so prompts and progress bars pass at once.

When oneDNN reads its settings: oneDNN 2.4.4 (in the ``mxnet==1.9.1`` wheel) reads
``DNNL_VERBOSE`` and ``DNNL_VERBOSE_TIMESTAMP`` from the environment once, when the first
primitive is created or run, and keeps them for the life of the process. ``dnnl_set_verbose``
would change the level later, but libmxnet does not export it (``nm -D libmxnet.so``), so the
environment is the only switch: it must be set before the first primitive. How "too late" is
detected in-process (:func:`start_in_process`): if libmxnet is not loaded yet, nothing can have
read the variables, so setting them is enough. If it is loaded, a probe (a 1x1 convolution,
which MXNet runs through oneDNN) runs with standard output captured: when no verbose line comes
out, oneDNN has read the variables already (or MXNet runs without oneDNN) and the session
refuses with the fix; a line without timestamp gets a warning (statistics yes, timeline no).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import IO

from .. import rules
from .parse import MARKERS


_SYNC = b"\x00pyprof-dnnl-sync-"
_STOP = _SYNC + b"stop\n"  # ends the in-process pump: a forked child may keep the pipe open


def dnnl_environment(level: int = 1, timestamps: bool = True) -> dict[str, str]:
    """The variables that turn oneDNN's verbose output on: ``DNNL_VERBOSE`` (1: executions,
    2: creations too) and ``DNNL_VERBOSE_TIMESTAMP`` (start time of each line, for merging)."""
    return {"DNNL_VERBOSE": str(level), "DNNL_VERBOSE_TIMESTAMP": "1" if timestamps else "0"}


class Splitter:
    """Split a byte stream: verbose lines to ``log``, everything else to ``out`` (a file
    descriptor), streaming. Call :meth:`feed` with each chunk as read, :meth:`close` at the end.

    Attributes:
        verbose_lines: verbose lines written to the log; ``stamped``: of them, lines with a
            timestamp; ``syncs``: sync markers seen (in-process capture).
    """

    def __init__(self, out: int, log: IO[bytes]) -> None:
        self.out = out
        self.log = log
        self.verbose_lines = 0
        self.stamped = 0
        self.syncs = 0
        self.stopped = False  # the stop token came: the pump ends (in-process capture)
        self._pending = b""

    def _write(self, data: bytes) -> None:
        if self.out is None:
            return
        view = memoryview(data)
        try:
            while view:
                n = os.write(self.out, view)
                view = view[n:]
        except OSError:  # the reader of our stdout left (`| head`): keep splitting into the log,
            self.out = None  # so that the program's writes never block on a full pipe

    def _line(self, line: bytes) -> None:
        at = -1
        for marker in MARKERS:
            at = line.find(marker)
            if at >= 0:
                break
        if at < 0:
            if line.startswith(_SYNC):
                if line == _STOP:
                    self.stopped = True
                else:
                    self.syncs += 1
                return
            self._write(line)
            return
        if at:
            self._write(line[:at])  # the program's partial line before oneDNN's
        rest = line[at:]
        self.log.write(rest)
        self.verbose_lines += 1
        if rest[rest.index(b",") + 1:][:1].isdigit():
            self.stamped += 1

    def feed(self, chunk: bytes) -> None:
        data = self._pending + chunk
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                break
            self._line(data[start:nl + 1])
            start = nl + 1
        tail = data[start:]
        keep = _marker_prefix(tail)
        if keep < len(tail):
            if any(m in tail for m in MARKERS) or tail.startswith(_SYNC[:len(tail)]):
                keep = len(tail)  # a verbose (or sync) line under way: wait for its end
            else:
                self._write(tail[:len(tail) - keep])
                tail = tail[len(tail) - keep:]
        self._pending = tail

    def close(self) -> None:
        if self._pending:
            self._line(self._pending)
            self._pending = b""
        self.log.flush()


def _marker_prefix(tail: bytes) -> int:
    """Length of the longest end of ``tail`` that starts a marker (or the sync marker)."""
    for n in range(min(len(tail), 20), 0, -1):
        end = tail[-n:]
        if any(m.startswith(end) for m in MARKERS) or _SYNC.startswith(end):
            return n
    return 0


def _pump(src: int, splitter: Splitter) -> None:
    while not splitter.stopped:
        try:
            chunk = os.read(src, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        splitter.feed(chunk)
    splitter.close()


_SITE = '''\
import os, sys
_here = os.path.dirname(os.path.abspath(__file__))
try:
    _claim = os.open(os.path.join(_here, "claimed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
except OSError:
    _claim = None  # another process of the command (a child of it) records the trace
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
import importlib.machinery, importlib.util
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
if _spec is not None and _spec.loader is not None:  # the one this one hides runs too
    _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
if _claim is not None:
    os.close(_claim)
    import pyprof  # PYPROF_AUTOSTART: starts the profiler, finishes the trace at exit
else:
    os.environ.pop("PYPROF_AUTOSTART", None)
'''


def run(argv: Sequence[str], log: str | os.PathLike[str], *, trace: str | None = None,
        level: int = 1, env: Mapping[str, str] | None = None) -> tuple[int, Splitter]:
    """Run ``argv`` with oneDNN's verbose output on; its verbose lines go to ``log``, the rest
    of its standard output to this process's, unchanged (standard error is not touched).

    With ``trace``, the first Python process of the command records an MXNet trace there
    (pyprof's ``PYPROF_AUTOSTART``, mode ``symbolic,imperative``, through a ``sitecustomize``
    put first on ``PYTHONPATH``; an existing ``sitecustomize`` still runs), finished at its exit.

    Ctrl+C (SIGINT, which a terminal sends to the child too): called in the main thread, this
    process ignores it while the command runs, keeps passing its output on until it exits,
    and returns its status (the child's own pyprof finishes its trace at exit).

    Returns:
        ``(exit status, splitter)``: the child's exit status (negative: killed by that signal)
        and the :class:`Splitter` with the line counts.

    Raises:
        TraceError: ``trace.bad_output`` for ``log`` or ``trace``, checked before the command
            starts.
    """
    from ..trace.writer import check_output  # the trace tools load only for `pyprof run`

    check_output(log, example="dnnl.log")
    if trace is not None:
        check_output(trace, example="profile.json")
    child_env = dict(os.environ if env is None else env)
    child_env.update(dnnl_environment(level))
    site_dir = None
    if trace is not None:
        site_dir = tempfile.mkdtemp(prefix="pyprof-dnnl-")
        with open(os.path.join(site_dir, "sitecustomize.py"), "w") as f:
            f.write(_SITE)
        child_env["PYTHONPATH"] = os.pathsep.join(
            [site_dir] + [p for p in [child_env.get("PYTHONPATH", "")] if p])
        child_env.update(PYPROF_AUTOSTART="1", PYPROF_FILENAME=os.path.abspath(trace))
        child_env.setdefault("PYPROF_MODE", "symbolic,imperative")
    sys.stdout.flush()
    # A handler, not SIG_IGN: the child would inherit SIG_IGN; a handler is reset by exec.
    # It returns, so os.read and wait resume (PEP 475) and the child decides when to stop.
    child: list[subprocess.Popen[bytes]] = []
    interrupts = [0]

    def forward(signum: int, frame: object) -> None:
        # The first SIGINT came from the terminal to the command too: the command decides.
        # A second one, or SIGTERM (sent to us alone), is passed on, so we are never stuck.
        interrupts[0] += signum == signal.SIGINT
        if child and (signum != signal.SIGINT or interrupts[0] > 1):
            child[0].send_signal(signum)

    main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)} \
        if main else {}
    try:
        with open(log, "wb") as log_file:
            splitter = Splitter(sys.stdout.fileno(), log_file)
            proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, env=child_env)
            child.append(proc)
            assert proc.stdout is not None
            try:
                _pump(proc.stdout.fileno(), splitter)
            finally:
                proc.stdout.close()
                code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if site_dir is not None:
            shutil.rmtree(site_dir, ignore_errors=True)
    return code, splitter


class InProcessCapture:
    """This process's standard output (file descriptor 1) through a :class:`Splitter` thread:
    verbose lines to ``log``, the rest to the original standard output. :meth:`sync` waits until
    everything written so far has been split; :meth:`stop` restores file descriptor 1."""

    def __init__(self, log: str) -> None:
        self.log = log
        self._log_file = open(log, "wb")  # noqa: SIM115 - closed by stop()
        sys.stdout.flush()
        self._saved = os.dup(1)
        read, write = os.pipe()
        self.splitter = Splitter(self._saved, self._log_file)
        os.dup2(write, 1)
        self._write = write  # kept: stop() ends the pump with a token, not by EOF
        self._read = read
        self._syncs = 0
        self._thread = threading.Thread(target=_pump, args=(read, self.splitter),
                                        name="pyprof-dnnl-capture", daemon=True)
        self._thread.start()

    def sync(self, timeout: float = 10.0) -> bool:
        """Wait until the lines written to standard output before this call are split; False
        when that took longer than ``timeout`` seconds."""
        sys.stdout.flush()
        self._syncs += 1
        os.write(1, _SYNC + str(self._syncs).encode() + b"\n")
        deadline = time.monotonic() + timeout
        while self.splitter.syncs < self._syncs and time.monotonic() < deadline:
            time.sleep(0.002)
        self._log_file.flush()
        return self.splitter.syncs >= self._syncs

    def stop(self) -> None:
        """Split what is left, restore standard output, close the log. Idempotent."""
        if self._thread is None:
            return
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        os.dup2(self._saved, 1)
        # A token after everything written so far ends the pump; EOF would not come while a
        # forked child (a DataLoader worker) still holds the pipe.
        os.write(self._write, _STOP)
        thread, self._thread = self._thread, None  # type: ignore[assignment]
        thread.join(timeout=10)
        if thread.is_alive():  # stuck writing to our real stdout: leave it its descriptors
            return
        for fd in (self._saved, self._read, self._write):
            os.close(fd)
        self._log_file.close()


def _probe() -> None:
    import mxnet as mx  # libmxnet is loaded already (checked by the caller)

    one = mx.nd.ones((1, 1, 1, 1))
    mx.nd.Convolution(one, one, no_bias=True, kernel=(1, 1), num_filter=1).wait_to_read()


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def start_in_process(log: str, *, level: int = 1) -> InProcessCapture:
    """Turn oneDNN's verbose output on in this process and capture it into ``log``.

    Raises:
        StateError: too late: oneDNN already read its settings (see the module docstring);
            standard output is restored and nothing is left changed but the two variables.
    """
    from .. import env as _env

    os.environ.update(dnnl_environment(level))
    loaded = _env.libmxnet_loaded()
    capture = InProcessCapture(log)
    if not loaded:
        return capture
    try:
        _probe()
    except Exception as exc:  # noqa: BLE001 - any failure means no oneDNN line can be had
        capture.stop()
        _remove(log)
        raise rules.error("dnnl.too_late", why=f"a probe convolution failed ({exc})") from None
    if not capture.sync():
        capture.stop()
        _remove(log)
        raise rules.error("dnnl.too_late", why="the probe's output was not split within 10 s")
    if not capture.splitter.verbose_lines:
        capture.stop()
        _remove(log)
        raise rules.error(
            "dnnl.too_late",
            why="libmxnet is loaded and a probe convolution printed no verbose line, so oneDNN "
                "already read DNNL_VERBOSE (unset or 0) at its first primitive, or MXNet runs "
                "without oneDNN (MXNET_ONEDNN_ENABLED=0)")
    if not capture.splitter.stamped:
        warnings.warn("pyprof: oneDNN's verbose lines carry no timestamp in this process "
                      "(DNNL_VERBOSE_TIMESTAMP was read before it was set), so the primitives "
                      "cannot be placed on the trace; the statistics still work. fix: set "
                      "DNNL_VERBOSE_TIMESTAMP=1 before the first operator, or use pyprof run "
                      "--dnnl", stacklevel=3)
    # the probe's convolution is not the program's: start the log after it
    capture.splitter.log.seek(0)
    capture.splitter.log.truncate()
    capture.splitter.verbose_lines = capture.splitter.stamped = 0
    return capture


class SessionCapture:
    """``pyprof.profile(dnnl=...)``: capture for the session's life, merge into each window.

    Args:
        log: ``True`` (the log is ``pyprof_dnnl_<pid>.log`` beside the windows) or a path.
        window_path: the session's window path template (its directory is used).

    Raises:
        StateError: too late (:func:`start_in_process`).
    """

    def __init__(self, log: bool | str | os.PathLike[str], window_path: str) -> None:
        self.log = (os.path.join(os.path.dirname(window_path), f"pyprof_dnnl_{os.getpid()}.log")
                    if log is True else os.path.abspath(os.fspath(log)))
        self.capture = start_in_process(self.log)
        self.results: list[object] = []

    def merge_window(self, window: object) -> None:
        """Put the primitives that started during ``window`` into its trace file (in place)."""
        from .merge import merge

        self.capture.sync()
        if not self.capture.splitter.stamped:
            return
        path = getattr(window, "path")
        try:
            self.results.append(merge(self.log, path, path, progress=False, time_range=(
                getattr(window, "start_us"), getattr(window, "end_us"))))
        except Exception as exc:  # noqa: BLE001 - the window is saved; say why it has no primitives
            warnings.warn(f"pyprof: oneDNN primitives not merged into {path}: {exc}", stacklevel=2)

    def stop(self) -> None:
        self.capture.stop()
