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
    assert set(r) == set(res["temp_space"]) | set(res["no_resources"])  # every entry measured
    ran_first = {name: v[0] for name, v in r.items()}
    assert None not in ran_first.values(), {n: v[1] for n, v in r.items() if v[0] is None}
    # X ran before Y <=> X requests no temp space
    assert sorted(n for n, first in ran_first.items() if not first) == sorted(res["temp_space"]), r
    assert sorted(n for n, first in ran_first.items() if first) == sorted(res["no_resources"]), r
