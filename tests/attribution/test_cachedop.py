"""Capture of hybridized Gluon blocks (CachedOp) and their backward (issue 22): the tutorial's
CNN (pyprof.examples.gluon_cnn) trained in per-operator mode in a fresh child process, with an
inference forward at another batch size between the steps (a second input signature)."""

from __future__ import annotations

import pytest

from tests.child import run_scenario

_CNN = """
import gc, json, pyprof, pyprof.trace
import mxnet as mx
from mxnet import autograd, gluon
from pyprof.attribution.matching import BOOKKEEPING, ARGS
from pyprof.examples.gluon_cnn import build_net, synthetic_mnist
WARMUP = True
PLANT
net = build_net(gluon); net.initialize(mx.init.Xavier()); net.hybridize()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
batches = synthetic_mnist(mx, 64, 2, 0)
def step(d, l):
    with autograd.record():
        loss = loss_fn(net(d), l)
    loss.backward(); trainer.step(64)
if WARMUP: step(*batches[0]); mx.nd.waitall()   # the CachedOp is made here, before the session
with pyprof.profile(path="w.json", record_shapes=True, with_flops=True, with_stack=True) as p:
    if not WARMUP: net(batches[0][0][:8]).wait_to_read()  # made here, through MXCreateCachedOpEx
    for i in range(3):
        step(*batches[i % 2])
        net(batches[0][0][:8]).wait_to_read()   # inference at batch 8
    mx.nd.waitall()
    graphs = len(p._recorder._graphs.by_handle)
    del net, trainer; gc.collect()              # MXFreeCachedOp
    freed = len(p._recorder._graphs.by_handle)
ev = json.load(open("w.json"))["traceEvents"]
ops = sorted((e for e in ev if e.get("ph") == "B" and e.get("cat") == "operator"), key=lambda e: e["ts"])
a = lambda e: e.get("args") or {}
st = pyprof.trace.stats("w.json", categories={"operator"})
sh = pyprof.trace.stats("w.json", categories={"operator"}, by="shape")
result = {
    "report": p.windows[0].attribution.as_dict(),
    "ambiguous": sorted(e["name"] for e in ops if a(e).get(ARGS["match"]) == "ambiguous" and a(e).get(ARGS["memory_check"]) is not False),
    "without": sorted({e["name"] for e in ops if ARGS["input_dims"] not in a(e) and e["name"] not in BOOKKEEPING}),
    "gemm": sorted({(e["name"], a(e).get(ARGS["block"]), json.dumps(a(e).get(ARGS["input_dims"]), separators=(",", ":")), a(e).get(ARGS["flops"]))
                    for e in ops if e["name"] in ("Convolution", "FullyConnected", "_backward_Convolution", "_backward_FullyConnected")}, key=str),
    "conv0_batches": [a(e).get(ARGS["input_dims"], [[None]])[0][0] for e in ops if e["name"] == "Convolution" and a(e).get(ARGS["block"]) == "conv0"],
    "backward_blocks": [a(e).get(ARGS["block"]) for e in ops if e["name"].startswith("_backward") and ARGS["block"] in a(e)],
    "sites": sorted({(e["name"], a(e)[ARGS["call_site"]].rsplit(" ", 1)[1]) for e in ops
                     if e["name"] in ("Convolution", "_backward_Convolution") and ARGS["call_site"] in a(e)}),
    "blocks": sorted({a(e).get(ARGS["block"]) for e in ops if a(e).get(ARGS["block"])}),
    "sources": sorted({(e["name"], a(e)[ARGS["source"]]) for e in ops if ARGS["source"] in a(e) and e["name"].startswith("_backward")}),
    "matches": sorted({a(e)[ARGS["match"]] for e in ops if ARGS["match"] in a(e)
                       and a(e).get(ARGS["memory_check"]) is not False}),
    "failed_checks": sorted({a(e)[ARGS["match"]] for e in ops if a(e).get(ARGS["memory_check"]) is False}),
    "node_memory_checks": sum(ARGS["memory_check"] in a(e) for e in ops if a(e).get(ARGS["block"])),
    "totals": [sorted([list(k), v] for k, v in sh.totals().items()),
               sorted([[o.category, o.name, o.device], o.total_us] for o in st.operators)],
    "calls": [sum(g.count for g in sh.groups), sum(o.count for o in st.operators)],
    "graphs": [graphs, freed], "valid": pyprof.trace.validate("w.json").ok,
    "autograd_checks": sorted({(e["name"], a(e).get(ARGS["memory_check"])) for e in ops  # (None: not told)
                               if a(e).get(ARGS["source"]) == "derived, autograd"}, key=repr),
    "workspace": sorted({(e["name"], a(e).get(ARGS["block"]), json.dumps([a(e).get(ARGS["input_dims"]), a(e).get(ARGS["input_type"]),
                                       a(e).get(ARGS["output_dims"]), a(e).get(ARGS["output_type"])], separators=(",", ":")))
                         for e in ops if e["name"] in ("_zeros_without_dtype", "_backward_Pooling")}),
}
"""

# Golden FLOPs of the CNN's GEMM layers (flops.json, worked out by hand): Convolution
# 2*(C/groups)*prod(kernel) + 1 (bias) per output element; FullyConnected 2*K*H + H per row;
# their backward 2x the forward.
_GOLDEN = {
    ("Convolution", "conv0", "[[64,1,28,28],[20,1,5,5],[20]]", 37601280),
    ("Convolution", "conv0", "[[8,1,28,28],[20,1,5,5],[20]]", 37601280 // 8),
    ("Convolution", "conv1", "[[64,20,12,12],[50,20,5,5],[50]]", 205004800),
    ("Convolution", "conv1", "[[8,20,12,12],[50,20,5,5],[50]]", 205004800 // 8),
    ("FullyConnected", "dense0", "[[64,800],[512,800],[512]]", 52461568),
    ("FullyConnected", "dense0", "[[8,800],[512,800],[512]]", 52461568 // 8),
    ("FullyConnected", "dense1", "[[64,512],[10,512],[10]]", 656000),
    ("FullyConnected", "dense1", "[[8,512],[10,512],[10]]", 656000 // 8),
    ("_backward_Convolution", "conv0", "[[64,20,24,24],[64,1,28,28],[20,1,5,5],[20]]", 2 * 37601280),
    ("_backward_Convolution", "conv1", "[[64,50,8,8],[64,20,12,12],[50,20,5,5],[50]]", 2 * 205004800),
    ("_backward_FullyConnected", "dense0", "[[64,512],[64,800],[512,800]]", 2 * 52461568),
    ("_backward_FullyConnected", "dense1", "[[64,10],[64,512],[10,512]]", 2 * 656000),
}
# What this capture does not cover (docs/attribution.md): nothing but bookkeeping.
_UNCOVERED: list[str] = []

_WRONG_SIGNATURE = """
from pyprof.attribution import cachedop as _c
_meta = _c.Graph.meta
_c.Graph.meta = lambda self, sig, codes: _meta(self, next(iter(self.signatures), sig), codes)
"""
_NO_EVICTION = """
from pyprof.attribution import cachedop as _c
_c.Graphs.freed = lambda self, handle: None
"""


_NO_STACK_FALLBACK = """
from pyprof.attribution import cachedop as _c
_c.Graphs.from_stack = lambda self, handle: None
"""
def _run(tmp_path, plant: str = "", per_operator: bool = True):
    return run_scenario(_CNN.replace("PLANT", plant), tmp_path,
                        env={"PYPROF_PER_OPERATOR": "1" if per_operator else "0"}, timeout=240)


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("cnn"))


def test_every_cnn_operator_event_but_the_listed_ones_carries_shapes(cnn):
    assert cnn["without"] == _UNCOVERED, cnn["report"]
    rep = cnn["report"]
    assert rep["matched"] == rep["calls"] and rep["unmatched_calls"] == 0
    # one CPU worker: the graph order is the run order; the trainer's updates read gradients a
    # hybridized block's backward wrote, whose writing node is not linked: not proven (issue 34)
    assert cnn["matches"] == ["ambiguous", "exact"], cnn["ambiguous"]
    assert {n for n in cnn["ambiguous"]} == {"multi_sgd_update"}, cnn["ambiguous"]
    # a label is a proof: a match the counter contradicts (its model's miss) is never exact
    assert "exact" not in cnn["failed_checks"]
    assert cnn["valid"] is True


def test_gemm_layers_flops_are_the_golden_integers_with_their_blocks(cnn):
    assert {tuple(g) for g in cnn["gemm"]} == _GOLDEN
    assert cnn["conv0_batches"] == [64, 8] * 3  # each invocation its own signature's shapes
    assert cnn["blocks"] == ["conv0", "conv0_relu", "conv1", "conv1_relu", "dense0", "dense0_relu",
                             "dense1", "flatten0", "pool0", "pool1"]


# The order MXNet 1.9.1 runs the CNN's backward nodes in (its graph, Executor.debug_str).
_BACKWARD_ORDER = ["dense1", "dense0_relu", "dense0", "flatten0", "pool1", "conv1_relu", "conv1",
                   "pool0", "conv0_relu", "conv0"]


def test_node_calls_carry_the_call_site_of_their_invocation(cnn):
    # the training forward is called in step(), the inference forward at module level; a
    # backward node carries its forward invocation's site
    assert cnn["sites"] == [["Convolution", "<module>"], ["Convolution", "step"],
                            ["_backward_Convolution", "step"]]


def test_backward_nodes_are_labelled_by_how_their_shapes_were_derived(cnn):
    assert cnn["backward_blocks"] == _BACKWARD_ORDER * 3  # each event its own node's shapes
    # oneDNN's max Pooling: its workspace and the workspace's zero gradient are derived too
    assert [s for s in cnn["sources"] if s[0] == "_backward_Pooling"] == [["_backward_Pooling", "derived"]]
    assert {s[1] for s in cnn["sources"]} == {"derived", "derived, autograd"}
    # the loss's backward is autograd's of imperative calls (pyprof.attribution.autograd)
    assert sorted(s[0] for s in cnn["sources"] if s[1] == "derived, autograd") == [
        "_backward_log_softmax", "_backward_mean", "_backward_mul_scalar", "_backward_pick"]
    assert cnn["node_memory_checks"] == 0  # a CachedOp's memory plan allocates ahead of its nodes


def test_totals_grouped_by_shape_equal_the_ungrouped_ones(cnn):
    assert cnn["totals"][0] == cnn["totals"][1]
    assert cnn["calls"][0] == cnn["calls"][1] > 100


def test_cached_op_graphs_are_evicted_when_freed(cnn):
    assert cnn["graphs"] == [1, 0]


def test_shapes_from_the_wrong_signature_fail(tmp_path):
    r = _run(tmp_path, _WRONG_SIGNATURE)
    assert r["conv0_batches"] != [64, 8] * 3
    assert {tuple(g) for g in r["gemm"]} != _GOLDEN


def test_no_eviction_at_free_fails(tmp_path):
    assert _run(tmp_path, _NO_EVICTION)["graphs"] == [1, 1]


def test_a_cached_op_made_inside_the_session_gets_its_symbol_at_creation(tmp_path):
    # the fallback (the Gluon block on the stack) planted away: MXCreateCachedOpEx's hook alone
    r = _run(tmp_path, _NO_STACK_FALLBACK + "WARMUP = False\n")
    # (the first forward also finishes Gluon's deferred initialisation: a CopyCPU2CPU per
    # parameter, made by NDArray copies, not by a recorded call)
    assert r["without"] == sorted(_UNCOVERED + ["CopyCPU2CPU"]) and "conv0" in r["blocks"]
    assert r["conv0_batches"] == [8] + [64, 8] * 3
    # and without either, a CachedOp made before the session is left unrecorded
    assert _run(tmp_path / "before", _NO_STACK_FALLBACK)["without"] != _UNCOVERED


def test_in_bulk_mode_the_nodes_go_to_their_bulks_and_the_imperative_calls_exact(tmp_path):
    r = _run(tmp_path, per_operator=False)
    rep = r["report"]
    # exact but where the counter contradicts it (its model's miss, written ambiguous), the
    # trainer's updates, which read gradients the block's backward wrote (not proven: issue 34),
    # and an engine bulk whose run the rule cannot order before another (the engine's timing
    # decides: under load, one in a few runs)
    failed = rep["memory_checked"] - rep["memory_passed"]
    assert "multi_sgd_update" in r["ambiguous"], r["ambiguous"]
    assert set(r["ambiguous"]) <= {"multi_sgd_update", "ImperativeBulk"}, r["ambiguous"]
    assert rep["ambiguous"] == failed + len(r["ambiguous"]), rep
    assert rep["exact"] + rep["ambiguous"] == rep["matched"] > 0
    # forward at 64 and 8, backward (10 nodes and 2 workspace zero gradients), and the loss's
    # 4 autograd backward nodes: in the runs the engine bulk cut (issue 34 item 3), each
    # ImperativeBulk event carrying its run's shapes (test_bulk_counts.py: their FLOPs)
    assert rep["unmatched_calls"] == 0 and rep["bulk_segments"]["ImperativeBulk"] > 0, rep
    assert "ImperativeBulk" not in r["without"]


@pytest.mark.parametrize("limit", [5, 15])
def test_a_window_records_at_most_max_calls_node_calls(tmp_path, limit):
    # 5: the first forward's 10 nodes do not fit; 15: they, the loss's 4 calls and the head
    # gradient (SetValueOp) do, the backward's nodes do not
    r = _run(tmp_path, f"from pyprof.attribution import capture as _cap\n_cap.MAX_CALLS = {limit}\n")
    assert r["report"]["calls"] == {5: 0, 15: 15}[limit]


_ALIVE = """
import json, gc, pyprof, mxnet as mx
from mxnet import autograd, gluon
from pyprof.examples.gluon_cnn import build_net, synthetic_mnist
with pyprof.profile(path="w.json", profile_memory=True, OPTIONS) as p:
    net = build_net(gluon); net.initialize(mx.init.Xavier()); net.hybridize()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    data, label = synthetic_mnist(mx, 16, 1, 0)[0]
    for i in range(2):
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        net(data[:4]).wait_to_read()
    mx.nd.waitall()
    del net, loss, data, label, loss_fn
    gc.collect()
    mx.nd.waitall()
events = json.load(open("w.json"))["traceEvents"]
mem = sorted((e["ts"], e["args"]["Memory: cpu/0"]) for e in events
             if e.get("ph") == "C" and e.get("name") == "Memory: cpu/0")
result = {"peak": max(v for _, v in mem), "last": mem[-1][1],
          "calls": p.windows[0].attribution.calls if p.windows[0].attribution else 0}
"""


def test_the_recorder_keeps_no_array_of_a_hybridized_block_alive(tmp_path):
    on = run_scenario(_ALIVE.replace("OPTIONS", "record_shapes=True, with_stack=True"), tmp_path / "on",
                      env={"PYPROF_PER_OPERATOR": "1"}, timeout=240)
    off = run_scenario(_ALIVE.replace("OPTIONS", "record_shapes=False"), tmp_path / "off",
                       env={"PYPROF_PER_OPERATOR": "1"}, timeout=240)
    assert on["calls"] > 50 and off["calls"] == 0
    assert on["peak"] >= 16 * 20 * 24 * 24 * 4  # conv0's output was there
    # freed as without recording (MXNet itself keeps about 5.9 MB here after the net is gone;
    # keeping the Gluon block alive, planted, leaves 9.4 MB)
    assert on["last"] == off["last"], (on, off)


def test_max_poolings_workspace_and_its_zero_gradient_carry_shapes(cnn):
    # oneDNN's max Pooling has a hidden output, its workspace (the output's shape, int32):
    # nothing reads it, so MXNet's backward zero-fills its gradient (_zeros_without_dtype)
    # and passes both to _backward_Pooling (src/operator/nn/pooling.cc)
    f, i = '"float32"', '"int32"'
    want = []
    for block, x, y in (("pool0", "[64,20,24,24]", "[64,20,12,12]"), ("pool1", "[64,50,8,8]", "[64,50,4,4]")):
        want.append(["_backward_Pooling", block, f"[[{y},{y},{x},{y},{y}],[{f},{i},{f},{f},{i}],[{x}],[{f}]]"])
        want.append(["_zeros_without_dtype", block, f"[[],[],[{y}],[{i}]]"])
    assert sorted(cnn["workspace"]) == sorted(want)


def test_the_losss_autograd_backward_passes_the_memory_check(cnn):
    # each passes, or is absent where the stamps cannot tell (never failed)
    assert sorted({name for name, ok in cnn["autograd_checks"]}) == [
        "SetValueOp", "_backward_log_softmax", "_backward_mean", "_backward_mul_scalar", "_backward_pick"]
    assert False not in {ok for _, ok in cnn["autograd_checks"]}, cnn["autograd_checks"]
