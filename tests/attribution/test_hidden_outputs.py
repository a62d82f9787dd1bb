"""Hidden outputs and MXNet's internal operators (issue 34 item 4), in per-operator mode, each
scenario in a child process: the memory check counts what an operator allocates beyond the
outputs a call gets back (attribution.json matching.hidden_outputs), the backward gradients MXNet
does not compute, oneDNN's Reorder2Default is bookkeeping (a layout conversion), and
_backward_BatchNorm gets shapes and FLOPs. What the engine's timing may move (a check absent
under load: interleaved, shared_stamp) is not asserted: no check fails, and checks are made."""

from __future__ import annotations

import json
import os

import pytest

from tests.child import run_scenario

_ENV = {"PYPROF_PER_OPERATOR": "1"}

_OPS = """
import ctypes, json, re, pyprof
import mxnet as mx
from mxnet import autograd
from mxnet.base import _LIB, NDArrayHandle, c_str, c_str_array, c_handle_array, py_str
from pyprof.attribution.matching import ARGS
from pyprof.attribution.memory import HIDDEN
PLANT
x = mx.nd.random.uniform(shape=(2, 8, 6, 6))
g, b, mm, mv = mx.nd.ones(8), mx.nd.zeros(8), mx.nd.zeros(8), mx.nd.ones(8)
g6, g2 = mx.nd.ones(6), mx.nd.ones(2)
OPS = {
    "BatchNorm": lambda: mx.nd.BatchNorm(x, g, b, mm, mv),
    "BatchNorm axis": lambda: mx.nd.BatchNorm(x, g6, g6, g6, g6, axis=2),
    "BatchNorm output_mean_var": lambda: mx.nd.BatchNorm(x, g, b, mm, mv, output_mean_var=True)[0],
    "Dropout": lambda: mx.nd.Dropout(x, p=0.5),
    "Dropout axes": lambda: mx.nd.Dropout(x, p=0.5, axes=(2, 3)),
    "Pooling max": lambda: mx.nd.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max"),
    "Pooling avg": lambda: mx.nd.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="avg"),
    "LRN": lambda: mx.nd.LRN(x, nsize=3),
    "LayerNorm": lambda: mx.nd.LayerNorm(x, g6, g6),
    "InstanceNorm": lambda: mx.nd.InstanceNorm(x, g, b),
    "GroupNorm": lambda: mx.nd.GroupNorm(x, g2, g2, num_groups=2),
}
MODES = ("inference", "record", "train_mode")
def run(mode, f):
    if mode == "record":
        with autograd.record():
            y = f()
    elif mode == "train_mode":
        with autograd.train_mode():
            y = f()
    else:
        y = f()
    y.wait_to_read()
for mode in MODES:          # warm-up: the first calls queue behind MXNet's seeding
    for f in OPS.values():
        run(mode, f)
mx.nd.waitall()
with pyprof.profile(path="h.json", record_shapes=True) as p:
    for _ in range(4):
        for mode in MODES:
            for f in OPS.values():
                run(mode, f)
    mx.nd.waitall()

def counts(op, ins, attrs):
    # the registry's (all, visible) outputs: MXImperativeInvokeEx refuses a wrong output count
    # naming both (src/c_api/c_api_ndarray.cc SetNDInputsOutputs)
    h = ctypes.c_void_p()
    assert _LIB.NNGetOpHandle(c_str(op), ctypes.byref(h)) == 0
    n, outs = ctypes.c_int(99), (NDArrayHandle * 99)()
    p_out = ctypes.cast(outs, ctypes.POINTER(NDArrayHandle))
    st = ctypes.POINTER(ctypes.c_int)()
    rc = _LIB.MXImperativeInvokeEx(h, len(ins), c_handle_array(ins), ctypes.byref(n), ctypes.byref(p_out),
                                   len(attrs), c_str_array(list(attrs)), c_str_array([str(v) for v in attrs.values()]),
                                   ctypes.byref(st))
    m = re.search(r"expects (\\d+) \\(all\\) or (\\d+) \\(visible only\\)", py_str(_LIB.MXGetLastError()))
    return [int(m.group(1)), int(m.group(2))] if rc != 0 and m else None
ARGS_OF = {"BatchNorm": ([x, g, b, mm, mv], {}), "Dropout": ([x], {"p": 0.5}),
           "Pooling": ([x], {"kernel": "(2, 2)", "pool_type": "max"}), "LRN": ([x], {"nsize": 3}),
           "LayerNorm": ([x, g6, g6], {}), "InstanceNorm": ([x, g, b], {}),
           "GroupNorm": ([x, g2, g2], {"num_groups": 2})}
ev = json.load(open("h.json"))["traceEvents"]
a = lambda e: e.get("args") or {}
names = {"BatchNorm", "Dropout", "Pooling", "LRN", "LayerNorm", "InstanceNorm", "GroupNorm"}
mine = [e for e in ev if e.get("ph") in ("B", "X") and e.get("name") in names]
result = {
    "report": p.windows[0].attribution.as_dict(),
    "events": len(mine),
    "failed": sorted(json.dumps([e["name"], a(e).get(ARGS["output_dims"]), a(e).get(ARGS["attrs"])]) for e in mine
                     if a(e).get(ARGS["memory_check"]) is False),
    "checked": sorted({e["name"] for e in mine if a(e).get(ARGS["memory_check"]) is True}),
    "registry": {op: [counts(op, *ARGS_OF[op]), 1 + len(HIDDEN.get(op, {"outputs": []})["outputs"])] for op in ARGS_OF},
}
"""


def _ops(tmp_path, plant: str = ""):
    return run_scenario(_OPS.replace("PLANT", plant), tmp_path, env=_ENV, timeout=240)


def test_hidden_outputs_pass_the_memory_check(tmp_path):
    r = _ops(tmp_path)
    assert r["events"] == 4 * 3 * 11, r["report"]
    # no check fails (a failed check would demote an exact match): every allocation modelled
    assert r["failed"] == [], r["failed"]
    assert r["report"]["memory_checked"] == r["report"]["memory_passed"] > 0, r["report"]
    # checks are made for every operator (some may be absent under load, not all of 12 each)
    assert r["checked"] == sorted({"BatchNorm", "Dropout", "Pooling", "LRN", "LayerNorm",
                                   "InstanceNorm", "GroupNorm"}), r["report"]
    # the table's outputs are the registry's (all outputs, hidden ones included)
    for op, (registry, table) in r["registry"].items():
        assert registry is not None and registry[0] == table and registry[1] == 1, (op, registry, table)


_NET = """
import json, pyprof
import mxnet as mx
from mxnet.gluon.model_zoo import vision
from pyprof.attribution.matching import ARGS
PLANT
nets = {name: getattr(vision, name)() for name in NAMES}
x = mx.nd.random.uniform(shape=(1, 3, SIZE, SIZE))
for net in nets.values():
    net.initialize(mx.init.Xavier())
    net(x).wait_to_read()        # warm-up: the parameters' first use
mx.nd.waitall()
with pyprof.profile(path="n.json", record_shapes=True) as p:
    for net in nets.values():
        net(x).wait_to_read()
    mx.nd.waitall()
ev = json.load(open("n.json"))["traceEvents"]
a = lambda e: e.get("args") or {}
ops = [e for e in ev if e.get("ph") in ("B", "X") and ARGS["match"] in a(e)]
result = {"report": p.windows[0].attribution.as_dict(),
          "failed": sorted({e["name"] for e in ops if a(e).get(ARGS["memory_check"]) is False}),
          "failed_exact": sum(a(e).get(ARGS["memory_check"]) is False and a(e)[ARGS["match"]] == "exact" for e in ops),
          "bn": sum(e["name"] == "BatchNorm" for e in ops),
          "bn_checked": sum(e["name"] == "BatchNorm" and a(e).get(ARGS["memory_check"]) is True for e in ops)}
"""


def _nets(tmp_path, names, size, plant=""):
    body = _NET.replace("NAMES", repr(names)).replace("SIZE", str(size)).replace("PLANT", plant)
    return run_scenario(body, tmp_path, env=_ENV, timeout=300)


@pytest.mark.parametrize("names,size", [
    (["resnet50_v1", "mobilenet1_0"], 32),
    pytest.param(["resnet50_v1", "resnet50_v2", "mobilenet1_0", "mobilenetv2_1.0"], 224,
                 marks=pytest.mark.skipif(os.environ.get("PYPROF_LONG_TESTS") != "1",
                                          reason="long mode: PYPROF_LONG_TESTS=1")),
])
def test_resnet50_and_mobilenet_inference_fail_no_check(tmp_path, names, size):
    r = _nets(tmp_path, names, size)
    rep = r["report"]
    assert rep["matched"] == rep["calls"] and rep["unmatched_events"] == {}, rep
    # before issue 34 item 4: ResNet-50's 53 BatchNorms failed their check (then ambiguous)
    assert r["failed"] == [] and r["failed_exact"] == 0, r
    assert rep["memory_checked"] == rep["memory_passed"] > rep["calls"] // 2, rep
    assert r["bn_checked"] > r["bn"] // 2, r


_STEP = """
import json, pyprof
import mxnet as mx
from mxnet import autograd, gluon
from pyprof.attribution.matching import ARGS, BOOKKEEPING
from pyprof import rules
PLANT
x = mx.nd.random.uniform(shape=(4, 3, 16, 16)); y = mx.nd.array([1, 2, 3, 0])
lf = gluon.loss.SoftmaxCrossEntropyLoss()
def make(hybrid):
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(8, 3, padding=1), gluon.nn.BatchNorm(), gluon.nn.Activation("relu"),
            gluon.nn.MaxPool2D(), gluon.nn.Dense(10))
    net.initialize(mx.init.Xavier())
    if hybrid:
        net.hybridize()
    tr = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    def step():
        with autograd.record():
            loss = lf(net(x), y)
        loss.backward(); tr.step(4)
    return net, step
nets = [make(False), make(True)]
for net, step in nets:
    step(); net(x).wait_to_read()
mx.nd.waitall()
with pyprof.profile(path="s.json", record_shapes=True, with_flops=True) as p:
    for net, step in nets:
        net(x).wait_to_read()     # inference: oneDNN reorders the weights to its layout
        step()                    # training reads them: Reorder2Default
        mx.nd.waitall()
ev = json.load(open("s.json"))["traceEvents"]
a = lambda e: e.get("args") or {}
ops = sorted((e for e in ev if e.get("ph") in ("B", "X") and e.get("cat") == "operator"), key=lambda e: e["ts"])
classes = rules.spec("trace.json")["bookkeeping"]["classes"]
result = {
    "report": p.windows[0].attribution.as_dict(),
    "reorders": sum(e["name"] == "Reorder2Default" for e in ops),
    "layout": "Reorder2Default" in classes["layout conversion"] and "Reorder2Default" in BOOKKEEPING,
    "bn_backward": sorted({json.dumps([a(e).get(ARGS["input_dims"]), a(e).get(ARGS["output_dims"]),
                                       a(e).get(ARGS["flops"]), a(e).get(ARGS["source"])]) for e in ops if e["name"] == "_backward_BatchNorm"}),
    "failed": sorted({e["name"] for e in ops if a(e).get(ARGS["memory_check"]) is False}),
    "checked": sorted({e["name"] for e in ops if a(e).get(ARGS["memory_check"]) is True}),
    "without": sorted({e["name"] for e in ops if ARGS["input_dims"] not in a(e) and e["name"] not in BOOKKEEPING}),
}
"""


@pytest.fixture(scope="module")
def step(tmp_path_factory):
    return run_scenario(_STEP.replace("PLANT", ""), tmp_path_factory.mktemp("step"), env=_ENV, timeout=240)


def test_reorder2default_is_a_layout_conversion(step):
    assert step["reorders"] >= 1, step["report"]
    assert step["layout"] is True
    assert "Reorder2Default" not in step["report"]["unmatched_events"], step["report"]


def test_backward_batchnorm_gets_shapes_and_flops(step):
    # inputs: out_grad, mean, var (the forward's hidden outputs), data, gamma, beta, moving
    # mean and var; outputs: the gradients of data, gamma, beta; FLOPs 2 x 5 per element
    dims = [[4, 8, 16, 16], [8], [8], [4, 8, 16, 16], [8], [8], [8], [8]]
    outs = [[4, 8, 16, 16], [8], [8]]
    flops = 2 * 5 * 4 * 8 * 16 * 16
    assert step["bn_backward"] == sorted(json.dumps([dims, outs, flops, s])
                                         for s in ("derived, autograd", "derived")), step["bn_backward"]
    assert step["without"] == [], step["without"]


def test_training_step_fails_no_check(step):
    # the forward's BatchNorm (mean, var) and max Pooling under record (its workspace), the first
    # convolution's backward (no data gradient): all modelled
    assert step["failed"] == [], step["failed"]
    assert {"BatchNorm", "Pooling"} <= set(step["checked"]), step["checked"]
    rep = step["report"]
    assert rep["memory_checked"] == rep["memory_passed"] > 0, rep
