"""The differential test catches a planted break of each divergence class (mutation testing).

The breaks are data (tests/differential/mutations.json: a file, the exact text replaced, the
replacement, the languages to run), so their anchors can be retargeted when the code moves.
Each anchor must occur exactly once: a change of the source that makes a break meaningless
fails here instead of passing. Running the five breaks (a batch through the Python reference
and the broken language, each in fresh children) takes minutes: set
PYPROF_DIFFERENTIAL_MUTATIONS=1 (or select -m differential with it) to run them.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from differential import compare, execute, gen, run

ROOT = Path(__file__).resolve().parent.parent
MUTATIONS = json.loads((ROOT / "tests" / "differential" / "mutations.json").read_text())["mutations"]


@pytest.mark.parametrize("m", MUTATIONS, ids=[m["class"] for m in MUTATIONS])
def test_each_anchor_is_there_exactly_once(m):
    text = (ROOT / m["file"]).read_text()
    assert text.count(m["text"]) == 1, \
        f"{m['file']} no longer holds the text the '{m['class']}' break replaces once: retarget it"


def _mutated_copy(tmp: Path, m: dict) -> tuple[Path, Path | None]:
    """(a source root whose pyprof is imported, a Clojure source folder or None)."""
    if m["language"] == "python":
        dst = tmp / "src"
        shutil.copytree(ROOT / "pyprof", dst / "pyprof", ignore=shutil.ignore_patterns("__pycache__"))
        target, clj = dst / m["file"], None
    else:
        dst = ROOT
        clj = tmp / "clj"
        shutil.copytree(ROOT / "jvm" / "src" / "clj", clj)
        target = clj / Path(m["file"]).relative_to("jvm/src/clj")
    code = target.read_text()
    assert code.count(m["text"]) == 1, f"{m['file']}: anchor not found once"
    target.write_text(code.replace(m["text"], m["replacement"]))
    if clj is not None:  # newer than its AOT class in jvm/target/aot, which Clojure would load
        later = time.time() + 86400
        os.utime(target, (later, later))
    return dst, clj


@pytest.mark.differential
@pytest.mark.jvm
@pytest.mark.skipif(os.environ.get("PYPROF_DIFFERENTIAL_MUTATIONS") != "1",
                    reason="minutes long: set PYPROF_DIFFERENTIAL_MUTATIONS=1")
@pytest.mark.parametrize("m", MUTATIONS, ids=[m["class"] for m in MUTATIONS])
def test_a_planted_break_makes_the_differential_test_report_a_divergence(tmp_path, m):
    source, clj = _mutated_copy(tmp_path, m)
    batch = gen.suite_batch(run.SIZE, run.SEED)  # the suite's batch
    result = execute.run_batch(batch, tuple(m["languages"]), source=source, clj=clj)
    # A child that fails means the setup is wrong, which must not count as a caught break.
    assert not result["failed"], result["failed"]
    found = [d for d in compare.first_divergences(batch, result)
             if d["language"] == m["languages"][-1]]
    assert found, f"planting '{m['class']}' in {m['file']}: no divergence reported"
    print(f"{m['class']}: " + run.report({"divergences": found[:1]}))
