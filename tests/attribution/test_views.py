"""Views under autograd (pyprof.attribution.views): ``NDArray.reshape``, ``x[a:b]`` and ``x[i]``
made while autograd records are MXNet's ``Reshape`` and ``slice`` nodes, whose backward nodes
run at the backward; a detached array, or a view made while autograd does not record, is off
the tape. Per-operator mode in a child process: MXNet's own events, in its run order, each
matched, with the shapes MXNet computes them at."""

from __future__ import annotations

import pytest

from tests.child import run_scenario

_VIEWS = """
import json, pyprof, mxnet as mx
from pyprof.attribution.matching import ARGS
a = mx.nd.random.uniform(shape=(3, 4)); a.attach_grad()
b = mx.nd.random.uniform(shape=(4, 5)); b.attach_grad()
LOSSES = {
    "reshape": lambda y: y.reshape((-1,)).sum(),       # MXNDArrayReshape64: Reshape
    "slice": lambda y: y[1:3].sum(),                   # MXNDArraySlice64: slice
    "at": lambda y: y[1].sum(),                        # MXNDArrayAt64: slice, then Reshape
    "view of a view": lambda y: y.reshape((-1,))[2].sum(),  # Reshape; at of 1-D: slice alone
    "detached": lambda y: (y.detach() * y).sum(),      # off the tape: no gradient through it
}
def outside():                                         # a view made while autograd does not record
    with mx.autograd.record():
        y = mx.nd.dot(a, b)
    z = y.reshape((-1,))
    with mx.autograd.record():
        return (z * y.reshape((-1,))).sum()
def step(kind):
    if kind == "outside":
        loss = outside()
    else:
        with mx.autograd.record():
            loss = LOSSES[kind](mx.nd.dot(a, b))
    loss.backward()
result = {}
for kind in [*LOSSES, "outside"]:
    step(kind); mx.nd.waitall()
    path = kind.replace(" ", "_") + ".json"
    with pyprof.profile(path=path, record_shapes=True, profile_memory=True) as p:
        step(kind); mx.nd.waitall()
    ev = json.load(open(path))["traceEvents"]
    g = lambda e: e.get("args") or {}
    ops = sorted((e for e in ev if e.get("ph") in ("B", "X") and e.get("cat") == "operator"
                  and e["name"] != "DeleteVariable"), key=lambda e: e["ts"])
    result[kind] = {
        "backward": [[e["name"], g(e).get(ARGS["input_dims"]), g(e).get(ARGS["output_dims"]),
                      g(e).get(ARGS["match"])] for e in ops if e["name"].startswith("_backward")],
        "segments": [g(e).get("pyprof.segment") for e in ops if e["name"] == "ImperativeBulk"],
        "attrs": {e["name"]: g(e).get(ARGS["attrs"]) for e in ops if e["name"] in ("_backward_reshape", "_backward_slice")},
        "report": p.windows[0].attribution.as_dict()}
"""

_DOT = ["_backward_dot", [[3, 5], [3, 4], [4, 5]], [[3, 4], [4, 5]]]
# MXNet 1.9.1's backward nodes, in its run order: each view's node gives the node before it
# the source's shape (the gradient of dot's output is [3, 5] whatever view the loss read)
_WANT = {
    "reshape": [["_backward_sum", [[1]], [[15]]], ["_backward_reshape", [[15]], [[3, 5]]], _DOT],
    "slice": [["_backward_sum", [[1]], [[2, 5]]], ["_backward_slice", [[2, 5]], [[3, 5]]], _DOT],
    "at": [["_backward_sum", [[1]], [[5]]], ["_backward_reshape", [[5]], [[1, 5]]],
           ["_backward_slice", [[1, 5]], [[3, 5]]], _DOT],
    "view of a view": [["_backward_sum", [[1]], [[1]]], ["_backward_slice", [[1]], [[15]]],
                       ["_backward_reshape", [[15]], [[3, 5]]], _DOT],
}
_ATTRS = {
    "reshape": {"_backward_reshape": {"shape": "[15]"}},
    "slice": {"_backward_slice": {"begin": "1", "end": "3"}},
    "at": {"_backward_reshape": {"shape": "[5]"}, "_backward_slice": {"begin": "1", "end": "2"}},
}


@pytest.fixture(scope="module")
def per_operator(tmp_path_factory):
    return run_scenario(_VIEWS, tmp_path_factory.mktemp("views"), env={"PYPROF_PER_OPERATOR": "1"},
                        timeout=300)


@pytest.mark.parametrize("kind", list(_WANT))
def test_a_taped_views_backward_node_is_matched_with_mxnets_shapes(per_operator, kind):
    r = per_operator[kind]
    assert [x[:3] for x in r["backward"]] == _WANT[kind], r["report"]
    assert r["report"]["unmatched_events"] == {} and r["report"]["matched"] == r["report"]["calls"]
    for kind_, attrs in _ATTRS.items():  # the forward node's attributes, as MXNet prints them
        if kind_ == kind:
            assert r["attrs"] == attrs


@pytest.mark.parametrize("kind", ["detached", "outside"])
def test_a_view_off_the_tape_adds_no_gradient_path(per_operator, kind):
    r = per_operator[kind]
    names = [x[0] for x in r["backward"]]
    # detached: one gradient reaches dot (no ElementWiseSum of two); outside: z is off the tape,
    # the view taken while recording is on it
    want = {"detached": ["_backward_sum", "_backward_broadcast_mul", "_backward_dot"],
            "outside": ["_backward_sum", "_backward_broadcast_mul", "_backward_reshape", "_backward_dot"]}
    assert names == want[kind], r["report"]
    assert r["report"]["unmatched_events"] == {} and r["report"]["matched"] == r["report"]["calls"], r["report"]
    assert r["backward"][-1][:3] == _DOT


def test_a_bulk_segment_lists_the_views_backward_nodes(tmp_path):
    r = run_scenario(_VIEWS.replace('[*LOSSES, "outside"]', '["reshape", "at"]'), tmp_path, timeout=300)
    for kind in ("reshape", "at"):
        (segment,) = r[kind]["segments"]
        assert segment == [w[:2] for w in _WANT[kind]], r[kind]["report"]



_GRAPHS = """
import json, pyprof, mxnet as mx
from mxnet import gluon
from pyprof.attribution.matching import ARGS
a = mx.nd.random.uniform(shape=(3, 4)); a.attach_grad()
b = mx.nd.random.uniform(shape=(4, 5)); b.attach_grad()
big = mx.nd.random.uniform(shape=(256, 256)); big.attach_grad()
head = gluon.nn.Dense(2); head.initialize(); head.hybridize()
def view_head():                 # a view is the head backward starts from
    with mx.autograd.record():
        h = mx.nd.dot(a, b)[1]
    h.backward()
def into_block():                # a view is a hybridized block's input
    with mx.autograd.record():
        loss = head(mx.nd.dot(a, b).reshape((1, -1))).sum()
    loss.backward()
def attach():                    # attach_grad on a taped view: the graph stops there
    with mx.autograd.record():
        z = mx.nd.dot(a, b).reshape((-1,)); z.attach_grad()
        loss = (z * 2).sum()
    loss.backward()
def retain():                    # the graph kept for a second backward
    with mx.autograd.record():
        loss = mx.nd.dot(a, b).reshape((-1,)).sum()
    loss.backward(retain_graph=True); loss.backward()
def given():                     # one head with its gradient given, one without
    with mx.autograd.record():
        y1 = mx.nd.dot(big, big); y2 = mx.nd.dot(a, b)
    mx.autograd.backward([y1, y2], head_grads=[mx.nd.ones((256, 256)), None])
def add_n():                     # one identity (_copy) per input; slice_axis
    with mx.autograd.record():
        y = mx.nd.dot(a, b)
        loss = mx.nd.add_n(y[1:].sum(), mx.nd.slice_axis(y, axis=1, begin=0, end=2).sum())
    loss.backward()
result = {}
for step in (view_head, into_block, attach, retain, given, add_n):
    step(); mx.nd.waitall()
    path = step.__name__ + ".json"
    with pyprof.profile(path=path, record_shapes=True, profile_memory=True) as p:
        step(); mx.nd.waitall()
    g = lambda e: e.get("args") or {}
    ops = sorted((e for e in json.load(open(path))["traceEvents"] if e.get("ph") in ("B", "X")
                  and e.get("cat") == "operator"), key=lambda e: e["ts"])
    result[step.__name__] = {
        "backward": [[e["name"], g(e).get(ARGS["input_dims"]), g(e).get(ARGS["output_dims"])] for e in ops
                     if e["name"].startswith("_backward") or e["name"] in ("SetValueOp", "_copy")],
        "labels": sorted({g(e).get(ARGS["match"]) for e in ops if ARGS["match"] in g(e)}),
        "failed": [e["name"] for e in ops if g(e).get(ARGS["memory_check"]) is False],
        "report": p.windows[0].attribution.as_dict()}
"""

_SUM, _HEAD = ["_backward_sum", [[1]], [[15]]], ["SetValueOp", [], [[1]]]
_GRAPHS_WANT = {
    "view_head": [["SetValueOp", [], [[5]]], ["_backward_reshape", [[5]], [[1, 5]]],
                  ["_backward_slice", [[1, 5]], [[3, 5]]], _DOT],
    "into_block": [_HEAD, ["_backward_sum", [[1]], [[1, 2]]],
                   ["_backward_FullyConnected", [[1, 2], [1, 15], [2, 15]], [[1, 15], [2, 15], [2]]],
                   ["_backward_reshape", [[1, 15]], [[3, 5]]], _DOT],
    "attach": [_HEAD, _SUM, ["_backward_mul_scalar", [[15]], [[15]]]],
    "retain": [_HEAD, _SUM, ["_backward_reshape", [[15]], [[3, 5]]], _DOT] * 2,
    "given": [["SetValueOp", [], [[3, 5]]],
              ["_backward_dot", [[256, 256]] * 3, [[256, 256]] * 2], _DOT],
    "add_n": [_HEAD, ["_copy", [[1]], [[1]]], ["_copy", [[1]], [[1]]],
              ["_backward_sum", [[1]], [[3, 2]]], ["_backward_sum", [[1]], [[2, 5]]],
              ["_backward_slice_axis", [[3, 2]], [[3, 5]]], ["_backward_slice", [[2, 5]], [[3, 5]]], _DOT],
}


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    return run_scenario(_GRAPHS, tmp_path_factory.mktemp("graphs"), env={"PYPROF_PER_OPERATOR": "1"},
                        timeout=300)


@pytest.mark.parametrize("step", list(_GRAPHS_WANT))
def test_the_gradient_graph_is_mxnets_around_views_variables_and_heads(graphs, step):
    # MXNet's events, each matched to the node of its shapes: a wrong graph leaves events
    # unmatched or gives them another node's shapes. One chain, or pushes the engine takes in
    # order (given: the big node ready at its push, the small one after SetValueOp), run in
    # MXNet's order, each proven; the equal nodes of two backwards (retain) and of independent
    # branches (add_n) run in the order the engine makes them ready, which load moves: there
    # a tie between equal calls is an honest guess, and the events compare as a set
    r = graphs[step]
    assert r["report"]["unmatched_events"] == {} and r["report"]["matched"] == r["report"]["calls"], r["report"]
    assert r["failed"] == [], r
    if step in ("retain", "add_n"):
        key = lambda x: repr(x)  # noqa: E731
        assert sorted(r["backward"], key=key) == sorted(_GRAPHS_WANT[step], key=key), r["report"]
        assert set(r["labels"]) <= {"exact", "memory", "ambiguous"}, r
    else:
        assert r["backward"] == _GRAPHS_WANT[step], r["report"]
        assert r["labels"] == ["exact"], r


# -- the registry alone (no MXNet): which view a call read, by handle, key and seq ------------

def _views(cap=8):
    from pyprof.attribution.views import Views
    return Views(cap)


def _src(p=7, k=0, shape=(3, 5)):
    return (shape, 0, p, k)  # the source's cache entry: (shape, dtype, producer, slot)


def test_a_call_reads_the_latest_view_made_before_it_at_that_handle_and_key():
    v = _views()
    v.add("Reshape", 100, (7, 0), 10, 1, 50, _src(), ((15,), 0), ())
    v.add(None, 100, (7, 0), 20, 1, 50, _src(), ((15,), 0), ())  # freed, the address a detach's
    node, slot = v.resolve(100, 15, 7, 0)
    assert (node.keys, node.vals, slot) == ([b"shape"], [b"[15]"], 0)
    assert node.producers == (7,) and node.inputs == [50] and node.in_meta[0][:2] == ((3, 5), 0)
    assert v.resolve(100, 25, 7, 0) == ("v", 100)  # after the detach: a leaf
    assert v.resolve(100, 5, 7, 0) is None  # before any view: the producer's output
    assert v.resolve(100, 15, 8, 0) is None and v.resolve(101, 15, 7, 0) is None


def test_views_without_a_producer_get_distinct_tags():
    v = _views()
    tags = {v.tag() for _ in range(1000)}
    assert len(tags) == 1000 and max(tags) <= -3  # -1 is "no slot"; tags never match it
    t = v.tag()
    v.add("Reshape", 100, (-1, t), 10, 1, 50, _src(-1, -1), ((15,), 0), ())
    assert v.resolve(100, 11, -1, t) is not None and v.resolve(100, 11, -1, -1) is None


def test_at_is_a_slice_then_a_reshape_and_a_view_of_a_view_chains():
    v = _views()
    v.add("at", 100, (7, 0), 10, 1, 50, _src(), ((5,), 0), (None, 1, None))
    reshape, _ = v.resolve(100, 11, 7, 0)
    sl = v.nodes()[reshape.producers[0]]
    assert (sl.keys, sl.vals, sl.out_meta[0][0], sl.producers) == ([b"begin", b"end"], [b"1", b"2"], (1, 5), (7,))
    assert reshape.in_meta[0][0] == (1, 5) and reshape.vals == [b"[5]"]
    # a 1-D source (numpy shapes off): the slice alone, shape (1,)
    v.add("at", 200, (7, 0), 12, 1, 100, ((15,), 0, 7, 0), ((1,), 0), (None, 2, None))
    (only, _) = v.resolve(200, 13, 7, 0)
    assert only.keys == [b"begin", b"end"] and only.producers == (reshape.seq,)


def test_a_backward_consumes_its_threads_views_and_tells_when_one_was_not_kept():
    v = _views(cap=2)
    v.add("Reshape", 100, (7, 0), 10, 1, 50, _src(), ((15,), 0), ())
    v.add("Reshape", 101, (7, 0), 10, 2, 50, _src(), ((15,), 0), ())
    v.add("Reshape", 102, (7, 0), 10, 1, 50, _src(), ((15,), 0), ())  # past the cap
    assert v.resolve(102, 11, 7, 0) is None
    assert v.consume(1) is True and v.consume(1) is False
    assert v.resolve(100, 11, 7, 0) is None and v.resolve(101, 11, 7, 0) is not None
    assert all(n.thread == 2 for n in v.nodes().values())
    v.clear()
    assert v.nodes() == {} and v.resolve(101, 11, 7, 0) is None
