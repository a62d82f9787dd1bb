"""One tracker in a process (issue 20, item 4): a JPype-hosted JVM reads and writes Python's
tracker, so state, pause, the kept filename and session ownership are the same facts in both
languages; values and errors cross the bridge exactly. Each scenario runs in a child process with
a real JVM and real MXNet (one trace session per process)."""

from __future__ import annotations

import json

from child import load_trace, operator_pairs, run_scenario

from pyprof import errors, rules

DOT = "mx.nd.dot(mx.nd.ones((8, 8)), mx.nd.ones((8, 8))).wait_to_read()"


def test_the_jvm_layer_uses_pythons_tracker_and_names_the_same_fields(tmp_path):
    r = run_scenario("""
import jpype
from pyprof import jvm
from pyprof.process.tracker import TRACKER, Tracker
jvm.start()
t = jpype.JClass("pyprof.jvm.Tracker")
result = {"java": [str(f) for f in t.FIELDS], "python": list(Tracker.FIELDS),
          "attributes": sorted(k for k in vars(TRACKER) if k != "lock"),
          "proxy": not isinstance(t.current(), jpype.JClass("pyprof.jvm.LocalTracker"))}
""", tmp_path)
    assert r["java"] == r["python"]
    assert sorted(r["python"]) == r["attributes"]
    assert r["proxy"]


def test_a_config_without_filename_keeps_the_file_whichever_language_configured(tmp_path):
    """Python names a.json and runs; Clojure configures without a filename (it used to move the
    trace to ./profile.json while Python still said a.json); then Python does the same after
    Clojure; one valid a.json holds every event, with the parts both kept."""
    r = run_scenario(f"""
import os
import mxnet as mx
from pyprof import jvm, profiler
from pyprof.process.tracker import TRACKER
p = jvm.require("pyprof.profiler")
profiler.set_config(filename="a.json", profile_imperative=True)
profiler.set_state("run")
{DOT}
sent = p.profiler_set_config({{"profile-imperative": True, "profile-api": False}})
after_jvm = [profiler.current_config()["filename"], p.current_config()["filename"],
             profiler.current_config()["profile_api"]]
{DOT}
kept_by_jvm = list(TRACKER.kept_parts)
profiler.set_config(profile_imperative=True, profile_api=True)  # Python continues after Clojure
after_py = [profiler.current_config()["filename"], p.current_config()["filename"],
            p.current_config()["profile_api"]]
{DOT}
p.profiler_set_state("stop")
p.dump_profile(True)                              # the JVM finishes: joins both parts
result = {{"sent": sent["filename"], "after_jvm": after_jvm, "after_py": after_py,
          "kept_by_jvm": len(kept_by_jvm), "files": sorted(os.listdir("."))}}
""", tmp_path)
    a = str(tmp_path / "a.json")  # made absolute at configuration
    assert r["sent"] == a
    assert r["after_jvm"] == [a, a, "false"]
    assert r["after_py"] == [a, a, "true"]
    assert r["kept_by_jvm"] == 1, "the part the JVM kept is in Python's tracker"
    assert "profile.json" not in r["files"]
    assert not [f for f in r["files"] if "kept" in f], r["files"]
    assert len(operator_pairs(load_trace(tmp_path / "a.json"), ("dot",))) == 3


def test_a_jvm_config_that_keeps_the_file_is_finished_by_pythons_exit(tmp_path):
    """Clojure names a.json and runs; Python configures without a filename; nobody dumps: the
    file kept by the JVM's and Python's configs is one valid trace at exit."""
    r = run_scenario(f"""
import os
import mxnet as mx
from pyprof import jvm, profiler
p = jvm.require("pyprof.profiler")
p.profiler_set_config({{"filename": "a.json", "profile-imperative": True}})
p.profiler_set_state("run")
{DOT}
profiler.set_config(profile_imperative=True, profile_api=True)
{DOT}
p.profiler_set_config({{"profile-imperative": True}})
{DOT}
result = [profiler.current_config()["filename"], p.current_config()["filename"]]
""", tmp_path)
    assert r == [str(tmp_path / "a.json")] * 2
    assert not (tmp_path / "profile.json").exists()
    assert not [f for f in tmp_path.iterdir() if "kept" in f.name]
    assert len(operator_pairs(load_trace(tmp_path / "a.json"), ("dot",))) == 3


def test_the_jvm_resolves_relative_files_where_python_changed_directory(tmp_path):
    """A probe's find: the JVM made paths absolute against user.dir, fixed when JPype started
    it, while MXNet writes relative to the process's working directory, which Python changes:
    after os.chdir a kept relative file was invalid JSON and a stray copy appeared where the JVM
    had started. Now the JVM resolves against the process's directory (/proc/self/cwd)."""
    r = run_scenario(f"""
import os
import mxnet as mx
from pyprof import jvm
os.mkdir("B"); os.mkdir("A")
os.chdir("B")
p = jvm.require("pyprof.profiler")
os.chdir("../A")
p.profiler_set_config({{"filename": "t.json", "profile-imperative": True}})
p.profiler_set_state("run")
{DOT}
p.dump_profile(False)
p.profiler_set_config({{"profile-imperative": True}})   # keeps t.json: a part beside it
{DOT}
p.profiler_set_state("stop")
p.dump_profile(True)
os.chdir("..")
result = {{"A": sorted(os.listdir("A")), "B": sorted(os.listdir("B"))}}
""", tmp_path)
    assert r == {"A": ["t.json"], "B": []}
    assert len(operator_pairs(load_trace(tmp_path / "A" / "t.json"), ("dot",))) == 2


def test_running_paused_and_finished_are_one_state(tmp_path):
    r = run_scenario(f"""
import mxnet as mx
from pyprof import jvm, profiler
p = jvm.require("pyprof.profiler")
out = {{}}
profiler.set_config(filename="a.json", continuous_dump=False)
p.profiler_set_state("run")
out["py_after_jvm_run"] = profiler.state()
profiler.pause()
out["jvm_after_py_pause"] = p.state()
p.resume()
out["py_after_jvm_resume"] = profiler.state()
p.pause()
profiler.set_state("run")                         # running un-pauses, in both
out["jvm_after_py_run"] = p.state()
{DOT}
profiler.set_state("stop")
out["jvm_after_py_stop"] = p.state()
p.dump_profile(True)
out["py_after_jvm_dump"] = profiler.state()
try:
    profiler.set_state("run")
except Exception as e:
    out["py_run_after"] = [type(e).__name__, e.code]
result = out
""", tmp_path)
    assert r["py_after_jvm_run"] == {"running": True, "paused": False, "finished": False,
                                     "ever_ran": True}
    assert r["jvm_after_py_pause"]["paused"] is True and r["jvm_after_py_pause"]["running"]
    assert r["py_after_jvm_resume"]["paused"] is False
    assert r["jvm_after_py_run"]["paused"] is False and r["jvm_after_py_run"]["running"] is True
    assert r["jvm_after_py_stop"]["running"] is False
    assert r["py_after_jvm_dump"] == {"running": False, "paused": False, "finished": True,
                                      "ever_ran": True}
    assert r["py_run_after"] == ["StateError", "state.finished_run"]
    load_trace(tmp_path / "a.json")


def test_a_session_of_either_language_owns_the_profiler_for_both(tmp_path):
    r = run_scenario(f"""
import threading
import mxnet as mx
import pyprof
from pyprof import jvm, profiler
from pyprof.process.tracker import TRACKER
s = jvm.require("pyprof.session")
p = jvm.require("pyprof.profiler")
out = {{}}

def refused(name, fn):
    try:
        fn()
        out[name] = None
    except pyprof.PyprofError as e:
        out[name] = [type(e).__name__, e.code, e.fields.get("session")]

# A JVM session owns the profiler: Python's calls are refused, from any thread.
js = jvm.eval_clojure('(def js (pyprof.session/start! (pyprof.session/profile'
                      ' {{:path "jvm_{{window}}.json" :profile-imperative true}})))')
out["py_sees_session"] = TRACKER.session
refused("py_set_state", lambda: profiler.set_state("run"))
refused("py_config", lambda: profiler.set_config(filename="x.json"))
t = threading.Thread(target=refused, args=("py_thread_dump", lambda: profiler.dump(False)))
t.start(); t.join()
refused("py_session", lambda: pyprof.profile(path="py_{{window}}.json").start())
{DOT}
# its steps run as the owner on a Java thread too (the owner identity crosses the bridge)
out["jvm_step_on_java_thread"] = jvm.eval_clojure(
    '(do (deref (future (pyprof.session/step! js))) (:step (pyprof.session/session-state js)))')
out["jvm_windows"] = len(jvm.eval_clojure('(pyprof.session/stop! js)'))
out["py_after_jvm_stop"] = TRACKER.session

# A Python session owns it: the JVM's calls are refused.
ps = pyprof.profile(path="py_{{window}}.json", profile_imperative=True)
ps.start()
refused("jvm_set_state", lambda: p.profiler_set_state("run"))
refused("jvm_config", lambda: p.profiler_set_config({{"filename": "x.json"}}))
refused("jvm_session", lambda: jvm.eval_clojure(
    '(pyprof.session/start! (pyprof.session/profile {{:path "j2_{{window}}.json"}}))'))
out["jvm_sees_session"] = p.state()["session"]
{DOT}
ps.step()
ps.stop()
out["py_windows"] = len(ps.windows)
out["state_after"] = p.state()
jvm.eval_clojure("(shutdown-agents)")  # the future above: else the JVM waits a minute at exit
result = out
""", tmp_path)
    assert r["py_sees_session"] is not None
    for name in ("py_set_state", "py_config", "py_thread_dump"):
        assert r[name] == ["StateError", "state.session_owns", r["py_sees_session"]], name
    assert r["py_session"][:2] == ["StateError", "session.nested"]
    assert r["jvm_step_on_java_thread"] == 1
    assert r["jvm_windows"] == 1 and r["py_after_jvm_stop"] is None
    assert r["jvm_sees_session"] is not None
    for name in ("jvm_set_state", "jvm_config"):
        assert r[name] == ["StateError", "state.session_owns", r["jvm_sees_session"]], name
    assert r["jvm_session"][:2] == ["StateError", "session.nested"]
    assert r["py_windows"] == 1 and r["state_after"]["session"] is None
    assert len(operator_pairs(load_trace(tmp_path / "jvm_0.json"), ("dot",))) == 1
    # (by name: a Python session after a JVM one lacks the metadata events the JVM's raw trace
    # reader took from the process's first raw file, so its device pids are not named)
    assert [e["ph"] for e in load_trace(tmp_path / "py_0.json")
            if e.get("name") == "dot" and e["ph"] in "BE"] == ["B", "E"]
    assert not (tmp_path / "x.json").exists()


# ------------------------------------------------------------------ values


VALUES = r"""
from fractions import Fraction
from decimal import Decimal
from pyprof.jvm import Keyword, StringKey
VALUES = [None, True, False, 0, -1, 2**63 - 1, 2**63, 2**64 - 1, 2**70, -2**63, -2**63 - 1,
          -2**70, 1.5, -0.0, 1e300, "", "plain", "q\"uote\\back", "\U0001F600 non-BMP \u00e9",
          Keyword("cpu"), Keyword("pyprof/error"), [1, [True, None], "x"], [],
          {"a": 1, "b": [False, {"c": None}]}, {StringKey("filename"): "a.json"}, {},
          {1: "one"}, Fraction(1, 3), Decimal("1.25"), {1, 2}]
"""

#: Clojure forms whose values go JVM -> Python -> JVM.
FORMS = ["nil", "true", "false", "9223372036854775807", "9223372036854775808N",
         "18446744073709551615N", "1180591620717411303424N", "-9223372036854775809N", "-1", "1.5",
         r'"\uD83D\uDE00 q\"\\"', ":cpu", ":pyprof/error", '[1 [true nil] "x"]',
         "{:a true :b [false {:c nil}]}", '{"filename" "a.json" "profile_api" "true"}',
         '{1 "one"}', "1/3", "1.25M", "#{1 2}", "[]", "{}", "(list 1 2)"]
#: Forms whose value comes back equal but not printed the same: a list goes back as a vector.
EQUAL_ONLY = {"(list 1 2)"}


def _same(a, b) -> bool:
    """Equal, with the same types all the way down (bool is no int; a Keyword key equals its
    str)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b and repr(a) == repr(b)


def test_values_round_trip_exactly_both_ways(tmp_path):
    import inspect
    r = run_scenario(VALUES + inspect.getsource(_same) + """
import json
import jpype
from pyprof import jvm
from pyprof.jvm import to_clojure, to_python
identity = jvm.require("clojure.core")["identity"]
p = jvm.require("pyprof.profiler")
out = {}
out["py_jvm_py"] = [[repr(v), _same(v, identity(v))] for v in VALUES]
# JVM -> Python -> JVM: equal (clojure.core/=) and printed the same
rt = jpype.JClass("clojure.java.api.Clojure")
ev, eq, pr = (rt.var("clojure.core", n) for n in ("eval", "=", "pr-str"))
out["jvm_py_jvm"] = []
for f in json.loads(FORMS_JSON):
    made = ev.invoke(rt.read(f))
    back = to_clojure(to_python(made))
    out["jvm_py_jvm"].append([f, bool(eq.invoke(made, back)),
                              str(pr.invoke(made)) == str(pr.invoke(back))])
# booleans are bool wherever they come from: a map, a vector, a JPype call's java.lang.Boolean
m = jvm.eval_clojure('{:b true :v [false true] :m {:x false}}')
java_bool = jpype.JClass("java.lang.Boolean").valueOf(True)
facade = to_python(jpype.JClass("pyprof.jvm.Profiler").state())
out["types"] = [type(m["b"]).__name__, [type(x).__name__ for x in m["v"]],
                type(m["m"]["x"]).__name__, type(to_python(java_bool)).__name__,
                sorted({type(x).__name__ for x in facade.values()})]
# a map from the JVM handed back: its booleans are booleans there
check = jvm.eval_clojure("(fn [m] (and (true? (:b m)) (false? (first (:v m))) (false? (:x (:m m)))))")
out["handed_back"] = jvm.require("clojure.core")["apply"](check, [m])
# counters at the ends of their range, read through the bridge
out["counter"] = [jvm.eval_clojure(
    '(let [c (pyprof.profiler/counter (pyprof.profiler/domain "d") "c%d")]'
    ' (pyprof.profiler/set-counter c %s) (pyprof.profiler/counter-value c))' % (i, v))
    for i, v in enumerate(["18446744073709551615N", "9223372036854775808N", "9223372036854775807",
                           "0"])]
c = p.counter(p.domain("py"), "big")
p.set_counter(c, 2**64 - 1)
out["counter_from_python"] = [p.counter_value(c), type(p.counter_value(c)).__name__]
result = out
""".replace("FORMS_JSON", repr(json.dumps(FORMS))), tmp_path)
    bad = [v for v, ok in r["py_jvm_py"] if not ok]
    assert not bad, f"Python -> JVM -> Python changed: {bad}"
    bad = [f for f, same, printed in r["jvm_py_jvm"]
           if not (same and (printed or f in EQUAL_ONLY))]
    assert not bad, f"JVM -> Python -> JVM changed: {bad}"
    assert r["types"] == ["bool", ["bool", "bool"], "bool", "bool", ["bool"]]
    assert r["handed_back"] is True
    assert r["counter"] == [2**64 - 1, 2**63, 2**63 - 1, 0]
    assert r["counter_from_python"] == [2**64 - 1, "int"]


def test_same_helper_tells_types_apart():
    assert _same({"a": [True]}, {"a": [True]})
    assert not _same([True], [1]) and not _same(1, 1.0) and not _same({"a": 1}, {"a": True})


# ------------------------------------------------------------------ errors


def _sample_fields(entry: dict) -> dict:
    import re
    names = {m.group(2) for t in (entry["message"], entry["fix"])
             for m in re.finditer(r"\{(api\.)?([a-z_]+)(!r)?\}", t) if not m.group(1)}
    return {n: (["a", "b"] if n == "choices" else f"<{n}>") for n in sorted(names)}


def test_every_error_kind_becomes_its_python_class_with_code_fix_and_fields(tmp_path):
    catalogue = rules.CATALOGUE["errors"]
    picks = {}
    for code in sorted(catalogue):
        kind = catalogue[code]["kind"]
        if kind != "mxnet":
            picks.setdefault(kind, code)
    assert set(picks) | {"mxnet"} == set(rules.API["error_kinds"]), "a kind with no error"
    cases = {code: _sample_fields(catalogue[code]) for code in picks.values()}
    r = run_scenario(f"""
import pyprof
from pyprof import jvm
cases = {json.dumps(cases)}
out = {{}}
jvm.require("pyprof.rules")
throw = jvm.eval_clojure("(fn [code fields] (throw (pyprof.rules/error code fields)))")
for code, fields in cases.items():
    try:
        jvm.require("clojure.core")["apply"](throw, [code, fields])
        out[code] = None
    except pyprof.PyprofError as e:
        out[code] = {{"class": type(e).__name__, "code": e.code, "fix": e.fix, "fields": e.fields,
                     "message": str(e), "data_fix": e.data["fix"]}}
# Java-phrased: an error of the Java facade carries the Java fix
try:
    jvm.eval_clojure('(throw (pyprof.jvm.PyprofException/catalogue "state.invalid"'
                     ' (into-array Object ["state" "go" "choices" ["stop" "run"]])))')
except pyprof.PyprofError as e:
    out["java"] = {{"class": type(e).__name__, "code": e.code, "fix": e.fix,
                   "java_fix": e.data["java-fix"], "message": str(e), "fields": e.fields}}
# MXNet's own failure: MXNetError with .function and .mxnet_message, Python's message
try:
    jvm.call("pyprof.example.ndarray", "op-handle", "pyprof_no_such_op")
except pyprof.MXNetError as e:
    out["mxnet"] = {{"class": type(e).__name__, "function": e.function,
                    "mxnet_message": e.mxnet_message, "message": str(e), "fix": e.fix,
                    "python": str(pyprof.MXNetError(e.function, e.mxnet_message))}}
result = out
""", tmp_path)
    for kind, code in picks.items():
        got = r[code]
        assert got is not None, f"{code}: nothing raised"
        expected = rules.error(code, **cases[code]) if kind != "mxnet" else None
        assert got["class"] == type(expected).__name__ == rules.API["error_kinds"][kind]["python"]
        assert got["code"] == expected.code == code
        assert got["fields"] == expected.fields == cases[code], code
        assert got["fix"] == got["data_fix"] and got["message"].endswith(" fix: " + got["fix"])
        template = catalogue[code]["fix"]
        if "!r}" not in template and "{choices}" not in template and "{api." not in template:
            assert got["fix"] == expected.fix, code  # the same text where nothing is a literal
    java = r["java"]
    assert java["class"] == "StateError" and java["code"] == "state.invalid"
    assert java["fix"] == java["java_fix"] and java["message"].endswith(" fix: " + java["fix"])
    assert java["fields"] == {"state": "go", "choices": ["stop", "run"]}
    mx = r["mxnet"]
    assert mx["class"] == "MXNetError" and mx["function"] == "NNGetOpHandle"
    assert "not registered" in mx["mxnet_message"]
    assert mx["message"] == mx["python"], "as a Python-side MXNetError reads"
    assert mx["fix"] == errors.MXNetError.default_fix


def test_a_jvm_session_open_at_pythons_exit_saves_its_window(tmp_path):
    """A JVM session opened through the bridge and never stopped: Python's exit runs what the
    JVM's shutdown hook would (JPype's JVM has none), so its window is saved and the raw trace
    deleted, as for a Python session (before, only a .partial and the raw directory were left)."""
    raw = tmp_path / "raw"
    raw.mkdir()
    run_scenario(f"""
import mxnet as mx
from pyprof import jvm
s = jvm.require("pyprof.session")
session = s.profile({{"path": "j_{{window}}.json", "profile-imperative": True}})
s["start!"](session)
{DOT}
""", tmp_path, env={"PYPROF_RAW_DIR": str(raw)})
    assert sorted(p.name for p in tmp_path.glob("j_*")) == ["j_0.json"]
    assert len(operator_pairs(load_trace(tmp_path / "j_0.json"), ("dot",))) == 1
    assert list(raw.iterdir()) == []  # the session's raw directory went with it
