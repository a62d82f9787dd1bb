"""Foreign bindings under steady mode: threads that call libmxnet through a binding of their
own (not pyprof's gated calls), while the main thread takes windows with ``profile_api`` on;
each case in several child processes, counting aborts and hangs, and checking that each
window holds only its own window's events.

Cases (8 foreign threads creating and freeing NDArrays: ``MXNDArrayCreateEx`` then
``MXNDArrayFree`` in a loop):

* ``py-session``  Python threads through their own ``ctypes.CDLL(library_path())``; windows
  by a ``pyprof.profile(steady=True)`` session (schedule: 1 idle step, 1 active, repeated);
* ``py-manual``   the same threads; steady mode by ``pyprof.steady.begin(filename=...)``,
  windows by ``pyprof.resume()``/``pause()`` (one trace file, a marker per window);
* ``py-hazard``   the same workload through a plain session (stop/run, no steady mode): the
  hazard steady mode removes (a demonstration: it aborts);
* ``jvm-session`` a plain JVM: Java threads through the test's own JNA ``Library`` of
  libmxnet (as DJL declares one); windows by a steady ``pyprof.jvm.ProfilerSession``;
* ``jvm-jmx``     the same threads; windows through the JMX bean
  (``pyprof.jvm.ProfilerControl``), steady mode from ``-Dpyprof.steady=true``;
* ``jvm-hazard``  the same threads through a plain ProfilerSession (stop/run): the hazard.

In every window the main thread sets a marker ``window-<n>``; a window passes when the
markers it holds are exactly its own. ``tests/test_steady_foreign.py`` runs a few processes per
case; ``FOREIGN_LONG=1`` (or ``bench/bench_foreign.py``) is the long mode.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from child import FAST_JVM
from stress_harness import run_child

ROOT = Path(__file__).resolve().parent.parent
CASES = ("py-session", "py-manual", "py-hazard", "jvm-session", "jvm-jmx", "jvm-hazard")
THREADS = 8

_PY_CHILD = r"""
import ctypes, json, os, sys, threading, time
case, windows, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
import pyprof
from pyprof.native import capi

lib = ctypes.CDLL(capi.library_path())  # the program's own binding: pyprof does not gate it
lib.MXNDArrayCreateEx.argtypes = [ctypes.POINTER(ctypes.c_uint32), ctypes.c_uint32,
                                  ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                  ctypes.POINTER(ctypes.c_void_p)]
lib.MXNDArrayFree.argtypes = [ctypes.c_void_p]
stop = threading.Event()
calls = [0] * %(threads)d

def work(i):
    shape = (ctypes.c_uint32 * 2)(4, 4)
    h = ctypes.c_void_p()
    while not stop.is_set():
        for _ in range(5):  # bursts, so that windows stay small enough to cut fast
            assert lib.MXNDArrayCreateEx(shape, 2, 1, 0, 0, 0, ctypes.byref(h)) == 0
            assert lib.MXNDArrayFree(h) == 0
        calls[i] += 5
        time.sleep(0.002)

switched = [0, False]  # state switches made while the threads ran; whether they run
real_set_state = pyprof.profiler.set_state
def counting_set_state(*args, **kwargs):
    switched[0] += switched[1]
    return real_set_state(*args, **kwargs)
pyprof.profiler.set_state = counting_set_state  # sessions call it through the module

options = dict(profile_api=True, profile_imperative=True)
domain = pyprof.Domain("steady-test")
threads = [threading.Thread(target=work, args=(i,)) for i in range(%(threads)d)]
if case == "py-manual":
    pyprof.steady.begin(filename=os.path.join(out, "manual.json"), **options)
else:
    prof = pyprof.profile(schedule=pyprof.schedule(wait=1, active=1, repeat=windows),
                          path=os.path.join(out, "w_{window}.json"),
                          steady=(case == "py-session"), **options)
    prof.start()  # steady: the profiler runs from here, before the threads start
switched[1] = True
for t in threads:
    t.start()
time.sleep(0.02)
for w in range(windows):
    if case == "py-manual":
        time.sleep(0.003)
        pyprof.resume()
        pyprof.Marker(domain, f"window-{w}").mark()
        time.sleep(0.005)
        pyprof.pause()
    else:
        prof.step()  # the idle step ends: the window opens (resume)
        pyprof.Marker(domain, f"window-{w}").mark()
        time.sleep(0.005)
        prof.step()  # the active step ends: the window is saved (pause)
if case != "py-manual":
    prof.stop()
stop.set()
for t in threads:
    t.join()
switched[1] = False
pyprof.steady.end()  # the threads have ended: stop (and finish manual.json)
print(json.dumps({"calls": sum(calls), "windows": windows, "switches": switched[0]}))
"""

_JVM_FORM = '(require (quote pyprof.steady-child)) (pyprof.steady-child/run "%s" "%s" %d %d)'


@dataclass
class Tally:
    """What the processes of one case did."""

    case: str
    processes: int = 0
    windows: int = 0
    aborts: int = 0
    hangs: int = 0
    failures: int = 0  # exited non-zero without a signal, or printed no summary
    bad_windows: int = 0  # a window holding another window's marker, or missing its own
    switches: int = 0  # state switches made while the foreign threads ran (steady: 0)
    calls: int = 0  # foreign create/free pairs made
    api_events: int = 0  # C API events of the foreign calls in the windows
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def row(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "problems"}


def _command(case: str, windows: int, out: Path) -> list[str]:
    if case.startswith("jvm"):
        sys.path.insert(0, str(ROOT))
        from pyprof import jvm

        props = ([f"-Dpyprof.outputRoot={out}"]
                 + (["-Dpyprof.steady=true"] if case == "jvm-jmx" else []))
        form = _JVM_FORM % (case, out, windows, THREADS)
        return ["java", *FAST_JVM, *props, "-cp", os.pathsep.join(jvm.classpath()), "clojure.main",
                "-e", form]
    return [sys.executable, "-c", _PY_CHILD % {"threads": THREADS}, case, str(windows), str(out)]


def _windows(case: str, out: Path, windows: int) -> tuple[int, int, list[str]]:
    """(bad windows, API events of the foreign calls, problems) of the traces in ``out``."""
    bad, api, problems = 0, 0, []
    if case == "py-manual":  # one file: the markers in order, one per window
        events = json.loads((out / "manual.json").read_text())["traceEvents"]
        marks = [e["name"] for e in events if str(e.get("name")).startswith("window-")]
        want = [f"window-{w}" for w in range(windows)]
        if marks != want:
            bad, problems = 1, [f"markers {marks[:5]}... want {want[:5]}..."]
        api = sum(1 for e in events if e.get("cat") == "MXNET_C_API"
                  and "NDArrayCreate" in str(e.get("name")))
        return bad, api, problems
    for w in range(windows):
        path = out / f"w_{w}.json"
        if not path.exists():
            bad += 1
            problems.append(f"window {w}: no file")
            continue
        events = json.loads(path.read_text())["traceEvents"]
        marks = sorted({e["name"] for e in events if str(e.get("name")).startswith("window-")})
        if marks != [f"window-{w}"]:
            bad += 1
            problems.append(f"window {w}: markers {marks}")
        api += sum(1 for e in events if e.get("cat") == "MXNET_C_API"
                   and "NDArrayCreate" in str(e.get("name")))
    return bad, api, problems


def _trial(case: str, windows: int, timeout: float, workdir: Path) -> tuple[str, dict, str]:
    """One child process: ('ok' | 'abort' | 'hang' | 'failure', summary, detail)."""
    out = Path(tempfile.mkdtemp(dir=workdir))
    env = {k: v for k, v in os.environ.items() if k != "PYPROF_STEADY"}
    outcome, line, detail = run_child(_command(case, windows, out), out, timeout, env)
    if outcome != "ok":
        return outcome, {}, detail
    summary = json.loads(line)
    bad, api, problems = _windows(case, out, windows)
    summary.update(bad=bad, api=api, problems=problems)
    return "ok", summary, ""


def run_case(case: str, *, processes: int, windows: int = 20, timeout: float = 120,
             parallel: int = 2, workdir: Path | None = None) -> Tally:
    """Run ``processes`` child processes of ``case`` and tally what they did."""
    tally = Tally(case)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(dir=workdir) as tmp, \
            ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [pool.submit(_trial, case, windows, timeout, Path(tmp))
                   for _ in range(processes)]
        for fut in futures:
            outcome, summary, detail = fut.result()
            tally.processes += 1
            if outcome == "ok":
                tally.windows += summary["windows"]
                tally.calls += summary["calls"]
                tally.switches += summary.get("switches", 0)
                tally.api_events += summary["api"]
                tally.bad_windows += summary["bad"]
                tally.problems.extend(summary["problems"])
            else:
                attr = {"abort": "aborts", "hang": "hangs"}.get(outcome, "failures")
                setattr(tally, attr, getattr(tally, attr) + 1)
                tally.problems.append(f"{outcome}: {detail}")
    tally.seconds = round(time.monotonic() - start, 1)
    return tally
