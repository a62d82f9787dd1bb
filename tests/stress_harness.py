"""Concurrency stress cases: worker threads busy in MXNet while another thread switches API
profiling on and off, each case in many child processes, counting aborts and hangs.

Cases (8 worker threads, ``profile_api`` on):

* ``py-py``   Python threads in ``mx.nd``, toggled by ``pyprof.profiler`` from Python;
* ``jvm-jvm`` a plain JVM: JVM threads in NDArray work from the first call (nothing has loaded
  libmxnet yet when another thread configures the profiler), toggled by the JVM layer;
* ``py-jvm``  Python threads in ``mx.nd``, toggled by the JVM layer on a JVM thread (bridge);
* ``jvm-py``  JVM threads in NDArray work (bridge), toggled by ``pyprof.profiler`` from Python.

``tests/test_stress.py`` runs a few trials of each; ``bench/bench_stress.py`` is the long mode.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from child import FAST_JVM

ROOT = Path(__file__).resolve().parent.parent
CASES = ("py-py", "jvm-jvm", "py-jvm", "jvm-py")

_PY_CHILD = r"""
import json, sys, threading, time
case, toggles, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
import pyprof
from pyprof import profiler
import mxnet as mx

stop = threading.Event()
ops = [0] * 8

def work(i):
    a = mx.nd.ones((4, 4))
    while not stop.is_set():
        (a + i).wait_to_read()
        ops[i] += 1

config = dict(profile_api=True, profile_imperative=True, filename=path, continuous_dump=False)
if case == "jvm-py":
    from pyprof import jvm
    jvm.call("pyprof.stress-child", "start-workers!", 8)
    deadline = time.monotonic() + 60  # switch while they are busy, not while they start
    while jvm.call("pyprof.stress-child", "ops-made") < 16 and time.monotonic() < deadline:
        time.sleep(0.01)
else:
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
if case == "py-jvm":
    from pyprof import jvm
    jvm.call("pyprof.profiler", "profiler-set-config",
             {k.replace("_", "-"): v for k, v in config.items()})
    jvm.call("pyprof.stress-child", "toggle!", toggles, 2)
else:
    profiler.set_config(**config)
    for _ in range(toggles):
        profiler.set_state("run")
        time.sleep(0.002)
        profiler.set_state("stop")
        time.sleep(0.002)
if case == "jvm-py":
    total = jvm.call("pyprof.stress-child", "stop-workers!")
else:
    stop.set()
    for t in threads:
        t.join()
    total = sum(ops)
profiler.dump()
if "jvm" in case:
    jvm.eval_clojure("(shutdown-agents)")
print(json.dumps({"ops": total, "toggles": toggles}))
"""


@dataclass
class Tally:
    """What the trials of one case did."""

    case: str
    trials: int = 0
    toggles: int = 0
    aborts: int = 0
    hangs: int = 0
    failures: int = 0  # exited non-zero without a signal, or printed no summary
    ops: int = 0
    api_events: int = 0  # C API events in the traces: API profiling really switched on
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def row(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "problems"}


def _command(case: str, toggles: int, trace: Path) -> list[str]:
    if case == "jvm-jvm":
        # The JVM finds libmxnet itself (the repository's .venv), as `lein run` does.
        from pyprof import jvm

        form = (f'(require (quote pyprof.stress-child)) '
                f'(pyprof.stress-child/jvm-jvm "{trace}" {toggles})')
        return ["java", *FAST_JVM, "-cp", os.pathsep.join(jvm.classpath()), "clojure.main", "-e", form]
    return [sys.executable, "-c", _PY_CHILD, case, str(toggles), str(trace)]


def run_child(cmd: list[str], cwd: Path, timeout: float,
              env: dict[str, str] | None = None) -> tuple[str, str, str]:
    """One child process in its own session (killed whole when it hangs), the repository on
    its PYTHONPATH: ('ok', its last line starting with '{', '') or ('abort' | 'hang' |
    'failure', '', detail). An abort is a signal or rc 134 (SIGABRT through a shell)."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "hang", "", f"no exit after {timeout:g} s"
    rc = proc.returncode
    if rc < 0 or rc == 134:
        return "abort", "", f"rc {rc}: {err.strip()[-600:]}"
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if rc != 0 or not lines:
        return "failure", "", f"rc {rc}: {err.strip()[-800:]}"
    return "ok", lines[-1], ""


def _trial(case: str, toggles: int, timeout: float, workdir: Path) -> tuple[str, dict, str]:
    """One child process: ('ok' | 'abort' | 'hang' | 'failure', summary, detail)."""
    trace = Path(tempfile.mkdtemp(dir=workdir)) / "trace.json"
    outcome, line, detail = run_child(_command(case, toggles, trace), trace.parent, timeout)
    if outcome != "ok":
        return outcome, {}, detail
    summary = json.loads(line) if case != "jvm-jvm" else _edn(line)
    summary["api_events"] = _api_events(trace)
    return "ok", summary, ""


def _edn(line: str) -> dict:
    """{:ops 12 :toggles 20} -> {"ops": 12, "toggles": 20} (the JVM child's summary)."""
    parts = line.strip("{}").replace(",", " ").split()
    return {parts[i].lstrip(":"): int(parts[i + 1]) for i in range(0, len(parts), 2)}


def _api_events(trace: Path) -> int:
    with open(trace, "rb") as f:
        events = json.load(f)["traceEvents"]
    return sum(1 for e in events if e.get("cat") == "MXNET_C_API")


def run_case(case: str, *, trials: int, toggles: int = 20, timeout: float = 180,
             parallel: int = 2, workdir: Path | None = None) -> Tally:
    """Run ``trials`` child processes of ``case`` and tally what they did."""
    tally = Tally(case)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(dir=workdir) as tmp, \
            ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [pool.submit(_trial, case, toggles, timeout, Path(tmp)) for _ in range(trials)]
        for fut in futures:
            outcome, summary, detail = fut.result()
            tally.trials += 1
            if outcome == "ok":
                tally.toggles += summary["toggles"]
                tally.ops += summary["ops"]
                tally.api_events += summary["api_events"]
            else:
                attr = {"abort": "aborts", "hang": "hangs"}.get(outcome, "failures")
                setattr(tally, attr, getattr(tally, attr) + 1)
                tally.problems.append(f"{outcome}: {detail}")
    tally.seconds = round(time.monotonic() - start, 1)
    return tally
