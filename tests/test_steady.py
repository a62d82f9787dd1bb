"""Steady mode (pyprof.steady, pyprof.profile(steady=True), PYPROF_STEADY): what it refuses,
how sessions take windows by pause and resume, how it ends (end(), exit). The foreign-binding
stress tests are in test_steady_foreign.py."""

import json
import os
from pathlib import Path

from child import load_trace, run_scenario

from pyprof import rules
from pyprof.session.scheduling import OPERATIONS, STEADY_OPERATIONS, TRANSITIONS, operations

# What a child reports for a call: the catalogue code of the pyprof error it raised, or "ok".
_PRELUDE = """
import pyprof
from pyprof import profiler
def code(fn):
    try:
        fn()
        return "ok"
    except pyprof.PyprofError as e:
        return [e.code, str(e)]
"""


def test_steady_transitions_never_switch_the_state():
    """Pure: the steady table (schedule.json steady) has no stop or run, only pause/resume."""
    assert STEADY_OPERATIONS == {"stop": "pause", "run": "resume"}
    assert set(STEADY_OPERATIONS.values()) <= set(OPERATIONS)
    for (prev, cur), ops in TRANSITIONS.items():
        steady = operations(prev, cur, steady=True)
        assert "stop" not in steady and "run" not in steady, (prev, cur, steady)
        assert len(steady) == len(ops)
        assert [STEADY_OPERATIONS.get(op, op) for op in ops] == list(steady)
    assert rules.API["steady"]["mode_keys"] == [
        "profile_all", "profile_symbolic", "profile_imperative", "profile_api", "profile_memory"]


def test_plain_calls_in_steady_mode(tmp_path):
    r = run_scenario(_PRELUDE + """
import mxnet as mx
out = {}
pyprof.steady.begin(profile_api=True, profile_imperative=True)
out["active"] = pyprof.steady.active()
out["state"] = profiler.state()
out["run"] = code(lambda: profiler.set_state("run"))
out["stop"] = code(lambda: profiler.set_state("stop"))
out["dump"] = code(lambda: profiler.dump())
out["dump_false"] = code(lambda: profiler.dump(False))
out["config_mode"] = code(lambda: profiler.set_config(profile_api=False, profile_imperative=True))
out["again"] = code(lambda: pyprof.steady.begin())
out["pause"] = code(profiler.pause)
out["resume"] = code(profiler.resume)
out["mx_run"] = code(lambda: mx.profiler.set_state("run"))  # raw mxnet.profiler: not pyprof's
out["end"] = code(pyprof.steady.end)
out["after"] = [pyprof.steady.active(), profiler.state()["running"]]
out["run_after"] = code(lambda: profiler.set_state("run"))  # MXNet names the deleted raw trace
profiler.set_config(filename="after.json")
out["run_configured"] = code(lambda: profiler.set_state("run"))
profiler.set_state("stop")
result = out
""", tmp_path)
    assert r["active"] == "pyprof.steady.begin()"
    assert r["state"] == {"running": True, "paused": True, "finished": False, "ever_ran": True}
    for key, call in (("run", "set_state('run')"), ("stop", "set_state('stop')")):
        assert r[key][0] == "steady.set_state"
        assert r[key][1].startswith(f"{call} in steady mode (begun by pyprof.steady.begin()): ")
        assert r[key][1].endswith("fix: take windows with pause() and resume() (or "
                                  "pyprof.profile(..., steady=True)), or end steady mode with "
                                  "pyprof.steady.end() once those threads have ended")
    assert r["dump"][0] == "steady.finished_dump" and "dump(finished=False)" in r["dump"][1]
    assert r["dump_false"] == "ok"
    assert r["config_mode"][0] == "steady.config_mode"
    assert "mode bits (profile_api)" in r["config_mode"][1]
    assert r["again"][0] == "steady.already"
    assert r["pause"] == r["resume"] == "ok"
    assert r["mx_run"] == "ok"  # running already: MXNet's IsProfiling does not change
    assert r["end"] == "ok" and r["after"] == [None, False]
    assert r["run_after"][0] == "state.after_session" and r["run_configured"] == "ok"


def test_steady_session_windows_by_pause_and_resume(tmp_path):
    """Three windows of a steady session: each holds its own marker and operators; the
    profiler stays running across the session's stop (no state switch at all), and a second
    session in steady mode (no steady=True) works the same way."""
    r = run_scenario(_PRELUDE + """
import mxnet as mx
from pyprof.process.tracker import TRACKER
switches = []
real = profiler.set_state
profiler.set_state = lambda *a, **k: (switches.append(a), real(*a, **k))[1]
d = pyprof.Domain("d")
a = mx.nd.ones((2, 2))
def windows(prof, first):
    for w in range(3):
        prof.step()                      # idle step ends: open + resume
        pyprof.Marker(d, f"window-{first + w}").mark()
        (a * (first + w + 1)).wait_to_read()
        prof.step()                      # active step ends: pause + save
prof = pyprof.profile(steady=True, schedule=pyprof.schedule(wait=1, active=1, repeat=3),
                      path="w_{window}.json", profile_api=True, profile_imperative=True)
prof.start()
windows(prof, 0)
prof.stop()
running = [TRACKER.running, TRACKER.steady == prof._name]
other = code(lambda: pyprof.profile(path="x.json", profile_api=False).start())
prof2 = pyprof.profile(schedule=pyprof.schedule(wait=1, active=1, repeat=3),
                       path="v_{window}.json", profile_api=True, profile_imperative=True)
prof2.start()
windows(prof2, 3)
prof2.stop()
result = {"switches": switches, "running": running, "other": other,
          "paths": [w.path for w in prof.windows + prof2.windows]}
""", tmp_path)
    assert r["switches"] == [["run"]]  # one switch in all: steady mode began in start()
    assert r["running"] == [True, True]
    assert r["other"][0] == "steady.options_differ"
    assert len(r["paths"]) == 6
    for w, path in enumerate(r["paths"]):
        events = load_trace(Path(path))
        marks = sorted({e["name"] for e in events if str(e.get("name")).startswith("window-")})
        assert marks == [f"window-{w}"], (path, marks)
        assert any(e.get("cat") == "MXNET_C_API" for e in events), path
        assert sum(1 for e in events if e.get("ph") == "B" and e["name"] == "_mul_scalar") == 1


def test_steady_refusals_around_sessions(tmp_path):
    r = run_scenario(_PRELUDE + """
out = {}
prof = pyprof.profile(path="y.json")
prof.start()
out["begin_in_session"] = code(lambda: pyprof.steady.begin())
prof.stop()
prof = pyprof.profile(path="z.json", steady=True)
prof.start()
out["end_in_session"] = code(pyprof.steady.end)
prof.stop()
pyprof.steady.end()
out["reserved"] = code(lambda: pyprof.steady.begin(continuous_dump=False))
pyprof.steady.begin(filename="own.json")  # after sessions: its end finishes the trace
out["own_file"] = code(lambda: pyprof.profile(path="x.json").start())
pyprof.resume(); pyprof.pause()
pyprof.steady.end()
result = out
""", tmp_path)
    assert r["own_file"][0] == "steady.own_file" and "own.json" in r["own_file"][1]
    assert r["begin_in_session"][0] == "steady.session_open"
    assert r["end_in_session"][0] == "steady.session_open"
    assert r["reserved"][0] == "session.reserved_option"
    load_trace(tmp_path / "own.json")  # end() finished it


def test_pyprof_steady_at_import_and_exit(tmp_path):
    """PYPROF_STEADY=1: steady mode from import; windows by a plain session; at exit the raw
    trace is finished and deleted, with nothing on stderr."""
    proc = run_scenario(_PRELUDE + """
import mxnet as mx
from pyprof.process.tracker import TRACKER
prof = pyprof.profile(path="w.json")
prof.start()
(mx.nd.ones((2, 2)) + 1).wait_to_read()
prof.stop()
raw = pyprof.session.raw_trace_path()
print(json.dumps({"active": pyprof.steady.active(), "running": TRACKER.running,
                  "raw_dir": os.path.dirname(raw)}))
""", tmp_path, env={"PYPROF_STEADY": "1"}, expect_rc=None)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["active"] == "PYPROF_STEADY" and got["running"] is True
    assert not os.path.exists(got["raw_dir"])
    events = load_trace(tmp_path / "w.json")
    assert any(e.get("name") == "_plus_scalar" for e in events)


def test_pyprof_steady_with_autostart_finishes_the_file_at_exit(tmp_path):
    """PYPROF_STEADY=1 with PYPROF_AUTOSTART=1: steady mode into PYPROF_FILENAME, recording from
    import (a new user's find: it began paused, and the file held no event), windows of it left
    out by pause and resume; finished at exit without a stop."""
    proc = run_scenario(_PRELUDE + """
import mxnet as mx
a = mx.nd.ones((2, 2))
(a + 1).wait_to_read()           # recorded from import
pyprof.pause()
(a - 2).wait_to_read()           # paused: not recorded
pyprof.resume()
(a * 3).wait_to_read()
pyprof.pause()
switches = code(lambda: profiler.set_state("stop"))
print(json.dumps({"active": pyprof.steady.active(), "stop": switches[0]}))
""", tmp_path, env={"PYPROF_STEADY": "1", "PYPROF_AUTOSTART": "1",
                   "PYPROF_FILENAME": str(tmp_path / "auto.json"), "PYPROF_MODE": "all"},
        expect_rc=None)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"active": "PYPROF_STEADY", "stop": "steady.set_state"}
    names = [e.get("name") for e in load_trace(tmp_path / "auto.json") if e.get("ph") == "B"]
    assert "_plus_scalar" in names and "_mul_scalar" in names and "_minus_scalar" not in names


def test_steady_mode_is_one_fact_across_the_bridge(tmp_path):
    """Begun in Python, steady mode binds the JVM layer in the same process (one tracker):
    the JVM sees who began it and refuses its own switches with the same code; ended from the
    JVM, Python sees it ended."""
    r = run_scenario(_PRELUDE + """
from pyprof import jvm
jvm.start()
pyprof.steady.begin(profile_api=True, profile_imperative=True)
out = {"jvm_active": jvm.call("pyprof.steady", "active")}
def jvm_switch():
    jvm.call("pyprof.profiler", "profiler-set-state", "stop")
out["jvm_stop"] = code(jvm_switch)
out["jvm_begin"] = code(lambda: jvm.call("pyprof.steady", "begin!", {}))
jvm.call("pyprof.steady", "end!")
out["after"] = [pyprof.steady.active(), profiler.state()["running"]]
out["raw_dir"] = os.path.dirname(pyprof.session.raw_trace_path())
jvm.eval_clojure("(shutdown-agents)")
result = out
""", tmp_path, timeout=600)
    assert r["jvm_active"] == "pyprof.steady.begin()"
    assert r["jvm_stop"][0] == "steady.set_state"
    assert r["jvm_stop"][1].startswith("(profiler-set-state :stop) in steady mode (begun by "
                                       "pyprof.steady.begin())")
    assert r["jvm_begin"][0] == "steady.already"
    assert r["after"] == [None, False]
    assert not os.path.exists(r["raw_dir"])  # Python's raw trace: finished and deleted at exit


def test_steady_mode_begun_in_one_layer_is_ended_and_windowed_there(tmp_path):
    """A parity probe's find: Java began steady mode, Python's end() took the JVM's raw trace for
    a user's file and finished the process's one trace (nothing could profile again); sessions
    of the other layer were refused with messages about the wrong file. Each layer keeps its
    own raw trace, so the other layer is refused, clearly, and the trace stays unfinished."""
    r = run_scenario(_PRELUDE + """
import jpype, mxnet as mx
from pyprof import jvm
jvm.start()
P = jpype.JClass("pyprof.jvm.Profiler")
P.steadyBegin(jpype.JClass("java.util.HashMap")())
mx.nd.ones((4, 4)).wait_to_read()
out = {"py_end": code(pyprof.steady.end),
       "py_session": code(lambda: pyprof.profile(path=%r).start()),
       "state": profiler.state()}
P.steadyEnd()
out["after"] = [pyprof.steady.active(), profiler.state()["finished"]]
pyprof.steady.begin(profile_imperative=True)
S = jpype.JClass("pyprof.jvm.ProfilerSession")
def java_session():
    try:
        S(jpype.JClass("java.util.Map").of("path", %r)).start()
        return "ok"
    except jpype.JException as e:
        return [str(e.code()), str(e.getMessage())]
out["java_session"] = java_session()
pyprof.steady.end()
out["end"] = profiler.state()["finished"]
jvm.eval_clojure("(shutdown-agents)")
result = out
""" % (str(tmp_path / "p_{window}.json"), "j_{window}.json"), tmp_path, timeout=600)
    code, message = r["py_end"]
    assert code == "steady.other_layer"
    assert message.startswith("pyprof.steady.end(): steady mode was begun by Profiler.steadyBegin(...)"
                              " in the JVM layer, on that layer's raw trace '")
    assert message.endswith("fix: end steady mode and take its windows where it began "
                            "(Profiler.steadyEnd() or (pyprof.steady/end!)), or begin it in this language")
    assert r["py_session"][0] == "steady.other_layer"
    assert r["py_session"][1].startswith("pyprof.profile(...).start(): steady mode was begun by")
    assert r["state"]["finished"] is False and r["after"] == [None, False]
    code, message = r["java_session"]
    assert code == "steady.other_layer"
    assert message.startswith("ProfilerSession.start(): steady mode was begun by pyprof.steady.begin()"
                              ' in Python, on that layer\'s raw trace "')
    assert "fix: end steady mode and take its windows where it began (pyprof.steady.end())" in message
    assert r["end"] is False


def test_every_operation_of_the_schedule_file_is_one_a_session_performs():
    """Pure: schedule.json names no operation pyprof.session's profile lacks ("save" cuts)."""
    from pyprof.session import profile
    assert set(OPERATIONS) - {"save"} == set(profile._OPERATIONS)
