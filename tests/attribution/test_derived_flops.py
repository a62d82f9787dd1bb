"""FLOPs are derived when reading (issue 35): a JVM window carries shapes and attributes and no
FLOPs; ``summarize --by shape``, ``roofline`` and ``report`` evaluate flops.json for its operator
events (:func:`pyprof.attribution.flops.counted`), and get what Python's ``with_flops=True``
writes for the same shapes. One child process: a Python session with ``with_flops`` (dot,
FullyConnected, Convolution, relu), then, over the JPype bridge, a JVM session with
``record_shapes`` and ``with_flops`` forwarding a bound dot of the same shapes."""

from __future__ import annotations

import json
import re

import pytest

from child import run_cli, run_scenario
from pyprof import rules
from pyprof.trace import report_html
from pyprof.trace.shapes import shape_stats

ARGS = rules.spec("attribution.json")["trace_args"]
N = 64

SCENARIO = f"""
import mxnet as mx
import pyprof
from pyprof import jvm
with pyprof.profile(path="py_{{window}}.json", record_shapes=True, with_flops=True):
    a, b = mx.nd.ones(({N}, {N})), mx.nd.ones(({N}, {N}))
    for _ in range(3):
        mx.nd.dot(a, b).wait_to_read()
    x, w, bias = mx.nd.ones((8, 32)), mx.nd.ones((16, 32)), mx.nd.ones((16,))
    mx.nd.FullyConnected(x, w, bias, num_hidden=16).wait_to_read()
    img, k, kb = mx.nd.ones((2, 3, 16, 16)), mx.nd.ones((4, 3, 3, 3)), mx.nd.ones((4,))
    mx.nd.Convolution(img, k, kb, kernel=(3, 3), num_filter=4, pad=(1, 1)).wait_to_read()
    mx.nd.relu(x).wait_to_read()
jvm.start()
for ns in ("org.apache.clojure-mxnet.context", "org.apache.clojure-mxnet.executor",
           "org.apache.clojure-mxnet.ndarray", "org.apache.clojure-mxnet.random",
           "org.apache.clojure-mxnet.symbol", "pyprof.session"):
    jvm.require(ns)
jvm.eval_clojure('''
(let [m "org.apache.clojure-mxnet."
      f (fn [ns n] (resolve (symbol (str m ns) n)))
      ctx ((f "context" "cpu"))
      u (fn [] ((f "random" "uniform") -1.0 1.0 [{N} {N}] {{:ctx ctx}}))
      exec ((f "symbol" "bind") ((f "symbol" "dot") "dot" [((f "symbol" "variable") "A")
                                                          ((f "symbol" "variable") "B")])
            ctx {{"A" [(u)] "B" [(u)]}})
      run (fn [] ((f "ndarray" "wait-to-read")
                  (first ((f "executor" "outputs") ((f "executor" "forward") exec)))))
      s (pyprof.session/start! (pyprof.session/profile {{:path "jvm_{{window}}.json"
                                                         :record-shapes true :with-flops true}}))]
  (dotimes [_ 3] (run))
  (pyprof.session/stop! s)
  nil)
''')
result = "ok"
"""


@pytest.fixture(scope="module")
def windows(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("derived")
    assert run_scenario(SCENARIO, tmp, timeout=300) == "ok"
    return tmp


def _ops(path) -> list[dict]:
    return [e for e in json.loads(path.read_text())["traceEvents"]
            if e.get("cat") == "operator" and e.get("ph") in ("B", "X") and e.get("args")]


def _written(py: list[dict], name: str) -> dict:
    """The args Python's with_flops wrote on the first event of operator ``name``."""
    return next(e["args"] for e in py if e["name"] == name and ARGS["flops"] in e["args"])


@pytest.mark.jvm
def test_a_jvm_window_carries_shapes_and_attributes_and_no_flops(windows):
    dots = [e for e in _ops(windows / "jvm_0.json") if e["name"] == "[dot]"]
    assert len(dots) == 3
    for e in dots:
        a = e["args"]
        assert a[ARGS["input_dims"]] == [[N, N], [N, N]] and a[ARGS["output_dims"]] == [[N, N]]
        assert a[ARGS["input_type"]] == ["float32", "float32"] and isinstance(a[ARGS["attrs"]], dict)
        assert ARGS["flops"] not in a and ARGS["bytes"] not in a


@pytest.mark.jvm
def test_summarize_by_shape_derives_what_python_writes(windows):
    py = _ops(windows / "py_0.json")
    dot = _written(py, "dot")
    assert dot[ARGS["flops"]] == 2 * N ** 3
    [g] = [g for g in shape_stats(windows / "jvm_0.json").groups if g.name == "[dot]"]
    assert g.count == 3
    assert (g.flops, g.bytes) == (3 * dot[ARGS["flops"]], 3 * dot[ARGS["bytes"]])
    res = run_cli(["summarize", str(windows / "jvm_0.json"), "--by", "shape", "--format", "json"],
                  windows)
    assert res.returncode == 0, res.stderr
    [row] = [r for r in json.loads(res.stdout)["groups"] if r["name"] == "[dot]"]
    assert row["flops"] == 3 * dot[ARGS["flops"]] and row["bytes"] == 3 * dot[ARGS["bytes"]]
    assert row["gflops_per_s"] == pytest.approx(row["flops"] / row["total_us"] / 1e3)


@pytest.mark.jvm
def test_report_shows_the_derived_flops_of_a_jvm_window(windows, tmp_path):
    py = _ops(windows / "py_0.json")
    dot = _written(py, "dot")
    out = tmp_path / "r.html"
    report_html(windows / "jvm_0.json", out)
    page = out.read_text()
    view = json.loads(re.search(r'id="pyprof-roofline-0">(.*?)</script>', page).group(1))
    [p] = [p for p in view["points"] if p["name"] == "[dot]"]
    assert (p["flops"], p["bytes"]) == (3 * dot[ARGS["flops"]], 3 * dot[ARGS["bytes"]])


@pytest.mark.jvm
def test_a_python_window_stripped_of_flops_reads_the_same(windows, tmp_path):
    """Every operator's group of the Python window, its FLOPs and bytes taken off the events,
    reads back with the FLOPs and bytes Python wrote (attributes: FullyConnected, Convolution)."""
    doc = json.loads((windows / "py_0.json").read_text())
    stripped = tmp_path / "stripped.json"
    for e in doc["traceEvents"]:
        for k in (ARGS["flops"], ARGS["bytes"]):
            (e.get("args") or {}).pop(k, None)
    stripped.write_text(json.dumps(doc))
    want = {(g.name, g.input_dims): (g.flops, g.bytes)
            for g in shape_stats(windows / "py_0.json").groups if g.input_dims is not None}
    got = {(g.name, g.input_dims): (g.flops, g.bytes)
           for g in shape_stats(stripped).groups if g.input_dims is not None}
    assert {"dot", "FullyConnected", "Convolution", "relu"} <= {n for n, _ in want}
    assert all(f is not None and b is not None for (n, _), (f, b) in want.items()
               if n in ("dot", "FullyConnected", "Convolution", "relu"))
    assert got == want
