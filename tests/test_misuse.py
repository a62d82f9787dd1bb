"""The misuse matrix (issue 12): every case of tests/misuse/cases.json runs in its own child
Python (the conformance runner, tests/conformance/runner.py) and must end as the case says: a
catalogue error whose message ends in a fix, or the documented result. The child must exit 0
(no abort, no signal) within the time limit (no hang), and a case's ``trace`` step reads back
the data collected before the misuse. The JVM runs the same cases: jvm/test/pyprof/misuse_test.clj."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "conformance"))

import runner  # noqa: E402

CASES = json.loads((Path(__file__).resolve().parent / "misuse" / "cases.json").read_text())["cases"]


def test_the_matrix_has_at_least_50_cases():
    assert len(CASES) >= 50 and len({c["name"] for c in CASES}) == len(CASES)
    assert sum(1 for c in CASES for s in c["steps"] if "error" in s.get("expect", {})) >= 50


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=c["known_bug"])) if "known_bug" in c
    else c for c in CASES], ids=[c["name"] for c in CASES])
def test_misuse_case(case, tmp_path):
    path = tmp_path / "case.json"
    path.write_text(json.dumps({"steps": case["steps"]}))
    outcomes = runner.run(path, timeout=120)  # a non-zero exit or a timeout fails the case
    assert not runner.differences(case, outcomes), runner.differences(case, outcomes)
    errors = [o for o in outcomes if "error" in o]
    assert len(errors) == sum(1 for s, o in zip(case["steps"], outcomes)
                              if "error" in s.get("expect", {}) and not o.get("skipped"))
    for o in errors:
        assert re.search(r"[.;)] fix: \S.*$", o["message"], re.S), o["message"]
