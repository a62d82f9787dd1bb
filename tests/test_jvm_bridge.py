"""The JPype bridge: one JVM per process, bound to the libmxnet Python loaded."""

from child import load_trace, run_scenario


def test_jvm_binds_to_the_library_python_loaded_and_shares_the_profiler(tmp_path):
    r = run_scenario("""
import mxnet as mx
import pyprof.native.capi as capi
from pyprof import jvm, profiler
p = jvm.require("pyprof.profiler")
# Configure from the JVM, record from both, dump from Python: one trace.
sent = p.profiler_set_config({"filename": "t.json", "profile-imperative": True,
                              "continuous-dump": False, "aggregate-stats": True})
p.profiler_set_state("run")
mx.nd.dot(mx.nd.ones((8, 8)), mx.nd.ones((8, 8))).wait_to_read()
profiler.dump()
jpype_prop = str(__import__("jpype").java.lang.System.getProperty("mxnet.library.path"))
result = {"sent": sent, "prop": jpype_prop, "py": capi.library_path()}
""", tmp_path)
    assert r["prop"] == r["py"]
    assert r["sent"]["profile_imperative"] == "true" and r["sent"]["filename"] == str(tmp_path / "t.json")
    from child import load_trace, operator_pairs
    assert len(operator_pairs(load_trace(tmp_path / "t.json"), ("dot",))) == 1


def test_start_twice_and_after_shutdown_are_clear_errors(tmp_path):
    r = run_scenario("""
from pyprof import jvm, JVMError
out = []
jvm.start()
try:
    jvm.start()
except JVMError as e:
    out.append(str(e))
jvm.shutdown()
try:
    jvm.start()
except JVMError as e:
    out.append(str(e))
try:
    jvm.call("pyprof.profiler", "pause")
except JVMError as e:
    out.append(str(e))
result = out
""", tmp_path)
    assert "already running" in r[0]
    assert "cannot start again" in r[1] and "cannot start again" in r[2]


def test_jvm_errors_become_pyprof_errors_with_their_data(tmp_path):
    r = run_scenario("""
import pyprof
from pyprof import jvm
p = jvm.require("pyprof.profiler")
out = {}
for name, call in [("key", lambda: p.profiler_set_config({"profile-symbolc": True})),
                   ("value", lambda: p.profiler_set_config({"profile-api": "yes"})),
                   ("state", lambda: p.profiler_set_state("go")),
                   ("dump", lambda: p.dump_profile(True)),
                   ("c", lambda: jvm.call("pyprof.example.ndarray", "op-handle", "pyprof_no_such_op")),
                   ("ns", lambda: jvm.require("pyprof.profilr")),
                   ("fn", lambda: p.profiler_set_confg({})),
                   # a new user's finds: wrong nearest, a fix that is no Python, bare TypeErrors
                   ("part", lambda: p.set_config({})),
                   ("bang", lambda: jvm.require("pyprof.session").start_BANG_(None)),
                   ("kwargs", lambda: p.profiler_set_config(filename="x.json")),
                   ("call_kw", lambda: jvm.call("pyprof.profiler", "dump-profile", finished=True)),
                   ("ns_type", lambda: jvm.require(5)),
                   # a probe's find: a lone surrogate (os.listdir's for a non-UTF-8 name) was a
                   # bare UnicodeEncodeError at the bridge, and JPype's fatal one on the way back
                   ("sur_path", lambda: p.profiler_set_config({"filename": "x\\udcff.json"})),
                   ("sur_name", lambda: jvm.require("pyprof.objects").domain("d\\udcff"))]:
    try:
        call()
    except pyprof.PyprofError as e:
        out[name] = [type(e).__name__, str(e), getattr(e, "data", None)]
out["round_trip"] = jvm.call("clojure.core", "identity", "a\\udcffb") == "a\\udcffb"
out["interned"] = jvm.call("clojure.core", "ns-resolve", jvm.call("clojure.core", "symbol", "pyprof.profiler"),
                           jvm.call("clojure.core", "symbol", "profiler-set-confg")) is not None
result = out
""", tmp_path)
    kind, message, data = r["key"]
    assert kind == "ConfigError" and "profile_symbolic" in message
    assert data["pyprof/error"] == "invalid-config" and data["nearest"] == "profile_symbolic"
    assert r["value"][0] == "ConfigError" and "yes" in r["value"][1]
    assert r["state"][0] == "StateError"
    assert r["dump"][0] == "StateError" and "before the profiler ran" in r["dump"][1]
    kind, message, data = r["c"]  # MXNet's own error, from a real failing C call
    assert kind == "MXNetError" and data["fn"] == "NNGetOpHandle"
    assert "not registered" in data["mxnet-error"]
    assert message.startswith("NNGetOpHandle failed:")
    # a misspelt namespace: was Clojure's bare java.io.FileNotFoundException
    kind, message, _ = r["ns"]
    assert kind == "JVMError" and message.startswith(
        "no Clojure namespace 'pyprof.profilr' on the JVM's classpath (Could not locate pyprof/profilr__init.class")
    assert message.endswith("fix: check the name: pyprof's are pyprof.profiler, pyprof.objects, "
                            "pyprof.session, pyprof.stats and pyprof.steady")
    # a misspelt function: was Clojure's IllegalStateException of an unbound var it interned
    assert r["fn"][:2] == ["JVMError", (
        "no public function 'profiler-set-confg' in Clojure namespace 'pyprof.profiler'; the "
        "nearest is 'profiler-set-config'. fix: call ns.profiler_set_config (an attribute names the "
        "function with _ for -; ns[\"name\"] takes any name)")]
    assert r["interned"] is False
    assert "the nearest is 'profiler-set-config'. fix: call ns.profiler_set_config " in r["part"][1]
    assert "the nearest is 'start!'. fix: call ns['start!'] " in r["bang"][1]
    assert r["kwargs"][:2] == ["JVMError", (
        "Clojure function pyprof.profiler/profiler-set-config takes positional arguments, not "
        "keyword arguments (filename); its argument lists are ([options]). fix: pass the "
        "arguments by position, an options map as one dict (as in "
        "profiler_set_config({\"filename\": \"t.json\"}))")]
    assert "its argument lists are ([] [finished] [finished profile-process])" in r["call_kw"][1]
    assert r["ns_type"][0] == "JVMError" and "a namespace is named by a str" in r["ns_type"][1]
    assert r["sur_path"][0] == "ConfigError" and "lone surrogate U+DCFF" in r["sur_path"][1]
    assert r["sur_name"][0] == "ConfigError" and "lone surrogate U+DCFF" in r["sur_name"][1]
    assert r["round_trip"] is True


def test_jit_compiled_npes_survive_libmxnet_loaded_first(tmp_path):
    """MXNet installs a SIGSEGV handler; the JVM's implicit null checks must still work."""
    r = run_scenario("""
import mxnet as mx
from pyprof import jvm
mx.nd.ones((4, 4)).wait_to_read()
result = jvm.eval_clojure("(let [f (fn [^String s] (try (.length s) (catch NullPointerException _ -1)))]"
          " (loop [i 0 acc 0] (if (< i 300000) (recur (inc i) (+ acc (f (when (odd? i) \\"ab\\")))) acc)))")
""", tmp_path)
    assert r == 150000 * 2 - 150000  # odd i: +2, even i: -1


def test_one_session_guard_across_the_bridge(tmp_path):
    """A finished dump in either language ends the process's one trace session for both."""
    r = run_scenario("""
import mxnet as mx
from pyprof import jvm, profiler
p = jvm.require("pyprof.profiler")
p.profiler_set_config({"filename": "a.json", "continuous-dump": False})
p.profiler_set_state("run")
mx.nd.dot(mx.nd.ones((8, 8)), mx.nd.ones((8, 8))).wait_to_read()
p.profiler_set_state("stop")
p.dump_profile(True)                      # the JVM finishes the trace
attempt("py_run", lambda: profiler.set_state("run"))
attempt("py_config", lambda: profiler.set_config(filename="b.json"))
result = errors
""", tmp_path / "jvm-first")
    assert r["py_run"][0] == "StateError" and r["py_config"][0] == "StateError"
    load_trace(tmp_path / "jvm-first" / "a.json")  # still valid JSON

    r = run_scenario("""
import mxnet as mx
from pyprof import jvm, profiler
profiler.set_config(filename="a.json", continuous_dump=False)
profiler.set_state("run")
mx.nd.dot(mx.nd.ones((8, 8)), mx.nd.ones((8, 8))).wait_to_read()
profiler.set_state("stop")
profiler.dump()                           # Python finishes the trace, before the JVM starts
p = jvm.require("pyprof.profiler")
attempt("jvm_config", lambda: p.profiler_set_config({"filename": "b.json"}))
attempt("jvm_run", lambda: p.profiler_set_state("run"))
result = errors
""", tmp_path / "py-first")
    assert r["jvm_config"][0] == "StateError" and r["jvm_run"][0] == "StateError"
    assert not (tmp_path / "py-first" / "b.json").exists()
    load_trace(tmp_path / "py-first" / "a.json")


def test_namespace_handles_after_shutdown_raise_jvm_error(tmp_path):
    r = run_scenario("""
import jpype
from pyprof import jvm
p = jvm.require("pyprof.profiler")
pause = p["pause"]
jvm.shutdown()
attempt("old_handle", pause)
result = errors
""", tmp_path)
    assert r["old_handle"][0] == "JVMError"


def test_the_classpath_cache_is_rebuilt_for_another_checkout_or_newer_sources(tmp_path):
    import os
    import time

    from pyprof.jvm import stale_reason

    d = tmp_path / "jvm"
    (d / "src" / "clj" / "pyprof").mkdir(parents=True)
    (d / "target" / "classes").mkdir(parents=True)
    (d / "project.clj").write_text("(defproject x)")
    src = d / "src" / "clj" / "pyprof" / "a.clj"
    src.write_text("(ns pyprof.a)")
    cache = d / "target" / "classpath.txt"
    assert "missing" in stale_reason(d, cache)
    other = "/elsewhere/jvm/src/clj:/elsewhere/jvm/target/classes:/root/.m2/x.jar"
    cache.write_text(other)
    assert "another checkout" in stale_reason(d, cache)
    cache.write_text(os.pathsep.join([str(d / "src" / "clj"), str(d / "target" / "classes"),
                                      "/root/.m2/x.jar"]))
    past = time.time() - 100
    for p in (d / "project.clj", src):
        os.utime(p, (past, past))
    assert stale_reason(d, cache) is None
    src.write_text("(ns pyprof.a) ; edited")
    assert "a.clj is newer" in stale_reason(d, cache)
