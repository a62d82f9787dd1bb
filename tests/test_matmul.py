"""The dot example end to end: `pyprof matmul` with each binding, and `lein run`."""

import json
import os
import re
import shutil
import subprocess

import pytest

from child import ROOT, cuda_build, load_trace, operator_pairs, run_cli
from pyprof import trace
from pyprof.examples.matmul import PEAK_BUDGET_S

SMALL = ["--size", "512", "--iters", "3", "--begin", "1", "--end", "2"]


def _check_one_dot(stdout: str, trace) -> None:
    pairs = operator_pairs(load_trace(trace), ("dot", "[dot]"))
    assert len(pairs) == 1, pairs
    name = pairs[0][0]["name"]
    assert f"dot operator: {name!r}" in stdout
    assert "1 call(s) in 1 profiled iteration(s)" in stdout
    assert "Profile Statistics" in stdout and "Time (ms)" in stdout  # MXNet's table
    assert "GFLOP/s:" in stdout and str(trace) in stdout
    if name == "[dot]":  # bulk execution's one-operator segment: named as such, no advice
        assert ("note:         '[dot]' is a bulk segment of one operator: its time is that "
                "operator's time\n") in stdout
        assert "MXNET_EXEC_BULK" not in stdout and "bulk segments hold" not in stdout


@pytest.mark.parametrize("binding", ["python", "jvm"])
def test_pyprof_matmul_small(tmp_path, binding):
    out = tmp_path / f"{binding}.json"
    result = tmp_path / "result.json"
    proc = run_cli(["matmul", *SMALL, "--binding", binding, "--output", str(out)], tmp_path,
                   env={"PYPROF_RESULT_JSON": str(result)})
    assert proc.returncode == 0, proc.stderr
    _check_one_dot(proc.stdout, out)
    assert "Subgraph backend" not in proc.stderr  # MXNet's line at every bind (3 binds)
    r = json.loads(result.read_text())
    assert r["binding"] == binding and r["dot_calls"] == 1 and r["size"] == 512
    assert r["dot_ms"] > 0 and r["gflops"] > 0
    # GFLOP/s is 2*N^3 over the profiler's own operator time.
    assert r["gflops"] == pytest.approx(2 * 512 ** 3 / (r["dot_ms"] / 1e3) / 1e9)
    _check_peak_line(proc.stdout, out, r)


def _check_peak_line(stdout: str, trace_path, r: dict) -> None:
    """The printed GFLOP/s is 2*N^3 over the dot's time in the trace's statistics and in MXNet's
    aggregate table; the peak line holds the measured peaks and the dot's share of each."""
    gflops = float(re.search(r"^GFLOP/s: +([0-9.]+) from operator time", stdout, re.M).group(1))
    dot_us = sum(o.total_us for o in trace.stats(trace_path, categories={"operator"}).operators
                 if o.name in ("dot", "[dot]"))
    assert gflops == pytest.approx(2 * 512 ** 3 / dot_us / 1e3, abs=0.051)
    agg_ms = float(re.search(r"^\[?dot\]? +1 +([0-9.]+) ", stdout, re.M).group(1))  # MXNet's table
    assert gflops == pytest.approx(2 * 512 ** 3 / agg_ms / 1e6, rel=0.01, abs=0.051)
    m = re.search(r"^peak: +MXNet dot ([0-9.]+) GFLOP/s \(this dot at ([0-9]+)% of it\), numpy GEMM "
                  r"([0-9.]+) GFLOP/s \(([0-9]+)%\); measured in ([0-9.]+) s", stdout, re.M)
    assert m, stdout
    dot_peak, dot_pct, gemm_peak, gemm_pct, seconds = map(float, m.groups())
    pk = r["peaks"]
    assert dot_peak == pytest.approx(pk["mxnet_dot_gflops"], abs=0.051) and dot_peak > 0
    assert gemm_peak == pytest.approx(pk["gemm_gflops"], abs=0.051) and gemm_peak > 0
    assert dot_pct == round(100 * r["gflops"] / pk["mxnet_dot_gflops"])
    assert gemm_pct == round(100 * r["gflops"] / pk["gemm_gflops"])
    # the printed figures are rounded to 0.1: the share they give lies in this interval
    lo, hi = 100 * (gflops - 0.05) / (dot_peak + 0.05), 100 * (gflops + 0.05) / max(dot_peak - 0.05, 1e-9)
    assert lo - 0.5 <= dot_pct <= hi + 0.5
    # above 1.1x the peak (peaks measured while the machine was busier) the line says so
    above = re.search(r"^note: +this dot ran above 1\.1x the MXNet dot peak measured after it", stdout, re.M)
    assert bool(above) == (r["gflops"] > 1.1 * pk["mxnet_dot_gflops"])
    above_gemm = re.search(r"^note: +this dot ran above 1\.1x numpy's GEMM peak: numpy's BLAS is "
                           r"not MXNet's", stdout, re.M)
    assert bool(above_gemm) == (not above and r["gflops"] > 1.1 * pk["gemm_gflops"])
    assert seconds == pytest.approx(pk["seconds"], abs=0.051) and pk["seconds"] < 2.5 + 2


def test_profiled_window_holds_exactly_its_iterations(tmp_path):
    out = tmp_path / "w.json"
    proc = run_cli(["matmul", "--size", "64", "--iters", "6", "--begin", "2", "--end", "5",
                    "--output", str(out), "--peak-budget", "0"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "GFLOP/s:" in proc.stdout and "peak:" not in proc.stdout  # not measured
    assert len(operator_pairs(load_trace(out), ("dot", "[dot]"))) == 3


@pytest.mark.skipif(shutil.which("lein") is None, reason="Leiningen not installed")
def test_lein_run_small(tmp_path):
    out = tmp_path / "c.json"
    env = dict(os.environ)
    env["MXNET_LIBRARY_PATH"] = _libmxnet()
    # the example's project (the library in jvm/ has no main): plain `lein run` there is the seed's
    proc = subprocess.run(["lein", "run", "-m", "pyprof.example.matmul", "--", *SMALL, "--output",
                           str(out)], cwd=ROOT / "examples" / "matmul", env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Subgraph backend" not in proc.stderr
    pairs = operator_pairs(load_trace(out), ("dot", "[dot]"))
    assert len(pairs) == 1
    assert pairs[0][0]["name"] in proc.stdout and "GFLOP/s" in proc.stdout
    assert "Time (ms)" in proc.stdout
    # the peak line (default budget, attribution.json peaks): the dot's share of MXNet's dot peak
    gflops = float(re.search(r"^GFLOP/s: ([0-9.]+) \(profiler, operator time\)", proc.stdout, re.M).group(1))
    dot_us = sum(o.total_us for o in trace.stats(out, categories={"operator"}).operators
                 if o.name in ("dot", "[dot]"))
    assert gflops == pytest.approx(2 * 512 ** 3 / dot_us / 1e3, abs=0.051)
    m = re.search(r"^peak: MXNet dot ([0-9.]+) GFLOP/s \(this dot at ([0-9]+)% of it\); measured in "
                  r"([0-9.]+) s after the run", proc.stdout, re.M)
    assert m, proc.stdout
    peak, pct, seconds = map(float, m.groups())
    lo, hi = 100 * (gflops - 0.05) / (peak + 0.05), 100 * (gflops + 0.05) / max(peak - 0.05, 1e-9)
    assert peak > 0 and lo - 0.5 <= pct <= hi + 0.5
    assert seconds < PEAK_BUDGET_S + 2
    above = re.search(r"^note: this dot ran above 1\.1x the MXNet dot peak", proc.stdout, re.M)
    if abs(gflops - 1.1 * peak) > 0.11:  # clear of the printed figures' rounding
        assert bool(above) == (gflops > 1.1 * peak)


@pytest.mark.skipif(cuda_build(), reason="a CUDA build of MXNet is installed")
def test_gpu_on_cpu_build_is_one_clear_line(tmp_path):
    for binding in ("python", "jvm"):
        proc = run_cli(["matmul", "--ctx", "gpu", "--size", "64", "--binding", binding,
                        "--output", str(tmp_path / "g.json")], tmp_path)
        assert proc.returncode == 1
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, proc.stderr
        assert "sees no GPU" in lines[0] and "mxnet-cu" in lines[0]
        assert not (tmp_path / "g.json").exists()


def test_bad_options_are_usage_errors(tmp_path):
    proc = run_cli(["matmul", "--begin", "3", "--end", "2"], tmp_path)
    assert proc.returncode == 2 and "--begin < --end" in proc.stderr
    assert "usage: pyprof matmul" in proc.stderr  # the parser of this subcommand
    proc = run_cli(["matmul", "--mode", "everything"], tmp_path)
    assert proc.returncode == 2 and "invalid --mode 'everything'" in proc.stderr
    proc = run_cli(["matmul", "--peak-budget", "-1"], tmp_path)
    assert proc.returncode == 2 and "--peak-budget must be >= 0, got -1.0" in proc.stderr
    # was clamped to --iters without a word (a new user's trial)
    proc = run_cli(["matmul", "--iters", "5", "--begin", "4", "--end", "9"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "--end 9 is past --iters 5: the run has no iteration 8" in proc.stderr


def _libmxnet() -> str:
    import pyprof.native.capi as capi

    return capi.library_path()


def test_cpu_device_id_past_the_profilers_tables_is_refused_and_keeps_the_trace(tmp_path):
    """MXNet's profiler aborts on a cpu id past its tables, after config deleted the file."""
    out = tmp_path / "keep.json"
    out.write_text('{"traceEvents": []}')
    proc = run_cli(["matmul", "--size", "64", "--device-id", str(os.cpu_count() + 3),
                    "--output", str(out)], tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "is out of range" in proc.stderr and "fix: use a device id from 0" in proc.stderr
    assert out.read_text() == '{"traceEvents": []}'


def test_bad_library_path_is_one_clear_error(tmp_path):
    for bad, why in (("/nope/libmxnet.so", "no such file"), ("/etc/passwd", "invalid ELF header")):
        proc = run_cli(["matmul", "--size", "64", "--output", str(tmp_path / "t.json")],
                       tmp_path, env={"MXNET_LIBRARY_PATH": bad})
        assert proc.returncode == 1
        assert "Traceback" not in proc.stderr
        assert f"{bad}: from MXNET_LIBRARY_PATH" in proc.stderr and why in proc.stderr
