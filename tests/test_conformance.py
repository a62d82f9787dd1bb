"""The conformance suite, Python side: every scenario under tests/conformance/scenarios runs
through the Python reference and must give the outcomes it states; every public function of
the Python API must be exercised by some scenario (the JVM side, conformance_test.clj, checks
the same for Clojure and Java)."""

from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "conformance"))

import runner  # noqa: E402

import pyprof  # noqa: E402
from pyprof import profiler  # noqa: E402

BINDINGS = json.loads((runner.HERE / "bindings.json").read_text())["calls"]


@pytest.mark.parametrize("path", runner.scenario_files(), ids=lambda p: p.stem)
def test_the_python_reference_gives_each_scenarios_outcomes(path):
    scenario = runner.load(path)
    diffs = runner.differences(scenario, runner.run(path))
    assert not diffs, f"{path.name}:\n" + "\n".join(diffs)


def _member(owner, attr):
    """The object behind ``owner.attr``: inherited methods and properties are one object; an
    instance attribute (documented under Attributes in the class docstring) is its name."""
    for klass in inspect.getmro(owner) if inspect.isclass(owner) else ():
        if attr in vars(klass):
            return vars(klass)[attr]
    if inspect.isclass(owner) and not hasattr(owner, attr):
        assert f"{attr}:" in (owner.__doc__ or ""), f"{owner.__name__}.{attr} is not documented"
        return f"{owner.__name__}.{attr}"
    return getattr(owner, attr)


def _resolve(dotted: str):
    """The object a binding's dotted Python name stands for (module, then attributes)."""
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:-1]:
            owner = getattr(owner, attr)
        return _member(owner, parts[-1])
    raise AssertionError(f"{dotted}: no module")


def _python_api() -> dict[int, str]:
    """The public functions, classes and members of the profiler API (id -> a name)."""
    api: dict[int, str] = {}
    for module, exported in ((profiler, profiler.__all__), (pyprof, pyprof.__all__)):
        for name in exported:
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, BaseException) or name == "__version__":
                continue
            api.setdefault(id(obj), f"{module.__name__}.{name}")
            if inspect.isclass(obj) and not issubclass(obj, enum.Enum):
                data = {f.name for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) \
                    else set()  # a record's fields are data, not functions
                for m in dir(obj):
                    if not m.startswith("_") and m not in data:
                        api.setdefault(id(_member(obj, m)), f"pyprof.{name}.{m}")
    return api


def test_every_public_python_function_is_covered_by_a_scenario():
    used = {step["call"] for path in runner.scenario_files()
            for step in runner.load(path)["steps"]}
    paths = {BINDINGS[call]["python"] for call in used if call in BINDINGS}
    covered = {id(_resolve(p)) for p in paths}
    # A class is covered when a scenario constructs it or calls one of its members.
    covered |= {id(_resolve(p.rsplit(".", 1)[0])) for p in paths if p.count(".") >= 2}
    missing = sorted(name for key, name in _python_api().items() if key not in covered)
    assert missing == [], "public functions no scenario calls (add a binding and a step):\n" + \
        "\n".join(missing)


def test_every_binding_names_a_real_python_function_and_says_why_one_is_missing():
    for call, b in BINDINGS.items():
        assert _resolve(b["python"]) is not None, f"{call}: {b['python']} does not exist"
        if "same_as" not in b:
            for lang in ("clojure", "java"):
                assert b.get(lang) is not None or b.get("why"), f"{call}: no {lang} binding, no why"


def test_the_golden_traces_still_give_their_committed_statistics():
    """Committed traces with the statistics Python computed for them: the JVM's stats_test
    checks its implementation against the same files, so both agree through them."""
    script = runner.ROOT / "tests" / "fixtures" / "make_expected_stats.py"
    proc = subprocess.run([sys.executable, str(script), "--check"], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
