"""Autograd's backward of imperative calls (issue 22, pyprof.attribution.autograd): an
imperative loss recorded by autograd and backwarded, in per-operator mode in a child process.
Every ``_backward_*`` event and the head gradient's ``SetValueOp`` carries MXNet's input
shapes, in MXNet's order, and the memory counter's rise inside each equals its outputs' bytes."""

from __future__ import annotations

import pytest

from tests.child import run_scenario

_LOSS = """
import json, pyprof, mxnet as mx
from mxnet import autograd
from pyprof.attribution.matching import ARGS
PLANT
x = mx.nd.random.uniform(shape=(4, 10)); y = mx.nd.array([1, 2, 3, 4]); x.attach_grad()
w = mx.nd.random.uniform(shape=(4, 10)); w.attach_grad()
def step():
    with autograd.record():
        h = mx.nd.relu(x * w)                               # broadcast_mul, relu
        loss = (-mx.nd.log_softmax(h).pick(y)).mean() * 2   # log_softmax, pick, _mul_scalar, mean
    loss.backward()
step(); mx.nd.waitall()
with pyprof.profile(path="ag.json", record_shapes=True, profile_memory=True) as p:
    step(); mx.nd.waitall()
ev = json.load(open("ag.json"))["traceEvents"]
ops = sorted((e for e in ev if e.get("ph") in ("B", "X") and e.get("cat") == "operator"), key=lambda e: e["ts"])
a = lambda e: e.get("args") or {}
result = {
    "backward": [[e["name"], a(e).get(ARGS["input_dims"]), a(e).get(ARGS["output_dims"]),
                  a(e).get(ARGS["memory_check"]), a(e).get(ARGS["match"])]
                 for e in ops if e["name"].startswith("_backward") or e["name"] == "SetValueOp"],
    "report": p.windows[0].attribution.as_dict(),
    "grad_ok": bool(abs(x.grad.asnumpy()).sum() > 0),
}
"""

# MXNet 1.9.1's backward of the loss, in its run order, with its inputs (FGradient heads) and
# outputs: the head gradient, then each forward call's backward node, newest first.
_WANT = [
    ["SetValueOp", [], [[1]]],
    ["_backward_mul_scalar", [[1]], [[1]]],
    ["_backward_mean", [[1]], [[4]]],
    ["_backward_mul_scalar", [[4]], [[4]]],
    ["_backward_pick", [[4], [4]], [[4, 10]]],
    ["_backward_log_softmax", [[4, 10], [4, 10]], [[4, 10]]],
    ["_backward_relu", [[4, 10], [4, 10]], [[4, 10]]],
    ["_backward_broadcast_mul", [[4, 10], [4, 10], [4, 10]], [[4, 10], [4, 10]]],
]

_NO_REVERSAL = """
from pyprof.attribution import autograd as _ag
_derive = _ag.derive
def _fwd_order(*a, **k):
    made, nodes = _derive(*a, **k)
    return made, nodes[::-1]
_ag.derive = _fwd_order
"""
_WRONG_INPUTS = """
from pyprof.attribution import autograd as _ag
_ag.TABLE["pick"]["inputs"] = ["g0", "i0"]  # the data, not the index
"""

_VARIABLES_ALLOCATED = """
from pyprof.attribution import autograd as _ag
_derive = _ag.derive
def _all_fresh(*a, **k):
    made, nodes = _derive(*a, **k)
    for n in nodes:
        n.to_var = [False] * len(n.to_var)
    return made, nodes
_ag.derive = _all_fresh
"""


def _run(tmp_path, plant: str = ""):
    return run_scenario(_LOSS.replace("PLANT", plant), tmp_path,
                        env={"PYPROF_PER_OPERATOR": "1"}, timeout=240)


def test_every_backward_event_carries_mxnets_shapes_in_mxnets_order(tmp_path):
    r = _run(tmp_path)
    assert [b[:3] for b in r["backward"]] == _WANT, r["report"]
    assert {b[4] for b in r["backward"]} == {"exact"}
    # the counter's rise inside each event equals the outputs it allocates (a variable's
    # gradient, allocated by attach_grad, counts 0); absent where the stamps cannot tell (a
    # sample in a microsecond two slices share, another thread's sample between: CI under load)
    assert False not in [b[3] for b in r["backward"]], r["report"]
    rep = r["report"]
    assert rep["matched"] == rep["calls"] == 7 + len(_WANT) and rep["unmatched_calls"] == 0
    assert rep["memory_passed"] == rep["memory_checked"]
    assert rep["memory_checked"] + sum(rep["memory_unchecked"].values()) == rep["matched"]
    assert r["grad_ok"]


@pytest.mark.parametrize("plant", [_NO_REVERSAL, _WRONG_INPUTS], ids=["forward order", "pick reads its data"])
def test_a_planted_bug_changes_the_events_shapes(tmp_path, plant):
    r = _run(tmp_path, plant)
    assert [b[:3] for b in r["backward"]] != _WANT


def test_the_memory_check_fails_when_a_variables_gradient_is_taken_as_allocated(tmp_path):
    # under load the stamps may not tell the event's rise (check absent): a run in 3 must
    for attempt in range(3):
        r = _run(tmp_path / str(attempt), _VARIABLES_ALLOCATED)
        checks = {b[0]: b[3] for b in r["backward"]}
        if checks["_backward_broadcast_mul"] is not None:
            break
    assert checks["_backward_broadcast_mul"] is False and checks["_backward_relu"] is not False


_POOL = """
import json, pyprof, mxnet as mx
from mxnet import autograd
from pyprof.attribution.matching import ARGS
x = mx.nd.random.uniform(shape=(2, 3, 8, 8)); x.attach_grad()
def step():
    with autograd.record():
        loss = mx.nd.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max").sum()
    loss.backward()
step(); mx.nd.waitall()
with pyprof.profile(path="pool.json", record_shapes=True, profile_memory=True) as p:
    step(); mx.nd.waitall()
ev = json.load(open("pool.json"))["traceEvents"]
a = lambda e: e.get("args") or {}
result = [[e["name"], a(e).get(ARGS["input_dims"]), a(e).get(ARGS["input_type"]), a(e).get(ARGS["output_dims"]),
           a(e).get(ARGS["output_type"]), a(e).get(ARGS["memory_check"])]
          for e in sorted(ev, key=lambda e: e.get("ts", 0)) if e.get("ph") in ("B", "X") and e.get("cat") == "operator"
          and (e["name"].startswith("_backward") or e["name"] in ("_zeros_without_dtype", "SetValueOp"))]
"""


def test_an_imperative_max_poolings_workspace_gradient_is_checked_by_the_counter(tmp_path):
    # outside a CachedOp, MXNet's backward allocates each gradient inside its node: the
    # counter's rise inside _zeros_without_dtype is the workspace's bytes (2*3*4*4 int32)
    r = run_scenario(_POOL, tmp_path, env={"PYPROF_PER_OPERATOR": "1"}, timeout=240)
    y, x = [2, 3, 4, 4], [2, 3, 8, 8]
    assert sorted((row[:5] for row in r), key=str) == sorted([
        ["SetValueOp", [], [], [[1]], ["float32"]],
        ["_backward_sum", [[1]], ["float32"], [y], ["float32"]],
        ["_zeros_without_dtype", [], [], [y], ["int32"]],
        ["_backward_Pooling", [y, y, x, y, y], ["float32", "int32", "float32", "float32", "int32"], [x],
         ["float32"]],
    ], key=str)
    # each check passes, or is absent where the stamps cannot tell (never failed)
    assert False not in [row[5] for row in r], r


_TWICE = """
import json, pyprof, mxnet as mx
x = mx.nd.ones((2, 3)); x.attach_grad(); mx.nd.waitall()
with pyprof.profile(path="w_{window}.json", OPTIONS) as p:
    with mx.autograd.record():
        y = (x * x).sum()  # x read twice: its two gradients summed (ElementWiseSum, add_n in the trace)
    y.backward()
    mx.nd.waitall()
ev = [e for e in json.load(open("w_0.json"))["traceEvents"] if e.get("ph") == "B" and e.get("name") == "add_n"]  # ElementWiseSum's trace name
result = {"report": p.windows[0].attribution.as_dict(), "args": [e.get("args", {}) for e in ev]}
"""


@pytest.mark.parametrize("options", ["record_shapes=True", "with_stack=True"])
def test_a_variable_read_twice_gets_its_summed_gradient_with_its_shape(tmp_path, options):
    r = run_scenario(_TWICE.replace("OPTIONS", options), tmp_path,
                     env={"PYPROF_PER_OPERATOR": "1"}, timeout=240)
    assert r["report"]["matched"] == r["report"]["calls"], r["report"]
    assert len(r["args"]) == 1, r["args"]
    if options == "record_shapes=True":  # the variable's shape, as MXNet allocates its gradient
        assert r["args"][0]["pyprof.output_dims"] == [[2, 3]], r["args"]
    else:  # with_stack alone: no shape args (a summing node has no forward call: no call site)
        assert "Input Dims" not in r["args"][0] and "pyprof.match" in r["args"][0], r["args"]


_DOT = """
import json, pyprof, mxnet as mx
from pyprof.attribution.matching import ARGS
a = mx.nd.random.uniform(shape=(3, 4)); a.attach_grad()
b = mx.nd.random.uniform(shape=(4, 5)); b.attach_grad()
def step():
    with mx.autograd.record():
        loss = mx.nd.reshape(mx.nd.dot(a, b), shape=(-1,)).sum()  # the operator, not the view
    loss.backward()
step(); mx.nd.waitall()
with pyprof.profile(path="dot.json", record_shapes=True, profile_memory=True) as p:
    step(); mx.nd.waitall()
ev = json.load(open("dot.json"))["traceEvents"]
a = lambda e: e.get("args") or {}
result = {"report": p.windows[0].attribution.as_dict(), "backward": [
    [e["name"], a(e).get(ARGS["input_dims"]), a(e).get(ARGS["output_dims"]), a(e).get(ARGS["memory_check"])]
    for e in sorted(ev, key=lambda e: e.get("ts", 0)) if e.get("ph") in ("B", "X")
    and e.get("cat") == "operator" and e["name"].startswith("_backward")]}
"""


def test_dot_and_reshape_backward_nodes_carry_mxnets_inputs(tmp_path):
    # capture.backward dot (ElemwiseGradUseIn: g0, lhs, rhs) and Reshape (UseNone: g0)
    r = run_scenario(_DOT, tmp_path, env={"PYPROF_PER_OPERATOR": "1"}, timeout=240)
    assert [b[:3] for b in r["backward"]] == [
        ["_backward_sum", [[1]], [[15]]],
        ["_backward_reshape", [[15]], [[3, 5]]],
        ["_backward_dot", [[3, 5], [3, 4], [4, 5]], [[3, 4], [4, 5]]],
    ]
    # the counter never contradicts them; absent where the stamps cannot tell (a sample in a
    # microsecond two slices share: memory_unchecked shared_stamp)
    assert False not in [b[3] for b in r["backward"]], r["report"]["memory_unchecked"]
    assert r["report"]["unmatched_events"] == {} and r["report"]["matched"] == r["report"]["calls"]


_FREED = """
import json, pyprof, mxnet as mx
from pyprof.attribution import autograd
asked = []
has_grad = autograd.has_grad
autograd.has_grad = lambda h: asked.append(h) or has_grad(h)
w = mx.nd.random.uniform(shape=(4, 5)); w.attach_grad()
with pyprof.profile(path="f.json", record_shapes=OPTION) as p:
    x = mx.nd.array([[1, 2, 3, 4]]); hx = x.handle.value
    with mx.autograd.record():
        loss = mx.nd.dot(x, w).sum()
    del x                                     # freed before the backward: its handle dangles
    loss.backward(); mx.nd.waitall()
result = {"asked": asked, "x": hx, "w": w.handle.value, "grad": w.grad.asnumpy().tolist()}
"""


@pytest.mark.parametrize("option", ["True", "False"])
def test_a_freed_leaf_is_never_asked_for_its_gradient(tmp_path, option):
    # MXNDArrayGetGrad reads the NDArray behind the handle: a freed one is memory MXNet gave back
    r = run_scenario(_FREED.replace("OPTION", option).replace(
        "record_shapes=False", "with_stack=True"), tmp_path, timeout=120)
    assert r["w"] in r["asked"] and r["x"] not in r["asked"], r
    assert r["grad"][0] == [1.0] * 5


_DATA = """
import json, pyprof, mxnet as mx
from pyprof.attribution.matching import ARGS
x = mx.nd.random.uniform(shape=(3, 4)); c = mx.nd.ones((3, 5))      # data: no attach_grad
w = mx.nd.random.uniform(shape=(4, 5)); w.attach_grad()
def step():
    with mx.autograd.record():
        loss = (c * mx.nd.dot(x, w)).sum()
    loss.backward()
step(); mx.nd.waitall()
with pyprof.profile(path="d.json", record_shapes=True, profile_memory=True) as p:
    step(); mx.nd.waitall()
a = lambda e: e.get("args") or {}
result = {e["name"]: [a(e).get(ARGS["match"]), a(e).get(ARGS["memory_check"])]
          for e in json.load(open("d.json"))["traceEvents"]
          if e.get("ph") in ("B", "X") and e.get("name") in ("_backward_dot", "_backward_broadcast_mul")}
"""


def test_an_fcompute_backward_allocates_the_gradient_of_a_leaf_without_one(tmp_path):
    # MXNet leaves the data's gradient uncomputed (kNullOp), but an FCompute operator gets every
    # output through NDArray::data(), which allocates: the counter rises by both outputs
    r = run_scenario(_DATA, tmp_path, env={"PYPROF_PER_OPERATOR": "1"}, timeout=120)
    assert set(r) == {"_backward_dot", "_backward_broadcast_mul"}, r
    assert all(label == "exact" and check is not False for label, check in r.values()), r


_LAYERS = """
import json, pyprof, mxnet as mx
from mxnet import gluon
from pyprof.attribution.matching import ARGS
x = mx.nd.random.uniform(shape=(4, 8, 8, 8)); idx = mx.nd.array([[1, 2], [3, 4]])  # data
w = mx.nd.ones((6, 3)); w.attach_grad()
layers = {"fc": gluon.nn.Dense(10), "conv": gluon.nn.Conv2D(4, 3), "bn": gluon.nn.BatchNorm(),
          "emb": gluon.nn.Embedding(8, 3), "ln": gluon.nn.LayerNorm()}
for n in layers.values():
    n.initialize()
def step():
    for k, n in [*layers.items(), ("take", None)]:
        with mx.autograd.record():
            loss = (n(idx if k == "emb" else x) if n is not None else mx.nd.take(w, idx)).sum()
        loss.backward()
for _ in range(6):  # every temp-space copy grown (an operator growing one allocates in its event)
    step()
mx.nd.waitall()
with pyprof.profile(path="l.json", record_shapes=True, profile_memory=True) as p:
    step(); mx.nd.waitall()
a = lambda e: e.get("args") or {}
result = {e["name"]: [a(e).get(ARGS["input_dims"]), a(e).get(ARGS["output_dims"]), a(e).get(ARGS["match"]),
                      a(e).get(ARGS["memory_check"])]
          for e in json.load(open("l.json"))["traceEvents"]
          if e.get("ph") in ("B", "X") and e.get("name", "").startswith("_backward") and e["name"] != "_backward_sum"}
"""

_X, _W = [4, 8, 8, 8], [10, 512]
_LAYERS_WANT = {
    "_backward_FullyConnected": [[[4, 10], _X, _W], [_X, _W, [10]]],
    "_backward_Convolution": [[[4, 4, 6, 6], _X, [4, 8, 3, 3], [4]], [_X, [4, 8, 3, 3], [4]]],
    "_backward_BatchNorm": [[_X, [8], [8], _X, [8], [8], [8], [8]], [_X, [8], [8]]],
    "_backward_Embedding": [[[2, 2, 3], [2, 2]], [[2, 2], [8, 3]]],          # g0, the indices
    "_backward_LayerNorm": [[_X, _X, [8], [4, 8, 8, 1], [4, 8, 8, 1]], [_X, [8], [8]]],  # + mean, std
    "_backward_take": [[[2, 2, 3], [2, 2]], [[6, 3], [2, 2]]],
}


def test_layers_on_data_get_mxnets_backward_nodes_and_allocations(tmp_path):
    # the data's gradient: skipped by the oneDNN operators (unread_not_allocated), allocated by
    # the FCompute ones (Embedding, take); the counter agrees with each
    r = run_scenario(_LAYERS, tmp_path, env={"PYPROF_PER_OPERATOR": "1"}, timeout=240)
    assert {k: v[:2] for k, v in r.items()} == _LAYERS_WANT, r
    assert all(v[2] == "exact" and v[3] is not False for v in r.values()), r


_SAME_NAME = """
import json, pyprof, mxnet as mx
from pyprof.attribution.matching import ARGS
x = mx.nd.random.uniform(shape=(2, 3, 4)); k = mx.nd.random.uniform(shape=(2, 5, 4)); k.attach_grad()
t = mx.nd.random.uniform(shape=(3, 4)); t.attach_grad()
def step():
    with mx.autograd.record():
        s = mx.nd.batch_dot(x, k, transpose_b=True)
    s.backward()
    with mx.autograd.record():
        u = mx.nd.transpose(t)
    u.backward()
for _ in range(6):  # every temp-space copy grown
    step()
mx.nd.waitall()
with pyprof.profile(path="n.json", record_shapes=True, profile_memory=True) as p:
    step(); mx.nd.waitall()
a = lambda e: e.get("args") or {}
result = {"events": sorted([e["name"], a(e).get(ARGS["input_dims"]), a(e).get(ARGS["output_dims"]), a(e).get(ARGS["match"]),
                            a(e).get(ARGS["memory_check"]) is not False]
                           for e in json.load(open("n.json"))["traceEvents"]
                           if e.get("ph") in ("B", "X") and e.get("name") in ("batch_dot", "transpose")),
          "report": p.windows[0].attribution.as_dict()}
"""


def test_backward_nodes_named_as_forward_operators_get_their_own_events(tmp_path):
    # batch_dot's backward is batch_dot nodes (here the rhs's: transpose_b, dy = dot(dz.T, x)),
    # transpose's a transpose: each event carries its own call's shapes
    r = run_scenario(_SAME_NAME, tmp_path, env={"PYPROF_PER_OPERATOR": "1"}, timeout=120)
    assert r["events"] == [
        ["batch_dot", [[2, 3, 4], [2, 5, 4]], [[2, 3, 5]], "exact", True],   # forward
        ["batch_dot", [[2, 3, 5], [2, 3, 4]], [[2, 5, 4]], "exact", True],   # k's gradient
        ["transpose", [[3, 4]], [[4, 3]], "exact", True],
        ["transpose", [[4, 3]], [[3, 4]], "exact", True],
    ], r["report"]
    assert r["report"]["unmatched_events"] == {} and r["report"]["matched"] == r["report"]["calls"], r["report"]
