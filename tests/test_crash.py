"""Valid traces after a crash (SIGKILL mid-profile) and at interpreter exit."""

import json
import signal

import pytest

from child import cuda_build, device_pids, load_trace, operator_pairs, run_scenario

import pyprof
from pyprof.trace import repair, validate


def test_killed_plain_profiler_is_recovered_by_repair(tmp_path):
    proc = run_scenario("""
import os, signal, mxnet as mx
from pyprof import profiler
profiler.set_config(filename="crash.json", profile_all=True, continuous_dump=True,
                    dump_period=0.05)
profiler.set_state("run")
a = mx.nd.ones((32, 32))
for _ in range(5):
    mx.nd.dot(a, a)
mx.nd.waitall()
profiler.dump(False)              # these five are on disk now
for _ in range(50):
    mx.nd.dot(a, a)               # some of these may be, too
os.kill(os.getpid(), signal.SIGKILL)
""", tmp_path, expect_rc=None)
    assert proc.returncode == -signal.SIGKILL
    path = tmp_path / "crash.json"
    with pytest.raises(json.JSONDecodeError):
        json.loads(path.read_text())  # what MXNet leaves behind
    result = repair(path)
    assert "missing closing" in " ".join(result.fixed)
    events = load_trace(path)
    devices = device_pids(events)
    # repair writes each B/E pair as one X event (and leaves out a begin the crash cut off)
    dots = [e for e in events if e["ph"] == "X" and e.get("name") == "dot" and e["pid"] in devices]
    assert 5 <= len(dots) <= 55 and validate(path).ok


def test_killed_session_window_is_recovered(tmp_path):
    proc = run_scenario("""
import os, signal, time, mxnet as mx, pyprof
a = mx.nd.ones((32, 32))
prof = pyprof.profile(schedule=pyprof.schedule(active=2), path="win_{window}.json",
                      dump_period=0.05)
prof.start()
for step in range(3):             # window 0: steps 0-1 (saved); window 1 opens at step 2
    for _ in range(step + 1):
        mx.nd.dot(a, a)
    prof.step()
for _ in range(7):
    mx.nd.dot(a, a)
mx.nd.waitall()
time.sleep(0.5)                   # MXNet's dump timer appends the window's events
os.kill(os.getpid(), signal.SIGKILL)
""", tmp_path, expect_rc=None, env={"PYPROF_RAW_DIR": str(tmp_path / "rawbase")})
    assert proc.returncode == -signal.SIGKILL
    assert len(list((tmp_path / "rawbase").iterdir())) == 1  # the dead process's directory
    assert len(operator_pairs(load_trace(tmp_path / "win_0.json"), ("dot",))) == 1 + 2
    assert not (tmp_path / "win_1.json").exists()
    assert (tmp_path / "win_1.json.partial").exists()
    window = pyprof.recover(tmp_path / "win_1.json")
    events = load_trace(tmp_path / "win_1.json")
    assert window.index == 1 and window.events == len(events)
    assert window.start_us <= min(e["ts"] for e in events if e.get("name") == "dot")
    assert window.end_us is None  # the process died: no end
    assert len(operator_pairs(events, ("dot",))) == 3 + 7
    assert "cpu/0" in {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert not list((tmp_path / "rawbase").iterdir()) and not list(tmp_path.glob("*.partial"))
    with pytest.raises(pyprof.StateError) as e:
        pyprof.recover(tmp_path / "win_1.json")
    out = str(tmp_path / "win_1.json")
    assert (e.value.code, str(e.value)) == (
        "session.nothing_to_recover",
        f"nothing to recover at {out!r}: no {out + '.partial'!r} file (windows that were saved "
        "need no recovery). fix: pass the path of a window whose process died while recording it")


def test_recover_needs_the_raw_trace(tmp_path):
    out, raw = tmp_path / "w_0.json", tmp_path / ".pyprof-raw-1.json"
    (tmp_path / "w_0.json.partial").write_text(json.dumps(
        {"raw": str(raw), "start": 0, "window": 0, "metadata": []}))
    with pytest.raises(pyprof.StateError) as e:
        pyprof.recover(out)
    assert (e.value.code, str(e.value)) == (
        "session.raw_trace_gone",
        f"the raw trace {str(raw)!r} of {str(out)!r} is gone; nothing to recover. "
        "fix: look for the recovered window beside it, named <stem>.recovered-<pid><suffix>: "
        "the first session started after the crash writes it there before it deletes the raw "
        "trace of the dead process")


@pytest.mark.parametrize("continuous", [True, False])
def test_trace_is_valid_at_interpreter_exit_without_dump(tmp_path, continuous):
    run_scenario(f"""
import mxnet as mx
from pyprof import profiler
profiler.set_config(filename="exit.json", continuous_dump={continuous}, dump_period=0.05)
profiler.set_state("run")
mx.nd.dot(mx.nd.ones((8, 8)), mx.nd.ones((8, 8))).wait_to_read()
profiler.dump(False) if {continuous} else None   # a repeated (partial) dump, then exit
""", tmp_path)
    assert len(operator_pairs(load_trace(tmp_path / "exit.json"), ("dot",))) == 1


def test_errors_do_not_abort_or_lose_events(tmp_path):
    """Every misuse raises with a fix; the process goes on and the trace keeps everything."""
    r = run_scenario("""
import mxnet as mx, pyprof
from pyprof import profiler
from pyprof.context import check_context
attempt("dump_before_run", profiler.dump)
profiler.set_config(filename="t.json", continuous_dump=False, aggregate_stats=False)
profiler.set_state("run")
a = mx.nd.ones((8, 8))
mx.nd.dot(a, a).wait_to_read()
attempt("unknown_key", lambda: profiler.set_config(filenme="x.json"))
attempt("wrong_type", lambda: profiler.set_config(dump_period=[1]))
attempt("bad_state", lambda: profiler.set_state("running"))
attempt("rename_while_open", lambda: profiler.set_config(filename="other.json"))
attempt("dumps_without_aggregate", profiler.dumps)
attempt("server_without_kvstore", lambda: profiler.set_state("run", profile_process="server"))
attempt("gpu_on_cpu_build", lambda: check_context("gpu"))
mx.nd.dot(a, a).wait_to_read()
profiler.set_state("stop")
profiler.dump()
attempt("reconfigure_after_finished", lambda: profiler.set_config(filename="again.json"))
result = errors
""", tmp_path)
    if cuda_build():  # a GPU the build can run is no error
        r.pop("gpu_on_cpu_build", None)
    assert {k: v[0] for k, v in r.items()} == {"dump_before_run": "StateError", "unknown_key": "ConfigError",
                 "wrong_type": "ConfigError", "bad_state": "StateError",
                 "dumps_without_aggregate": "StateError",
                 "server_without_kvstore": "StateError", "reconfigure_after_finished": "StateError",
                 **({} if cuda_build() else {"gpu_on_cpu_build": "DeviceError"})}
    # a new filename while running is no error: the first dot ends in t.json, the second in other.json
    assert len(operator_pairs(load_trace(tmp_path / "t.json"), ("dot",))) == 1
    assert len(operator_pairs(load_trace(tmp_path / "other.json"), ("dot",))) == 1
