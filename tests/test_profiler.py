"""The reference API (pyprof.profiler) against real MXNet, one session per child process."""

import json

from child import load_trace, operator_pairs, run_scenario

SCENARIO = """
import mxnet as mx
import pyprof.profiler as profiler
profiler.set_config(filename="trace.json", profile_all=True, aggregate_stats=True,
                    continuous_dump=False)
a = mx.nd.ones((64, 64))
profiler.set_state("run")
for _ in range(3):
    mx.nd.dot(a, a).wait_to_read()
profiler.set_state("stop")
profiler.dump()
result = {"table": profiler.dumps(), "json": profiler.dumps(format="json", sort_by="count",
          ascending=True), "state": profiler.state(), "config": profiler.current_config()}
"""


def test_run_stop_dump_dumps(tmp_path):
    r = run_scenario(SCENARIO, tmp_path)
    events = load_trace(tmp_path / "trace.json")
    assert len(operator_pairs(events, ("dot",))) == 3
    stats = json.loads(r["json"])
    assert stats["Time"]["operator"]["dot"]["Count"] == 3
    assert stats["Unit"] == {"Time": "ms", "Memory": "kB"}
    assert "operator" in r["table"] and "dot" in r["table"] and "Time (ms)" in r["table"]
    assert r["state"] == {"running": False, "paused": False, "finished": True, "ever_ran": True}
    assert r["config"]["profile_all"] == "true"
    assert r["config"]["filename"] == str(tmp_path / "trace.json")  # absolute at configuration
    assert r["config"]["profile_process"] == "worker"  # omitted: back to the C default


def test_config_reaches_mxnet(tmp_path):
    """profile_api=False records no C API events; profile_imperative=False no NDArray ops."""
    r = run_scenario("""
import mxnet as mx
import pyprof.profiler as profiler
profiler.set_config(filename="t.json", profile_api=False, profile_imperative=False,
                    profile_symbolic=True, continuous_dump=False)
a = mx.nd.ones((32, 32))
profiler.set_state("run")
mx.nd.dot(a, a).wait_to_read()
c = mx.sym.dot(mx.sym.var("A"), mx.sym.var("B"))
c.bind(mx.cpu(), {"A": a, "B": a}).forward()[0].wait_to_read()
profiler.set_state("stop")
profiler.dump()
result = True
""", tmp_path)
    assert r is True
    events = load_trace(tmp_path / "t.json")
    cats = {e.get("cat") for e in events}
    assert "MXNET_C_API" not in cats
    assert len(operator_pairs(events, ("dot",))) == 0  # the imperative dot: not recorded
    assert len(operator_pairs(events, ("[dot]", "dot"))) == 1  # the bound symbol's


def test_bad_key_value_state_raise_and_the_process_survives(tmp_path):
    r = run_scenario("""
import mxnet as mx
import pyprof
from pyprof import profiler
profiler.set_config(filename="t.json", continuous_dump=False, aggregate_stats=True)
profiler.set_state("run")
a = mx.nd.ones((16, 16))
mx.nd.dot(a, a).wait_to_read()
attempt("key", lambda: profiler.set_config(profile_symbolc=True))
attempt("value", lambda: profiler.set_config(profile_api="yes"))
attempt("state", lambda: profiler.set_state("go"))
attempt("format", lambda: profiler.dumps(format="xml"))
attempt("sort", lambda: profiler.dumps(sort_by="mean"))
attempt("server", lambda: profiler.set_state("run", profile_process="server"))
profiler.set_config(filename="other.json", continuous_dump=False, aggregate_stats=True)
mx.nd.dot(a, a).wait_to_read()
profiler.set_state("stop")
profiler.dump()
attempt("second_session", lambda: profiler.set_config(filename="next.json"))
attempt("second_dump", lambda: profiler.dump())
result = errors
""", tmp_path)
    assert r["key"][0] == "ConfigError" and "did you mean 'profile_symbolic'" in r["key"][1]
    assert r["value"][0] == "ConfigError" and "'yes'" in r["value"][1]
    assert r["state"][0] == "StateError" and "one of 'stop', 'run'" in r["state"][1]
    assert r["format"][0] == "ConfigError" and r["sort"][0] == "ConfigError"
    assert r["server"][0] == "StateError" and "distributed kvstore" in r["server"][1]
    assert r["second_session"][0] == "StateError" and "child process" not in r["key"][1]
    assert r["second_dump"][0] == "StateError"
    # Nothing collected was lost: a new filename while running (as in mxnet.profiler) put the
    # first dot in the finished first trace and the second in the next one.
    assert len(operator_pairs(load_trace(tmp_path / "t.json"), ("dot",))) == 1
    assert len(operator_pairs(load_trace(tmp_path / "other.json"), ("dot",))) == 1


def test_dump_before_run_and_dumps_without_aggregate_stats(tmp_path):
    r = run_scenario("""
import pyprof
from pyprof import profiler
from pyprof.native import capi as _capi
errors = {}
try:
    profiler.dump()
except pyprof.StateError as e:
    errors["dump"] = str(e)
try:  # the raw C error, translated with the function's name
    _capi.call("MXDumpProcessProfile", 1, 0, None)
except pyprof.MXNetError as e:
    errors["raw"] = [e.function, e.mxnet_message, str(e)]
profiler.set_config(filename="t.json", aggregate_stats=False)
try:
    profiler.dumps()
except pyprof.StateError as e:
    errors["dumps"] = str(e)
result = errors
""", tmp_path)
    assert "set_state('run')" in r["dump"]
    fn, message, text = r["raw"]
    assert fn == "MXDumpProcessProfile" and "hasn't been run" in message
    assert text.startswith("MXDumpProcessProfile failed: Check failed")
    assert "Stack trace" not in text
    assert "aggregate_stats=True" in r["dumps"]


def test_mxnet_profiler_and_pyprof_share_one_library(tmp_path):
    """Configure through mxnet.profiler, record and dump through pyprof: one trace."""
    r = run_scenario("""
import mxnet as mx
from mxnet import profiler as mxprof
import pyprof.profiler as profiler, pyprof.native.capi as capi
mxprof.set_config(filename="t.json", profile_imperative=True, continuous_dump=False)
profiler.set_state("run")
mx.nd.dot(mx.nd.ones((8, 8)), mx.nd.ones((8, 8))).wait_to_read()
mxprof.set_state("stop")
profiler.dump()
import os
result = [capi.library_path(), os.path.realpath(mx.base._LIB._name)]
""", tmp_path)
    assert r[0] == r[1]
    assert len(operator_pairs(load_trace(tmp_path / "t.json"), ("dot",))) == 1
