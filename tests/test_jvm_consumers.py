"""The JVM library as a consumer gets it: `lein install` in jvm/, then two fresh projects in a
temporary directory, one Leiningen (project.clj) and one Maven (pom.xml), each written from the
snippet of jvm/README.md ("Depending on it: the Maven coordinate"), read from the README here
so that the document and the test cannot drift. Each has a tiny main that profiles one
imperative `dot` of two 64x64 arrays through `pyprof.jvm.capi.LibMXNet` (the library has no
NDArray API: the work is the consumer's own MXNet calls), with the Clojure API
(`pyprof.profiler`) and the Java facade (`pyprof.jvm.Profiler`) respectively; the trace each
writes must hold the dot's B/E pair. The installed pom must name Maven Central as its only
repository and the library's four dependencies, which resolve from there.

The local Maven repository: one of the test's own, never ``~/.m2``, so that neither a
pyprof-jvm installed there by hand nor one left by this test can hide a broken build. It is
``$PYPROF_CONSUMER_REPO``, by default ``~/.cache/pyprof/consumer-m2``, kept between runs for
its downloads (Central's jars and Maven's plugins: about 25 MB, a few seconds, the first
time); pyprof's own group is deleted from it before the install and after the test, under a
lock (two runs at once take turns). Leiningen reaches it through ``:local-repo`` (``lein
update-in`` for the install, a user profile in a temporary ``LEIN_HOME`` for the consumer; the
snippet's empty ``:base`` keeps Leiningen's nREPL, on Clojars only, out), Maven through
``-Dmaven.repo.local``."""

import fcntl
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from child import ROOT, load_trace, operator_pairs

pytestmark = [pytest.mark.jvm,
              pytest.mark.skipif(shutil.which("lein") is None, reason="Leiningen not installed"),
              pytest.mark.skipif(shutil.which("mvn") is None, reason="Maven not installed")]

JVM = ROOT / "jvm"
README = JVM / "README.md"
SECTION = "## Depending on it: the Maven coordinate"
REPO = Path(os.environ.get("PYPROF_CONSUMER_REPO")
            or Path.home() / ".cache" / "pyprof" / "consumer-m2")
POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
#: what the library's pom may name (groupId, artifactId): all on Maven Central
DEPENDENCIES = {("org.clojure", "clojure"), ("net.java.dev.jna", "jna"),
                ("org.clojure", "data.json"), ("com.fasterxml.jackson.core", "jackson-core")}

CLOJURE_MAIN = """(ns {ns}
  "Profiles one imperative dot of two 64x64 arrays into the trace named by the argument."
  (:require [pyprof.profiler :as p])
  (:import (com.sun.jna Pointer)
           (com.sun.jna.ptr IntByReference PointerByReference)
           (pyprof.jvm.capi LibMXNet)))

(defn- invoke
  "Runs operator `op` on `inputs` with the string parameters `params`; returns its outputs."
  [^String op inputs params]
  (let [handle (PointerByReference.)
        n (IntByReference. 0)
        outputs (PointerByReference.)]
    (LibMXNet/NNGetOpHandle op handle)
    (LibMXNet/MXImperativeInvoke (.getValue handle) (count inputs)
                                 (LibMXNet/pointers (into-array Pointer inputs)) n outputs
                                 (count params)
                                 (LibMXNet/strings (into-array String (keys params)))
                                 (LibMXNet/strings (into-array String (vals params))))
    (vec (.getPointerArray (.getValue outputs) 0 (.getValue n)))))

(defn -main [out]
  (p/profiler-set-config {{:filename out :profile-imperative true}})
  (let [[a] (invoke "_random_uniform" [] {{"shape" "(64,64)"}})
        [b] (invoke "_random_uniform" [] {{"shape" "(64,64)"}})
        _ (LibMXNet/MXNDArrayWaitAll)
        [c] (p/with-profiling
              (let [outs (invoke "dot" [a b] {{}})]
                (LibMXNet/MXNDArrayWaitToRead (first outs))
                outs))]
    (p/dump-profile true)
    (run! #(LibMXNet/MXNDArrayFree %) [a b c]))
  (println "trace:" out))
"""

JAVA_MAIN = """import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;
import java.util.Map;
import pyprof.jvm.Profiler;
import pyprof.jvm.capi.LibMXNet;

/** Profiles one imperative dot of two 64x64 arrays into the trace args[0]. */
public class Trace {
  /** Runs operator op on inputs with string parameters key, value, ...; returns its outputs. */
  static Pointer[] invoke(String op, Pointer[] inputs, String... params) {
    PointerByReference handle = new PointerByReference();
    LibMXNet.NNGetOpHandle(op, handle);
    String[] keys = new String[params.length / 2];
    String[] values = new String[params.length / 2];
    for (int i = 0; i < keys.length; i++) {
      keys[i] = params[2 * i];
      values[i] = params[2 * i + 1];
    }
    IntByReference n = new IntByReference(0);
    PointerByReference outputs = new PointerByReference();
    LibMXNet.MXImperativeInvoke(handle.getValue(), inputs.length, LibMXNet.pointers(inputs), n,
        outputs, keys.length, LibMXNet.strings(keys), LibMXNet.strings(values));
    return outputs.getValue().getPointerArray(0, n.getValue());
  }

  public static void main(String[] args) {
    Profiler.setConfig(Map.of("filename", args[0], "profile_imperative", true));
    Pointer a = invoke("_random_uniform", new Pointer[0], "shape", "(64,64)")[0];
    Pointer b = invoke("_random_uniform", new Pointer[0], "shape", "(64,64)")[0];
    LibMXNet.MXNDArrayWaitAll();
    Profiler.setState("run");
    Pointer c = invoke("dot", new Pointer[] {a, b})[0];
    LibMXNet.MXNDArrayWaitToRead(c);
    Profiler.setState("stop");
    Profiler.dump(true);
    for (Pointer p : new Pointer[] {a, b, c}) {
      LibMXNet.MXNDArrayFree(p);
    }
    System.out.println("trace: " + args[0]);
  }
}
"""


def _snippet(language: str, marker: str) -> str:
    """The ```language block of the README's section that holds ``marker``: exactly one."""
    text = README.read_text()
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = [b for b in re.findall(rf"```{language}\n(.*?)```", section, re.S) if marker in b]
    assert len(blocks) == 1, f"one ```{language} block with {marker!r} in {SECTION!r} of {README}"
    return blocks[0]


def _libmxnet() -> str:
    import pyprof.native.capi as capi

    return capi.library_path()


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 300):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} in {cwd}:\n{(proc.stdout + proc.stderr)[-3000:]}"
    return proc


def _project_version() -> str:
    return re.search(r'\(defproject pyprof/pyprof-jvm "([^"]+)"', (JVM / "project.clj").read_text())[1]


def _one_dot(trace: Path) -> None:
    pairs = operator_pairs(load_trace(trace), ("dot",))
    assert len(pairs) == 1, f"{trace}: dot B/E pairs {pairs}"


@pytest.fixture(scope="module")
def installed():
    """pyprof-jvm installed by `lein install` into REPO (under REPO's lock): its pom's path."""
    REPO.mkdir(parents=True, exist_ok=True)
    target = f"target/consumer-install-{os.getpid()}"  # not jvm/target itself: others use it
    with open(REPO.parent / f"{REPO.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(REPO / "pyprof", ignore_errors=True)
        try:
            proc = _run(["lein", "update-in", ":", "assoc", ":local-repo", json.dumps(str(REPO)),
                         ":target-path", json.dumps(target), "--", "install"], JVM)
            out = proc.stdout + proc.stderr
            assert "Warning" not in out and "Installed jar and pom" in out, out[-3000:]
            version = _project_version()
            yield REPO / "pyprof" / "pyprof-jvm" / version / f"pyprof-jvm-{version}.pom"
        finally:
            shutil.rmtree(JVM / target, ignore_errors=True)
            shutil.rmtree(REPO / "pyprof", ignore_errors=True)


def test_the_pom_names_central_only_and_dependencies_from_it(installed):
    pom = ET.parse(installed).getroot()
    ids = [u.text for u in pom.findall("m:repositories/m:repository/m:id", POM_NS)]
    urls = [u.text for u in pom.findall("m:repositories/m:repository/m:url", POM_NS)]
    # Central as Leiningen names it (jvm/project.clj): no Debian file repository, no Clojars
    assert ids == ["central"] and urls[0].startswith("https://") and urls[0].endswith("/maven2/"), urls
    deps, test_scope = set(), set()
    for d in pom.findall("m:dependencies/m:dependency", POM_NS):
        gav = tuple(d.find(f"m:{k}", POM_NS).text for k in ("groupId", "artifactId", "version"))
        scope = d.find("m:scope", POM_NS)
        (test_scope if scope is not None and scope.text == "test" else deps).add(gav)
    assert {(g, a) for g, a, _ in deps} == DEPENDENCIES  # tools.cli went with the example
    # the :dev profile's (the example's tools.cli, for the tests here): test scope, which no
    # consumer inherits
    assert {(g, a) for g, a, _ in test_scope} <= {("org.clojure", "tools.cli")}, test_scope
    # each came from Central into the test's repository (the install names no other repository)
    for group, artifact, version in deps:
        mark = REPO / group.replace(".", "/") / artifact / version / "_remote.repositories"
        assert f"{artifact}-{version}.jar>central=" in mark.read_text(), mark
    with zipfile.ZipFile(installed.with_suffix(".jar")) as z:
        names = z.namelist()
    assert "pyprof/jvm/capi/LibMXNet.class" in names
    assert not [n for n in names if n.startswith(("pyprof/example/", "pyprof/jvm/example/",
                                                  "org/apache/", "clojure/tools/cli"))]


def test_readme_snippets_name_the_installed_coordinate():
    version = _project_version()
    assert f'[pyprof/pyprof-jvm "{version}"]' in _snippet("clojure", "(defproject")
    pom = ET.fromstring(_snippet("xml", "<project"))
    dep = pom.find("m:dependencies/m:dependency", POM_NS)
    assert [dep.find(f"m:{k}", POM_NS).text for k in ("groupId", "artifactId", "version")] == \
        ["pyprof", "pyprof-jvm", version]


def test_leiningen_consumer_profiles_a_dot(installed, tmp_path):
    project = _snippet("clojure", "(defproject")
    ns = re.search(r":main\s+(?:\^:skip-aot\s+)?([\w.-]+)", project)[1]
    src = tmp_path / "app" / "src" / Path(*ns.replace("-", "_").split(".")).with_suffix(".clj")
    src.parent.mkdir(parents=True)
    (tmp_path / "app" / "project.clj").write_text(project)
    src.write_text(CLOJURE_MAIN.format(ns=ns))
    home = tmp_path / "lein-home"
    home.mkdir()
    # the test's local repository only: the snippet resolves everything else from Central
    (home / "profiles.clj").write_text("{:user {:local-repo %s}}\n" % json.dumps(str(REPO)))
    trace = tmp_path / "lein-trace.json"
    env = dict(os.environ, LEIN_HOME=str(home), MXNET_LIBRARY_PATH=_libmxnet())
    proc = _run(["lein", "run", str(trace)], tmp_path / "app", env=env)
    assert f"trace: {trace}" in proc.stdout
    _one_dot(trace)
    cp = _run(["lein", "classpath"], tmp_path / "app", env=env).stdout.strip().splitlines()[-1]
    assert str(installed.with_suffix(".jar")) in cp.split(os.pathsep)


def test_maven_consumer_profiles_a_dot(installed, tmp_path):
    app = tmp_path / "app"
    (app / "src" / "main" / "java").mkdir(parents=True)
    (app / "pom.xml").write_text(_snippet("xml", "<project"))
    (app / "src" / "main" / "java" / "Trace.java").write_text(JAVA_MAIN)
    env = dict(os.environ, MXNET_LIBRARY_PATH=_libmxnet())
    _run(["mvn", "-q", "-B", f"-Dmaven.repo.local={REPO}", "compile", "dependency:build-classpath",
          "-Dmdep.outputFile=cp.txt"], app, env=env)
    entries = (app / "cp.txt").read_text().strip().split(os.pathsep)
    assert str(installed.with_suffix(".jar")) in entries
    assert all(e.startswith(str(REPO) + os.sep) for e in entries), entries
    # JNA's native part comes in Central's JNA jar: no -Djna.boot.library.path, no system package
    jna = [e for e in entries if re.search(r"/jna-[\d.]+\.jar$", e)]
    assert len(jna) == 1, entries
    with zipfile.ZipFile(jna[0]) as z:
        assert any(n.endswith("/libjnidispatch.so") for n in z.namelist())
    trace = tmp_path / "mvn-trace.json"
    proc = _run(["java", "-cp", os.pathsep.join([str(app / "target" / "classes"), *entries]),
                 "Trace", str(trace)], app, env=env, timeout=120)
    assert f"trace: {trace}" in proc.stdout
    _one_dot(trace)
