"""Child interpreters forked from a warm one: ``run`` is ``subprocess.run([python, *argv])``
without paying ``import mxnet, pyprof`` (about 2.3 s of CPU) in every child.

A zygote is a Python that imported mxnet and pyprof and made no MXNet or profiler call; it forks
one child per request, the way a multiprocessing user's workers start (MXNet's fork handlers stop
and restart its engine; pyprof's leave a child that never used the profiler free to use it).
The child is a real process with its own pid, the caller's pipes as stdin/stdout/stderr, the
requested cwd, argv and environment; it runs the script as ``__main__`` and exits through the
interpreter's normal shutdown (threads joined, atexit run), so exit codes and signals read as
``subprocess.run`` gives them.

What would differ from a fresh interpreter is kept out: a zygote serves only children whose
environment agrees with its own on every variable MXNet, OpenMP, the JVM or pyprof may read at
import (``_SIGNATURE_PREFIXES``); a signature is given a zygote the second time it is asked for,
and a first request, or ``fresh=True`` (tests of import order, of first loads), runs a plain
``subprocess.run``. ``PYPROF_TEST_ZYGOTE=0`` turns zygotes off.

Per-operator mode (``PYPROF_PER_OPERATOR=1``) is applied at ``import pyprof`` and must come
before libmxnet loads: a zygote of that environment imports pyprof first, as the scripts that
ask for it do (``import pyprof, mxnet``), and its children get the variables pyprof set
(``MXNET_EXEC_BULK_*``, which MXNet also reads later: at bind, at autograd's first backward).
A script that imports mxnet before pyprof in that environment (a test of the late warning)
still needs ``fresh=True``.
"""

from __future__ import annotations

import builtins
import importlib
import json
import os
import atexit
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import types
from pathlib import Path
from typing import Any

_SIGNATURE_PREFIXES = ("MXNET_", "PYPROF_", "OMP_", "KMP_", "LD_", "PYTHON", "DMLC_", "JAVA",
                       "JDK_", "CLASSPATH", "CUDA", "OPENBLAS", "MKL", "TMPDIR", "LANG", "LC_")
#: variables no import reads: the script's own last lines (PYPROF_CHILD_RESULT), and pyprof's
#: that a call reads when it runs (the raw trace's directory and bounds, the claim directory,
#: the free-space check, the examples' result file, the JVM's classpath); a test that sets one
#: to a path of its own still forks from the zygote
_PER_CALL = {"PYPROF_CHILD_RESULT", "PYPROF_RAW_DIR", "PYPROF_RAW_MAX_BYTES", "PYPROF_RAW_ROTATE_BYTES",
             "PYPROF_KEEP_RAW", "PYPROF_RECOVER_WAIT_SECONDS", "PYPROF_RECOVER_MAX_BYTES",
             "PYPROF_CLAIM_DIR", "PYPROF_MIN_FREE_BYTES", "PYPROF_RESULT_JSON", "PYPROF_JVM_CLASSPATH"}
_MAX_ZYGOTES = 3
#: what the zygote's imports set in its environment (a fresh child's imports set it too)
_IMPORT_ENV: dict[str, str] = {}


def _signature(env: dict[str, str]) -> tuple:
    return tuple(sorted((k, v) for k, v in env.items()
                        if k.startswith(_SIGNATURE_PREFIXES) and k not in _PER_CALL))


# ------------------------------------------------------------------ the caller's side

class _Zygote:
    def __init__(self, env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair()
        self.status_dir = tempfile.mkdtemp(prefix="pyprof-zygote-")
        boot = (f"import sys; sys.path[0] = {str(Path(__file__).parent)!r}; import zygote; "
                f"zygote.main({theirs.fileno()}, {self.status_dir!r})")
        self.proc = subprocess.Popen([sys.executable, "-c", boot], env=env, cwd="/",
                                     pass_fds=[theirs.fileno()],
                                     stdin=subprocess.PIPE)  # EOF on stdin: the caller is gone
        theirs.close()
        self.sock, self.lock = ours, threading.Lock()
        self.waiting: dict[int, threading.Event] = {}

    def close(self) -> None:
        """End the zygote (its children run on) and remove its status directory."""
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.sock.close()
        shutil.rmtree(self.status_dir, ignore_errors=True)

    def start(self, request: dict[str, Any], fds: list[int]) -> int:
        with self.lock:  # one request on the wire at a time; replies come back in order
            socket.send_fds(self.sock, [json.dumps(request).encode()], fds)
            return json.loads(_read_line(self.sock))["pid"]


def _read_line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            raise RuntimeError("the zygote ended")
        data += chunk
    return data


_zygotes: dict[tuple, _Zygote] = {}
_asked: set[tuple] = set()
_guard = threading.Lock()
atexit.register(lambda: [z.close() for z in list(_zygotes.values())])


def _zygote_for(env: dict[str, str]) -> _Zygote | None:
    if os.environ.get("PYPROF_TEST_ZYGOTE", "1") == "0":
        return None
    sig = _signature(env)
    with _guard:
        z = _zygotes.get(sig)
        if z is not None and z.proc.poll() is None:
            return z
        if sig not in _asked:
            _asked.add(sig)
            return None
        if len(_zygotes) >= _MAX_ZYGOTES:  # the oldest goes (stdin's EOF ends it)
            _zygotes.pop(next(iter(_zygotes))).close()
        z = _zygotes[sig] = _Zygote(env)
        return z


def run(argv: list[str], *, cwd: str | os.PathLike, env: dict[str, str], timeout: float,
        fresh: bool = False) -> subprocess.CompletedProcess:
    """``subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True,
    text=True, timeout=timeout)``, from a zygote where one serves ``env``. ``argv`` is
    ``["-c", code, ...]``, ``["-m", module, ...]`` or ``[script, ...]``. Raises
    ``subprocess.TimeoutExpired`` (the child killed) as ``subprocess.run`` does."""
    z = None if fresh else _zygote_for(env)
    if z is None:
        return subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout)
    (in_r, in_w), (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe(), os.pipe()
    try:
        pid = z.start({"argv": argv, "cwd": str(cwd), "env": env}, [in_r, out_w, err_w])
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    os.close(in_w)
    out, err = [], []
    readers = [threading.Thread(target=lambda fd=fd, sink=sink: sink.append(_drain(fd)))
               for fd, sink in ((out_r, out), (err_r, err))]
    for t in readers:
        t.start()
    status = _wait(pid, timeout, z.status_dir)
    if status is None:
        os.kill(pid, signal.SIGKILL)
        _wait(pid, 30, z.status_dir)
    for t in readers:
        t.join()
    args = [sys.executable, *argv]
    if status is None:
        raise subprocess.TimeoutExpired(args, timeout, output=out[0], stderr=err[0])
    return subprocess.CompletedProcess(args, status, out[0], err[0])


def _drain(fd: int) -> str:
    with open(fd, "rb") as f:
        return f.read().decode("utf-8", "replace")


def _wait(pid: int, timeout: float, status_dir: str) -> int | None:
    """The exit code of the zygote's child ``pid`` (negative: the signal), or None after
    ``timeout`` s. Not our child: its end is seen through pidfd."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return _status_file(pid, status_dir)
    try:
        if not select.select([fd], [], [], timeout)[0]:
            return None
    finally:
        os.close(fd)
    return _status_file(pid, status_dir)


def _status_file(pid: int, status_dir: str) -> int:
    # The zygote writes a child's status once it has reaped it: wait for that.
    path = Path(status_dir, str(pid))
    for _ in range(3000):
        try:
            code = int(path.read_text())
            path.unlink()
            return code
        except (FileNotFoundError, ValueError):
            threading.Event().wait(0.01)
    raise RuntimeError(f"the zygote wrote no exit status for {pid}")


# ------------------------------------------------------------------ the zygote

def main(fd: int, status_dir: str) -> None:
    """The zygote's body (``fd``: its end of the caller's socket pair); in a forked child,
    it returns once the child has run its script as ``python ARGV`` would."""
    request = _serve(fd, Path(status_dir))
    if request is not None:
        _become(request)


def _serve(fd: int, status_dir: Path) -> dict[str, Any] | None:
    """Serve fork requests until the caller goes; in a forked child, return its request."""
    before = dict(os.environ)
    per_operator = os.environ.get("PYPROF_PER_OPERATOR", "").strip().lower() in ("1", "true", "yes", "on")
    for name in ("pyprof", "mxnet") if per_operator else ("mxnet", "pyprof"):
        importlib.import_module(name)  # the point: imported once, before any fork
    _IMPORT_ENV.update((k, v) for k, v in os.environ.items() if before.get(k) != v)
    sock = socket.socket(fileno=fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    while True:
        ready = select.select([sock, wake_r, sys.stdin], [], [])[0]
        if wake_r in ready:
            os.read(wake_r, 4096)
        while True:  # reap every ended child
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            tmp = status_dir / f".{pid}"
            tmp.write_text(str(os.waitstatus_to_exitcode(status)))
            tmp.rename(status_dir / str(pid))
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
            return None
        if sock in ready:
            msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
            if not msg:
                return None
            request = json.loads(msg)
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                sock.close()
                os.close(wake_r)
                os.close(wake_w)
                for target, source in enumerate(fds):
                    os.dup2(source, target)
                    os.close(source)
                return request
            for f in fds:
                os.close(f)
            sock.sendall(json.dumps({"pid": pid}).encode() + b"\n")


def _become(request: dict[str, Any]) -> None:
    """Turn this forked child into ``python ARGV`` in CWD with ENV."""
    import runpy

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ.update(_IMPORT_ENV)
    tempfile.tempdir = None
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    argv = request["argv"]
    if argv[0] == "-c":
        sys.argv, sys.path[0] = ["-c", *argv[2:]], ""
        module = types.ModuleType("__main__")
        module.__builtins__ = builtins
        sys.modules["__main__"] = module
        exec(compile(argv[1], "<string>", "exec"), module.__dict__)
    elif argv[0] == "-m":
        sys.argv, sys.path[0] = [argv[1], *argv[2:]], request["cwd"]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv, sys.path[0] = list(argv), str(Path(argv[0]).resolve().parent)
        runpy.run_path(argv[0], run_name="__main__")

