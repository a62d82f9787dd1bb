"""Bulk mode counts (issue 34 item 3): in MXNet's default mode a hybridized ResNet-18's
``ImperativeBulk`` events carry the shapes of the operators they ran and the sums of their
FLOPs and bytes (pyprof.attribution.segments.bulk_runs), the session says once that
per-operator times need PYPROF_PER_OPERATOR=1, and ``summarize --by shape`` names that fix.

One child per mode (a fresh interpreter each: the mode is set before libmxnet loads), the same
random weights (seeded), a window of one inference forward at 1x3x64x64 and a second window of
one training step (forward, loss, backward).
"""

from __future__ import annotations

from collections import Counter

import pytest

from child import run_scenario, zoo_training

_SCENARIO = zoo_training("resnet18_v1", 64) + """
import contextlib, io, os
net(x).wait_to_read()
train()  # warm-up: the CachedOp is made and the first backward run before the session
err = io.StringIO()
with contextlib.redirect_stderr(err):
    with pyprof.profile(schedule=pyprof.schedule(active=1, repeat=2), path="w_{window}.json",
                        record_shapes=True, with_flops=True) as p:
        net(x).wait_to_read()
        p.step()
        train()
        p.step()
windows = []
for w in p.windows:
    ops = []
    for e in json.load(open(w.path))["traceEvents"]:
        if e.get("cat") == "operator" and e.get("ph") in ("B", "X"):
            a = e.get("args") or {}
            ops.append([e["name"], a.get("pyprof.flops"), a.get("pyprof.bytes"),
                        a.get("pyprof.segment"), a.get("pyprof.match"), a.get("Input Dims")])
    windows.append({"ops": ops, "report": w.attribution.as_dict(),
                    "by_shape": pyprof.trace.summarize(w.path, by="shape")})
result = {"windows": windows, "stderr": err.getvalue()}
"""

#: the engine's bookkeeping, which no call stands for, left out of the operators compared
_NOT_RECORDED = {"DeleteVariable", "WaitForVar", "WaitForAll"}
#: MXNet's aliases a segment's node may be named by, to the name the trace writes
_ALIASES = {"ElementWiseSum": "add_n"}


@pytest.fixture(scope="module")
def modes(tmp_path_factory):
    base = tmp_path_factory.mktemp("bulk_counts")
    return {m: run_scenario(_SCENARIO, base / m, env={"PYPROF_PER_OPERATOR": v}, timeout=240)
            for m, v in (("bulk", "0"), ("per_operator", "1"))}


def _flops(window) -> int:
    return sum(op[1] or 0 for op in window["ops"])


def _operators(window) -> Counter:
    """The operators the window's events ran: a segment's from its pyprof.segment arg."""
    out: Counter = Counter()
    for name, _, _, segment, _, _ in window["ops"]:
        if segment is not None:  # (a node is named by its handle's name: add_n's is its alias)
            out.update(_ALIASES.get(n, n) for n, _ in segment)
        elif name not in _NOT_RECORDED:
            out[name] += 1
    return out


@pytest.mark.parametrize("index", [0, 1], ids=["inference", "training"])
def test_bulk_segments_carry_the_per_operator_flops(modes, index):
    bulk, per_op = modes["bulk"]["windows"][index], modes["per_operator"]["windows"][index]
    segments = [op for op in bulk["ops"] if op[0] == "ImperativeBulk"]
    assert segments and not any(op[0] == "ImperativeBulk" for op in per_op["ops"])
    # every segment took a run of the block's calls: its operators, shapes, summed FLOPs
    assert bulk["report"]["unmatched_calls"] == 0, bulk["report"]
    assert all(op[1] and op[2] and op[3] and op[5] for op in segments), segments
    assert bulk["report"]["bulk_segments"] == {"ImperativeBulk": len(segments)}
    # the same operators ran, by name and count (68 forward nodes: 20 convolutions, ...)
    assert _operators(bulk) == _operators(per_op)
    assert _operators(bulk)["Convolution"] == 20
    total, want = _flops(bulk), _flops(per_op)
    assert want > 0 and abs(total - want) <= 0.01 * want, (total, want)


def test_the_inference_segments_are_runs_of_the_engine_bulk_size(modes):
    bulk = modes["bulk"]["windows"][0]
    runs = [len(op[3]) for op in bulk["ops"] if op[0] == "ImperativeBulk"]
    assert runs == [15, 15, 15, 15, 8]  # 68 nodes, MXNet's default bulk of 15
    assert {op[4] for op in bulk["ops"] if op[0] == "ImperativeBulk"} == {"exact"}
    assert _flops(bulk) == _flops(modes["per_operator"]["windows"][0])


def test_the_session_says_once_that_per_operator_times_need_per_operator_mode(modes):
    err = modes["bulk"]["stderr"]
    lines = [x for x in err.splitlines() if "bulk segments" in x]
    assert len(lines) == 1 and "PYPROF_PER_OPERATOR=1" in lines[0], err
    assert "bulk segments" not in modes["per_operator"]["stderr"]


def test_summarize_by_shape_names_per_operator_mode_not_record_shapes(modes):
    text = modes["bulk"]["windows"][0]["by_shape"]
    assert "PYPROF_PER_OPERATOR=1" in text and "record_shapes" not in text, text
    rows = [x for x in text.splitlines() if x.startswith("ImperativeBulk")]
    assert len(rows) == 5 and all(x.split()[-2] != "-" for x in rows), rows  # GFLOP/s per segment
    assert "PYPROF_PER_OPERATOR" not in modes["per_operator"]["windows"][0]["by_shape"]
