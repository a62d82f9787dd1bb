"""Profiling never aborts or hangs the program it profiles: threads, the bridge, fork, Ctrl+C.

The stress cases run in child processes (tests/stress_harness.py); ``PYPROF_STRESS_TRIALS``
and ``PYPROF_STRESS_TOGGLES`` raise their size (bench/bench_stress.py is the long mode).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from child import ROOT, load_trace, run_scenario
from stress_harness import CASES, run_case

from pyprof.native.gate import Gate
from pyprof.errors import StateError

TRIALS = int(os.environ.get("PYPROF_STRESS_TRIALS", "3"))
TOGGLES = int(os.environ.get("PYPROF_STRESS_TOGGLES", "20"))


@pytest.mark.parametrize("case", CASES)
def test_switching_api_profiling_under_8_busy_threads_never_aborts_or_hangs(case, tmp_path):
    tally = run_case(case, trials=TRIALS, toggles=TOGGLES, workdir=tmp_path)
    assert (tally.aborts, tally.hangs, tally.failures) == (0, 0, 0), tally.problems
    assert tally.trials == TRIALS and tally.toggles == TRIALS * TOGGLES
    assert tally.ops > 8 * TRIALS, "the workers ran"
    assert tally.api_events > 0, "API profiling was really on: the traces hold C API events"


# ------------------------------------------------------------------ the gate, in process


def _reader_blocked_while(gate: Gate, inside) -> bool:
    """Does a reader started while ``inside`` (a context) holds wait until it ends?"""
    entered = threading.Event()
    reader = gate.wrap(entered.set)
    with inside:
        t = threading.Thread(target=reader)
        t.start()
        blocked = not entered.wait(0.2)
    t.join(5)
    return blocked and entered.is_set()


def test_a_reader_waits_for_a_writer_and_runs_after_it():
    gate = Gate()
    assert _reader_blocked_while(gate, gate.exclusive())
    assert gate.in_flight == 0


def test_a_writer_waits_until_readers_in_flight_have_returned():
    gate = Gate()
    release = threading.Event()
    inside = threading.Event()

    def slow_call():
        inside.set()
        release.wait(5)

    t = threading.Thread(target=gate.wrap(slow_call))
    t.start()
    inside.wait(5)
    got = []
    w = threading.Thread(target=lambda: (gate.acquire(), got.append(time.monotonic()),
                                         gate.release()))
    w.start()
    time.sleep(0.2)
    assert got == [] and gate.in_flight == 1
    released_at = time.monotonic()
    release.set()
    w.join(5)
    t.join(5)
    assert got and got[0] >= released_at


def test_a_nested_call_passes_a_closed_gate_instead_of_deadlocking():
    gate = Gate()
    order = []
    inner = gate.wrap(lambda: order.append("inner"))
    writer_waiting = threading.Event()

    def outer():
        order.append("outer")
        threading.Thread(target=lambda: (writer_waiting.set(), gate.acquire(),
                                         order.append("switch"), gate.release())).start()
        writer_waiting.wait(5)
        time.sleep(0.1)  # the writer has closed the gate and waits for this call
        inner()  # a C callback calling MXNet again: counted already, so it passes

    gate.wrap(outer)()
    deadline = time.monotonic() + 5
    while "switch" not in order and time.monotonic() < deadline:
        time.sleep(0.01)
    assert order == ["outer", "inner", "switch"]


def test_switching_from_inside_a_call_is_refused_not_aborted():
    gate = Gate()

    def callback():
        with gate.exclusive():
            pass

    with pytest.raises(StateError, match="from inside an MXNet call"):
        gate.wrap(callback)()
    assert _reader_blocked_while(gate, gate.exclusive()), "the gate still works"


def test_a_call_that_never_returns_makes_the_switch_fail_clearly_and_reopens_the_gate():
    gate = Gate()
    release = threading.Event()
    t = threading.Thread(target=gate.wrap(lambda: release.wait(10)), name="stuck-worker")
    t.start()
    time.sleep(0.05)
    with pytest.raises(StateError, match=r"stuck-worker.*PYPROF_SWITCH_TIMEOUT"):
        gate.acquire(timeout=0.3)
    ran = []
    gate.wrap(lambda: ran.append(1))()  # readers are not left shut out
    release.set()
    t.join(5)
    assert ran == [1] and gate.in_flight == 0


def test_peers_close_after_this_gate_and_open_before_it():
    gate, log = Gate(), []

    class Peer:
        def acquire(self):
            log.append(("peer acquire", gate._closed[0]))

        def release(self):
            log.append(("peer release", gate._closed[0]))

    gate.add_peer(Peer())
    with gate.exclusive():
        log.append(("switch", gate._closed[0]))
    assert log == [("peer acquire", True), ("switch", True), ("peer release", True)]
    assert not gate._closed[0]


# ------------------------------------------------------------------ fork


def test_a_fork_child_gets_a_clear_error_from_the_profiler_not_an_abort(tmp_path):
    r = run_scenario("""
import multiprocessing as mp
import mxnet as mx
import pyprof
from pyprof import profiler

def child(q):
    out = {}
    for name, call in [("stop", lambda: profiler.set_state("stop")),
                       ("dump", lambda: profiler.dump()),
                       ("mxnet.profiler", lambda: mx.profiler.set_state("stop")),
                       ("counter", lambda: pyprof.Counter(pyprof.Domain("d"), "c").set_value(1))]:
        try:
            call()
            out[name] = "no error"
        except pyprof.PyprofError as e:
            out[name] = [type(e).__name__, str(e)]
    out["ops"] = float((mx.nd.ones((2, 2)) + 1).sum().asscalar())  # MXNet itself still works
    q.put(out)

profiler.set_config(filename="parent.json", profile_imperative=True)
profiler.set_state("run")
(mx.nd.ones((4, 4)) * 2).wait_to_read()
ctx = mp.get_context("fork")
q = ctx.Queue()
p = ctx.Process(target=child, args=(q,))
p.start()
out = q.get(timeout=60)
p.join(60)
profiler.set_state("stop")
profiler.dump()
result = {"child": out, "exitcode": p.exitcode}
""", tmp_path)
    child = r["child"]
    assert r["exitcode"] == 0
    for name in ("stop", "dump", "mxnet.profiler", "counter"):
        kind, message = child[name]
        assert kind == "StateError", (name, child[name])
        assert "fork of process" in message and "'spawn'" in message and "fix:" in message
    assert child["ops"] == 8.0
    assert any(e.get("name") == "_mul_scalar" for e in load_trace(tmp_path / "parent.json"))


def test_a_fork_child_of_a_process_that_never_profiled_may_profile(tmp_path):
    r = run_scenario("""
import multiprocessing as mp
import mxnet as mx
from pyprof import profiler

def child(q):
    profiler.set_config(filename="child.json", profile_imperative=True)
    profiler.set_state("run")
    (mx.nd.ones((2, 2)) + 1).wait_to_read()
    profiler.set_state("stop")
    profiler.dump()
    q.put("done")

(mx.nd.ones((2, 2)) + 1).wait_to_read()
ctx = mp.get_context("fork")
q = ctx.Queue()
p = ctx.Process(target=child, args=(q,))
p.start()
result = [q.get(timeout=60)]
p.join(60)
result.append(p.exitcode)
""", tmp_path)
    assert r == ["done", 0]
    assert any(e.get("name") == "_plus_scalar" for e in load_trace(tmp_path / "child.json"))


def test_a_fork_child_of_a_process_with_a_jvm_gets_a_jvm_error_not_a_hang(tmp_path):
    r = run_scenario("""
import multiprocessing as mp
import pyprof
from pyprof import jvm, profiler

def child(q):
    out = {}
    for name, call in [("call", lambda: jvm.call("pyprof.profiler", "state")),
                       ("profiler", lambda: profiler.set_state("run"))]:
        try:
            call()
            out[name] = "no error"
        except pyprof.PyprofError as e:
            out[name] = [type(e).__name__, str(e)]
    q.put(out)

jvm.call("pyprof.profiler", "state")
ctx = mp.get_context("fork")
q = ctx.Queue()
p = ctx.Process(target=child, args=(q,))
p.start()
out = q.get(timeout=60)
p.join(60)
result = {"child": out, "exitcode": p.exitcode, "parent": jvm.call("clojure.core", "+", 1, 2)}
""", tmp_path, timeout=180)
    assert r["exitcode"] == 0 and r["parent"] == 3
    kind, message = r["child"]["call"]
    assert kind == "JVMError" and "'spawn'" in message and "fix:" in message
    kind, message = r["child"]["profiler"]
    assert kind == "StateError" and "a JVM" in message


_BARE_FORK = """
import json, os, sys, time
import mxnet as mx
import pyprof
{setup}
a = mx.nd.ones((64, 64))
with pyprof.profile(path="w_{{window}}.json") as prof:
    (a + 1).wait_to_read()
    time.sleep(1.2)  # past the raw trace's first dump: MXNet's continuous-dump timer runs
    pid = os.fork()
    if pid == 0:
        out = open("child.out", "w")  # buffered: written when the interpreter finishes
        (mx.nd.ones((2, 2)) - 1).wait_to_read()  # recorded by the child's copy of the profiler
        print("child", file=out)
        sys.exit(3)  # inside the with block: its __exit__ runs in the child too
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    status = os.waitstatus_to_exitcode(done[1]) if done[0] else "hung"
    (a * 3).wait_to_read()
events = json.load(open(prof.windows[0].path))["traceEvents"]
result = {{"status": status, "names": sorted({{e.get("name") for e in events}} - {{None}}),
          "out": open("child.out").read()}}
"""


@pytest.mark.parametrize("setup", [
    "", "from pyprof import jvm; jvm.call('pyprof.profiler', 'state')"], ids=["python", "jvm"])
def test_a_bare_fork_child_exits_with_its_status_and_leaves_the_parents_window(setup, tmp_path):
    """A child of ``os.fork()`` ending by ``sys.exit`` inside the session: MXNet's ~Profiler
    would dump into the parent's raw trace and abort joining the parent's timer thread, a
    JVM's shutdown would wait for the parent's threads for ever."""
    r = run_scenario(_BARE_FORK.format(setup=setup), tmp_path, timeout=240)
    assert r["status"] == 3, r  # not -6 (SIGABRT), not 1 (an error from the session's exit)
    assert r["out"] == "child\n"  # the interpreter finished before _exit
    assert {"_plus_scalar", "_mul_scalar"} <= set(r["names"])  # before and after the fork
    assert "_minus_scalar" not in r["names"]  # the child's operator stays the child's


# ------------------------------------------------------------------ Ctrl+C

_CTRL_C = """
import json, sys
from pyprof import jvm, profiler
p = jvm.require("pyprof.profiler")
p.profiler_set_config({"filename": "ctrlc.json", "profile-api": True, "profile-imperative": True})
p.profiler_set_state("run")
print("ready", flush=True)
calls = 0
try:
    while True:
        p.state()
        calls += 1
except KeyboardInterrupt:
    pass
p.profiler_set_state("stop")   # the JVM is still there: stop and dump through it
p.dump_profile(True)
print(json.dumps({"calls": calls}), flush=True)
"""


def test_ctrl_c_during_jvm_calls_is_a_keyboard_interrupt_and_the_trace_survives(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # A program at a terminal, whatever launched this suite: a background job (CI runners,
    # `nohup ... &`) inherits SIGINT ignored, and Python keeps it ignored (no KeyboardInterrupt).
    proc = subprocess.Popen([sys.executable, "-c", _CTRL_C], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert '"calls"' in out and int(out.split('"calls": ')[1].split("}")[0]) > 0
    events = load_trace(tmp_path / "ctrlc.json")
    assert any(e.get("ph") == "M" for e in events)
