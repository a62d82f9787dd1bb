"""Sessions of one process with one window path never replace each other's windows (api.json
``trace_claims.written_about``), on all four surfaces: Python's ``pyprof.profile``, Clojure's
``pyprof.session``, the Java facade ``ProfilerSession`` and the JMX bean. Three sessions in a
row, each setting its own marker, all with ``same_{window}.json``: before, each reported
``same_0.json`` and only the last one's events survived. Now the second and third are saved as
``same_0.1.json`` and ``same_0.2.json``, each says so in one line on stderr, and every file
holds its own session's marker only."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from child import FAST_JVM, load_trace, run_scenario

SESSIONS = 3
NOTE = re.compile(r"pyprof: window 0's file (\S+)/same_0\.json was written by an earlier session "
                  r"of this process; window 0 is saved as \1/same_0\.(\d)\.json instead\. fix: ")

_PY = """
import pyprof
from pyprof import profiler
paths = []
for i in range(3):
    with pyprof.profile(path="same_{window}.json") as p:
        pyprof.Marker(pyprof.Domain("written"), f"session-{i}").mark("process")
    paths.append([w.path for w in p.windows])
result = paths
"""

# Each JVM case prints one JSON line: the window paths of each of the three sessions.
_CLJ = {
    "clojure": """
(require '[pyprof.session :as s] '[pyprof.profiler :as p] '[clojure.data.json :as json])
(println (json/write-str
  (vec (for [i (range 3)]
         (let [sess (s/start! (s/profile {:path "same_{window}.json"}))]
           (p/mark (p/domain "written") (str "session-" i) :process)
           (mapv :path (s/stop! sess)))))))
""",
    "java": """
(require '[clojure.data.json :as json])
(import '(pyprof.jvm Profiler ProfilerSession))
(println (json/write-str
  (vec (for [i (range 3)]
         (let [sess (.start (ProfilerSession. {"path" "same_{window}.json"} (System/getProperty "user.dir")))]
           (Profiler/mark (Profiler/domain "written") (str "session-" i) "process")
           (mapv #(get % "path") (.stop sess)))))))
""",
    "jmx": """
(require '[clojure.data.json :as json])
(import '(pyprof.jvm Profiler ProfilerControl) '(javax.management ObjectName)
        '(java.lang.management ManagementFactory))
(ProfilerControl/register)
(def mbs (ManagementFactory/getPlatformMBeanServer))
(def on (ObjectName. ProfilerControl/OBJECT_NAME))
(defn invoke [op params sig] (.invoke mbs on op (object-array params) (into-array String sig)))
(println (json/write-str
  (vec (for [i (range 3)]
         (do (invoke "start" ["path=same_{window}.json" 60] ["java.lang.String" "long"])
             (invoke "awaitSaved" [60000] ["long"]) ; started
             (Profiler/mark (Profiler/domain "written") (str "session-" i) "process")
             (invoke "stop" [] [])
             (invoke "awaitSaved" [60000] ["long"])
             (mapv #(get % "path") (get (json/read-str (.getAttribute mbs on "Status")) "windows")))))))
""",
}


def _markers(path: str) -> set[str]:
    return {e["name"] for e in load_trace(Path(path)) if str(e.get("name", "")).startswith("session-")}


def _check(paths: list[list[str]], stderr: str, workdir: Path) -> None:
    assert [len(p) for p in paths] == [1] * SESSIONS, paths
    files = [p[0] for p in paths]
    root = os.path.realpath(workdir)
    assert [os.path.realpath(f) for f in files] == [
        f"{root}/same_0.json", f"{root}/same_0.1.json", f"{root}/same_0.2.json"], files
    for i, f in enumerate(files):
        assert _markers(f) == {f"session-{i}"}, f
    notes = [m.group(2) for m in NOTE.finditer(stderr)]
    assert notes == ["1", "2"], stderr[-3000:]


def _python_check(body: str, tmp_path) -> None:
    """Run ``body`` in a child Python; check its sessions' window paths and its stderr."""
    proc = run_scenario(body, tmp_path, expect_rc=None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    paths = json.loads((tmp_path / next(f for f in os.listdir(tmp_path)
                                        if f.startswith("result-"))).read_text())
    _check(paths, proc.stderr, tmp_path)


def test_python_sessions(tmp_path):
    _python_check(_PY, tmp_path)


@pytest.mark.parametrize("surface", ["clojure", "java", "jmx"])
def test_jvm_sessions(tmp_path, surface):
    from pyprof import jvm

    cmd = ["java", *FAST_JVM, f"-Dpyprof.outputRoot={tmp_path}", "-cp",
           os.pathsep.join(jvm.classpath()), "clojure.main", "-e", _CLJ[surface],
           "-e", "(shutdown-agents)"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check(json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr, tmp_path)


_MIXED = """
import os, jpype, pyprof
from pyprof import jvm
jvm.start()
ProfilerSession, Profiler = jpype.JClass("pyprof.jvm.ProfilerSession"), jpype.JClass("pyprof.jvm.Profiler")
paths = []
for i, lang in enumerate(["python", "java", "python"]):
    if lang == "python":
        with pyprof.profile(path="same_{window}.json") as p:
            pyprof.Marker(pyprof.Domain("written"), f"session-{i}").mark("process")
        paths.append([w.path for w in p.windows])
    else:
        opts = jpype.JClass("java.util.HashMap")()
        opts.put("path", "same_{window}.json")
        s = ProfilerSession(opts, os.getcwd()).start()
        Profiler.mark(Profiler.domain("written"), f"session-{i}", "process")
        paths.append([str(w.get("path")) for w in s.stop()])
result = paths
"""


def test_python_and_java_sessions_of_one_process_share_the_record(tmp_path):
    # the JPype bridge: one process, one record of the windows written (the tracker's), so a
    # Java session never replaces a Python session's window, nor the reverse
    _python_check(_MIXED, tmp_path)
