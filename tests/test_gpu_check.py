"""The GPU set-up and device check on a machine without a GPU: `scripts/setup.sh --gpu` (and the
wrappers' --gpu) stop with one line and change nothing; `scripts/gpu-check.sh --dry-run` lists
its steps with their commands and writes the summary skeleton; a real run without a usable GPU
stops at the step that says why."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from child import ROOT

STEP_IDS = ["driver", "context", "dot-gpu-python", "dot-gpu-jvm", "dot-gpu-lein", "memory-gpu",
            "parity-gpu", "bench-gemm-gpu", "dot-cpu-python", "dot-cpu-jvm", "dot-cpu-lein",
            "bench-gemm-cpu"]
FAKE_SMI = """#!/bin/sh
case "$*" in *--query-gpu=compute_cap*) echo "{cc}"; exit 0 ;; *--query-gpu*) exit 0 ;; esac
[ "{fail}" = 1 ] && {{ echo "NVIDIA-SMI has failed because it couldn't communicate with the \
NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."; exit 9; }}
echo "| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: {cuda}     |"
"""


def _path_without_nvidia_smi(extra: Path | None = None) -> str:
    dirs = [d for d in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
            if d and not (Path(d) / "nvidia-smi").exists()]
    return os.pathsep.join(([str(extra)] if extra else []) + dirs)


def _fake_driver(tmp_path: Path, cuda: str = "12.4", cc: str = "9.0", fail: bool = False) -> Path:
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(cuda=cuda, cc=cc, fail=int(fail)))
    smi.chmod(0o755)
    return bin_dir


def _run(args: list[str], path: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path}
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _venv_mxnet() -> dict:
    """What .venv holds of MXNet: its distributions, libmxnet.so's identity, the build chosen."""
    sites = sorted((ROOT / ".venv" / "lib").glob("python*/site-packages"))
    if not sites:
        pytest.skip("no .venv (scripts/setup.sh makes it)")
    site = sites[0]
    lib = site / "mxnet" / "libmxnet.so"
    st = lib.stat()
    records = {p.name: hashlib.sha256((p / "RECORD").read_bytes()).hexdigest()
               for p in sorted(site.glob("mxnet*.dist-info")) if (p / "RECORD").exists()}
    marker = ROOT / ".venv" / ".pyprof-mxnet"
    return {"dists": records, "lib": (st.st_size, st.st_mtime_ns, st.st_ino),
            "marker": marker.read_text() if marker.exists() else None}


def _one_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert len(lines) == 1, text
    return lines[0]


@pytest.mark.parametrize("script", [["scripts/setup.sh", "--gpu"],
                                    ["scripts/setup.sh", "--gpu", "cu112"],
                                    ["scripts/matmul.sh", "--gpu", "--size", "64"],
                                    ["scripts/test.sh", "--gpu", "-k", "nothing"]])
def test_gpu_setup_without_a_driver_is_one_line_and_changes_nothing(script):
    before = _venv_mxnet()
    p = _run(script, _path_without_nvidia_smi())
    assert p.returncode == 1 and p.stdout == ""
    line = _one_line(p.stderr)
    assert line.startswith("[setup] --gpu: no NVIDIA driver on this machine (nvidia-smi not found)")
    assert "install the NVIDIA driver" in line and "without --gpu" in line
    assert _venv_mxnet() == before


@pytest.mark.parametrize("fake, args, expect", [
    (dict(fail=True), [], "nvidia-smi failed (NVIDIA-SMI has failed because it couldn't"),
    (dict(cuda="9.2"), [], "older than every MXNet 1.9.1 CUDA build (10.1 to 11.7); fix: update the"),
    (dict(cuda="11.2"), ["cu117"], "mxnet-cu117 needs a driver for CUDA 11.7 or newer"),
    (dict(), ["cu118"], "no MXNet 1.9.1 build for CUDA 'cu118'; fix: choose one of cu101, cu102"),
])
def test_gpu_setup_refusals_are_one_line_and_change_nothing(tmp_path, fake, args, expect):
    before = _venv_mxnet()
    p = _run(["scripts/setup.sh", "--gpu", *args],
             _path_without_nvidia_smi(_fake_driver(tmp_path, **fake)))
    assert p.returncode == 1 and p.stdout == ""
    assert expect in _one_line(p.stderr)
    assert _venv_mxnet() == before


def test_gpu_setup_picks_the_newest_wheel_the_driver_runs(tmp_path):
    before = _venv_mxnet()
    path = _path_without_nvidia_smi(_fake_driver(tmp_path, cuda="12.4", cc="9.0"))
    p = _run(["scripts/setup.sh", "--gpu", "--dry-run"], path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "mxnet-cu117==1.9.1 (driver supports CUDA 12.4)\n"
    warning = _one_line(p.stderr)  # a Hopper card: no 1.9.1 wheel has kernels for it
    assert "no kernels for this GPU's compute capability 9.0" in warning
    p = _run(["scripts/setup.sh", "--gpu", "11.2", "--dry-run"],
             _path_without_nvidia_smi(_fake_driver(tmp_path, cuda="12.4", cc="8.0")))
    assert (p.returncode, p.stdout, p.stderr) == \
        (0, "mxnet-cu112==1.9.1 (driver supports CUDA 12.4)\n", "")
    p = _run(["scripts/setup.sh", "--cpu", "--dry-run"], path)
    assert (p.returncode, p.stdout) == (0, "mxnet==1.9.1\n")
    assert _venv_mxnet() == before


def test_gpu_check_dry_run_lists_each_step_with_its_command(tmp_path):
    out = tmp_path / "gpu-out"
    p = _run(["scripts/gpu-check.sh", "--dry-run", str(out)], _path_without_nvidia_smi())
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "summary.json").read_text())
    assert doc["dry_run"] is True and doc["status"] == "dry-run"
    assert [s["id"] for s in doc["steps"]] == STEP_IDS
    assert all(s["status"] == "planned" and s["seconds"] is None for s in doc["steps"])
    for i, s in enumerate(doc["steps"], 1):  # the listing: number, id, title, exact command
        assert f"{i:2}. {s['id']}: {s['title']}\n    $ {s['command']}\n" in p.stdout
    cmd = {s["id"]: s["command"] for s in doc["steps"]}
    o = str(out)
    assert cmd["dot-gpu-python"] == (
        f"PYPROF_RESULT_JSON={o}/dot-gpu-python.result.json .venv/bin/pyprof matmul --size 4096 "
        f"--iters 3 --begin 1 --end 2 --ctx gpu --device-id 0 --binding python "
        f"--output {o}/dot-gpu-python.json")
    assert "--ctx gpu --device-id 0 --binding jvm" in cmd["dot-gpu-jvm"]
    assert "lein run -m clojure.main" in cmd["dot-gpu-lein"]
    assert "cd examples/matmul" in cmd["dot-gpu-lein"]
    assert "(alter-var-root #'profiler.core/gpu? (constantly true))" in cmd["dot-gpu-lein"]
    assert "(constantly false)" in cmd["dot-cpu-lein"]
    assert cmd["memory-gpu"] == f".venv/bin/python scripts/gpu_check.py memory {o}/memory"
    assert cmd["parity-gpu"].endswith(f"parity {o}/dot-gpu-python.json {o}/dot-gpu-jvm.json")
    assert cmd["bench-gemm-gpu"].startswith(".venv/bin/pyprof bench --ctx gpu --category gemm")
    assert "--ctx gpu" not in cmd["dot-cpu-python"]
    assert [f["binding"] for f in doc["dot_gflops"]] == ["python", "jvm", "lein"]
    md = (out / "summary.md").read_text()
    assert md.startswith("# gpu-check: dry-run\n") and md.count("| planned |") == len(STEP_IDS)
    assert sorted(x.name for x in out.iterdir()) == ["logs", "summary.json", "summary.md"]
    assert list((out / "logs").iterdir()) == []


def test_gpu_check_dry_run_needs_only_the_system_python(tmp_path):
    py = shutil.which("python3") or sys.executable
    p = subprocess.run([py, "scripts/gpu_check.py", "run", "--dry-run", str(tmp_path / "o")],
                       cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env={"PATH": os.environ.get("PATH", ""), "PYTHONNOUSERSITE": "1"})
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["status"] == "dry-run"


def test_gpu_check_usage_errors():
    p = _run(["scripts/gpu-check.sh"], _path_without_nvidia_smi())
    assert p.returncode == 2 and "missing OUTDIR" in _one_line(p.stderr)
    p = _run(["scripts/gpu-check.sh", "--frobnicate", "x"], _path_without_nvidia_smi())
    assert p.returncode == 2 and "unknown option '--frobnicate'" in _one_line(p.stderr)


def test_gpu_check_on_a_cpu_build_stops_at_the_context_step(tmp_path):
    """A driver (faked) but the CPU build of MXNet: the context step fails with pyprof's
    device.no_gpu, and every later step is skipped, so the run exits 1 at once."""
    out = tmp_path / "run"
    p = _run(["scripts/gpu-check.sh", str(out)],
             _path_without_nvidia_smi(_fake_driver(tmp_path, cc="8.0")), timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    doc = json.loads((out / "summary.json").read_text())
    status = {s["id"]: s["status"] for s in doc["steps"]}
    assert status["driver"] == "passed" and status["context"] == "failed"
    assert {status[i] for i in STEP_IDS[2:]} == {"skipped"}
    ctx = next(s for s in doc["steps"] if s["id"] == "context")
    assert ctx["details"]["error_code"] == "device.no_gpu"
    assert "sees no GPU" in ctx["details"]["context"]
    assert doc["status"] == "failed" and (out / "logs" / "context.log").exists()
    assert "# gpu-check: failed" in (out / "summary.md").read_text()


def test_gpu_check_reports_an_unsupported_card_and_skips_the_rest(tmp_path, monkeypatch):
    """The run's bookkeeping with stand-in steps: the context step fails with pyprof's
    device.gpu_unsupported (as on a Hopper card with a 1.9.1 wheel), so the run is
    'unsupported', the other steps are skipped, and the summary carries the error."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import gpu_check

    out = tmp_path / "o"
    probe = {"context": "DeviceError: GPU 0 is NVIDIA H200 (compute capability 9.0), but this "
                        "MXNet build (mxnet-cu117, CUDA 11.7) has no kernels for it",
             "error_code": "device.gpu_unsupported", "card": ["NVIDIA H200", 9, 0],
             "build": {"name": "mxnet-cu117", "cuda": "11.7", "sass": [[8, 6]], "ptx": [],
                       "source": "the kernels in libmxnet.so"}}
    real = gpu_check.steps

    def stand_ins(o):
        plan = real(o)
        plan[0].command = "true"
        plan[1].command = (f"printf '%s' {json.dumps(json.dumps(probe))} > {o}/probe.json; "
                           "exit 1")
        return plan
    monkeypatch.setattr(gpu_check, "steps", stand_ins)
    assert gpu_check.run(out, dry_run=False, budget=60) == 1
    doc = json.loads((out / "summary.json").read_text())
    assert doc["status"] == "unsupported"
    assert [s["status"] for s in doc["steps"]] == ["passed", "failed"] + ["skipped"] * 10
    assert doc["steps"][1]["details"]["error_code"] == "device.gpu_unsupported"
    md = (out / "summary.md").read_text()
    assert md.startswith("# gpu-check: unsupported") and "NVIDIA H200" in md
