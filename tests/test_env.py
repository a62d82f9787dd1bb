"""Environment helpers: PYPROF_AUTOSTART / PYPROF_MODE, per-operator mode, bulk notes."""

import os
import re
import subprocess
import sys

import pytest

from child import FAST_JVM, ROOT, load_trace, operator_pairs, run_scenario

import pyprof
from pyprof import env


def test_parse_mode():
    assert env.parse_mode("symbolic,imperative") == {
        "profile_symbolic": True, "profile_imperative": True, "profile_api": False,
        "profile_memory": False, "profile_all": False}
    assert all(env.parse_mode(" ALL ").values())
    assert env.parse_mode("api, memory")["profile_memory"] is True
    with pytest.raises(pyprof.ConfigError, match="did you mean 'imperative'"):
        env.parse_mode("symbolic,imperitive")
    with pytest.raises(pyprof.ConfigError, match="empty profiler mode"):
        env.parse_mode(" , ")


def test_config_from_environment():
    kw = env.config_from_environment({"PYPROF_MODE": "imperative", "PYPROF_FILENAME": "a.json",
                                      "PYPROF_AGGREGATE_STATS": "1", "PYPROF_DUMP_PERIOD": "0.5"})
    assert kw["profile_imperative"] and not kw["profile_symbolic"]
    assert kw["filename"].endswith("/a.json") and kw["aggregate_stats"] is True
    assert kw["dump_period"] == "0.5" and kw["continuous_dump"] is True
    with pytest.raises(pyprof.ConfigError, match="PYPROF_AGGREGATE_STATS"):
        env.config_from_environment({"PYPROF_AGGREGATE_STATS": "yes"})


@pytest.mark.parametrize("name, raw, problem", [
    ("PYPROF_MODE", "symbolc", "unknown profiler mode 'symbolc'"),
    ("PYPROF_MODE", ",", "empty profiler mode ','"),
    ("PYPROF_FILENAME", "/nonexistent-dir/run.json", "directory '/nonexistent-dir' does not exist"),
    ("PYPROF_DUMP_PERIOD", "abc", "invalid value 'abc' for profiler config key 'dump_period'")])
def test_a_bad_variable_is_named_in_its_error(name, raw, problem):
    # a new user's find: the error of a bad PYPROF_MODE at import never said PYPROF_MODE
    with pytest.raises(pyprof.ConfigError) as info:
        env.config_from_environment({name: raw})
    text = str(info.value)
    assert text.startswith(f"invalid {name}={raw!r}: ") and problem in text.split(" fix: ")[0]
    assert info.value.code == "env.bad_variable"
    assert info.value.fix.startswith(f"in {name}: ") and text.count(" fix: ") == 1
    with pytest.raises(pyprof.ConfigError, match="dump_period"):
        env.config_from_environment({"PYPROF_DUMP_PERIOD": "-1"})


def test_per_operator_sets_the_bulk_variables():
    fake = {}
    env.per_operator(fake)
    assert fake == {name: "0" for name in env.BULK_VARIABLES}
    assert {"MXNET_EXEC_BULK_EXEC_INFERENCE", "MXNET_EXEC_BULK_EXEC_TRAIN",
            "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN"} <= set(fake)


AUTOSTART = {"PYPROF_AUTOSTART": "1", "PYPROF_MODE": "symbolic,imperative",
             "PYPROF_FILENAME": "auto.json"}


def test_autostart_records_imperative_operators_and_finishes_at_exit(tmp_path):
    run_scenario("""
import pyprof            # starts the profiler (PYPROF_AUTOSTART=1)
import mxnet as mx
a = mx.nd.ones((8, 8))
for _ in range(3):
    mx.nd.dot(a, a)
# no stop, no dump: pyprof finishes the trace at exit
""", tmp_path, env=AUTOSTART)
    events = load_trace(tmp_path / "auto.json")
    assert len(operator_pairs(events, ("dot",))) == 3
    assert not any(e.get("cat") == "MXNET_C_API" for e in events)  # api not in PYPROF_MODE


def test_bad_mode_fails_at_import_with_the_fix(tmp_path):
    proc = run_scenario("import pyprof", tmp_path, expect_rc=None,
                        env={**AUTOSTART, "PYPROF_MODE": "imperativ"})
    assert proc.returncode == 1
    assert "did you mean 'imperative'" in proc.stderr


BOUND = """
import pyprof
import mxnet as mx
a = mx.nd.ones((8, 8))
c = mx.sym.relu(mx.sym.dot(mx.sym.var("A"), mx.sym.var("B")))
exe = c.bind(mx.cpu(), {"A": a, "B": a})
with pyprof.profile(path="bound.json") as prof:
    exe.forward()[0].wait_to_read()
s = prof.windows[0].stats(categories={"operator"})
result = {"names": sorted({o.name for o in s.operators}), "notes": s.notes,
          "summary": prof.windows[0].summary()}
"""


def test_bulk_names_are_explained_and_per_operator_mode_splits_them(tmp_path):
    bulk = run_scenario(BOUND, tmp_path / "bulk", fresh=True)  # bulking is set as libmxnet loads
    assert "[dot,relu]" in bulk["names"]
    assert any("MXNET_EXEC_BULK_EXEC_INFERENCE=0" in n for n in bulk["notes"])
    assert "MXNET_EXEC_BULK_EXEC_INFERENCE=0" in bulk["summary"]

    split = run_scenario(BOUND, tmp_path / "split", env={"PYPROF_PER_OPERATOR": "1"}, fresh=True)
    assert {"dot", "relu"} <= set(split["names"]) and "[dot,relu]" not in split["names"]
    assert not any("BULK" in n for n in split["notes"])


# --- every PYPROF_* variable is listed once (api.json environment); another one is said -------

_AUTOSTRT, _PER_OPERATR = "PYPROF_" "AUTOSTRT", "PYPROF_" "PER_OPERATR"  # (listed by no one)
_SOURCES = ("pyprof", "jvm/src", "jvm/test", "scripts", "tests", "bench", "examples", ".ci")
_VARIABLE = re.compile(r"\bPYPROF_[A-Z0-9_]*[A-Z0-9]\b")


def test_every_variable_the_sources_read_is_listed_and_documented():
    """The list cannot drift: a variable a source names is in api.json ``environment``, every
    listed one is named by a source, and docs/configuration.md's table holds the list."""
    listed = pyprof.rules.API["environment"]["variables"]
    named = set()
    for top in _SOURCES:
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and path.suffix in (".py", ".clj", ".java", ".sh", "") \
                    and "fixtures" not in path.parts:
                named |= set(_VARIABLE.findall(path.read_text(errors="replace")))
    assert sorted(named - set(listed)) == []
    assert sorted(set(listed) - named) == []
    doc = (ROOT / "docs" / "configuration.md").read_text().split("## Environment variables")[1]
    rows = re.findall(r"^\| `(PYPROF_[A-Z0-9_]+)` \| (.+) \|$", doc.split("\n## ")[0], re.M)
    assert rows == list(listed.items())


def test_an_unknown_variable_is_named_with_the_nearest():
    notes = env.unknown_variables({_AUTOSTRT: "1", "PYPROF_RAW_DIR": "/tmp",
                                   "PYPROFILE": "x", "MXNET_PROFILER_MODE": "15"})
    assert notes == [pyprof.rules.render(pyprof.rules.API["environment"]["unknown_note"], {
        "name": _AUTOSTRT, "nearest": "PYPROF_AUTOSTART"})]
    assert "did you mean PYPROF_AUTOSTART?" in notes[0]
    assert env.unknown_variables({"PYPROF_MODE": "api"}) == []


def test_import_and_the_jvm_say_an_unknown_variable_once(tmp_path):
    """`import pyprof` says it on stderr, a JVM on its own when pyprof.profiler loads: one line,
    one text; a program run with -W error still imports pyprof (it was a UserWarning)."""
    bad = {**os.environ, _PER_OPERATR: "1", "PYPROF_RAW_DIR": str(tmp_path)}
    py = subprocess.run([sys.executable, "-W", "error", "-c", "import pyprof"], env=bad, cwd=tmp_path,
                        capture_output=True, text=True, timeout=120)
    from pyprof import jvm
    clj = subprocess.run(["java", *FAST_JVM, "-cp", os.pathsep.join(jvm.classpath()),
                          "clojure.main", "-e", "(require 'pyprof.profiler)"], env=bad,
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    note = env.unknown_variables({_PER_OPERATR: "1"})[0]
    assert "did you mean PYPROF_PER_OPERATOR?" in note
    assert py.returncode == 0 and py.stderr.splitlines() == [note], py.stderr
    assert clj.returncode == 0 and clj.stderr.splitlines().count(note) == 1, clj.stderr
    assert "PYPROF_RAW_DIR" not in py.stderr + clj.stderr
