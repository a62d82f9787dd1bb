"""A child forked from a zygote reads as ``subprocess.run`` of a fresh interpreter: argv, cwd,
sys.path[0], environment, ``__name__``, stdin at EOF, output, exit code, a signal, a timeout,
threads joined and atexit run at exit; and it is a fork (its parent is the zygote)."""

import os
import subprocess
import sys

import pytest
import zygote

SCRIPT = r"""
import atexit, os, sys, threading, time
def later():
    time.sleep(0.3)
    print("thread ended", flush=True)
threading.Thread(target=later).start()
atexit.register(lambda: print("atexit ran", flush=True))
print(sys.argv[1:], os.getcwd(), repr(sys.path[0]), os.environ["ZYGOTE_X"], __name__,
      repr(sys.stdin.read()), "mxnet" in sys.modules)
sys.stderr.write("to stderr\n")
sys.exit(int(sys.argv[1]))
"""


def _both(argv, cwd, env):
    fresh = subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=120, stdin=subprocess.DEVNULL)
    zygote.run(argv, cwd=cwd, env=env, timeout=120)  # the first ask of a signature: fresh
    forked = zygote.run(argv, cwd=cwd, env=env, timeout=120)
    return fresh, forked


@pytest.mark.parametrize("form", ["-c", "script"])
def test_a_forked_child_reads_as_a_fresh_one(tmp_path, form):
    env = dict(os.environ, ZYGOTE_X="x1")
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    argv = ["-c", SCRIPT, "3", "b"] if form == "-c" else [str(script), "3", "b"]
    fresh, forked = _both(argv, tmp_path, env)
    assert forked.returncode == fresh.returncode == 3
    assert forked.stderr == fresh.stderr == "to stderr\n"
    # the one difference: mxnet is already imported in the forked child
    assert fresh.stdout.replace("False\n", "X\n") == forked.stdout.replace("True\n", "X\n")
    assert fresh.stdout.splitlines()[1:] == ["thread ended", "atexit ran"]
    path0 = "''" if form == "-c" else repr(str(tmp_path))
    assert f"['3', 'b'] {tmp_path} {path0} x1 __main__ ''" in forked.stdout


def test_signals_timeouts_and_the_parent(tmp_path):
    env = dict(os.environ, ZYGOTE_X="x2")
    code = "import os, signal, sys; print(os.getppid(), flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    fresh, forked = _both(["-c", code], tmp_path, env)
    assert fresh.returncode == forked.returncode == -9
    assert int(forked.stdout) != os.getpid()  # the zygote, not this process
    with pytest.raises(subprocess.TimeoutExpired):
        zygote.run(["-c", "import time; time.sleep(60)"], cwd=tmp_path, env=env, timeout=1)
    # after a timeout the zygote serves again
    assert zygote.run(["-c", "print(6 * 7)"], cwd=tmp_path, env=env, timeout=60).stdout == "42\n"


def test_another_import_time_environment_gets_a_fresh_interpreter(tmp_path):
    code = "import os; print(os.getppid())"
    env = dict(os.environ, ZYGOTE_X="x3", MXNET_ENGINE_TYPE="NaiveEngine")
    assert int(zygote.run(["-c", code], cwd=tmp_path, env=env, timeout=60).stdout) == os.getpid()
    assert zygote.run(["-c", code], cwd=tmp_path, env=env, timeout=60, fresh=True).stdout \
        == f"{os.getpid()}\n"


def test_a_per_operator_child_reads_as_a_fresh_one(tmp_path):
    """PYPROF_PER_OPERATOR=1: the zygote imports pyprof first, and its child has the bulk
    variables pyprof set before libmxnet loaded (MXNet reads some later) and bulk scopes off."""
    code = ("import os, pyprof, mxnet as mx; print(sorted((k, v) for k, v in os.environ.items() "
            "if k.startswith('MXNET_EXEC_BULK')), mx.engine.set_bulk_size(7), "
            "mx.engine.set_bulk_size(7))")
    env = dict(os.environ, ZYGOTE_X="x4", PYPROF_PER_OPERATOR="1")
    fresh, forked = _both(["-c", code], tmp_path, env)
    assert fresh.returncode == forked.returncode == 0, forked.stderr
    assert forked.stdout == fresh.stdout and "('MXNET_EXEC_BULK_EXEC_TRAIN', '0')" in fresh.stdout
