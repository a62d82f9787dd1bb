"""The JVM layer's artifacts: the library jar (`lein jar` / `lein install`) holds pyprof's own
classes, sources and spec files, no compiled copy of a dependency and nothing of the example
(examples/matmul); the example's uberjar runs the dot example, whose usage text names the
command that started it; the JVM's default output root (<tmp>/pyprof) does not shadow the
Python package of the editable install."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import pyprof
from child import ROOT

JVM = ROOT / "jvm"
EXAMPLE = ROOT / "examples" / "matmul"

pytestmark = pytest.mark.skipif(shutil.which("lein") is None, reason="Leiningen not installed")


def _lein(*args, timeout=600, cwd=JVM):
    proc = subprocess.run(["lein", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return proc


def test_library_jar_holds_only_pyprof_classes_sources_and_spec():
    # A target of its own: the build leaves jvm/target/classes (the dev classpath) alone.
    target = JVM / "target" / "jarcheck"
    built = _lein("update-in", ":", "assoc", ":target-path", '"target/jarcheck"', "--", "jar")
    assert "Warning" not in built.stdout + built.stderr, built.stdout + built.stderr
    jars = sorted(target.glob("pyprof-jvm-*.jar"))
    assert len(jars) == 1, jars
    with zipfile.ZipFile(jars[0]) as z:
        names = z.namelist()
        pom = z.read("META-INF/maven/pyprof/pyprof-jvm/pom.properties").decode()
        manifest = z.read("META-INF/MANIFEST.MF").decode()
    classes = [n for n in names if n.endswith(".class")]
    assert not [n for n in names if n.startswith(("clojure/data/json", "clojure/tools/cli"))]
    # the example (pyprof.example.*, pyprof.jvm.example.*, org.apache.clojure-mxnet.*) and its
    # main stay in examples/matmul: Leiningen's default Main-Class, clojure.main, is no demo
    assert not [n for n in names if n.startswith(("pyprof/example/", "pyprof/jvm/example/",
                                                  "org/apache/", "profiler/"))]
    assert "Main-Class: clojure.main" in manifest.splitlines(), manifest
    assert not [n for n in classes if not n.startswith("pyprof/jvm/")], "classes outside pyprof.jvm"
    assert not [n for n in classes if "__init" in n], "AOT-compiled Clojure namespaces"
    assert "pyprof/jvm/Profiler.class" in names and "pyprof/jvm/capi/LibMXNet.class" in names
    assert "pyprof/profiler.clj" in names and "pyprof/session.clj" in names
    assert "api.json" in names and "errors.json" in names
    assert "groupId=pyprof" in pom and "artifactId=pyprof-jvm" in pom


def test_example_uberjar_runs_the_dot_example_and_its_usage_names_the_command():
    # one Leiningen start for both tasks: the uberjar's lines ("Created ...") come before run's;
    # the jar's Main-Class is the seed's example (profiler.core), pyprof's dot example a class in it
    lein = _lein("do", "uberjar,", "run", "-m", "pyprof.example.matmul", "--", "--help",
                 cwd=EXAMPLE)
    jars = sorted((EXAMPLE / "target" / "uberjar").glob("profiler-*-standalone.jar"))
    assert len(jars) == 1, jars
    with zipfile.ZipFile(jars[0]) as z:
        assert "Main-Class: profiler.core" in z.read("META-INF/MANIFEST.MF").decode().splitlines()
    rel = jars[0].relative_to(EXAMPLE)
    proc = subprocess.run(["java", "-cp", str(rel), "pyprof.example.matmul", "--help"], cwd=EXAMPLE,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[0] == "usage: java -cp <classpath> pyprof.example.matmul [options]"
    assert "--size N" in proc.stdout
    lines = lein.stdout.splitlines()
    last_created = max(i for i, line in enumerate(lines) if line.startswith("Created "))
    assert lines[last_created + 1] == "usage: lein run -m pyprof.example.matmul -- [options]", \
        lein.stdout[-2000:]


def test_a_pyprof_directory_in_the_working_directory_does_not_shadow_the_package(tmp_path):
    # The JVM's default output root is <tmp>/pyprof: `python -c "import pyprof"` run in <tmp>
    # found that directory as a namespace package under setuptools' import-hook editable
    # install (scripts/setup.sh installs in editable_mode=compat, a .pth, instead).
    (tmp_path / "pyprof").mkdir()
    out = subprocess.run([sys.executable, "-c", "import pyprof; print(pyprof.__file__); "
                          "print(callable(pyprof.stats))"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()
    assert out == [str(Path(pyprof.__file__)), "True"]
