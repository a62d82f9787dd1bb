"""kill -9 during sessions and continuous dumps: no leftovers, every flushed event recovered.

Each victim is a child process profiling in a loop. The test freezes it (SIGSTOP) at a moment
it does not choose, copies what is on disk then (the flushed events), and kills it (SIGKILL).
A new process then starts a session: the dead process's raw-trace directory must be gone, its
open window written with every operator pair that was flushed (beside the window's path, as
``<stem>.recovered-<pid>.json``), and nothing else left behind.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from child import ROOT, load_trace, operator_pairs, run_cli, run_scenario

import pytest

from pyprof.session import leftovers as _leftovers
from pyprof.trace import validate

#: The next start waits for the sweep until it is done (a bound, not a delay: a busy machine
#: may take longer than the default second to recover these small leftovers).
SWEEP_WAIT = {"PYPROF_RECOVER_WAIT_SECONDS": "60"}

#: A complete "dot" end event as MXNet writes it (multi-line JSON, fields in this order).
_DOT_END = re.compile(rb'\{\s*"name": "dot",\s*"cat": "operator",\s*"ph": "E",[^{}]*\}')

SESSION_VICTIM = """
import time, mxnet as mx, pyprof
a = mx.nd.ones((32, 32))
deadline = time.time() + 60
with pyprof.profile(schedule=pyprof.schedule(wait=WAIT, active=3), path="win_{window}.json",
                    dump_period=0.02) as prof:
    while time.time() < deadline:
        for _ in range(4):
            mx.nd.dot(a, a)
        time.sleep(0.04)
        prof.step()
"""

PLAIN_VICTIM = """
import time, mxnet as mx
from pyprof import profiler
profiler.set_config(filename="plain.json", profile_imperative=True, continuous_dump=True,
                    dump_period=0.02)
profiler.set_state("run")
a = mx.nd.ones((32, 32))
deadline = time.time() + 60
while time.time() < deadline:
    mx.nd.dot(a, a)
    time.sleep(0.002)
"""


def _start(code: str, workdir: Path, env: dict[str, str]) -> subprocess.Popen:
    child_env = dict(os.environ, **env)
    child_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), child_env.get("PYTHONPATH", "")])
    return subprocess.Popen([sys.executable, "-c", code], cwd=workdir, env=child_env,
                            stderr=subprocess.PIPE)


def _wait_for(cond, proc: subprocess.Popen, what: str, limit: float = 30) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        assert proc.poll() is None, f"the victim ended early: {proc.stderr.read().decode()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _freeze_copy_kill(proc: subprocess.Popen, copy) -> object:
    """SIGSTOP, take what is on disk (``copy()``), SIGKILL; returns what ``copy`` returned."""
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        return copy()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        proc.stderr.close()


def _kill_in_session(work: Path, rawbase: Path, wait: int, delay: float) -> tuple[str, int]:
    """Kill a session victim while its second window records; return (path the next start
    recovers the window to, dot pairs of that window on disk at the kill) for each open window."""
    proc = _start(SESSION_VICTIM.replace("WAIT", str(wait)), work,
                  {"PYPROF_RAW_DIR": str(rawbase)})
    _wait_for(lambda: (work / "win_1.json.partial").exists(), proc, "window 1")
    time.sleep(delay)

    def copy():
        partials = sorted(work.glob("win_*.json.partial"))
        info = [json.loads(p.read_bytes()) for p in partials]
        raw = Path(info[-1]["raw"]).read_bytes() if info else b""
        return [(str(p)[:-len(".partial")], raw[i["start"]:i.get("end")])
                for p, i in zip(partials, info)]

    flushed = _freeze_copy_kill(proc, copy)
    assert proc.returncode == -signal.SIGKILL
    assert len(list(rawbase.iterdir())) == 1, "the dead process's directory is left for now"
    # recovered beside the window, never at its path (a rerun of the script writes there)
    return [(path[:-len(".json")] + f".recovered-{proc.pid}.json", len(_DOT_END.findall(data)))
            for path, data in flushed]


def test_killed_sessions_leave_nothing_and_every_flushed_event_is_recovered(tmp_path):
    rawbase, work = tmp_path / "rawbase", tmp_path / "work"
    rawbase.mkdir()
    work.mkdir()
    expected = []
    # a wait step between windows, and windows back to back (two unsaved windows at times)
    for wait, delay in ((1, 0.06), (0, 0.3)):
        killed = _kill_in_session(work, rawbase, wait, delay)
        assert killed, "a window was recording at the kill"
        expected += killed
        # the next start: recovers the dead process's windows, deletes its directory
        r = run_scenario("""
import os, pyprof
from pyprof.session import rawdir
with pyprof.profile(path="next.json"):
    pass
rawdir.wait_removed()  # this process's own directory, deleted on its thread once closed
result = sorted(os.listdir(os.environ["PYPROF_RAW_DIR"]))
""", work, env={"PYPROF_RAW_DIR": str(rawbase), **SWEEP_WAIT})
        assert r == [], "no raw-trace directory is left"
        assert not list(work.glob("*.partial")) and not list(work.glob(".pyprof-*"))
        for path, dots in expected:
            events = load_trace(path)  # recovered: valid
            assert validate(path).ok
            assert len(operator_pairs(events, ("dot",))) == dots, path
        for old in work.glob("win_*.json"):
            old.rename(old.with_name(f"{wait}_{old.name}"))
        expected = [(str(Path(p).with_name(f"{wait}_{Path(p).name}")), n) for p, n in expected]
    assert sum(n for _, n in expected) > 0, "some events were flushed before the kills"
    left = [n for n in os.listdir(work)
            if not re.match(r"(next|result-.*|\d_win_\d+(\.recovered-\d+)?)\.json\Z", n)]
    assert left == [], "nothing else is left behind"


def test_killed_continuous_dump_is_recovered_by_repair(tmp_path):
    proc = _start(PLAIN_VICTIM, tmp_path, {})
    plain = tmp_path / "plain.json"
    _wait_for(lambda: plain.exists() and len(_DOT_END.findall(plain.read_bytes())) > 20, proc,
              "the trace")
    snapshot = _freeze_copy_kill(proc, plain.read_bytes)
    flushed = len(_DOT_END.findall(snapshot))
    assert flushed > 10
    r = run_cli(["repair", str(plain)], tmp_path)
    assert r.returncode == 0, r.stderr
    events = load_trace(plain)
    # repair writes B/E pairs as X events; a begin whose end was not flushed is left out
    dots = [e for e in events if e.get("name") == "dot" and e["ph"] == "X"]
    assert len(dots) == flushed and validate(plain).ok
    assert sorted(os.listdir(tmp_path)) == ["plain.json"], "no temporary file is left behind"


KEEP_VICTIM = """
import os, time, mxnet as mx
from pyprof import profiler
profiler.set_config(filename="kept.json", profile_imperative=True, continuous_dump=True,
                    dump_period=0.05)
profiler.set_state("run")
a = mx.nd.ones((4,))
for _ in range(N):
    a + 1
mx.nd.waitall()
profiler.dump(finished=False)
profiler.set_config(profile_api=False)  # no filename: kept.json is kept in a part
for _ in range(M):
    a + 1
mx.nd.waitall()
time.sleep(0.3)  # the dump timer flushes the later ops into the new, headless kept.json
os.kill(os.getpid(), 9)
"""

#: A complete "_plus_scalar" end event as MXNet writes it.
_PLUS_END = re.compile(rb'\{\s*"name": "_plus_scalar",\s*"cat": "operator",\s*"ph": "E",[^{}]*\}')


def test_parts_kept_by_a_killed_process_are_joined_not_lost(tmp_path):
    n, m = 7, 5
    proc = _start(KEEP_VICTIM.replace("N", str(n)).replace("M", str(m)), tmp_path, {})
    proc.wait(60)
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    parts = sorted(tmp_path.glob(".pyprof-*-kept-*-kept.json.json"))
    assert len(parts) == 1, "the keep left a part"
    in_part = len(_PLUS_END.findall(parts[0].read_bytes()))
    in_file = len(_PLUS_END.findall((tmp_path / "kept.json").read_bytes()))
    assert in_part == n and 0 < in_file <= m, (in_part, in_file)
    # the next start (a session in this directory) joins the dead process's part into kept.json
    run_scenario("""
import pyprof
with pyprof.profile(path="next.json"):
    pass
result = None
""", tmp_path, env=SWEEP_WAIT)
    assert not list(tmp_path.glob(".pyprof-*")), "no part (nor temporary file) is left"
    r = run_cli(["repair", "kept.json"], tmp_path)
    assert r.returncode == 0, r.stderr
    plus = [e for e in load_trace(tmp_path / "kept.json")
            if e.get("name") == "_plus_scalar" and e["ph"] == "X"]
    assert len(plus) == in_part + in_file and validate(tmp_path / "kept.json").ok


LOOP = """
import os, signal, time, mxnet as mx, pyprof
print(os.getpid(), flush=True)
a = mx.nd.ones((32, 32))
with pyprof.profile(schedule=pyprof.schedule(active=2), path="loop_{window}.json",
                    dump_period=0.05) as prof:
    for step in range(2):         # window 0: steps 0-1
        for _ in range(3):
            mx.nd.dot(a, a)
        if step == 1 and os.environ.get("LOOP_DIES"):
            for _ in range(7):
                mx.nd.dot(a, a)
            mx.nd.waitall()
            time.sleep(0.5)       # MXNet's dump timer appends the window's events
            os.kill(os.getpid(), signal.SIGKILL)
        prof.step()
result = None
"""


def test_a_rerun_of_the_killed_script_keeps_the_recovered_window(tmp_path):
    env = {"PYPROF_RAW_DIR": str(tmp_path / "rawbase"), **SWEEP_WAIT}
    first = run_scenario(LOOP, tmp_path, env=dict(env, LOOP_DIES="1"), expect_rc=None)
    assert first.returncode == -signal.SIGKILL, first.stderr
    dead = int(first.stdout.split()[0])
    assert (tmp_path / "loop_0.json.partial").exists() and not (tmp_path / "loop_0.json").exists()
    # a file already at the first name is not written over: the next number is taken
    taken = tmp_path / f"loop_0.recovered-{dead}.json"
    taken.write_text("mine")
    second = run_scenario(LOOP, tmp_path, env=env, expect_rc=None)  # same code, to completion
    assert second.returncode == 0, second.stderr
    recovered = tmp_path / f"loop_0.recovered-{dead}-1.json"
    assert taken.read_text() == "mine"
    assert (f"pyprof: recovered window {tmp_path / 'loop_0.json'} of dead process {dead} as "
            f"{recovered}") in second.stderr.splitlines()
    assert len(operator_pairs(load_trace(recovered), ("dot",))) == 3 + 3 + 7  # every flushed one
    assert validate(recovered).ok and run_cli(["validate", str(recovered)], tmp_path).returncode == 0
    new = tmp_path / "loop_0.json"  # the rerun's own window
    assert len(operator_pairs(load_trace(new), ("dot",))) == 3 + 3
    assert validate(new).ok and run_cli(["validate", str(new)], tmp_path).returncode == 0
    assert not list(tmp_path.glob("*.partial")) and not list((tmp_path / "rawbase").iterdir())
    assert sorted(p.name for p in tmp_path.glob("loop_*")) == sorted(  # window 1 opened at exit
        ["loop_0.json", "loop_1.json", taken.name, recovered.name])


#: Window name -> where the sweep writes it for dead pid 7 (jvm session_crash_test has the same).
RECOVERED_NAMES = [("loop_0.json", "loop_0.recovered-7.json"), ("trace", "trace.recovered-7"),
                   (".hidden", ".hidden.recovered-7"), ("a.b.json", "a.b.recovered-7.json"),
                   ("..x", "..x.recovered-7")]


@pytest.mark.parametrize(("name", "first"), RECOVERED_NAMES)
def test_the_recovered_path_is_beside_the_window_and_never_a_file_there(tmp_path, name, first):
    window = str(tmp_path / name)
    stem, suffix = (first[:-len(".json")], ".json") if first.endswith(".json") else (first, "")
    names = [first, f"{stem}-1{suffix}", f"{stem}-2{suffix}"]
    for i, expected in enumerate(names):
        tmp = tmp_path / f".pyprof-{os.getpid()}-recover-{i}.tmp"
        tmp.write_text(f"window {i}")
        assert _leftovers.link_beside(str(tmp), window, 7) == str(tmp_path / expected)
        tmp.unlink()
    assert sorted(os.listdir(tmp_path)) == sorted(names)
    assert [(tmp_path / n).read_text() for n in names] == [f"window {i}" for i in range(3)]
