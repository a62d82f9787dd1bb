"""pyprof peaks: the shape and positivity of the measured peaks on tiny sizes (no timing is
asserted: the machine is shared)."""

from __future__ import annotations

import json
import subprocess
import sys

from pyprof.attribution import peaks


def test_tiny_measurement_has_every_peak():
    import mxnet  # noqa: F401 - measures MXNet's own dot: the full lane
    p = peaks.measure(gemm_sizes=(16, 32), copy_mib=1, dot_sizes=(16,), repeats=2, budget_s=2.0)
    assert set(p.gemm) == {16, 32} and all(v > 0 for v in p.gemm.values())
    assert p.gemm_gflops == max(p.gemm.values()) > 0
    assert p.copy_gbs > 0 and p.copy_bytes == 1 << 20
    assert set(p.mxnet_dot) == {16} and p.mxnet_dot_gflops == p.mxnet_dot[16] > 0
    assert p.seconds > 0
    d = json.loads(json.dumps(p.as_dict()))
    assert d["gemm"].keys() == {"16", "32"} and d["mxnet_dot_gflops"] > 0
    text = peaks.format_peaks(p)
    assert "GEMM peak" in text and "copy bandwidth" in text and "MXNet dot peak" in text


def test_without_mxnet_and_a_spent_budget_the_smallest_sizes_still_run():
    p = peaks.measure(gemm_sizes=(64, 32), copy_mib=1, repeats=3, budget_s=1e-9, mxnet=False)
    assert list(p.gemm) == [32] and p.gemm[32] > 0  # the larger size did not fit
    assert p.mxnet_dot_gflops is None and p.mxnet_dot == {}
    assert "MXNet" not in peaks.format_peaks(p)


def test_cli_prints_json_peaks():
    run = subprocess.run([sys.executable, "-m", "pyprof", "peaks", "--budget", "1", "--no-mxnet",
                          "--format", "json"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    d = json.loads(run.stdout)
    assert d["gemm_gflops"] > 0 and d["copy_gbs"] > 0 and d["mxnet_dot_gflops"] is None
    bad = subprocess.run([sys.executable, "-m", "pyprof", "peaks", "--budget", "0"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "fix:" in bad.stderr
    # roofline's --budget 0 is refused too (its roofs need peaks), naming the other way
    bad = subprocess.run([sys.executable, "-m", "pyprof", "roofline", "w.json", "-o", "w.png",
                          "--budget", "0"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--peaks FILE" in bad.stderr.splitlines()[-1]
