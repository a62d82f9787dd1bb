"""An open window at exit (api.json ``raw_trace.exit_about``): saved, with one line on stderr
naming its file, at the end of a Python program and on a JVM's SIGTERM; one of more raw bytes
than ``exit_max_bytes`` is left for ``pyprof recover`` (its .partial and the raw trace kept),
said in one line; no part, empty or temporary file is left beside the windows. Real MXNet, real
processes; the limit is lowered in the child so that a small window crosses it. The time an exit
takes is a figure of bench/ (docs/performance.md), not a bound here."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from child import FAST_JVM, ROOT, load_trace

SAVED = re.compile(r"^pyprof: at exit, window 0 saved: (\S+) \((\d+) events\)$", re.M)
LEFT = re.compile(r"^pyprof: at exit, window 0 \((\d+) bytes of raw trace, more than the (\d+) an "
                  r"exit writes\) is left for recovery in (\S+)\. fix: pyprof recover (\S+)$", re.M)

_PY = r"""
import os, sys, time
import mxnet as mx
import pyprof, pyprof.session
limit = int(sys.argv[1])
if limit:
    pyprof.session._RAW_SPEC["exit_max_bytes"] = limit
s = pyprof.profile(path="w_{window}.json", profile_imperative=True)
s.start()
for _ in range(300):
    mx.nd.ones((4, 4)).wait_to_read()
print("running", flush=True)
"""

_CLJ = r"""
(require 'pyprof.session)
(import '(pyprof.jvm Profiler ProfilerSession))
(let [limit (Long/parseLong (first *command-line-args*))]
  (when (pos? limit)
    (alter-var-root (resolve 'pyprof.session/raw-spec) assoc "exit_max_bytes" limit)))
(def s (.start (ProfilerSession. {"path" "w_{window}.json" "profile_imperative" true}
                                 (System/getProperty "user.dir"))))
(def d (Profiler/domain "exit"))
(dotimes [_ 500] (Profiler/mark d "tick" "process")) ; recorded before the test's signal
(println "running") (flush)
(loop [] (Profiler/mark d "tick" "process") (Thread/sleep 2) (recur))
"""


def _leftovers(d: Path) -> list[str]:
    """Files beside the windows that must not be there: parts, empties, temporary files."""
    return sorted(p.name for p in d.iterdir() if p.name != "service.clj" and (
                  p.name.startswith(".pyprof-") or p.name.endswith((".tmp", ".partial"))
                  or (p.is_file() and p.stat().st_size == 0)))


def _python(tmp_path: Path, limit: int) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYPROF_RAW_DIR=str(tmp_path / "raw"))
    (tmp_path / "raw").mkdir()
    return subprocess.run([sys.executable, "-c", _PY, str(limit)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def _jvm_sigterm(tmp_path: Path, limit: int) -> subprocess.CompletedProcess:
    """A JVM whose session records until SIGTERM (sent once it has recorded 500 markers)."""
    from pyprof import jvm

    (tmp_path / "raw").mkdir()
    script = tmp_path / "service.clj"
    script.write_text(_CLJ)
    cmd = ["java", *FAST_JVM, f"-Dpyprof.outputRoot={tmp_path}", "-cp",
           os.pathsep.join(jvm.classpath()), "clojure.main", str(script), str(limit)]
    p = subprocess.Popen(cmd, cwd=tmp_path, env=dict(os.environ, PYPROF_RAW_DIR=str(tmp_path / "raw")),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "running", p.stderr.read()[-3000:]
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=300)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


@pytest.mark.parametrize("kind", ["python", "jvm-sigterm"])
def test_an_open_window_is_saved_at_exit_in_one_line(tmp_path, kind):
    proc = _python(tmp_path, 0) if kind == "python" else _jvm_sigterm(tmp_path, 0)
    saved = SAVED.findall(proc.stderr)
    assert len(saved) == 1, proc.stderr[-3000:]
    path, events = saved[0]
    assert Path(path) == tmp_path / "w_0.json"
    trace = load_trace(Path(path))
    assert len(trace) == int(events) > 0
    assert _leftovers(tmp_path) == []
    assert list((tmp_path / "raw").iterdir()) == [], "the raw trace is deleted"


@pytest.mark.parametrize("kind", ["python", "jvm-sigterm"])
def test_a_window_past_the_exit_bound_is_left_for_recovery(tmp_path, kind):
    proc = _python(tmp_path, 1000) if kind == "python" else _jvm_sigterm(tmp_path, 1000)
    left = LEFT.findall(proc.stderr)
    assert len(left) == 1, proc.stderr[-3000:]
    nbytes, limit, raw, path = left[0]
    assert int(nbytes) > int(limit) == 1000
    assert Path(path) == tmp_path / "w_0.json" and not Path(path).exists()
    assert Path(path + ".partial").is_file() and Path(raw).is_file()
    assert not SAVED.search(proc.stderr)
    rec = subprocess.run([sys.executable, "-m", "pyprof", "recover", path], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert rec.returncode == 0, rec.stderr[-3000:]
    recovered = Path(rec.stdout.strip().splitlines()[-1])
    assert recovered.parent == tmp_path and recovered.name.startswith("w_0.recovered-")
    names = {e.get("name") for e in load_trace(recovered)}
    assert ("_ones" if kind == "python" else "tick") in names
