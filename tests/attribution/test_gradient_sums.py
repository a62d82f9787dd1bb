"""The gradient sums of a hybridized block's backward (issue 34 item 4): where an array feeds
several nodes (a residual block's input: its body's first convolution and the shortcut's
``elemwise_add``), MXNet's CachedOp backward sums its gradients with ``add_n``
(``AggregateGradient``'s ``ElementWiseSum``). pyprof.attribution.cachedop.backward_plan makes
those nodes, in MXNet's run order, with shapes (every input and the output the summed array's)
and FLOPs (n - 1 per element), labelled ``exact`` only where every gradient summed has a known
writer. A hybridized ResNet-18 at 1x3x32x32, one training step after a warm-up, per-operator
mode, in a child process."""

from __future__ import annotations

import json

import pytest

from tests.child import run_scenario, zoo_training

_SCENARIO = zoo_training("resnet18_v1", 32) + """
PLANT
train()
with pyprof.profile(path="w.json", record_shapes=True, with_flops=True) as p:
    train()
rows = []
for e in sorted(json.load(open("w.json"))["traceEvents"], key=lambda e: e.get("ts", 0)):
    if e.get("cat") == "operator" and e.get("ph") in ("B", "X"):
        a = e.get("args") or {}
        rows.append([e["name"], a.get("Input Dims"), a.get("pyprof.output_dims"), a.get("pyprof.flops"),
                     a.get("pyprof.match"), a.get("pyprof.source"), a.get("pyprof.block")])
result = {"rows": rows, "report": p.windows[0].attribution.as_dict()}
"""

#: Activation left out of capture.backward: its backward nodes are written by no entry, so the
#: sums reading them are not proven
_UNKNOWN_ACTIVATION = """
from pyprof.attribution import autograd as _ag
del _ag.TABLE["Activation"]
"""


def _run(tmp_path, plant: str = ""):
    return run_scenario(_SCENARIO.replace("PLANT", plant), tmp_path, env={"PYPROF_PER_OPERATOR": "1"},
                        timeout=240)


@pytest.fixture(scope="module")
def step(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("sums"))


def test_every_gradient_sum_gets_its_shapes_and_flops_exactly(step):
    sums = [r for r in step["rows"] if r[0] == "add_n"]
    # a sum at each residual block whose input also feeds the shortcut's add: 8 in ResNet-18
    # (the blocks without a downsample, and the input of the one after each downsample)
    dims = sorted(json.dumps(r[1]) for r in sums)
    want = {64: 3, 128: 2, 256: 2, 512: 1}
    side = {64: 8, 128: 4, 256: 2, 512: 1}
    assert dims == sorted(json.dumps([[1, c, side[c], side[c]]] * 2) for c, n in want.items()
                          for _ in range(n)), dims
    for name, ins, outs, flops, match, source, block in sums:
        assert outs == [ins[0]] and flops == ins[0][1] * ins[0][2] * ins[0][3], (ins, outs, flops)
        assert (match, source) == ("exact", "derived") and block, (match, source, block)
    rep = step["report"]
    # every backward event has its call now: none left unmatched (before: the 8 add_n)
    assert rep["unmatched_events"] == {} and rep["matched"] == rep["calls"] == rep["events"], rep
    assert rep["exact"] == rep["matched"], rep


def test_a_sum_reading_a_gradient_no_entry_writes_is_not_exact(tmp_path):
    r = _run(tmp_path, _UNKNOWN_ACTIVATION)
    sums = [x for x in r["rows"] if x[0] == "add_n"]
    # the sums still carry their shapes; the 5 that read a post-add relu's gradient, whose
    # writer (_backward_Activation, now unknown) no call stands for, are ambiguous, never exact;
    # the 3 at a stage's output, which feeds the next stage's first convolution and its
    # downsample convolution, read two known writers: still proven
    assert len(sums) == 8 and all(x[1] and x[3] for x in sums), sums
    labels = sorted((x[4], x[5]) for x in sums)
    assert labels == [("ambiguous", "derived, partial inputs")] * 5 + [("exact", "derived")] * 3, sums
    assert sorted(x[1][0][1] for x in sums if x[4] == "exact") == [64, 128, 256], sums
    assert all(x[4] != "exact" for x in r["rows"] if x[0] == "_backward_Activation")
