"""Bulk segments (pyprof.attribution.segments) and their matching, on synthetic calls and
events: names, runs of one invocation's nodes, the segment's inputs, outputs and summed FLOPs."""

from __future__ import annotations

import json

import pytest

from pyprof.attribution import matching
from pyprof.attribution.calls import HANDLES, Call
from pyprof.attribution.segments import group_of, merged, node_names, node_ops, segment_ops

DOT, RELU, CONV, ACT, BN = 9001, 9002, 9003, 9004, 9005  # operator handles of this test


@pytest.fixture(autouse=True)
def handles(monkeypatch):
    for name, h in (("dot", DOT), ("relu", RELU), ("Convolution", CONV), ("Activation", ACT),
                    ("BatchNorm", BN)):
        monkeypatch.setitem(HANDLES, name, h)


def test_segment_names():
    assert segment_ops("[dot,relu]") == ["dot", "relu"]
    assert segment_ops("[dot]") == ["dot"]
    assert segment_ops("Activation,Pooling") == ["Activation", "Pooling"]
    assert segment_ops("relu") == ["relu"]
    assert segment_ops("[dot,re") is None  # cut at 127 characters by MXNet
    assert segment_ops("ImperativeBulk") == ["ImperativeBulk"]


def _forward(first: int, t: int, n: int = 6) -> list[Call]:
    """One invocation of relu(dot(A, B)): A (n,4), B (4,5); the relu reads the dot's output 0."""
    f32 = 0
    a, b, y = ((n, 4), f32), ((4, 5), f32), ((n, 5), f32)
    dot = Call(first, t, t + 5, DOT, [11, 12], [], [a, b], [y], [], [], (-1, -1), 1, None, (-1, -1),
               None, "bound symbol", first)
    relu = Call(first + 1, t, t + 5, RELU, [], [], [y], [y], [], [], (first,), 1, None, (0,),
                None, "bound symbol", first)
    return [dot, relu]


def _events(starts: list[int], name: str = "[dot,relu]") -> list[dict]:
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "cpu/0"}}]
    for s in starts:
        ev += [{"ph": "B", "name": name, "cat": "operator", "pid": 1, "tid": 7, "ts": s},
               {"ph": "E", "name": name, "cat": "operator", "pid": 1, "tid": 7, "ts": s + 50}]
    return ev


def test_a_segment_is_a_run_of_one_invocations_nodes():
    calls = _forward(0, 100) + _forward(2, 110)
    by_seq = {c.seq: c for c in calls}
    ops = node_ops(["dot", "relu"])
    assert ops == [(DOT, frozenset()), (RELU, frozenset())]
    assert group_of(calls[0], ops, by_seq, set()) == tuple(calls[:2])
    assert group_of(calls[1], node_ops(["relu", "dot"]), by_seq, set()) is None  # another invocation's
    assert group_of(calls[0], ops, by_seq, {1}) is None  # its relu matched already
    imperative = Call(9, 100, 105, DOT, [], [], None, None, [], [], (), 1, None)
    assert group_of(imperative, node_ops(["dot"]), {9: imperative}, set()) is None


def _nodes(*ops: int) -> dict[int, Call]:
    return {k: Call(k, 100, 105, op, [], [], None, None, [], [], (), 1, None, (), None, "bound symbol", 0)
            for k, op in enumerate(ops)}


def test_a_onednn_subgraph_operator_takes_its_base_and_the_post_nodes_it_fused():
    by_seq = _nodes(CONV, BN, ACT, RELU)
    conv = node_ops(["_sg_mkldnn_conv"])
    assert conv[0][0] == CONV and {BN, ACT} <= conv[0][1]
    assert [c.seq for c in group_of(by_seq[0], node_ops(["_sg_mkldnn_conv", "relu"]), by_seq, set())] == [0, 1, 2, 3]
    # a post node of the name the segment lists next is that name's, not fused
    g = group_of(by_seq[0], node_ops(["_sg_mkldnn_conv", "Activation", "relu"]), by_seq, set())
    assert [c.seq for c in g] == [0, 1, 2, 3]
    assert group_of(by_seq[0], node_ops(["_sg_mkldnn_conv", "BatchNorm", "relu"]), by_seq, set()) is None
    by_seq = _nodes(CONV, ACT)
    assert [c.seq for c in group_of(by_seq[0], node_ops(["_sg_mkldnn_conv", "Activation"]), by_seq, set())] == [0, 1]
    assert [c.seq for c in group_of(by_seq[0], node_ops(["_sg_mkldnn_conv"]), by_seq, set())] == [0, 1]
    # the FLOP table's names for the nodes: the base's and the post's
    assert node_names(["_sg_mkldnn_conv"], tuple(by_seq.values())) == ["Convolution", "Activation"]


def test_the_segments_args_are_its_boundary_and_summed_counts(tmp_path):
    m = merged(_forward(0, 100, n=6))
    assert m.shapes("in") == [[6, 4], [4, 5]] and m.shapes("out") == [[6, 5]]
    assert m.attrs() == {}
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"traceEvents": _events([200])}))
    rep = matching.annotate(path, _forward(0, 100), {"record_shapes": True, "with_flops": True})
    assert (rep.matched, rep.unmatched_calls, rep.memory_unchecked) == (1, 0, {"executor_node": 1})
    args = next(e["args"] for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "B")
    names = matching.ARGS
    assert args[names["input_dims"]] == [[6, 4], [4, 5]]
    assert args[names["output_dims"]] == [[6, 5]]
    assert args[names["flops"]] == 2 * 6 * 4 * 5 + 6 * 5
    assert args[names["bytes"]] == 4 * (6 * 4 + 4 * 5 + 6 * 5) + 4 * 2 * 6 * 5
    assert names["attrs"] not in args and args[names["match"]] == "exact"


def test_forwards_take_their_segments_first_in_first_out():
    calls = _forward(0, 100, n=6) + _forward(2, 110, n=6)
    found, _ = matching.match(calls, _events([200, 300]))
    assert [(c.seq, len(g), label) for c, label, g in found.values()] == [(0, 2, "exact"), (2, 2, "exact")]


def test_in_a_window_with_segments_an_executor_node_is_no_plain_event():
    calls = _forward(0, 100)
    ev = _events([200]) + [{"ph": "X", "name": "dot", "cat": "operator", "pid": 1, "tid": 7,
                            "ts": 150, "dur": 10}]
    found, _ = matching.match(calls, ev)
    assert [(c.seq, len(g)) for c, _, g in found.values()] == [(0, 2)]


def test_a_segment_of_several_blocks_names_their_holder_and_each_nodes_block(monkeypatch):
    """A segment spanning dense0 (and its relu) and dense1 is labelled with the block holding
    them all (the hybridized Sequential), never with its first node's; per node, its block."""
    from pyprof.attribution import segments

    monkeypatch.setattr(segments, "PARENTS", {})
    for block, parent in (("seq0", None), ("dense0", "seq0"), ("dense0_relu", "dense0"),
                          ("dense1", "seq0")):
        segments.note_parent(block, parent)
    f32 = 0
    x, w0, h, w1, y = ((2, 3), f32), ((4, 3), f32), ((2, 4), f32), ((5, 4), f32), ((2, 5), f32)
    fc0 = Call(0, 1, 2, DOT, [], [], [x, w0], [h], [], [], (-1, -1), 1, None, (-1, -1), "dense0", "inference", 0)
    act = Call(1, 1, 2, RELU, [], [], [h], [h], [], [], (0,), 1, None, (0,), "dense0_relu", "inference", 0)
    fc1 = Call(2, 1, 2, DOT, [], [], [h, w1], [y], [], [], (1, -1), 1, None, (0, -1), "dense1", "inference", 0)
    m = merged((fc0, act, fc1))
    assert m.block == "seq0" and m.source == "inference"
    assert segments.node_blocks((fc0, act, fc1)) == ["dense0", "dense0_relu", "dense1"]
    assert merged((fc0, act)).block == "dense0"  # dense0 holds its relu
    assert segments.node_blocks((fc0,)) is None
    # a name seen under two parents proves no holder
    segments.note_parent("dense1", "other0")
    assert merged((fc0, act, fc1)).block is None
    # the loss's autograd backward then the block's backward: no block holds both, two sources;
    # a backward node's inputs past its gradients (weights, data, saved outputs) are read from
    # outside, its gradient from the node before it is not
    gy, gh = y, h
    loss = Call(5, 1, 2, RELU, [], [], [gy, y], [gy], [], [], (4,), 1, None, (0,), None, "derived, autograd", -1)
    bfc1 = Call(6, 1, 2, DOT, [], [], [gy, h, w1], [gh, w1], [], [], (5,), 1, None, (0,), "dense1", "derived", 6)
    b = merged((loss, bfc1))
    assert b.block is None and b.source == "derived, autograd; derived"
    assert segments.node_blocks((loss, bfc1)) == [None, "dense1"]
    assert b.shapes("in") == [[2, 5], [2, 5], [2, 4], [5, 4]]  # loss's g0 and y; bfc1's h, w1
    assert b.shapes("out") == [[2, 4], [5, 4]]
