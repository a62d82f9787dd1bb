"""The conformance suite catches a broken rule in either language (mutation testing).

Each case plants one bug in a copy of one language's sources: a key conversion, a constant, a
message, a schedule step, a statistics field, and the two breaks that once went unnoticed
(marker scope always "process", dumps sort codes swapped). The scenario that covers the rule
then runs on the mutated copy and must report a difference. The exact text replaced is checked
first, so a change of the source that makes a case meaningless fails here instead of passing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "conformance"))

import runner  # noqa: E402
from child import FAST_JVM  # noqa: E402

ROOT = runner.ROOT

# (rule, language, file, text, replacement, scenario)
MUTATIONS = [
    ("key conversion", "clojure", "jvm/src/clj/pyprof/util.clj",
     r"(str/replace (name k) \- \_)", "(name k)", "config_values.json"),
    ("a constant: run/stop codes", "clojure", "jvm/src/clj/pyprof/rules.clj",
     '(def states "{\\"stop\\" 0, \\"run\\" 1}" (codes "states"))',
     '(def states "swapped" {"stop" 1, "run" 0})', "state_errors.json"),
    ("a constant: dumps sort codes", "clojure", "jvm/src/clj/pyprof/rules.clj",
     '(codes "dumps_sort_keys")', '(assoc (codes "dumps_sort_keys") "count" 0 "total" 4)',
     "dumps.json"),
    ("a message: the fix dropped", "python", "pyprof/rules.py",
     "exc = cls(f\"{render(entry['message'], fields)} fix: {fix}\")",
     "exc = cls(render(entry['message'], fields))", "config_errors.json"),
    ("a schedule step: one wait step too many", "clojure", "jvm/src/clj/pyprof/session/schedule.clj",
     "(cond (< pos n) (if (= pos (dec n)) last each)",
     "(cond (<= pos n) (if (= pos (dec n)) last each)", "sessions.json"),
    ("a stats field: calls counted one too many", "clojure", "jvm/src/clj/pyprof/stats.clj",
     "{:category cat :name name :device device :count n :total-us total",
     "{:category cat :name name :device device :count (inc n) :total-us total", "trace_tools.json"),
    ("marker scope always process", "clojure", "jvm/src/clj/pyprof/objects.clj",
     "(mx MXProfileSetMarker (.pointer d) ^String name ^String s)",
     '(mx MXProfileSetMarker (.pointer d) ^String name "process")', "markers.json"),
    ("a constant: Python's states", "python", "pyprof/rules.py",
     'STATES: dict[str, int] = API["states"]', 'STATES: dict[str, int] = {"stop": 1, "run": 0}',
     "state_errors.json"),
]


def _mutated_copy(tmp: Path, language: str, rel: str, text: str, replacement: str) -> Path:
    """A copy of the language's source tree with ``text`` in ``rel`` replaced once."""
    src = ROOT / ("pyprof" if language == "python" else "jvm/src/clj")
    dst = tmp / ("src/pyprof" if language == "python" else "clj")
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    target = dst / Path(rel).relative_to(src.relative_to(ROOT))
    code = target.read_text()
    assert code.count(text) == 1, f"{rel} no longer holds the text this mutation replaces"
    target.write_text(code.replace(text, replacement))
    # Clojure loads a namespace's AOT class (jvm/target/aot) unless its source is newer: a
    # classpath cache rebuilt after the copy (a test beside this one) would hide the mutation.
    later = time.time() + 86400
    os.utime(target, (later, later))
    return dst


def _run_jvm(scenario: Path, clj: Path, workdir: Path) -> list[dict]:
    from pyprof import jvm

    classpath = os.pathsep.join([str(clj), *jvm.classpath()])
    form = (f"(require 'pyprof.conformance) (pyprof.conformance/-main "
            f"{json.dumps(str(scenario))} \"clojure\" {json.dumps(str(workdir))})")
    proc = subprocess.run(["java", *FAST_JVM, "-cp", classpath, "clojure.main", "-e", form], cwd=workdir,
                          capture_output=True, text=True, timeout=300)
    # The runner catches every step's error: a failing child means the setup is wrong, which
    # must not count as a caught mutation.
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("rule,language,rel,text,replacement,scenario", MUTATIONS,
                         ids=[m[0] for m in MUTATIONS])
def test_a_planted_break_makes_the_conformance_suite_fail(tmp_path, rule, language, rel, text,
                                                          replacement, scenario):
    path = runner.SCENARIOS / scenario
    copy = _mutated_copy(tmp_path, language, rel, text, replacement)
    if language == "python":
        outcomes = runner.run(path, source=copy.parent)
        diffs = runner.differences(runner.load(path), outcomes)
    else:
        work = tmp_path / "work"
        work.mkdir()
        outcomes = _run_jvm(path, copy, work)
        diffs = runner.differences(runner.load(path), outcomes, language="jvm")
    assert diffs, f"planting '{rule}' in {rel} left {scenario} passing"
    print(f"{rule}: {diffs[0]}")  # what gave the mutation away (pytest -s shows it)
