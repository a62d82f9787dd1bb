"""The fast lane's rule (tests/conftest.py) on small test files written here: what it puts in
the lane, what it keeps out, and the guard that refuses MXNet in a fast run."""

from __future__ import annotations

import textwrap

import pytest

import conftest as lanes

SOURCE = '''
import json
from child import run_scenario
from pyprof import trace
from pyprof.trace import stats

def _helper(tmp):
    return run_scenario("import mxnet", tmp)

def _pure(x):
    return json.dumps(x)

@pytest.fixture
def recorded(tmp_path):
    return _helper(tmp_path)

def test_pure():
    assert _pure(1) == "1"

def test_reads_a_trace(tmp_path):
    assert stats(tmp_path / "t.json")

def test_child_through_a_helper(tmp_path):
    assert _helper(tmp_path)

def test_child_through_a_fixture(recorded):
    assert recorded

def test_workers(tmp_path):
    assert stats(tmp_path, _workers=2)

def test_executable():
    import sys
    assert sys.executable

def test_profiler_inside():
    from pyprof import profiler
    profiler.set_state("run")

def test_pyprof_attribute():
    import pyprof
    pyprof.profile()
'''


@pytest.fixture
def rule(tmp_path):
    path = tmp_path / "test_sample.py"
    path.write_text(textwrap.dedent(SOURCE))
    return lanes._FileRule(path)


def test_pure_tests_are_in_the_lane(rule):
    assert not rule.imports_mxnet
    assert not rule.heavy("test_pure") and not rule.heavy("test_reads_a_trace")


@pytest.mark.parametrize("name", ["test_child_through_a_helper", "test_child_through_a_fixture",
                                  "test_workers", "test_executable", "test_profiler_inside",
                                  "test_pyprof_attribute", "recorded", "_helper"])
def test_what_reaches_mxnet_a_child_or_workers_is_kept_out(rule, name):
    assert rule.heavy(name)


@pytest.mark.parametrize("line", ["import mxnet as mx", "from mxnet import nd",
                                  "mx = pytest.importorskip('mxnet')"])
def test_a_file_that_imports_mxnet_is_not_in_the_lane(tmp_path, line):
    path = tmp_path / "test_mx.py"
    path.write_text(f"import pytest\n{line}\n\ndef test_x():\n    assert 1\n")
    assert lanes._FileRule(path).imports_mxnet


@pytest.mark.parametrize("name", ["mxnet", "mxnet.ndarray", "jpype"])
def test_the_guard_refuses_mxnet_and_jpype(name):
    with pytest.raises(lanes.LaneError, match=r"fast-lane test .* fix: "):
        lanes._BlockImports().find_spec(name)
    assert lanes._BlockImports().find_spec("json") is None


def test_the_guard_holds_in_the_lanes_workers():
    """``scripts/test.sh --fast`` runs the lane on pytest-xdist workers: the guard goes into
    each worker (the controller starts them as Python processes, so it has none), and a test
    that reaches MXNet in a way the rule cannot see still fails there."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parent
    probe = here / f"test_zz_lane_probe_{os.getpid()}.py"
    probe.write_text("import importlib\n\n\ndef test_sneaks_in():\n"
                     "    importlib.import_module('mx' + 'net')\n\n\ndef test_pure():\n    assert 1\n")
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-m", "fast", "-n", "2", "-q",
                               "-p", "no:cacheprovider", str(probe)], cwd=here.parent,
                              capture_output=True, text=True, timeout=300)
    finally:
        probe.unlink()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed, 1 passed" in proc.stdout
    assert "LaneError: import mxnet in a fast-lane test" in proc.stdout
