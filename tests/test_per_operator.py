"""Per-operator mode turns off every kind of bulk execution MXNet 1.9.1 has, and says when it
comes too late (pyprof.env.per_operator, PYPROF_PER_OPERATOR)."""

import json
import mmap
import re
from pathlib import Path

from child import run_scenario

from pyprof import env

SPEC = json.loads((Path(env.__file__).parent / "spec" / "trace.json").read_text())["bulk"]


def is_bulk_name(name: str) -> bool:
    """A segment name as the spec's patterns say (what pyprof.trace.is_bulk_name reads)."""
    return any(re.search(p["pattern"], name) for p in SPEC["names"])


def test_the_variables_are_the_specs_and_all_set_to_zero():
    assert env.BULK_VARIABLES == tuple(SPEC["variables"])
    assert set(env.BULK_VARIABLES) == {
        "MXNET_EXEC_BULK_EXEC_INFERENCE", "MXNET_EXEC_BULK_EXEC_TRAIN",
        "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN", "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD",
        "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_BWD"}
    fake = {"MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN": "15"}
    assert env.per_operator(fake) == []
    assert fake == {name: "0" for name in env.BULK_VARIABLES}


def test_libmxnet_reads_each_variable_and_writes_imperative_bulk():
    """The names come from MXNet 1.9.1 itself: each is a string in the wheel's libmxnet.so."""
    from pyprof.native import capi as _capi

    with open(_capi.library_path(), "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        for name in (*env.BULK_VARIABLES, "ImperativeBulk"):
            assert m.find(name.encode() + b"\0") >= 0, name


# One process, every kind of bulk MXNet 1.9.1 has: a Gluon block hybridized without and with
# static_alloc (training: forward, backward, trainer step; inference), autograd backward of a
# block that is not hybridized, a bound symbol (inference and training), an mx.engine.bulk
# scope. Small shapes: a few milliseconds of work.
EVERY_KIND = """
import pyprof
import mxnet as mx
from mxnet import autograd, gluon

def block(**flags):
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(4, 3, activation="relu"), gluon.nn.MaxPool2D(2), gluon.nn.Dense(4))
    net.initialize()
    if flags.get("hybrid", True):
        net.hybridize(**{k: v for k, v in flags.items() if k != "hybrid"})
    return net

x = mx.nd.ones((4, 1, 8, 8))
y = mx.nd.array([0, 1, 2, 3])
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
nets = [block(), block(static_alloc=True, static_shape=True), block(hybrid=False)]
trainers = [gluon.Trainer(n.collect_params(), "sgd", {"learning_rate": 0.1}) for n in nets]
s = mx.sym.FullyConnected(mx.sym.relu(mx.sym.var("data")), num_hidden=4, name="fc")
infer = s.simple_bind(mx.cpu(), data=(4, 1, 8, 8), grad_req="null")
train = s.simple_bind(mx.cpu(), data=(4, 1, 8, 8))

def work():
    for net, trainer in zip(nets, trainers):
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(4)
        net(x).wait_to_read()
    infer.forward(is_train=False, data=x)
    train.forward(is_train=True, data=x)
    train.backward(mx.nd.ones((4, 4)))
    with mx.engine.bulk(8):
        z = x
        for _ in range(4):
            z = z + 1
    mx.nd.waitall()

work()  # warm-up: shapes, memory, oneDNN primitives
with pyprof.profile(path="every.json", profile_symbolic=True, profile_imperative=True) as prof:
    work()
st = prof.windows[0].stats(categories={"operator"})
result = {"names": sorted({o.name for o in st.operators}), "notes": st.notes,
          "summary": prof.windows[0].summary()}
"""


def test_per_operator_mode_leaves_no_bulk_segment(tmp_path):
    bulk = run_scenario(EVERY_KIND, tmp_path / "bulk", timeout=120, fresh=True)
    merged = [n for n in bulk["names"] if is_bulk_name(n)]
    assert "ImperativeBulk" in merged, bulk["names"]
    assert any(n.startswith("[") for n in merged), merged  # bound symbols
    assert any(not n.startswith("[") and "," in n for n in merged), merged  # static_alloc
    assert any("MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN=0" in n for n in bulk["notes"])
    assert re.search(r"- bulk segments hold [0-9.]+% of cpu/0 / operator \(.*ImperativeBulk "
                     r"[0-9.]+%", bulk["summary"]), bulk["summary"]

    split = run_scenario(EVERY_KIND, tmp_path / "split", env={"PYPROF_PER_OPERATOR": "1"},
                         fresh=True,
                         timeout=120)
    assert not [n for n in split["names"] if is_bulk_name(n)], split["names"]
    assert {"Convolution", "_backward_Convolution", "Pooling", "FullyConnected",
            "_backward_FullyConnected", "_plus_scalar"} <= set(split["names"])
    assert not any("bulk" in n.lower() for n in split["notes"])
    assert "bulk segments" not in split["summary"]


def test_too_late_says_what_stays_bulked_and_the_fix(tmp_path):
    out = run_scenario("""
import warnings
import mxnet as mx
import pyprof
a = mx.nd.ones((4, 4))
exe = mx.sym.dot(mx.sym.var("A"), mx.sym.var("B")).bind(mx.cpu(), {"A": a, "B": a})
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    late = pyprof.env.per_operator()
with mx.engine.bulk(10):
    inside = mx.engine.set_bulk_size(5)
result = {"late": late, "warnings": [str(w.message) for w in caught], "inside": inside}
""", tmp_path, fresh=True)
    assert len(out["late"]) == 2
    assert "libmxnet is already loaded" in out["late"][0]
    assert "block.hybridize(forward_bulk_size=0, backward_bulk_size=0)" in out["late"][0]
    assert "PYPROF_PER_OPERATOR=1" in out["late"][0]
    assert out["late"][1].startswith("1 executor(s) bound before now")
    assert "bind them again" in out["late"][1]
    assert out["warnings"] == ["pyprof.env.per_operator(): " + "; ".join(out["late"])]
    assert out["inside"] == 0  # the bulk scope is off even after mxnet was imported


def test_per_operator_before_mxnet_is_silent(tmp_path):
    out = run_scenario("""
import warnings
import pyprof
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    late = pyprof.env.per_operator()
import mxnet as mx
result = {"late": late, "warnings": [str(w.message) for w in caught],
          "scope": mx.engine.set_bulk_size(7), "again": mx.engine.set_bulk_size(7)}
""", tmp_path, fresh=True)
    assert out == {"late": [], "warnings": [], "scope": 0, "again": 0}
