"""Bulk segments that span several Gluon blocks (a new user's report): in MXNet's default mode
a hybridized Dense(64, relu), Dense(10) net's forward runs as one ``ImperativeBulk`` of
dense0's and dense1's nodes, and its backward as one of the loss's autograd backward and the
block's backward nodes. A segment's ``pyprof.block`` names the block holding all its nodes (the
Sequential), never its first node's; ``pyprof.blocks`` names each node's; ``pyprof.source``
names every source of its nodes; its ``Input Dims`` lists every input it reads from outside it,
a backward node's data, weights and saved outputs included.

One fresh child per mode (the mode is set before libmxnet loads), a warm-up step, then a window
of one training step at 32x100.
"""

from __future__ import annotations

import pytest

from child import run_scenario

_SCENARIO = """
import json
import pyprof, mxnet as mx
from mxnet import gluon, autograd, nd
mx.random.seed(3)
net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(64, activation="relu"), gluon.nn.Dense(10))
net.initialize(mx.init.Xavier())
net.hybridize()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
data = nd.random.uniform(shape=(32, 100)); label = nd.array([i % 10 for i in range(32)])
def step():
    with autograd.record():
        loss = loss_fn(net(data), label)
    loss.backward()
    trainer.step(32)
    loss.wait_to_read()
step()
with pyprof.profile(path="w_{window}.json", record_shapes=True, with_flops=True) as p:
    step()
ops = []
for e in json.load(open(p.windows[0].path))["traceEvents"]:
    if e.get("cat") == "operator" and e.get("ph") in ("B", "X"):
        ops.append([e["name"], e.get("args") or {}])
result = {"ops": ops, "report": p.windows[0].attribution.as_dict(),
          "names": [net.name, net[0].name, net[0].act.name, net[1].name]}
"""


@pytest.fixture(scope="module")
def modes(tmp_path_factory):
    base = tmp_path_factory.mktemp("bulk_blocks")
    return {m: run_scenario(_SCENARIO, base / m, env={"PYPROF_PER_OPERATOR": v}, timeout=240, fresh=True)
            for m, v in (("bulk", "0"), ("per_operator", "1"))}


def _segments(run) -> list[dict]:
    return [a for name, a in run["ops"] if name == "ImperativeBulk"]


def test_a_forward_segment_of_two_blocks_is_labelled_with_their_holder(modes):
    run = modes["bulk"]
    seq, dense0, relu, dense1 = run["names"]
    fwd = [a for a in _segments(run) if a["pyprof.source"] == "inference"]
    assert len(fwd) == 1, _segments(run)
    a = fwd[0]
    assert [n for n, _ in a["pyprof.segment"]] == ["FullyConnected", "Activation", "FullyConnected"]
    assert a["pyprof.block"] == seq  # not dense0: dense1's time and FLOPs are in it too
    assert a["pyprof.blocks"] == [dense0, relu, dense1]
    assert a["Input Dims"] == [[32, 100], [64, 100], [64], [10, 64], [10]]
    assert a["pyprof.match"] == "exact"


def test_the_backward_segment_names_both_sources_and_reads_its_saved_arrays(modes):
    run = modes["bulk"]
    _, dense0, relu, dense1 = run["names"]
    bwd = [a for a in _segments(run) if a["pyprof.source"] != "inference"]
    assert len(bwd) == 1, _segments(run)
    a = bwd[0]
    assert [n for n, _ in a["pyprof.segment"]] == [
        "_backward_mean", "_backward_mul_scalar", "_backward_pick", "_backward_log_softmax",
        "_backward_FullyConnected", "_backward_Activation", "_backward_FullyConnected"]
    # the loss's autograd backward and the hybridized block's: no block holds both
    assert a["pyprof.source"] == "derived, autograd; derived"
    assert "pyprof.block" not in a
    assert a["pyprof.blocks"] == [None] * 4 + [dense1, relu, dense0]
    # read from outside: the head gradient, the label, log_softmax's output, then per
    # _backward_FullyConnected/_backward_Activation the data, weights and saved activations;
    # not the gradient _backward_log_softmax hands the block (written inside)
    assert a["Input Dims"] == [[32], [32], [32, 10], [32, 64], [10, 64], [32, 64], [32, 100], [64, 100]]
    assert a["pyprof.output_dims"] == [[10, 64], [10], [32, 100], [64, 100], [64]]
    assert run["report"]["unmatched_calls"] == 0


def test_per_operator_mode_matches_the_block_backward_after_the_loss_backward(modes):
    run = modes["per_operator"]
    assert not _segments(run)
    assert run["report"]["unmatched_calls"] == 0
    got = [(name, a.get("pyprof.source"), a.get("pyprof.match")) for name, a in run["ops"]
           if name in ("_backward_log_softmax", "_backward_FullyConnected", "_backward_Activation")]
    assert got == [("_backward_log_softmax", "derived, autograd", "exact"),
                   ("_backward_FullyConnected", "derived", "exact"),
                   ("_backward_Activation", "derived", "exact"),
                   ("_backward_FullyConnected", "derived", "exact")]
