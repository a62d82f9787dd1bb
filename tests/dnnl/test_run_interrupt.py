"""Ctrl+C on ``pyprof run --dnnl --trace``: SIGINT to the whole process group, as a terminal
sends it. pyprof run lets the child (real MXNet) stop, then still writes the log, merges the
primitives into the child's trace, and exits with the child's status (130)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from pyprof.trace import validate

LOOP = """
import time
import mxnet as mx
x = mx.nd.random.uniform(shape=(1, 4, 8, 8))
w = mx.nd.random.uniform(shape=(4, 4, 3, 3))
print("looping", flush=True)
while True:  # until interrupted
    mx.nd.Convolution(x, w, no_bias=True, kernel=(3, 3), num_filter=4).wait_to_read()
    time.sleep(0.005)
"""


def test_ctrl_c_still_merges_and_exits_with_the_childs_status(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    log, trace = tmp_path / "dnnl.log", tmp_path / "trace.json"
    proc = subprocess.Popen([sys.executable, "-m", "pyprof", "run", "--dnnl", "--log", str(log),
                             "--trace", str(trace), "--", sys.executable, str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                            start_new_session=True)  # its own process group, like a terminal job
    try:
        assert proc.stdout.readline() == b"looping\n"  # the child's output passes through
        time.sleep(2)  # let it record some convolutions (not an assertion on time)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err_text = err.decode()
    assert proc.returncode == 128 + signal.SIGINT, err_text
    assert "Traceback" not in err_text.split("KeyboardInterrupt", 1)[-1]  # only the child's
    assert "_pump" not in err_text
    lines = log.read_text().splitlines()
    assert lines and all(ln.startswith(("dnnl_verbose,", "onednn_verbose,")) for ln in lines)
    assert "inside operators" in err_text
    res = validate(trace)
    assert res.ok, res.problems
    events = json.loads(trace.read_text())["traceEvents"]
    prims = [e for e in events if e.get("cat") == "dnnl" and e.get("name") == "convolution"]
    convs = [e for e in events if e.get("cat") == "operator" and e.get("name") == "Convolution"]
    assert prims and convs
    assert len(prims) == sum(1 for ln in lines if ",exec," in ln and ",convolution," in ln)
