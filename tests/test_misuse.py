"""The misuse matrix (issue 12): every case of tests/misuse/cases.json runs in a child
Python (the conformance runner, tests/conformance/runner.py) and must end as the case says: a
catalogue error whose message ends in a fix, or the documented result. The child must exit 0
(no abort, no signal) within the time limit (no hang), and a case's ``trace`` step reads back
the data collected before the misuse. The cases that leave the profiler as it was (cases.json
``shared_child``: every step refused, or one that only makes objects or files) share one child
(runner.py --batch), ending in a probe case that records and reads back data. The JVM runs the same cases: jvm/test/pyprof/misuse_test.clj."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "conformance"))

import runner  # noqa: E402

_DOC = json.loads((Path(__file__).resolve().parent / "misuse" / "cases.json").read_text())
CASES = _DOC["cases"]
SHARED = _DOC["shared_child"]


def test_the_matrix_has_at_least_50_cases():
    assert len(CASES) >= 50 and len({c["name"] for c in CASES}) == len(CASES)
    assert sum(1 for c in CASES for s in c["steps"] if "error" in s.get("expect", {})) >= 50


def _refusal(case: dict) -> bool:
    """Whether ``case`` shares a child (cases.json ``shared_child``): each step refused, or a
    call that never configures, runs or dumps the profiler."""
    return "known_bug" not in case and all(
        "error" in s.get("expect", {}) or s["call"] in SHARED["calls"] for s in case["steps"])


REFUSALS = [c for c in CASES if _refusal(c)]
#: ends the shared child's cases: configures, runs, records, dumps and reads back, so it fails
#: when a case before it changed the profiler (as jvm/test/pyprof/misuse_test.clj's probe)
PROBE = next(c for c in CASES if c["name"] == SHARED["probe"])


@pytest.fixture(scope="module")
def refusals_in_one_child(tmp_path_factory):
    """The refusal cases, then the probe, in order in one child Python (runner.py --batch):
    {case name: outcomes}, the probe's under its own name."""
    import zygote

    d = tmp_path_factory.mktemp("refusals")
    batch = d / "batch.json"
    batch.write_text(json.dumps({"sequences": [{"steps": c["steps"]} for c in [*REFUSALS, PROBE]]}))
    proc = zygote.run([str(runner.HERE / "runner.py"), "--batch", str(batch), str(d)], cwd=d,
                      env=dict(os.environ), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcomes = json.loads(proc.stdout.strip().splitlines()[-1])
    return dict(zip([c["name"] for c in REFUSALS] + ["probe"], outcomes))


def test_refusals_share_a_child_and_leave_the_profiler_as_it_was(refusals_in_one_child):
    assert len(REFUSALS) >= 70
    assert not runner.differences(PROBE, refusals_in_one_child["probe"]), \
        runner.differences(PROBE, refusals_in_one_child["probe"])


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=c["known_bug"])) if "known_bug" in c
    else c for c in CASES], ids=[c["name"] for c in CASES])
def test_misuse_case(case, tmp_path, request):
    if _refusal(case):
        outcomes = request.getfixturevalue("refusals_in_one_child")[case["name"]]
    else:
        path = tmp_path / "case.json"
        path.write_text(json.dumps({"steps": case["steps"]}))
        outcomes = runner.run(path, timeout=120)  # a non-zero exit or a timeout fails the case
    assert not runner.differences(case, outcomes), runner.differences(case, outcomes)
    errors = [o for o in outcomes if "error" in o]
    assert len(errors) == sum(1 for s, o in zip(case["steps"], outcomes)
                              if "error" in s.get("expect", {}) and not o.get("skipped"))
    for o in errors:
        assert re.search(r"[.;)] fix: \S.*$", o["message"], re.S), o["message"]
