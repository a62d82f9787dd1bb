"""The resource table matching models (attribution.json matching.resources), measured on the
real engine: an operator that requests temp space waits for the call that took the same copy
before it (MXNET_CPU_TEMP_COPY round robin), one that does not runs as soon as it is ready."""

from __future__ import annotations

from pyprof import rules
from tests.child import run_scenario

# Per block, on one CPU worker: P (a slow exp, no resource), D (temp space: takes copy k and
# waits for P), three ready temp-space calls S (copies k+1..k+3), the operator X, then a ready
# temp-space call Y. X takes copy k when it requests temp space, so it waits for D and runs
# after Y; otherwise it runs before Y (which then takes copy k). S, D and Y are operators other
# than X (two sets), told apart by name.
_PROBE = """
import json, time, mxnet as mx
nd = mx.nd
big = nd.ones((1500, 1500)); s = nd.ones((4, 4)); row = nd.ones((1, 4)); img = nd.ones((1, 2, 6, 6))
w = nd.ones((3, 2, 3, 3)); b3 = nd.ones((3,)); fw = nd.ones((5, 4)); fb = nd.ones((5,))
g2 = nd.ones((2,)); g4 = nd.ones((4,)); b3d = nd.ones((2, 4, 4)); idx = nd.array([0, 1])
thunks = {
 "dot": lambda: nd.dot(s, s), "sum": lambda: nd.sum(s, axis=1), "_plus_scalar": lambda: s + 1,
 "_mul_scalar": lambda: s * 2, "elemwise_add": lambda: nd.elemwise_add(s, s),
 "elemwise_sub": lambda: nd.elemwise_sub(s, s), "elemwise_mul": lambda: nd.elemwise_mul(s, s),
 "_minus_scalar": lambda: s - 1, "_rminus_scalar": lambda: 1 - s, "_div_scalar": lambda: s / 2,
 "_rdiv_scalar": lambda: 2 / s, "_power_scalar": lambda: s ** 2, "_maximum_scalar": lambda: nd.maximum(s, 1),
 "mean": lambda: nd.mean(s, axis=1), "max": lambda: nd.max(s, axis=1), "min": lambda: nd.min(s, axis=1),
 "prod": lambda: nd.prod(s, axis=1), "nansum": lambda: nd.nansum(s, axis=1), "norm": lambda: nd.norm(s),
 "batch_dot": lambda: nd.batch_dot(b3d, b3d),
 "FullyConnected": lambda: nd.FullyConnected(s, fw, fb, num_hidden=5),
 "Convolution": lambda: nd.Convolution(img, w, b3, kernel=(3, 3), num_filter=3),
 "BatchNorm": lambda: nd.BatchNorm(img, g2, g2, g2, g2), "LayerNorm": lambda: nd.LayerNorm(s, g4, g4),
 "Reshape": lambda: nd.reshape(s, (16,)), "Flatten": lambda: nd.flatten(img),
 "expand_dims": lambda: nd.expand_dims(s, 0), "slice": lambda: nd.slice(s, (0, 0), (2, 2)),
 "Concat": lambda: nd.concat(s, s), "take": lambda: nd.take(s, idx),
 "Embedding": lambda: nd.Embedding(idx, s, input_dim=4, output_dim=4), "add_n": lambda: nd.add_n(s, s, s),
 "_equal_scalar": lambda: s == 1, "topk": lambda: nd.topk(s, k=2), "sort": lambda: nd.sort(s),
 "relu": lambda: nd.relu(s), "exp": lambda: nd.exp(s), "transpose": lambda: nd.transpose(s),
 "broadcast_add": lambda: nd.broadcast_add(s, row), "broadcast_mul": lambda: s * s,
 "broadcast_sub": lambda: nd.broadcast_sub(s, row), "broadcast_div": lambda: nd.broadcast_div(s, row),
 "broadcast_maximum": lambda: nd.maximum(s, s), "_ones": lambda: nd.ones((4, 4)),
 "_zeros": lambda: nd.zeros((4, 4)), "elemwise_div": lambda: nd.elemwise_div(s, s),
 "Pooling": lambda: nd.Pooling(img, kernel=(2, 2), pool_type="max"),
 "Activation": lambda: nd.Activation(s, act_type="relu"), "softmax": lambda: nd.softmax(s),
 "log_softmax": lambda: nd.log_softmax(s), "sigmoid": lambda: nd.sigmoid(s), "tanh": lambda: nd.tanh(s),
 "sqrt": lambda: nd.sqrt(s), "square": lambda: nd.square(s), "log": lambda: nd.log(s),
 "Cast": lambda: nd.cast(s, "float16"), "clip": lambda: nd.clip(s, 0, 1),
 "where": lambda: nd.where(s, s, s), "argmax": lambda: nd.argmax(s, axis=1),
 "one_hot": lambda: nd.one_hot(idx, 4), "LeakyReLU": lambda: nd.LeakyReLU(s), "abs": lambda: nd.abs(s),
 "broadcast_to": lambda: nd.broadcast_to(row, (4, 4)),
}
sets = [dict(D=lambda p: nd.sum(p, axis=1), S=lambda: nd.prod(s, axis=1), Y=lambda: nd.nansum(row, axis=1), names={"sum", "prod", "nansum"}),
        dict(D=lambda p: nd.mean(p, axis=1), S=lambda: nd.max(s, axis=1), Y=lambda: nd.min(row, axis=1), names={"mean", "max", "min"})]
nd.sum(s, axis=1).wait_to_read(); mx.nd.waitall()
mx.profiler.set_config(profile_imperative=True, profile_memory=False, profile_api=False, filename="probe.json")
mx.profiler.set_state("run")
marks = []
for name, f in thunks.items():
    k = sets[1] if name in sets[0]["names"] else sets[0]
    marks.append((name, time.time_ns() // 1000, k["Y"].__code__.co_consts))
    p = nd.exp(big); d = k["D"](p)
    ss = [k["S"]() for _ in range(3)]
    x = f()
    y = k["Y"]()
    mx.nd.waitall()
mx.profiler.set_state("stop"); mx.profiler.dump()
ev = json.load(open("probe.json"))["traceEvents"]
ops = sorted((e["ts"], e["name"]) for e in ev if e.get("ph") == "B" and e.get("cat") == "operator")
result = {}
for i, (name, t, _) in enumerate(marks):
    end = marks[i + 1][1] if i + 1 < len(marks) else float("inf")
    block = [n for ts, n in ops if t <= ts < end]
    y = "nansum" if name not in sets[0]["names"] else "min"
    result[name] = [block.index(name) < block.index(y) if name in block and y in block else None, block]
"""


def test_every_operator_in_the_resource_table_is_measured_as_listed(tmp_path):
    res = rules.spec("attribution.json")["matching"]["resources"]
    r = run_scenario(_PROBE, tmp_path, timeout=300)
    # every entry measured, here or as a backward node below
    assert set(r) | _backward_nodes() == set(res["temp_space"]) | set(res["no_resources"])
    ran_first = {name: v[0] for name, v in r.items()}
    assert None not in ran_first.values(), {n: v[1] for n, v in r.items() if v[0] is None}
    # X ran before Y <=> X requests no temp space
    assert sorted(n for n, first in ran_first.items() if not first) == sorted(set(res["temp_space"]) & set(r)), r
    assert sorted(n for n, first in ran_first.items() if first) == sorted(set(res["no_resources"]) & set(r)), r


# The backward nodes of capture.backward, the same way: X is the node a backward pushes (its
# head gradient given and ready, so nothing the backward pushes before it holds it back).
_BACKWARD_PROBE = """
import pyprof  # (its import applies PYPROF_PER_OPERATOR: each node its own event)
import json, time, mxnet as mx
from mxnet import autograd
from pyprof import rules
nd = mx.nd
T = rules.spec("attribution.json")["capture"]["backward"]
big = nd.ones((1500, 1500)); s = nd.ones((4, 4)); row = nd.ones((1, 4))
def var(*shape):
    v = nd.ones(shape) * 0.5; v.attach_grad(); return v
r = var(4, 4); q = nd.ones((4, 4)) * 0.3; g = var(4); b0 = var(4); idx = nd.array([0, 1, 2, 3]); rv = var(1, 4)
img = var(1, 2, 6, 6); ker = var(3, 2, 3, 3); fw = var(5, 4); gam = var(2); bet = var(2)
mm = nd.zeros((2,)); mv = nd.ones((2,))
FW = {
 "Convolution": lambda: nd.Convolution(img, ker, kernel=(3, 3), num_filter=3, no_bias=True),
 "FullyConnected": lambda: nd.FullyConnected(r, fw, num_hidden=5, no_bias=True),
 "Activation": lambda: nd.Activation(r, act_type="relu"), "Flatten": lambda: nd.flatten(img),
 "BatchNorm": lambda: nd.BatchNorm(img, gam, bet, mm, mv),
 "Pooling": lambda: nd.Pooling(img, kernel=(2, 2), pool_type="max"),
 "log_softmax": lambda: nd.log_softmax(r), "softmax": lambda: nd.softmax(r),
 "pick": lambda: nd.pick(r, idx), "_mul_scalar": lambda: r * 2, "_div_scalar": lambda: r / 2,
 "_plus_scalar": lambda: r + 1, "_rminus_scalar": lambda: 1 - r, "_rdiv_scalar": lambda: 2 / r,
 "_power_scalar": lambda: r ** 2, "mean": lambda: nd.mean(r, axis=1), "sum": lambda: nd.sum(r, axis=1),
 "dot": lambda: nd.dot(r, q), "Reshape": lambda: nd.reshape(r, shape=(16,)),
 "slice": lambda: nd.slice(r, (0, 0), (2, 2)), "slice_axis": lambda: nd.slice_axis(r, axis=1, begin=0, end=2),
 "Embedding": lambda: nd.Embedding(idx, r, input_dim=4, output_dim=4), "take": lambda: nd.take(r, idx),
 "LayerNorm": lambda: nd.LayerNorm(r, g, b0), "elemwise_sub": lambda: nd.elemwise_sub(r, q),
 "elemwise_mul": lambda: nd.elemwise_mul(r, q), "elemwise_div": lambda: nd.elemwise_div(r, q),
 "broadcast_add": lambda: nd.broadcast_add(r, rv), "broadcast_sub": lambda: nd.broadcast_sub(r, rv),
 "broadcast_mul": lambda: nd.broadcast_mul(r, rv), "broadcast_div": lambda: nd.broadcast_div(r, rv),
 "clip": lambda: nd.clip(r, 0, 1), "relu": lambda: nd.relu(r), "sigmoid": lambda: nd.sigmoid(r),
 "tanh": lambda: nd.tanh(r), "_copy": lambda: r.copy(), "log": lambda: nd.log(r),
 "square": lambda: nd.square(r), "sqrt": lambda: nd.sqrt(r), "transpose": lambda: nd.transpose(r),
}
sets = [dict(D=lambda p: nd.sum(p, axis=1), S=lambda: nd.prod(s, axis=1), Y=lambda: nd.nansum(row, axis=1)),
        dict(D=lambda p: nd.mean(p, axis=1), S=lambda: nd.max(s, axis=1), Y=lambda: nd.min(row, axis=1))]
for k in sets:
    k["D"](s); k["S"](); k["Y"]()
mx.nd.waitall()
mx.profiler.set_config(profile_imperative=True, profile_memory=False, profile_api=False, filename="bprobe.json")
mx.profiler.set_state("run")
marks, seen = [], set()
for fwd, f in FW.items():
    name = T[fwd]["op"]
    if name in seen:
        continue
    seen.add(name)
    k = sets[1] if name in ("_backward_sum",) else sets[0]
    for _ in range(2):  # the node's temp space grown
        with autograd.record():
            z = f()
        z.backward()
    with autograd.record():
        z = f()
    og = nd.ones(z.shape)
    z.wait_to_read(); og.wait_to_read(); mx.nd.waitall()
    marks.append((name, time.time_ns() // 1000, "min" if k is sets[1] else "nansum"))
    p = nd.exp(big); d = k["D"](p)
    ss = [k["S"]() for _ in range(3)]
    z.backward(og)
    y = k["Y"]()
    mx.nd.waitall()
mx.profiler.set_state("stop"); mx.profiler.dump()
ev = json.load(open("bprobe.json"))["traceEvents"]
ops = sorted((e["ts"], e["name"]) for e in ev if e.get("ph") == "B" and e.get("cat") == "operator")
result = {}
for i, (name, t, y) in enumerate(marks):
    end = marks[i + 1][1] if i + 1 < len(marks) else float("inf")
    block = [n for ts, n in ops if t <= ts < end]
    result[name] = [block.index(name) < block.index(y) if name in block and y in block else None, block]
"""


def _backward_nodes() -> set[str]:
    """The backward nodes capture.backward names (exp's _mul is elemwise_mul and add_n's
    identity _copy, measured as those; batch_dot's nodes are batch_dot)."""
    table = rules.spec("attribution.json")["capture"]["backward"]
    return {v["op"] for k, v in table.items() if k != "about" and "op" in v} - {"_mul", "identity"}


def test_every_backward_node_is_measured_as_the_resource_table_lists_it(tmp_path):
    res = rules.spec("attribution.json")["matching"]["resources"]
    r = run_scenario(_BACKWARD_PROBE, tmp_path, env={"PYPROF_PER_OPERATOR": "1"}, timeout=300)
    nodes = _backward_nodes()
    assert set(r) == nodes, nodes ^ set(r)
    ran_first = {name: v[0] for name, v in r.items()}
    assert None not in ran_first.values(), {n: v[1] for n, v in r.items() if v[0] is None}
    assert {n for n, first in ran_first.items() if not first} == nodes & set(res["temp_space"]), r
    assert {n for n, first in ran_first.items() if first} == nodes & set(res["no_resources"]), r


# The chain through a backward node, as matching models it: a slow dot D holds copy k, three
# ready sums take the next three, the backward's _backward_FullyConnected the fourth (k
# again); then A and B, two sums of different bytes: A takes copy k + 1, B copy k + 2 when the
# node took k, else A waits for D. The rule's label (before the memory check) is exact only
# when the counter agrees.
_CHAIN = """
import pyprof
import json, mxnet as mx
from mxnet import autograd
from pyprof.attribution import matching as _m
raw = {}
_match = _m.match
def _spy(*a, **k):
    out, ops = _match(*a, **k)
    raw.update({i: lab for i, (c, lab, g) in out.items()})
    return out, ops
_m.match = _spy
big = mx.nd.random.uniform(shape=(1500, 1500)); m = mx.nd.ones((1500, 1))
q = mx.nd.ones((4, 4)); w = mx.nd.ones((4, 4)); w.attach_grad()
s = [mx.nd.ones((2, 4)) for _ in range(3)]
sa = mx.nd.ones((5, 4)); sb = mx.nd.ones((9, 8))
def step():
    with autograd.record():
        z = mx.nd.FullyConnected(q, w, num_hidden=4, no_bias=True)
    p = mx.nd.exp(big)
    x1 = mx.nd.sum(s[0], axis=0); d = mx.nd.dot(p, m); x3 = mx.nd.sum(s[1], axis=0); x4 = mx.nd.sum(s[2], axis=0)
    z.backward()
    return mx.nd.sum(sa, axis=0), mx.nd.sum(sb, axis=0)
for _ in range(8):
    step()
mx.nd.waitall()
with pyprof.profile(path="c.json", record_shapes=True, profile_memory=True) as p:
    step(); mx.nd.waitall()
ev = json.load(open("c.json"))["traceEvents"]
a = lambda e: e.get("args") or {}
result = [[a(e).get("Input Dims"), raw.get(i), a(e).get("pyprof.memory_check")] for i, e in enumerate(ev)
          if e.get("ph") in ("B", "X") and e.get("name") == "sum" and a(e).get("Input Dims") in ([[5, 4]], [[9, 8]])]
"""


def test_a_backward_node_taking_temp_space_shifts_the_chain(tmp_path):
    r = run_scenario(_CHAIN, tmp_path, env={"PYPROF_PER_OPERATOR": "1"}, timeout=300)
    assert sorted(x[0] for x in r) == [[[5, 4]], [[9, 8]]], r
    # a wrong exact (the node left out of the chain: A taken as ready at its call) is one the
    # counter refutes
    assert not [x for x in r if x[1] == "exact" and x[2] is False], r
    assert "exact" in [x[1] for x in r], r
