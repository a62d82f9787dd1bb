"""The backward of ``clip`` (MobileNet v2's ReLU6, issue 34): ``_backward_clip`` is autograd's
node for ``clip`` (``ElemwiseGradUseIn``: the output's gradient, then the forward input), a
``capture.backward`` entry of attribution.json. A hybridized MobileNet v2 0.25 at 1x3x32x32,
one training step after a warm-up, per-operator mode, in a child process."""

from __future__ import annotations

import json
from collections import Counter

from tests.child import run_scenario, zoo_training

_SCENARIO = zoo_training("mobilenetv2_0.25", 32) + """
train()
with pyprof.profile(path="w.json", record_shapes=True, with_flops=True) as p:
    train()
rows = [[e["name"], (e.get("args") or {}).get("Input Dims"), (e.get("args") or {}).get("pyprof.match")]
        for e in json.load(open("w.json"))["traceEvents"]
        if e.get("cat") == "operator" and e.get("ph") in ("B", "X") and e["name"] in ("clip", "_backward_clip")]
result = {"rows": rows, "report": p.windows[0].attribution.as_dict()}
"""

def _run(tmp_path):
    return run_scenario(_SCENARIO, tmp_path, env={"PYPROF_PER_OPERATOR": "1"},
                        timeout=240)


def test_every_backward_clip_is_matched_exactly_with_its_forward_shapes(tmp_path):
    step = _run(tmp_path)
    rep = step["report"]
    assert rep["unmatched_events"] == {} and rep["matched"] == rep["calls"] == rep["events"], rep
    forward = [r for r in step["rows"] if r[0] == "clip"]
    backward = [r for r in step["rows"] if r[0] == "_backward_clip"]
    # one backward node per ReLU6 of the network (36 in MobileNet v2), each reading the output's
    # gradient and the forward input: two arrays of the forward input's shape
    assert len(backward) == 36, len(backward)
    assert all(r[2] == "exact" and len(r[1]) == 2 and r[1][0] == r[1][1] for r in backward), backward
    assert (Counter(json.dumps(r[1][0]) for r in backward)
            == Counter(json.dumps(r[1][0]) for r in forward)), (backward, forward)
