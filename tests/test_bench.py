"""pyprof.bench: both engines against real MXNet (each batch runs in its own worker process)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from child import cuda_build, run_cli
from pyprof import bench
from pyprof.bench import comparison, inputs, registry
from pyprof.bench.inputs import Tensor
from pyprof.bench.report import Report

# Operators whose kernels take milliseconds here, and a 1-element one that measures the python
# engine's fixed per-run cost (dispatch, engine drain, Python), which the native engine never sees.
HEAVY = ["dot", "sin"]
TINY = {"op": "identity", "inputs": {"data": Tensor((1,))}}


def _cases():
    cases = bench.plan(HEAVY, [])
    cases = [c for c in cases if list(c.inputs.values())[0].shape[0] == 512]  # square variants
    return cases + [bench.Case(TINY["op"], TINY["inputs"])]


@pytest.fixture(scope="module")
def both_engines():
    opts = dict(runs=10, warmup=2, run_backward=False, progress=False)
    return {eng: bench.run_cases(_cases(), profiler=eng, **opts) for eng in bench.ENGINES}


def test_engines_time_the_same_runs(both_engines):
    # Whether their times agree is a benchmark (bench/bench_engines.py), not a test: it
    # depends on the machine's load.
    nat, py = both_engines["native"], both_engines["python"]
    for op in [*HEAVY, TINY["op"]]:
        a, b = nat.find(op)[0]["forward"], py.find(op)[0]["forward"]
        assert a["count"] == b["count"] == 10
        assert 0 < a["median_ms"] <= a["p90_ms"] and 0 < b["median_ms"] <= b["p90_ms"]
    for op in HEAVY:  # the same kernels in the same unit: within 10x whatever the load (a units check)
        a, b = nat.find(op)[0]["forward"], py.find(op)[0]["forward"]
        assert 0.1 < a["median_ms"] / b["median_ms"] < 10, (op, a["median_ms"], b["median_ms"])


def test_native_engine_reads_kernels_and_memory_in_bytes(both_engines):
    rep = both_engines["native"]
    dot = rep.find("dot")[0]
    assert dot["memory"]["unit"] == "bytes"
    # one 512x512 float32 output: exactly 1 MiB handed out by the storage manager
    assert dot["memory"]["forward_peak_bytes"] == 512 * 512 * 4
    assert [k["name"] for k in dot["kernels"]["forward"]] == ["dot"]
    assert dot["kernels"]["forward"][0]["calls"] == 10
    doc = json.loads(rep.to_json())
    assert doc["units"] == {"time": "ms", "memory": "bytes"}
    md = rep.to_markdown()
    assert "peak mem (bytes)" in md
    # the published wheel reports PROFILER off although its profiler works: the header says so
    off = doc["environment"]["runtime_features"]["PROFILER"] is False
    assert off == ("✖ PROFILER is a build flag the published wheels leave off" in md)
    assert both_engines["python"].find("dot")[0].get("memory") is None


def test_a_failing_operator_is_recorded_and_the_run_goes_on():
    cases = [bench.Case("dot", {"lhs": Tensor((3, 4)), "rhs": Tensor((5, 6))}),
             bench.Case("no_such_op", {}),
             bench.Case("sin", {"data": Tensor((64, 64))})]
    rep = bench.run_cases(cases, runs=3, warmup=1, progress=False)
    bad, missing, good = rep.results
    assert bad["status"] == "failed" and "shape" in bad["error"].lower()
    assert missing["status"] == "failed" and "no_such_op" in missing["error"]
    assert good["status"] == "ok" and good["forward"]["count"] == 3
    assert good["backward"]["count"] == 3
    assert rep.summary()["failed_cases"] == 2


def test_python_engine_statistics_and_spread_warning():
    s = bench.summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s["median_ms"] == 3.0 and s["iqr_ms"] == 2.0 and s["mean_ms"] == 22.0
    assert s["p99_ms"] == pytest.approx(96.16)
    from pyprof.bench.runner import _spread_warning
    assert "high spread" in _spread_warning("forward", s)
    assert _spread_warning("forward", bench.summarize([1.0, 1.01, 1.02, 1.0])) is None


def test_registry_categories_and_uncovered_operators():
    cats = registry.by_category()
    assert set(cats) == set(registry.CATEGORIES)
    assert {"dot", "batch_dot"} <= set(cats["gemm"])
    assert "broadcast_add" in cats["binary_broadcast"] and "sin" in cats["unary"]
    assert "Convolution" in cats["nn_conv"] and "sgd_update" in cats["optimizer"]
    covered = {op for ops in cats.values() for op in ops}
    missing = registry.without_benchmark()
    assert "Convolution_v1" in missing and not covered & set(missing)
    assert covered | set(missing) == set(registry.operators())


def test_input_table_variants():
    cases = inputs.cases_for("broadcast_add", ["lhs", "rhs"])
    assert [inputs.describe(c) for c in cases] == [
        {"lhs": [512, 512], "rhs": [512, 512]}, {"lhs": [16384, 16], "rhs": [16384, 1]}]
    sgd = inputs.cases_for("sgd_update", ["weight", "grad", "lr"])
    assert len(sgd) == 2 and all(c["lr"] == 0.01 for c in sgd)  # scalars repeat
    big = inputs.cases_for("sin", ["data"], large_tensor=True)
    assert any(np.prod(c["data"].shape) >= 2 ** 32 for c in big)


def _report(samples: dict[str, list[float]]) -> Report:
    results = [{"operator": op, "namespace": "nd", "category": "x", "inputs": {"data": [8]},
                "status": "ok", "samples_ms": {"forward": s}} for op, s in samples.items()]
    return Report(results, {}, {})


def test_compare_reuses_the_trace_diff():
    rng = np.random.default_rng(1)
    base = rng.normal(1.0, 0.01, 30).tolist()
    same = rng.normal(1.0, 0.01, 30).tolist()
    slow = (np.asarray(base) * 1.5).tolist()
    result = comparison.compare(_report({"a": base, "b": base}), _report({"a": same, "b": slow}))
    verdicts = {r.key[0]: r.verdict for r in result.rows}
    assert verdicts == {"a": "unchanged", "b": "slower"}
    assert result.unit == "ms" and result.exit_code == 1


def test_cli_category_json_markdown_and_compare(tmp_path):
    out = tmp_path / "gemm.json"
    p = run_cli(["bench", "--category", "gemm", "--runs", "3", "--warmup", "1",
                 "--output-file", str(out)], tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "pyprof.bench/1"
    assert {r["operator"] for r in doc["results"]} == set(registry.by_category()["gemm"])
    assert doc["environment"]["runtime_features"]["CUDA"] is cuda_build()
    assert all(r["status"] == "ok" for r in doc["results"])
    md = tmp_path / "gemm.md"
    r = run_cli(["bench", "--compare", str(out), str(out), "--output-file", str(md)], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "unchanged" in md.read_text()


@pytest.mark.skipif(cuda_build(), reason="a CUDA build of MXNet is installed")
def test_cli_gpu_on_cpu_build_is_one_clear_line(tmp_path):
    p = run_cli(["bench", "--ctx", "gpu", "--ops", "dot"], tmp_path)
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "GPU" in lines[0] and "fix:" in lines[0], p.stderr


def test_cli_compare_np(tmp_path):
    p = run_cli(["bench", "--compare-np", "dot", "--runs", "5", "--warmup", "1",
                 "--no-backward", "--output-format", "json"], tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    spaces = {(r["namespace"], r["operator"]): r for r in doc["results"]}
    assert set(spaces) == {("nd", "dot"), ("np", "dot")}
    assert all(r["status"] == "ok" for r in spaces.values()), spaces
    assert spaces[("np", "dot")]["inputs"] == {"a": [512, 512], "b": [512, 512]}


def test_cli_output_and_compare_inputs_are_checked_first(tmp_path):
    """A new user's find: --output-file in a missing directory ran the whole benchmark, then
    threw its results away with a bare errno; --compare of a missing file was a bare errno too."""
    p = run_cli(["bench", "--category", "gemm", "--runs", "1", "--output-file",
                 str(tmp_path / "nodir" / "b.json")], tmp_path)
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == [
        f"pyprof bench: cannot write output '{tmp_path / 'nodir' / 'b.json'}': directory "
        f"'{tmp_path / 'nodir'}' does not exist; nothing was done. fix: create it first, or "
        "choose an existing directory"]
    (tmp_path / "notes.txt").write_text("not json")
    for missing, why in ((tmp_path / "none.json", "No such file or directory"),
                         (tmp_path / "notes.txt", "Expecting value")):
        r = run_cli(["bench", "--compare", str(missing), str(missing)], tmp_path)
        assert r.returncode == 1
        assert f"cannot read the bench result file {missing}: {why}" in r.stderr, r.stderr
        assert "fix: name a file written by `pyprof bench --output-file" in r.stderr
