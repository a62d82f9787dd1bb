"""Running one batch of sequences through each API, each in its own child process.

A batch is ``{"sequences": [scenario, ...]}``. Every language runs the whole batch in order in
one process (the profiler is one per process; one JVM start per batch, since a JVM start costs
seconds), sequence i in ``<workdir>/s<i>``:

* ``python``: ``runner.py --batch`` (the reference; each step's ``"lang"`` ignored);
* ``clojure`` and ``java``: ``pyprof.conformance-batch/-main-batch`` in a child JVM;
* ``bridge``: ``runner.py --batch --bridge``, a Python process hosting the JVM by JPype, each
  step made in the language its ``"lang"`` names.

``source`` is the checkout whose ``pyprof`` the Python children import and ``clj`` a folder of
Clojure sources put first on the JVM's classpath (the mutation tests run a mutated copy).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RUNNER = ROOT / "tests" / "conformance" / "runner.py"
LANGUAGES = ("python", "clojure", "java", "bridge")


def _jvm_classpath(clj: Path | None) -> list[str]:
    from pyprof import jvm

    return ([str(clj)] if clj else []) + jvm.classpath()


def _command(language: str, batch: Path, workdir: Path, clj: Path | None) -> list[str]:
    if language in ("python", "bridge"):
        return [sys.executable, str(RUNNER), "--batch", str(batch), str(workdir)] + (
            ["--bridge"] if language == "bridge" else [])
    from pyprof.native import capi as _capi

    form = (f"(require 'pyprof.conformance-batch) (pyprof.conformance-batch/-main-batch "
            f"{json.dumps(str(batch))} {json.dumps(language)} {json.dumps(str(workdir))})")
    return ["java", "-cp", os.pathsep.join(_jvm_classpath(clj)), "-Xss4m",
            f"-Dmxnet.library.path={_capi.library_path()}", f"-Dpyprof.outputRoot={workdir}",
            "clojure.main", "-e", form]


def run_batch(sequences: list[dict[str, Any]], languages: tuple[str, ...] = LANGUAGES, *,
              source: Path = ROOT, clj: Path | None = None, timeout: float = 600,
              parallel: bool = True) -> dict[str, Any]:
    """The outcomes of every language: ``{"outcomes": {lang: [[outcome per step] per
    sequence]}, "roots": {lang: workdir}, "failed": {lang: why}}`` (a child that exited badly
    or timed out is in ``failed``, its outcomes absent)."""
    tmp = Path(tempfile.mkdtemp(prefix="differential-"))
    batch = tmp / "batch.json"
    batch.write_text(json.dumps({"sequences": sequences}), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(source), os.environ.get(
        "PYTHONPATH", "")]))
    if source != ROOT:  # a copy of pyprof alone: the JVM project stays this checkout's
        env.setdefault("PYPROF_JVM_DIR", str(ROOT / "jvm"))
    if clj is not None:
        env["PYPROF_JVM_CLASSPATH"] = os.pathsep.join(_jvm_classpath(clj))
    procs, roots = {}, {}
    for lang in languages:
        work = tmp / lang
        work.mkdir()
        roots[lang] = str(work)
        out = open(tmp / f"{lang}.out", "w")  # noqa: SIM115 - closed below
        err = open(tmp / f"{lang}.err", "w")  # noqa: SIM115
        procs[lang] = (subprocess.Popen(_command(lang, batch, work, clj), cwd=work, env=env,
                                        stdout=out, stderr=err, text=True), out, err)
        if not parallel:
            _wait(procs[lang], timeout)
    result: dict[str, Any] = {"outcomes": {}, "roots": roots, "failed": {}, "dir": str(tmp)}
    for lang, p in procs.items():
        rc = _wait(p, timeout)
        text = (tmp / f"{lang}.out").read_text()
        lines = text.strip().splitlines()
        try:
            if rc != 0:
                raise ValueError(f"exit {rc}")
            result["outcomes"][lang] = json.loads(lines[-1])
        except (ValueError, IndexError) as exc:
            result["failed"][lang] = f"{exc}: {(tmp / f'{lang}.err').read_text()[-2000:]}"
    return result


def _wait(p: tuple[Any, Any, Any], timeout: float) -> int:
    proc, out, err = p
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    out.close()
    err.close()
    return rc
