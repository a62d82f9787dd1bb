"""pyprof.dnnl on logs MXNet writes in this test (child processes): convolution, pooling, fully
connected and reorders, DNNL_VERBOSE 1 and 2, with and without timestamps; the merged trace of a
small convolution workload; pyprof.profile(dnnl=True) and its too-late error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dnnl_reference  # noqa: E402

from pyprof import dnnl  # noqa: E402
from pyprof.trace import validate  # noqa: E402

TOLERANCE_US = 2.0  # clock resolution: MXNet truncates to 1 us, oneDNN's clock has 1 us steps

WORKLOAD = """
import mxnet as mx
print("workload output", flush=True)
x = mx.nd.random.uniform(shape=(2, 32, 16, 16))
w = mx.nd.random.uniform(shape=(64, 32, 3, 3))
b = mx.nd.zeros((64,))
for i in range(3):
    y = mx.nd.Convolution(x, w, b, kernel=(3, 3), num_filter=64, pad=(1, 1))
    z = mx.nd.Pooling(y, kernel=(2, 2), stride=(2, 2), pool_type="max")
    f = mx.nd.FullyConnected(z, mx.nd.ones((5, 64 * 8 * 8)), mx.nd.zeros((5,)), num_hidden=5)
mx.nd.waitall()
print("sum", f.sum().asscalar())
"""


def _pyprof_run(tmp_path, *extra, level=1):
    script = tmp_path / "work.py"
    script.write_text(WORKLOAD)
    log = tmp_path / "dnnl.log"
    proc = subprocess.run([sys.executable, "-m", "pyprof", "run", "--dnnl", "--level", str(level),
                           "--log", str(log), *extra, "--", sys.executable, str(script)],
                          capture_output=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc, log


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("timestamps", [True, False])
def test_real_logs_equal_an_independent_sum(tmp_path, level, timestamps):
    if timestamps:
        proc, log = _pyprof_run(tmp_path, level=level)
        out = proc.stdout.decode()
        assert out.startswith("workload output\n") and "sum " in out and "dnnl_verbose" not in out
    else:  # the seed's way: DNNL_VERBOSE set by hand, stdout saved as is
        script = tmp_path / "work.py"
        script.write_text(WORKLOAD)
        log = tmp_path / "stdout.log"
        env = {**__import__("os").environ, "DNNL_VERBOSE": str(level)}
        with open(log, "wb") as f:
            subprocess.run([sys.executable, str(script)], stdout=f, env=env, check=True, timeout=120)
    text = log.read_text()
    ref = dnnl_reference.sums(text)
    assert {p for _, p in ref} >= {"convolution", "pooling_v2", "inner_product", "reorder"}
    assert any(op == "create" for op, _ in ref) == (level == 2)
    s = dnnl.stats(log)
    assert {r.primitive for r in s.rows} == {p for _, p in ref}  # none dropped, none made up
    for r in s.rows:
        assert (r.exec_count, r.exec_total_ms) == (
            ref[("exec", r.primitive)][0], pytest.approx(ref[("exec", r.primitive)][1], rel=1e-12))
        if level == 2:
            assert (r.create_count, r.create_total_ms) == (
                ref[("create", r.primitive)][0], pytest.approx(ref[("create", r.primitive)][1], rel=1e-12))
    assert s.find("convolution")[0].exec_count == 3
    assert (s.timestamped > 0) == timestamps
    assert s.other_lines == (0 if timestamps else 2)
    assert s.info.version.startswith("oneDNN v2.4.4")


def test_merged_trace_puts_every_convolution_in_a_convolution_slice(tmp_path):
    trace = tmp_path / "trace.json"
    proc, log = _pyprof_run(tmp_path, "--trace", str(trace))
    assert "inside operators" in proc.stderr.decode()
    assert validate(trace).ok, validate(trace).problems
    events = json.loads(trace.read_text())["traceEvents"]
    convs = [e for e in events if e.get("ph") == "X" and e.get("name") == "Convolution"
             and e.get("cat") == "operator"]
    prims = [e for e in events if e.get("cat") == "dnnl"]
    conv_prims = [e for e in prims if e["name"] == "convolution"]
    assert len(convs) == 3 and len(conv_prims) == 3
    assert len(prims) == sum(1 for ln in log.read_text().splitlines() if ",exec," in ln)
    for p in conv_prims:
        assert p["args"]["operator"] == "Convolution"
        # the raw oneDNN start and duration, before any clamping, lie in the slice
        start, dur = p["args"]["ts_ms"] * 1e3, p["args"]["time_ms"] * 1e3
        holders = [c for c in convs if c["pid"] == p["pid"] and
                   c["ts"] - TOLERANCE_US <= start and start + dur <= c["ts"] + c["dur"] + TOLERANCE_US]
        assert len(holders) == 1
        assert holders[0]["ts"] <= p["ts"] and p["ts"] + p["dur"] <= holders[0]["ts"] + holders[0]["dur"]
        assert p["tid"] != holders[0]["tid"]
        assert "src_f32" in p["args"]["mds"] and p["args"]["problem"].startswith("mb2_ic32oc64")


SESSION = """
import sys, pyprof
if {late}:
    import mxnet as mx
    mx.nd.Convolution(mx.nd.ones((1, 1, 4, 4)), mx.nd.ones((1, 1, 1, 1)), no_bias=True,
                      kernel=(1, 1), num_filter=1).wait_to_read()
import mxnet as mx
try:
    with pyprof.profile(path={path!r}, dnnl={log!r}) as prof:
        x = mx.nd.random.uniform(shape=(2, 32, 16, 16))
        w = mx.nd.random.uniform(shape=(64, 32, 3, 3))
        for i in range(2):
            mx.nd.Convolution(x, w, no_bias=True, kernel=(3, 3), num_filter=64, pad=(1, 1))
        mx.nd.waitall()
        print("inside")
    print("placed", prof._dnnl.results[0].placed)
except pyprof.errors.StateError as exc:
    print("StateError", exc)
"""


@pytest.mark.parametrize("late", [False, True])
def test_profile_dnnl(tmp_path, late):
    path, log = str(tmp_path / "w_{window}.json"), str(tmp_path / "s.log")
    proc = subprocess.run([sys.executable, "-c", SESSION.format(late=late, path=path, log=log)],
                          capture_output=True, timeout=120)
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    if late:
        assert "StateError oneDNN's verbose output cannot be turned on" in out and "fix: " in out
        assert not Path(log).exists()
        return
    assert "inside\n" in out and "dnnl_verbose" not in out
    events = json.loads((tmp_path / "w_0.json").read_text())["traceEvents"]
    prims = [e for e in events if e.get("cat") == "dnnl" and e["name"] == "convolution"]
    assert len(prims) == 2 and all(p["args"]["operator"] == "Convolution" for p in prims)
    assert validate(tmp_path / "w_0.json").ok
