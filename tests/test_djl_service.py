"""The DJL service example (examples/djl-service): a JVM service on DJL's MXNet engine, with
pyprof's JMX MBean, profiled by a JMX client in another JVM (its stress harness) while four
worker threads serve predictions: N cycles of start("", 0) with default options, a few steps
and stop. 0 aborts, 0 hangs, 0 control errors, 0 failed requests; every window file valid
(pyprof validate too), naming the workers' threads; one ``pyprof.window.saved`` notification
per window; one JNA on the classpath and one libmxnet in the process.

``PYPROF_DJL_STRESS_CYCLES`` / ``PYPROF_DJL_STRESS_SECONDS`` run the long mode (the harness
reads them: more cycles, or cycles for that many seconds)."""

import json
import os
import re
import shutil
import subprocess

import pytest

from child import ROOT, run_cli

pytestmark = [pytest.mark.jvm,
              pytest.mark.skipif(shutil.which("lein") is None, reason="Leiningen not installed")]

EXAMPLE = ROOT / "examples" / "djl-service"
CYCLES = int(os.environ.get("PYPROF_DJL_STRESS_CYCLES") or 50)
SECONDS = int(os.environ.get("PYPROF_DJL_STRESS_SECONDS") or 0)


def _libmxnet() -> str:
    import pyprof.native.capi as capi

    return capi.library_path()


def _lein(*args, timeout):
    env = dict(os.environ, MXNET_LIBRARY_PATH=_libmxnet(), DJL_OFFLINE="true")
    return subprocess.run(["lein", *args], cwd=EXAMPLE, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _jna_jars() -> list[str]:
    proc = _lein("classpath", timeout=300)  # the first run resolves DJL from Maven Central
    assert proc.returncode == 0, proc.stderr[-3000:]
    entries = proc.stdout.strip().splitlines()[-1].split(os.pathsep)
    return [e for e in entries if re.search(r"/jna(-platform)?-[^/]*\.jar$", e)]


def test_stress_of_default_sessions_beside_djl_workers(tmp_path):
    jna = _jna_jars()
    assert len(jna) == 1, jna  # exactly one JNA: DJL's (the project declares none of its own)
    out = tmp_path / "stress"
    timeout = 600 if SECONDS else 300
    proc = _lein("stress", "--", "--cycles", str(CYCLES), "--seconds", str(SECONDS),
                 "--out", str(out), timeout=timeout + max(SECONDS, 0))
    report_file = out / "report.json"
    assert report_file.exists(), (proc.stdout[-3000:], proc.stderr[-3000:])
    r = json.loads(report_file.read_text())
    summary = "\n".join(line for line in proc.stdout.splitlines() if line.startswith("stress:"))
    assert (r["aborts"], r["hangs"], r["errors"]) == (0, 0, 0), summary + "\n" + json.dumps(
        r["abort_details"])
    assert r["failed_requests"] == 0 and r["requests"] > 0, summary
    assert r["cycles_completed"] == r["cycles"] >= CYCLES, summary
    assert r["window_files"] >= r["cycles"], summary   # default schedule: one window a cycle
    assert r["windows_valid"] == r["window_files"] and r["partial_files"] == 0, summary
    assert r["emitter"], "pyprof:type=ProfilerControl is a NotificationEmitter"
    assert r["saved_notifications"] == r["window_files"], summary  # one per window
    assert r["failed_notifications"] == 0, summary
    assert r["problems"] == [] and r["clean"], summary
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the service ran on the one JNA of the classpath and on the wheel's libmxnet, once mapped
    assert r["jna"] == [f"{re.search(r'jna-([^/]*)[.]jar$', jna[0]).group(1)} from {jna[0]}"], r["jna"]
    assert r["libmxnet"] == [os.path.realpath(_libmxnet())], r["libmxnet"]
    assert {"start", "step", "stop"} <= set(r["timings"]), r["timings"]
    # pyprof's own check of every window (Perfetto-valid as pyprof writes them)
    windows = sorted(str(p) for p in out.glob("svc-*/windows/**/*.json"))
    assert len(windows) == r["window_files"]
    check = run_cli(["validate", *windows], tmp_path)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    # the workers named themselves (Profiler.nameThread): their operators run on their own
    # thread are on tracks of their names (trace.json thread_names)
    names = {e["args"]["name"] for w in windows for e in json.loads(open(w).read())["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert {f"djl-service-worker-{i}" for i in range(4)} <= names, sorted(names)
