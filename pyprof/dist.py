"""Distributed training: profile kvstore servers and workers, and see them on one timeline.

In MXNet's parameter-server mode a *worker* process configures and drives its servers'
profilers through the distributed kvstore: ``set_config``/``set_state``/``dump`` with
``profile_process='server'`` travel to every server, each of which writes
``rank<r>_<basename>`` in its own working directory (:func:`server_trace_path`; observed with
1.9.1). pyprof's functions find the kvstore that ``mx.kv.create('dist_*')`` registered, as
``mxnet.profiler``'s do. Issue the server calls from one worker (rank 0).

Typical worker code::

    kv = mx.kv.create("dist_sync")
    with pyprof.dist.server_profiling(kv, filename="server.json", profile_all=True):
        train(kv)
    # then, anywhere: pyprof.dist.merge({"server 0": "rank0_server.json",
    #                                    "worker 0": "worker0.json", ...}, "cluster.json")

:func:`launch_local` starts a scheduler, servers and workers on 127.0.0.1 (the ``DMLC_*``
variables MXNet's own ``tools/launch.py`` sets for a local cluster), with a time limit, and
kills every process it started when it returns or fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from . import profiler, rules


ROLES = ("scheduler", "server", "worker")


def role(environ: Mapping[str, str] | None = None) -> str | None:
    """This process's role in a parameter-server job (``DMLC_ROLE``), or None outside one."""
    value = (os.environ if environ is None else environ).get("DMLC_ROLE")
    return value if value in ROLES else None


def server_trace_path(filename: str | os.PathLike[str], rank: int = 0) -> str:
    """The file server ``rank`` writes for ``filename`` (relative to the server's directory)."""
    head, tail = os.path.split(os.fspath(filename))
    return os.path.join(head, f"rank{rank}_{tail}")


def _attach(kv: Any) -> None:
    kv_type = getattr(kv, "type", "")
    if not str(kv_type).startswith("dist"):
        raise rules.error("dist.needs_kvstore", kv_type=kv_type or type(kv).__name__)
    profiler.set_kvstore_handle(kv.handle)


@contextlib.contextmanager
def server_profiling(kv: Any, *, filename: str = "server.json", **options: Any) -> Iterator[None]:
    """Profile every kvstore server of ``kv`` for the duration of the block.

    Configures (``options`` as in ``pyprof.profiler.set_config``), runs, and on exit (also when
    the block raises) stops and dumps the servers' traces, finished: each server then holds a
    valid ``rank<r>_<filename>`` (see :func:`server_trace_path`). Call from one worker.
    """
    _attach(kv)
    profiler.set_config(filename=filename, profile_process="server", **options)
    profiler.set_state("run", profile_process="server")
    try:
        yield
    finally:
        profiler.set_state("stop", profile_process="server")
        profiler.dump(True, profile_process="server")


@dataclasses.dataclass(frozen=True)
class ProcessResult:
    """One process of a local cluster: its role, launch index, exit status and output."""

    role: str
    index: int
    returncode: int | None
    stdout: str
    stderr: str


@dataclasses.dataclass(frozen=True)
class Cluster:
    """What :func:`launch_local` ran. ``ok``: every process exited 0."""

    port: int
    processes: list[ProcessResult]

    @property
    def ok(self) -> bool:
        return all(p.returncode == 0 for p in self.processes)

    def by_role(self, role: str) -> list[ProcessResult]:
        return [p for p in self.processes if p.role == role]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_local(worker: Sequence[str], *, num_workers: int = 2, num_servers: int = 1,
                 timeout: float = 120, cwd: str | os.PathLike[str] | None = None,
                 env: Mapping[str, str] | None = None,
                 server: Sequence[str] | None = None) -> Cluster:
    """Run a parameter-server job on 127.0.0.1: a scheduler, servers and workers.

    Args:
        worker: the worker command (argv), e.g. ``[sys.executable, "train.py"]``.
        num_workers, num_servers: how many of each.
        timeout: seconds for the whole job; then every process is killed and PyprofError raised.
        cwd: working directory of every process (servers write their traces there).
        env: extra environment for every process.
        server: the scheduler/server command; default ``python -c "import mxnet"`` (importing
            mxnet with ``DMLC_ROLE=server`` or ``scheduler`` runs the server loop).

    Returns:
        :class:`Cluster` with each process's exit status and output, once all have exited, or
        as soon as one fails (the others are then killed: they would wait for it for ever).
        Every process still running is killed (its whole process group) before this returns.

    Raises:
        PyprofError: the time limit passed (with each process's last stderr lines).
    """
    port = _free_port()
    base = dict(os.environ)
    base.update(env or {})
    base.update({
        "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": str(port),
        "DMLC_NODE_HOST": "127.0.0.1", "DMLC_INTERFACE": "lo",
        "DMLC_NUM_SERVER": str(num_servers), "DMLC_NUM_WORKER": str(num_workers),
    })
    serve = list(server or [sys.executable, "-c", "import mxnet"])
    plan = [("scheduler", 0, serve)] + [("server", i, serve) for i in range(num_servers)] + \
           [("worker", i, list(worker)) for i in range(num_workers)]
    procs: list[tuple[str, int, subprocess.Popen, Any, Any]] = []
    deadline = time.monotonic() + timeout
    try:
        for role_name, index, argv in plan:
            penv = dict(base, DMLC_ROLE=role_name, PYPROF_DIST_INDEX=str(index))
            # Output goes to files: a full pipe would block a process while we wait on another.
            out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
            procs.append((role_name, index, subprocess.Popen(
                argv, cwd=cwd, env=penv, stdout=out, stderr=err, text=True,
                start_new_session=True), out, err))
        # Poll: a process that fails leaves the others waiting for it for ever, so stop them.
        while True:
            codes = [p.poll() for _, _, p, _, _ in procs]  # poll every one (no short cut)
            if None not in codes:
                break
            if any(rc not in (None, 0) for rc in codes):
                _kill_all([p for _, _, p, _, _ in procs])
                break
            if time.monotonic() > deadline:
                running = [f"{r} {i}" for r, i, p, _, _ in procs if p.poll() is None]
                _kill_all([p for _, _, p, _, _ in procs])
                tails = "".join(f"\n--- {r} {i} (rc {p.returncode}) stderr:\n{_text(e)[-1500:]}"
                                for r, i, p, _, e in procs)
                raise rules.error("dist.cluster_timeout", timeout=f"{timeout:g}",
                                  running=", ".join(running), port=port, tails=tails)
            time.sleep(0.05)
        return Cluster(port, [ProcessResult(r, i, p.returncode, _text(o), _text(e))
                              for r, i, p, o, e in procs])
    finally:
        _kill_all([p for _, _, p, _, _ in procs])
        for *_, o, e in procs:
            o.close()
            e.close()


def _text(f: Any) -> str:
    f.seek(0)
    return f.read()


def _kill_all(procs: Sequence[subprocess.Popen]) -> None:
    """SIGKILL the group of each process still running (it may have children), then reap it.

    A process already reaped is left alone: its id may belong to someone else by now.
    """
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=10)


def merge(traces: Mapping[str, str | os.PathLike[str]], out: str | os.PathLike[str],
          **options: Any):
    """Merge per-process traces into one timeline, labelled by role and rank.

    ``traces`` maps a label (``"server 0"``, ``"worker 1"``) to a trace file. Uses
    :func:`pyprof.trace.merge`: each input's process rows become ``"<label>: <device>"`` and stay
    together; all ``ts`` share the host clock. Returns its :class:`~pyprof.trace.MergeResult`.
    """
    from .trace import merge as trace_merge
    return trace_merge(list(traces.values()), out, labels=list(traces), **options)
