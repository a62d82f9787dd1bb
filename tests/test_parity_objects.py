"""Parity of the JVM layer with the Python reference for custom objects, pause/resume and the
exact statistics. Each recording side runs in its own child process (one session per process).
"""

import json
import subprocess

from child import FAST_JVM, ROOT, load_trace, run_scenario

# Same objects, same calls, through pyprof.objects (Python) and pyprof.profiler (JVM via JPype).
SCENARIO = """
cfg = dict(filename="trace.json", profile_symbolic=False, profile_imperative=False,
           profile_api=False, profile_memory=False, aggregate_stats=True, continuous_dump=False)
errors = []
if BINDING == "python":
    from pyprof import profiler
    from pyprof.objects import Counter, Domain, Event, Frame, Marker, Task
    profiler.set_config(**cfg)
    profiler.set_state("run")
    d = Domain("parity")
    t, f, e, c = Task(d, "task"), Frame(d, "frame"), Event("event"), Counter(d, "counter", 5)
    for i in range(3):
        t.start(); f.start(); e.start(); c.increment(2); e.stop(); f.stop(); t.stop()
    profiler.pause(); t.start(); t.stop(); profiler.resume()   # paused: not recorded
    c.decrement(1); Marker(d, "mark").mark("global")
    for call in (t.stop, lambda: c.decrement(100), lambda: Event('a"b')):
        try:
            call()
        except Exception as exc:
            errors.append(type(exc).__name__)
    profiler.set_state("stop")
    profiler.dump()
else:
    from pyprof import jvm
    p = jvm.require("pyprof.profiler")
    p.profiler_set_config({k.replace("_", "-"): v for k, v in cfg.items()})
    p.profiler_set_state("run")
    d = p.domain("parity")
    t, f, e, c = p.task(d, "task"), p.frame(d, "frame"), p.event("event"), p.counter(d, "counter", 5)
    for i in range(3):
        p.start(t); p.start(f); p.start(e); p.increment(c, 2); p.stop(e); p.stop(f); p.stop(t)
    p.pause(); p.start(t); p.stop(t); p.resume()
    p.decrement(c, 1); p.mark(d, "mark", "global")
    for call in (lambda: p.stop(t), lambda: p.decrement(c, 100), lambda: p.event('a"b')):
        try:
            call()
        except Exception as exc:
            errors.append(type(exc).__name__)
    p.profiler_set_state("stop")
    p.dump_profile(True)
result = errors
"""


def _events(path):
    from collections import Counter
    return Counter((e.get("name"), e.get("cat"), e["ph"], json.dumps(e.get("args"), sort_keys=True)
                    if e["ph"] == "C" else None)
                   for e in load_trace(path) if e["ph"] != "M" and e.get("cat") != "MXNET_C_API")


def test_custom_objects_pause_resume_and_errors_match(tmp_path):
    py = run_scenario("BINDING = 'python'\n" + SCENARIO, tmp_path / "py")
    jv = run_scenario("BINDING = 'jvm'\n" + SCENARIO, tmp_path / "jvm")
    assert py == jv == ["StateError", "StateError", "ConfigError"]
    e_py, e_jv = _events(tmp_path / "py" / "trace.json"), _events(tmp_path / "jvm" / "trace.json")
    assert e_py[("task", "parity", "b", None)] == 3      # the paused start/stop is not recorded
    assert e_py[("event", "event", "B", None)] == 3
    assert e_py == e_jv


def _jvm_stats(trace):
    """pyprof.stats/stats computed in a JVM (lein's classpath, cached by scripts/setup.sh)."""
    from pyprof import jvm
    code = ("(require 'pyprof.stats 'clojure.data.json)"
            f"(println (clojure.data.json/write-str (pyprof.stats/stats {json.dumps(str(trace))})))")
    cp = (ROOT / "jvm" / "target" / "classpath.txt").read_text().strip() if \
        (ROOT / "jvm" / "target" / "classpath.txt").exists() else ":".join(jvm.classpath())
    out = subprocess.run(["java", *FAST_JVM, "-cp", cp, "clojure.main", "-e", code], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_exact_statistics_agree_with_pyprof_trace_stats(tmp_path):
    """The JVM records a trace; Python's pyprof.trace.stats and the JVM's pyprof.stats read it."""
    run_scenario("""
from pyprof import jvm
p, nd = jvm.require("pyprof.profiler"), jvm.require("pyprof.example.ndarray")
p.profiler_set_config({"filename": "trace.json", "profile-imperative": True,
                       "continuous-dump": False, "aggregate-stats": True})
d = p.domain("stats")
c = p.counter(d, "n")
p.profiler_set_state("run")
for i in range(25):
    t = p.task(d, "step")
    p.start(t)
    a = nd.random_uniform(-1.0, 1.0, [16 + i, 16])
    nd.wait_to_read(a)
    nd.close(a)
    p.increment(c, i)
    p.stop(t)
p.profiler_set_state("stop")
p.dump_profile(True)
""", tmp_path)
    trace = tmp_path / "trace.json"
    from pyprof.trace import stats
    py = stats(trace)
    jv = _jvm_stats(trace)
    assert jv["units"] == {"time": "us", "memory": "bytes"}
    py_ops = {(o.category, o.name, o.device): o for o in py.operators}
    jv_ops = {(o["category"], o["name"], o["device"]): o for o in jv["operators"]}
    assert set(py_ops) == set(jv_ops) and ("stats", "step", "") in jv_ops
    for key, o in py_ops.items():
        j = jv_ops[key]
        for f in ("count", "total_us", "min_us", "max_us"):
            assert j[f.replace("_", "-")] == getattr(o, f), (key, f)
        for f in ("mean_us", "p50_us", "p90_us", "p99_us"):
            assert abs(j[f.replace("_", "-")] - getattr(o, f)) <= 1e-9 * max(1.0, abs(getattr(o, f))), (key, f)
    assert [o["name"] for o in jv["operators"]] == [o.name for o in py.operators]
    py_mem = {m.device: m for m in py.memory}
    for m in jv["memory"]:
        assert m["max-bytes"] == py_mem[m["device"]].max_bytes
        assert m["samples"] == py_mem[m["device"]].samples
    py_ctr = {(c.category, c.name): c for c in py.counters}
    for c in jv["counters"]:
        pc = py_ctr[(c["category"], c["name"])]
        assert (c["count"], c["min"], c["max"], c["last"]) == (pc.count, pc.min, pc.max, pc.last)
        assert abs(c["mean"] - pc.mean) <= 1e-9 * max(1.0, abs(pc.mean))
