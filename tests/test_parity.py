"""Parity: one scenario through the Python API and through the JVM layer in-process.

Each side runs in its own child process (one profiler session per process). The
normalised traces (timestamps, pids and tids set aside) must hold the same multiset of
(name, category, phase) events, and MXNet's JSON statistics must agree on operator
names and counts.
"""

import json
from collections import Counter

from child import load_trace, run_scenario

SCENARIO = """
import json
N, CALLS = 128, 4
cfg = dict(filename="trace.json", profile_symbolic=True, profile_imperative=False,
           profile_api=False, profile_memory=False, aggregate_stats=True,
           continuous_dump=False)
if BINDING == "python":
    import mxnet as mx
    from pyprof import profiler
    a = mx.nd.random.uniform(-1, 1, (N, N)); b = mx.nd.random.uniform(-1, 1, (N, N))
    exe = mx.sym.dot(mx.sym.var("A"), mx.sym.var("B"), name="dot").bind(mx.cpu(), {"A": a, "B": b})
    profiler.set_config(**cfg)
    profiler.set_state("run")
    for _ in range(CALLS):
        exe.forward()[0].wait_to_read()
    profiler.set_state("stop")
    profiler.dump()
    stats = profiler.dumps(format="json")
else:
    from pyprof import jvm
    p = jvm.require("pyprof.profiler")
    nd, sym, ctx = (jvm.require(f"pyprof.example.{n}") for n in ("ndarray", "symbol", "context"))
    ex = jvm.require("pyprof.example.executor")
    cpu = ctx.cpu()
    a = nd.random_uniform(-1.0, 1.0, [N, N], {"ctx": cpu})
    b = nd.random_uniform(-1.0, 1.0, [N, N], {"ctx": cpu})
    exe = sym.bind(sym.dot("dot", [sym.variable("A"), sym.variable("B")]), cpu, {"A": a, "B": b})
    p.profiler_set_config({k.replace("_", "-"): v for k, v in cfg.items()})
    p.profiler_set_state("run")
    for _ in range(CALLS):
        nd.wait_to_read(ex.outputs(ex.forward(exe))[0])
    p.profiler_set_state("stop")
    p.dump_profile(True)
    stats = json.dumps(p.dumps({"format": "json"}))
result = stats
"""


def _events(path):
    return Counter((e.get("name"), e.get("cat"), e["ph"]) for e in load_trace(path)
                   if e["ph"] != "M")


def _op_counts(stats_json: str):
    doc = json.loads(stats_json)
    return {(cat, name): v["Count"] for cat, ops in doc["Time"].items()
            for name, v in ops.items()}


def test_python_and_jvm_record_the_same_trace(tmp_path):
    py = run_scenario("BINDING = 'python'\n" + SCENARIO, tmp_path / "py")
    jv = run_scenario("BINDING = 'jvm'\n" + SCENARIO, tmp_path / "jvm")
    e_py, e_jv = _events(tmp_path / "py" / "trace.json"), _events(tmp_path / "jvm" / "trace.json")
    assert e_py[("[dot]", "operator", "B")] == 4  # the scenario really ran
    assert e_py == e_jv
    assert _op_counts(py) == _op_counts(jv)
    assert _op_counts(py)[("operator", "[dot]")] == 4
