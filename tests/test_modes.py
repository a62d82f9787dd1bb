"""What MXNet 1.9.1 records with each mode key off and on, and what pyprof says about it
(pyprof.profiler.set_config's warning for profile_symbolic; MXNET_PROFILER_AUTOSTART at import)."""

import pytest

from child import load_trace, run_scenario

from pyprof import env

# One process, one session per configuration: every mode key on, then each key off alone.
# The work touches every mode: imperative NDArray operators and a hybridized Gluon block
# (imperative), a bound symbol (symbolic), C API calls (api) and allocations (memory).
MODES = """
import collections, json, warnings
import pyprof
import mxnet as mx
from mxnet import gluon

net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(8, activation="relu"))
net.initialize()
net.hybridize()
x = mx.nd.ones((4, 6))
a = mx.nd.ones((8, 8))
exe = mx.sym.relu(mx.sym.dot(mx.sym.var("A"), mx.sym.var("B"))).bind(mx.cpu(), {"A": a, "B": a})

def work():
    mx.nd.dot(a, a).wait_to_read()
    net(x).wait_to_read()
    exe.forward()[0].wait_to_read()
    mx.nd.waitall()

KEYS = ["profile_symbolic", "profile_imperative", "profile_api", "profile_memory"]
work()
result = {}
for off in [None] + KEYS:
    opts = {k: k != off for k in KEYS}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pyprof.profile(path=f"modes_{off}.json", **opts) as prof:
            work()
    events = json.load(open(prof.windows[0].path))["traceEvents"]
    timed = [e for e in events if e.get("ph") in ("B", "b", "C")]
    st = prof.windows[0].stats()
    result[str(off)] = {
        "operators": sorted({e["name"] for e in timed if e.get("cat") == "operator"}),
        "categories": sorted({e.get("cat") for e in timed}),
        "stats_names": sorted({o.name for o in st.operators}),
        "memory": [m.device for m in st.memory],
        "warnings": [str(w.message) for w in caught if "pyprof" in str(w.message)],
    }
"""


@pytest.fixture(scope="module")
def modes(tmp_path_factory):
    return run_scenario(MODES, tmp_path_factory.mktemp("modes"), timeout=120)


def test_every_key_on_records_every_mode(modes):
    on = modes["None"]
    assert {"dot", "ImperativeBulk", "[dot,relu]"} <= set(on["operators"])
    assert {"operator", "MXNET_C_API", "Device Storage"} <= set(on["categories"])
    assert on["memory"] == ["cpu/0"] and on["warnings"] == []


def test_imperative_off_records_no_imperative_operator(modes):
    off = modes["profile_imperative"]
    assert "dot" not in off["operators"] and "ImperativeBulk" not in off["operators"]
    assert off["operators"] == ["[dot,relu]"]  # the bound symbol only


def test_api_off_records_no_api_call(modes):
    off = modes["profile_api"]
    assert "MXNET_C_API" not in off["categories"]
    assert not any(n.startswith("MX") for n in off["stats_names"])


def test_memory_off_records_no_memory_counter(modes):
    off = modes["profile_memory"]
    assert "Device Storage" not in off["categories"] and off["memory"] == []


def test_symbolic_off_still_records_bound_symbols_and_says_so(modes):
    """MXNet 1.9.1 records executors' operators whatever the mode: pyprof warns at set_config
    (a session configures through it), naming the fix."""
    off = modes["profile_symbolic"]
    assert "[dot,relu]" in off["operators"]  # MXNet's behaviour, documented
    assert len(off["warnings"]) == 1
    assert off["warnings"][0].startswith("pyprof: profile_symbolic is off, but MXNet 1.9.1 "
                                         "records the operators of bound symbols")
    assert "pyprof.profiler.pause()" in off["warnings"][0]


@pytest.mark.parametrize("environ,problem", [
    ({}, False),
    ({"MXNET_PROFILER_AUTOSTART": "0"}, False),
    ({"MXNET_PROFILER_AUTOSTART": "1"}, True),
    ({"MXNET_PROFILER_AUTOSTART": "1", "MXNET_PROFILER_MODE": "13"}, True),
    ({"MXNET_PROFILER_AUTOSTART": "1", "MXNET_PROFILER_MODE": "15"}, False),
    ({"MXNET_PROFILER_AUTOSTART": "1", "MXNET_PROFILER_MODE": "2"}, False),
])
def test_mxnet_autostart_without_imperative_is_a_problem(environ, problem):
    found = env.mxnet_autostart_problem(environ)
    assert (found is not None) == problem
    if problem:
        assert "fix: use PYPROF_AUTOSTART=1 instead" in found
        assert "MXNET_PROFILER_MODE=15" in found


AUTOSTARTED = """
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import pyprof
import mxnet as mx
a = mx.nd.ones((8, 8))
mx.nd.dot(a, a).wait_to_read()
result = [str(w.message) for w in caught if "pyprof" in str(w.message)]
"""


def test_mxnet_autostart_is_reported_at_import(tmp_path):
    alone = run_scenario(AUTOSTARTED, tmp_path / "alone", env={"MXNET_PROFILER_AUTOSTART": "1"})
    assert alone == ["pyprof: " + env.mxnet_autostart_problem({"MXNET_PROFILER_AUTOSTART": "1"})]
    names = {e.get("name") for e in load_trace(tmp_path / "alone" / "profile.json")}
    assert "dot" not in names  # what the warning says: mode 13 records no imperative operator

    full = run_scenario(AUTOSTARTED, tmp_path / "full",
                        env={"MXNET_PROFILER_AUTOSTART": "1", "MXNET_PROFILER_MODE": "15"})
    assert full == []
    assert "dot" in {e.get("name") for e in load_trace(tmp_path / "full" / "profile.json")}
