"""Custom profiler objects, and MXNet 1.9.1's own profiler tests with only the import changed.

The classic scenarios are ports of tests/python/unittest/test_profiler.py (MXNet 1.9.1): the
bodies keep MXNet's code and names, with ``from pyprof import profiler`` in place of
``from mxnet import profiler`` (and smaller arrays and loops, for a 2-core machine). Each runs in
its own child process, since MXNet allows one trace session per process.
"""

import json
from collections import OrderedDict

import pytest

from child import load_trace, operator_pairs, run_scenario

# MXNet's helper from test_profiler.py, verbatim but for the import.
PRELUDE = """
import os, time, json
import numpy as np
import mxnet as mx
from pyprof import profiler

def enable_profiler(profile_filename, run=True, continuous_dump=False, aggregate_stats=False):
    profiler.set_config(profile_symbolic=True,
                        profile_imperative=True,
                        profile_memory=True,
                        profile_api=True,
                        filename=profile_filename,
                        continuous_dump=continuous_dump,
                        aggregate_stats=aggregate_stats)
    if run is True:
        profiler.set_state('run')

def test_profile_event(do_enable_profiler=True):
    if do_enable_profiler is True:
        enable_profiler('test_profile_event.json')
    event = profiler.Event("test_profile_event")
    event.start()
    var = mx.nd.ones((100, 50))
    assert np.allclose(var.asnumpy(), np.ones((100, 50)))
    event.stop()
    if do_enable_profiler is True:
        profiler.set_state('stop')

def test_profile_counter(do_enable_profiler=True):
    if do_enable_profiler is True:
        enable_profiler('test_profile_counter.json')
    python_domain = profiler.Domain('PythonDomain::test_profile_counter')
    counter = profiler.Counter(python_domain, "PythonCounter::test_profile_counter")
    counter.set_value(5)
    counter += 1
    for _ in range(20):
        value_change = 3
        counter.increment(value_change)
        counter -= 2
    if do_enable_profiler is True:
        profiler.set_state('stop')
"""


def classic(body: str, tmp_path, **kw):
    return run_scenario(PRELUDE + body, tmp_path, **kw)


def events_of(tmp_path, name):
    return load_trace(tmp_path / name)


def test_profiler_symbolic_executor(tmp_path):
    """test_profiler: a bound dot, profiled from iteration 2 to 4 of 5."""
    classic("""
enable_profiler('test_profiler.json', False, False)
A = mx.sym.Variable('A')
B = mx.sym.Variable('B')
C = mx.symbol.dot(A, B)
executor = C.simple_bind(mx.cpu(1), 'write', A=(256, 256), B=(256, 256))
a = mx.random.uniform(-1.0, 1.0, shape=(256, 256))
b = mx.random.uniform(-1.0, 1.0, shape=(256, 256))
a.copyto(executor.arg_dict['A'])
b.copyto(executor.arg_dict['B'])
for i in range(5):
    if i == 2:
        profiler.set_state('run')
    if i == 4:
        profiler.set_state('stop')
    executor.forward()
    c = executor.outputs[0]
    c.wait_to_read()
profiler.set_state('stop')
profiler.dump()
""", tmp_path)
    events = events_of(tmp_path, "test_profiler.json")
    assert len(operator_pairs(events, ("[dot]", "dot"))) == 2  # iterations 2 and 3


def test_domain_task_frame_event_counter_marker(tmp_path):
    """create_domain(_dept), task, frame, event, counter, marker: every kind is in the trace."""
    classic("""
enable_profiler('objects.json')
domain = profiler.Domain(name='PythonDomain::test_profile_create_domain')
print("Domain created: {}".format(str(domain)))
dept = profiler.Domain('PythonDomain::test_profile_create_domain_dept')
task = profiler.Task(dept, "test_profile_task")
task.start()
var = mx.nd.ones((100, 50))
var.asnumpy()
task.stop()
frame = profiler.Frame(dept, "test_profile_frame")
frame.start()
mx.nd.ones((100, 50)).asnumpy()
frame.stop()
test_profile_event(False)
test_profile_counter(False)
profiler.Marker(domain, "test_marker").mark('process')
domain.new_marker("global_marker").mark(scope='global')
profiler.set_state('stop')
profiler.dump()
""", tmp_path)
    events = events_of(tmp_path, "objects.json")

    def phases(name):
        return sorted(e["ph"] for e in events if e.get("name") == name)

    assert phases("test_profile_task") == ["b", "e"]
    assert phases("test_profile_frame") == ["(", ")"]
    assert phases("test_profile_event") == ["B", "E"]
    counter = [e["args"]["PythonCounter::test_profile_counter"] for e in events
               if e.get("name") == "PythonCounter::test_profile_counter"]
    assert counter[0] == 5 and counter[-1] == 5 + 1 + 20 * (3 - 2)
    marks = {e["name"]: e for e in events if e.get("ph") == "n"} or \
            {e["name"]: e for e in events if "marker" in e.get("name", "")}
    assert {"test_marker", "global_marker"} <= set(marks)
    task_ev = next(e for e in events if e.get("name") == "test_profile_task")
    assert task_ev["cat"] == "PythonDomain::test_profile_create_domain_dept"


def test_pause_resume(tmp_path):
    """test_profile_tune_pause_resume: what runs while paused is not recorded."""
    classic("""
enable_profiler('test_profile_tune_pause_resume.json')
profiler.pause()
python_domain = profiler.Domain('PythonDomain::test_profile_task')
task = profiler.Task(python_domain, "test_profile_task")
task.start()
mx.nd.ones((100, 50)).asnumpy()
task.stop()
profiler.resume()
test_profile_event(False)
profiler.pause()
profiler.set_state('stop')
profiler.dump()
""", tmp_path)
    names = {e.get("name") for e in events_of(tmp_path, "test_profile_tune_pause_resume.json")}
    assert "test_profile_event" in names and "test_profile_task" not in names


def test_continuous_profile_and_instant_marker(tmp_path):
    """The continuously dumped file only grows, and is valid once finished."""
    sizes = classic("""
file_name = 'test_continuous_profile_and_instant_marker.json'
enable_profiler(file_name, True, True, True)
python_domain = profiler.Domain('PythonDomain::test_continuous_profile')
last_file_size = 0
sizes = []
for i in range(5):
    profiler.Marker(python_domain, "StartIteration-" + str(i)).mark('process')
    test_profile_event(False)
    test_profile_counter(False)
    profiler.dump(False)
    new_file_size = os.path.getsize(file_name)
    assert new_file_size >= last_file_size
    last_file_size = new_file_size
    sizes.append(new_file_size)
profiler.dump(False)
debug_str = profiler.dumps()
assert len(debug_str) > 0
profiler.set_state('stop')
profiler.dump()
result = sizes
""", tmp_path)
    assert sizes == sorted(sizes) and sizes[-1] > sizes[0]
    events = events_of(tmp_path, "test_continuous_profile_and_instant_marker.json")
    assert {f"StartIteration-{i}" for i in range(5)} <= {e.get("name") for e in events}


def test_aggregate_stats_valid_json_and_sorting(tmp_path):
    """test_aggregate_stats_valid_json_return and _sorting: every key, both directions."""
    out = classic("""
enable_profiler('test_aggregate_stats_sorting.json', True, True, True)
test_profile_event(False)
test_profile_counter(False)
result = {}
for sb in ['total', 'avg', 'min', 'max', 'count']:
    for asc in [False, True]:
        result[f"{sb}-{asc}"] = profiler.dumps(format='json', sort_by=sb, ascending=asc)
result["table"] = profiler.dumps()
profiler.set_state('stop')
""", tmp_path)
    keys = {"total": "Total", "avg": "Avg", "min": "Min", "max": "Max", "count": "Count"}
    for sb, column in keys.items():
        for asc in (False, True):
            stats = json.loads(out[f"{sb}-{asc}"], object_pairs_hook=OrderedDict)
            assert "Time" in stats and "Memory" in stats and "Unit" in stats
            for domain in stats["Time"].values():
                values = [item[column] for item in domain.values()]
                assert values == sorted(values, reverse=not asc), (sb, asc, values)
            if sb != "total":  # memory items have no Total
                for domain in stats["Memory"].values():
                    values = [item[column] for item in domain.values()]
                    assert values == sorted(values, reverse=not asc), (sb, asc, values)
    assert "Time (ms)" in out["table"]


def test_aggregate_duplication(tmp_path):
    """Operators are counted once (no double count from their async copies)."""
    out = classic("""
enable_profiler('test_aggregate_duplication.json', run=True, continuous_dump=True,
                aggregate_stats=True)
profiler.dumps(reset=True)
inp = mx.nd.zeros(shape=(100, 100))
y = mx.nd.sqrt(inp)
inp = inp + 1
inp = inp + 1
mx.nd.waitall()
profiler.dump(False)
result = json.loads(profiler.dumps(format='json'))
profiler.set_state('stop')
profiler.dump()
""", tmp_path)
    ops = out["Time"]["operator"]
    assert ops["sqrt"]["Count"] == 1 and ops["_plus_scalar"]["Count"] == 2
    events = events_of(tmp_path, "test_aggregate_duplication.json")
    assert len(operator_pairs(events, ("sqrt",))) == 1
    assert len(operator_pairs(events, ("_plus_scalar",))) == 2


CUSTOM_OP = """
class MyAdd(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0] + 1)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], out_grad[0])

@mx.operator.register('MyAdd')
class MyAddProp(mx.operator.CustomOpProp):
    def __init__(self):
        super(MyAddProp, self).__init__(need_top_grad=True)

    def list_arguments(self):
        return ['data']

    def list_outputs(self):
        return ['output']

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return MyAdd()
"""


def test_custom_operator_profiling(tmp_path):
    """A Python custom operator: Op::pure_python and Op::<sub-operator>, not the bare name."""
    out = classic(CUSTOM_OP + """
enable_profiler('test_custom_operator_profiling.json', True, True, True)
inp = mx.nd.zeros(shape=(100, 100))
x = inp + 1
y = mx.nd.Custom(inp, op_type='MyAdd')
z = mx.nd.Custom(inp, op_type='MyAdd')
mx.nd.waitall()
profiler.set_state('stop')
result = json.loads(profiler.dumps(format='json'))
profiler.dump()
""", tmp_path)
    custom = out["Time"]["Custom Operator"]
    assert "MyAdd::pure_python" in custom and "MyAdd::_plus_scalar" in custom
    assert "_plus_scalar" not in custom
    assert custom["MyAdd::pure_python"]["Count"] == 2
    events = events_of(tmp_path, "test_custom_operator_profiling.json")
    # pure_python is only an async b/e pair on the Custom Operator category's pid
    assert [e["ph"] for e in events if e.get("name") == "MyAdd::pure_python"].count("b") == 2
    assert len(operator_pairs(events, ("MyAdd::_plus_scalar",))) == 2
    assert len(operator_pairs(events, ("_plus_scalar",))) == 1  # x = inp + 1, outside the op


def test_object_contract(tmp_path):
    """Handles freed once; domains cached; context managers, decorators; loud misuse."""
    r = run_scenario("""
import gc, mxnet as mx, pyprof
from pyprof import profiler, objects

profiler.set_config(filename="t.json", continuous_dump=False)
profiler.set_state("run")
d = pyprof.Domain("D")
assert pyprof.Domain("D") is d and profiler.Domain("D") is d and str(d) == "D"

# Handles: close() twice frees once; count MXProfileDestroyHandle calls through a wrapper.
real = objects._fn("MXProfileDestroyHandle")
calls = []
objects._fns["MXProfileDestroyHandle"] = lambda h: (calls.append(h), real(h))[1]
t = d.new_task("t")
t.close(); t.close()
del t; gc.collect()
e = pyprof.Event("e")
del e; gc.collect()
objects._fns["MXProfileDestroyHandle"] = real
result = {"destroyed": len(calls)}

with d.new_task("ctx_task"):
    mx.nd.ones((4, 4)).wait_to_read()
frame = d.new_frame("ctx_frame")
@frame
def work(n):
    return mx.nd.ones((n, n)).sum().asscalar()
work(3); work(4)
c = d.new_counter("c", 2)
c += 3
c -= 5
attempt("below_zero", lambda: c.decrement(1))
attempt("set_negative", lambda: c.set_value(-1))
attempt("float_delta", lambda: c.increment(1.5))
result["value"] = c.value
t2 = d.new_task("t2")
attempt("stop_first", t2.stop)
t2.start()
attempt("start_twice", t2.start)
t2.stop()
t2.close()
attempt("closed", t2.start)
attempt("quote", lambda: d.new_task('a"b'))
attempt("long", lambda: d.new_task("x" * 200))
attempt("scope", lambda: d.new_marker("m").mark("galaxy"))
attempt("no_domain", lambda: pyprof.Task("D", "t"))
profiler.set_state("stop")
profiler.dump()
result["errors"] = errors
""", tmp_path)
    assert r["destroyed"] == 2
    assert r["value"] == 0
    err = r["errors"]
    assert err["below_zero"][0] == "StateError" and "wrap" in err["below_zero"][1]
    assert err["set_negative"][0] == "ConfigError"  # a value out of range: the argument
    assert err["float_delta"][0] == "ConfigError"
    assert err["stop_first"][0] == "StateError" and "start() first" in err["stop_first"][1]
    assert err["start_twice"][0] == "StateError" and err["closed"][0] == "StateError"
    assert err["quote"][0] == "ConfigError" and "valid JSON" in err["quote"][1]
    assert err["long"][0] == "ConfigError" and err["scope"][0] == "ConfigError"
    assert err["no_domain"][0] == "ConfigError" and "pyprof.Domain('my_domain')" in err["no_domain"][1]
    events = load_trace(tmp_path / "t.json")
    assert sorted(e["ph"] for e in events if e.get("name") == "ctx_task") == ["b", "e"]
    assert [e["ph"] for e in events if e.get("name") == "ctx_frame"].count("(") == 2
    counter = [e["args"]["c"] for e in events if e.get("name") == "c" and e.get("ph") == "C"]
    assert counter == [2, 5, 0]  # no wrap-around value ever reached MXNet


@pytest.mark.parametrize("module", ["mxnet.profiler", "pyprof.profiler"])
def test_same_counter_trace_as_mxnet(tmp_path, module):
    """The same object calls through mxnet.profiler and pyprof give the same trace events."""
    run_scenario(f"""
import mxnet as mx
import {module} as profiler
profiler.set_config(filename="t.json", continuous_dump=False, profile_api=False)
profiler.set_state("run")
d = profiler.Domain("dom")
c = profiler.Counter(d, "ctr", 7)
c += 2
c -= 4
t = profiler.Task(d, "task")
t.start(); t.stop()
profiler.Marker(d, "mk").mark()
profiler.set_state("stop")
profiler.dump()
""", tmp_path)
    events = load_trace(tmp_path / "t.json")
    assert [e["args"]["ctr"] for e in events if e.get("name") == "ctr"] == [7, 9, 5]
    assert sorted(e["ph"] for e in events if e.get("name") == "task") == ["b", "e"]
    assert [e.get("s") for e in events if e.get("name") == "mk"] == ["p"]
