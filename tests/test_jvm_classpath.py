"""The cached JVM classpath (pyprof.jvm.classpath) is built once when several processes find it
stale at the same moment (two pytest workers, two services starting after an update): the
others wait for that build and read it. Leiningen and java are stand-ins here (scripts on PATH
that log each run), so the test is about the lock, not the build."""

import os
import subprocess
import sys
from pathlib import Path

from child import ROOT

_LEIN = """#!/bin/sh
echo run >> "$BUILD_LOG"
sleep 1
mkdir -p target/classes
echo "$PWD/src/clj:$PWD/target/classes"
"""


def _project(tmp: Path) -> tuple[Path, dict[str, str]]:
    project, bin_dir = tmp / "jvm", tmp / "bin"
    (project / "src" / "clj").mkdir(parents=True)
    (project / "project.clj").write_text("(defproject stand-in \"0\")\n")
    bin_dir.mkdir()
    for name, text in (("lein", _LEIN), ("java", "#!/bin/sh\nexit 0\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               PYPROF_JVM_DIR=str(project), BUILD_LOG=str(tmp / "builds.log"),
               PYTHONPATH=str(ROOT))
    env.pop("PYPROF_JVM_CLASSPATH", None)
    return project, env


def test_processes_that_find_the_classpath_stale_at_once_build_it_once(tmp_path):
    project, env = _project(tmp_path)
    code = "import pyprof.jvm as j; print(j.classpath())"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [e for _, e in outs]
    assert len({o for o, _ in outs}) == 1, outs  # each read the one build
    assert str(project / "src" / "clj") in outs[0][0]
    assert (tmp_path / "builds.log").read_text().splitlines() == ["run"]
