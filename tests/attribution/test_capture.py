"""Capture of imperative calls and their matching (issue 22): real MXNet, sessions in child
processes (tests/child.py). Each scenario records one window and returns what its trace says."""

from __future__ import annotations

import json

import pytest

from pyprof.native import shim
from tests.child import run_scenario

_LOOP = """
import json, random, numpy as np, pyprof, mxnet as mx
from pyprof.attribution.matching import BOOKKEEPING, ARGS
rng = random.Random(SEED)
shapes = [(8, 16), (16, 16), (4, 16), (32, 8)]
PLANT
# one warm-up step before the window: MXNet's one-time ResourceParallelRandomSetSeed (the
# first resource use of a process) holds back queued operators in ways matching does not model
w = mx.nd.dot(mx.nd.ones((4, 4)), mx.nd.ones((4, 4))) + 1; mx.nd.sum(mx.nd.exp(w)).wait_to_read()
with pyprof.profile(path="w.json", record_shapes=True, with_flops=True) as p:
    live = [mx.nd.ones(s) for s in shapes]
    for i in range(300):
        x = rng.choice(live)
        k = rng.randrange(10)
        if k == 0: y = mx.nd.relu(x)
        elif k == 1: y = x + 1
        elif k == 2: y = mx.nd.exp(x)
        elif k == 3: y = mx.nd.dot(x, mx.nd.ones((x.shape[1], 8)))
        elif k == 4: y = mx.nd.broadcast_add(x, mx.nd.ones((1, x.shape[1])))
        elif k == 5: y = mx.nd.sum(x, axis=1, keepdims=True)
        elif k == 6: y = mx.nd.transpose(x)
        elif k == 7: y = x * x
        elif k == 8: y = x.reshape((x.shape[1], x.shape[0]))  # a view: a new handle, x's variable
        else: y = mx.nd.array(np.ones(x.shape[::-1], "float32"))  # made by no operator
        if rng.random() < 0.5: live[rng.randrange(len(live))] = y
    mx.nd.waitall()
events = json.load(open("w.json"))["traceEvents"]
ops = [e for e in events if e.get("ph") == "B" and e.get("cat") == "operator"]
result = {"report": p.windows[0].attribution.as_dict(),
          "without": sorted({e["name"] for e in ops if ARGS["input_dims"] not in (e.get("args") or {})
                             and e["name"] not in BOOKKEEPING}),
          "bad_memory": [e["name"] for e in ops if (e.get("args") or {}).get(ARGS["memory_check"]) is False],
          "bad_exact": [e["name"] for e in ops if (e.get("args") or {}).get(ARGS["memory_check"]) is False
                        and e["args"].get(ARGS["match"]) == "exact"],
          "no_memory_check": sum(1 for e in ops if ARGS["match"] in (e.get("args") or {}) and ARGS["memory_check"] not in e["args"]),
          # unary operators: the input's recorded shape is the output's (stale cache entries break it)
          "inconsistent": [e["args"][ARGS["input_dims"]] for e in ops if e["name"] in ("relu", "exp", "_plus_scalar")
                           and e["args"][ARGS["input_dims"]][0] != e["args"][ARGS["output_dims"]][0]],
          "flops": sorted({(tuple(map(tuple, e["args"][ARGS["input_dims"]])), e["args"].get(ARGS["flops"])) for e in ops if e["name"] == "dot" and "args" in e}),
          }
import pyprof.trace
result["valid"] = pyprof.trace.validate("w.json").ok
st = pyprof.trace.stats("w.json", categories={"operator"})
sh = pyprof.trace.stats("w.json", categories={"operator"}, by="shape")
result["totals"] = [sorted([list(k), v] for k, v in sh.totals().items()),
                    sorted([[o.category, o.name, o.device], o.total_us] for o in st.operators)]
result["calls"] = [sum(g.count for g in sh.groups), sum(o.count for o in st.operators)]
result["dot_groups"] = [[g.input_dims, g.count, g.flops, g.gflops_per_s] for g in sh.groups if g.name == "dot"]
result["summary"] = pyprof.trace.summarize("w.json", by="shape")
"""


# Planted bugs, each of which the random loop must catch: the shape cache not evicted at
# MXNDArrayFree (addresses are reused; in the Python and the native recorder), and matching each
# event to the first unmatched call of its name (no dependencies).
_PLANTS = {
    "no_eviction": """
from pyprof.attribution import capture as _c
from pyprof.native import shim as _shim
_c.Recorder._make_free = lambda self, raw: raw
_shim.NativeStore.make_free = lambda self, raw: raw
""",
    "first_same_name": """
from pyprof.attribution import matching as _m
_orig = _m.match
def _first(calls, events, **kw):
    for c in calls:
        c.producers = ()
        c.pushed_us = c.t_us - c.seq  # earliest call first
    return _orig(calls, events, **kw)
_m.match = _first
""",
}


def _loop(seed: int, plant: str = "") -> str:
    return _LOOP.replace("SEED", str(seed)).replace("PLANT", plant)


@pytest.mark.parametrize("seed", [7, 11])
def test_random_loop_every_operator_event_carries_shapes_and_the_memory_check_passes(tmp_path, seed):
    r = run_scenario(_loop(seed), tmp_path, timeout=120)
    rep = r["report"]
    assert r["without"] == [], r["report"]
    assert rep["matched"] == rep["calls"] == rep["events"] > 280
    assert r["inconsistent"] == []
    # labelled, not claimed: ties the rule cannot order (two calls made ready by one completion
    # through different engine variables, or a push racing a completion), decided by the
    # memory counter where it tells them apart. 40 runs here (docs/attribution.md): 0
    # mismatches; per run at most 27 unchecked (66 interleaved, 37 first samples and 2 decided
    # by memory in all) and at most 4 labelled
    assert rep["exact"] + rep["ambiguous"] + rep["by_memory"] == rep["matched"]
    # the rule's ties (the matches the memory check turned ambiguous counted apart, below): how
    # many, the engine's timing decides (at most 4 a run on a quiet machine, 14 in a loaded CI
    # run), so the test asserts what they cannot reach: the rule decides most events, as a rule
    # that gave up would not
    failed = rep["memory_checked"] - rep["memory_passed"]
    assert rep["exact"] >= 0.9 * rep["matched"], rep
    # the memory check: a label is a proof, so a match whose check fails is never exact; fails
    # are the counter model's misses (a sample stamped at a neighbour's microsecond): 0 to 2 a
    # run on a quiet machine, none where the rule matched wrongly (the planted case fails 20+)
    unchecked = rep["memory_unchecked"]
    assert r["bad_exact"] == [], r["bad_exact"]
    assert rep["memory_checked"] - rep["memory_passed"] == len(r["bad_memory"]) <= 5, r["bad_memory"]
    assert rep["memory_checked"] + sum(unchecked.values()) == rep["matched"]
    assert r["no_memory_check"] == sum(unchecked.values())
    assert set(unchecked) <= {"first_sample", "interleaved", "shared_stamp", "matched_by_memory"}, unchecked
    assert unchecked.get("first_sample", 0) <= 1 and unchecked.get("matched_by_memory", 0) == rep["by_memory"]
    # how many the calling thread's frees interleave, the load decides: 1-70 of about 300 beside
    # the JVM suite, 93 of 299 beside two busy loops. When a trace tells a rise and when not is
    # tests/attribution/test_memory.py's (synthetic stamps); here, that the checker checks where
    # the trace tells (a checker that gave up checks none)
    assert rep["memory_checked"] > 0, unchecked
    # dot (M x K) . (K x 8): 2*M*K*8 FLOPs, from the recorded shapes
    assert r["flops"] and all(f == 2 * dims[0][0] * dims[0][1] * dims[1][1] for dims, f in r["flops"])
    assert r["valid"] is True
    # grouped by shape, the totals are the ungrouped ones, per operator
    assert r["totals"][0] == r["totals"][1] and r["calls"][0] == r["calls"][1] > 280
    assert len(r["dot_groups"]) >= 3  # dot at several shapes, each its own row
    for dims, count, fl, rate in r["dot_groups"]:
        assert fl == count * 2 * dims[0][0] * dims[0][1] * dims[1][1] and rate > 0
    d = r["dot_groups"][0][0]
    assert "GFLOP/s" in r["summary"] and f"{d[0][0]}x{d[0][1]}; {d[1][0]}x{d[1][1]}" in r["summary"]


def test_no_eviction_at_free_fails_the_random_loop(tmp_path):
    r = run_scenario(_loop(7, _PLANTS["no_eviction"]), tmp_path, timeout=120)
    rep = r["report"]
    assert r["inconsistent"], rep


def test_first_same_name_matching_fails_the_slow_producer_case(tmp_path):
    # (on the random loop it passes: with one FIFO worker, call order is nearly run order)
    r = run_scenario(_SLOW.replace("PLANT", _PLANTS["first_same_name"]), tmp_path, timeout=120)
    pairs = [r["order"][i:i + 2] for i in range(0, 60, 2)]
    assert sum(p == [[[300, 300]], [[3, 3]]] for p in pairs) >= 25  # the wrong way round
    # each swapped pair fails two checks (the right matching fails none): 44 of 89 failed
    # beside the JVM suite, where a share of a half was one check short
    assert r["report"]["memory_checked"] - r["report"]["memory_passed"] >= 20, r["report"]


_SLOW = """
import json, pyprof, mxnet as mx
PLANT
big = mx.nd.ones((300, 300)); c3 = mx.nd.ones((3, 3)); mx.nd.relu(mx.nd.dot(c3, c3)).wait_to_read()
with pyprof.profile(path="w.json", record_shapes=True) as p:
    for i in range(30):
        slow = mx.nd.dot(big, big)       # a slow producer
        a = mx.nd.relu(slow)             # waits for it
        b = mx.nd.relu(c3)               # ready at once, same operator, called later
        mx.nd.waitall()
events = json.load(open("w.json"))["traceEvents"]
relu = sorted((e for e in events if e.get("ph") == "B" and e.get("name") == "relu"), key=lambda e: e["ts"])
result = {"order": [e["args"]["Input Dims"] for e in relu], "report": p.windows[0].attribution.as_dict(),
          "dots": [(e["ts"], e["name"]) for e in events if e.get("ph") in "BE" and e.get("cat") == "operator"][:12]}
"""


def test_a_ready_operator_after_a_slow_producer_is_matched_to_its_own_event(tmp_path):
    r = run_scenario(_SLOW.replace("PLANT", ""), tmp_path, timeout=120)
    # the ready relu runs first (it was queued while the dot ran): its event has its shape
    # (24-29 of 30 iterations on a quiet machine, 11 seen at a load of 11; in the others the
    # dot was done before the ready relu was queued): enough of them for the case to be tested
    pairs = [r["order"][i:i + 2] for i in range(0, 60, 2)]
    assert r["order"].count([[3, 3]]) == 30
    assert sum(p == [[[3, 3]], [[300, 300]]] for p in pairs) >= 8, r["order"]
    assert r["order"].count([[3, 3]]) == 30 == r["order"].count([[300, 300]])
    # no mismatch; unchecked: the window's first sample, and the iterations where the dot's
    # completion raced the ready relu's push (the counter told them apart: label memory)
    rep = r["report"]
    # a label is a proof: a failed check (the counter model's miss: 0 to 2 a run here) is
    # written ambiguous, never exact; the planted wrong matching fails 20 or more
    assert rep["memory_checked"] >= 75 and rep["memory_checked"] - rep["memory_passed"] <= 2, rep
    assert rep["exact"] + rep["ambiguous"] + rep["by_memory"] == 90
    assert rep["ambiguous"] >= rep["memory_checked"] - rep["memory_passed"], rep
    assert rep["memory_checked"] + sum(rep["memory_unchecked"].values()) == rep["matched"] == 90
    assert set(rep["memory_unchecked"]) <= {"first_sample", "interleaved", "shared_stamp", "matched_by_memory"}, rep


_SITES = """
import json, pyprof, mxnet as mx
with pyprof.profile(path="w.json", record_shapes=True, with_stack=True) as p:
    for i in range(5):
        a = mx.nd.relu(mx.nd.ones((2, 3)))   # LINE_A
        b = mx.nd.relu(mx.nd.ones((7, 5)))   # LINE_B
    mx.nd.waitall()
events = json.load(open("w.json"))["traceEvents"]
result = [[e["args"]["Input Dims"], e["args"]["pyprof.call_site"], e["args"]["pyprof.stack"]]
          for e in events if e.get("ph") == "B" and e.get("name") == "relu"]
"""


def test_two_call_lines_with_different_shapes_carry_their_own_line(tmp_path):
    rows = run_scenario(_SITES, tmp_path, timeout=120)
    lines = {"LINE_A": None, "LINE_B": None}
    for n, text in enumerate(_SITES.strip("\n").splitlines(), start=1):
        for key in lines:
            if key in text:
                lines[key] = n + 13  # the child's prelude (tests/child.py) comes first
    assert len(rows) == 10
    by_shape = {json.dumps(d): {site for dd, site, _ in rows if dd == d} for d, _, _ in rows}
    assert set(by_shape) == {"[[2, 3]]", "[[7, 5]]"}
    (site_a,), (site_b,) = by_shape["[[2, 3]]"], by_shape["[[7, 5]]"]
    la, lb = int(site_a.split(":")[-1].split()[0]), int(site_b.split(":")[-1].split()[0])
    assert lb == la + 1 and site_a.endswith("<module>")
    assert all(stack[-1] == site for _, site, stack in rows)


_ALIVE = """
import json, gc, pyprof, mxnet as mx
with pyprof.profile(path="w.json", record_shapes=True, with_stack=True, profile_memory=True) as p:
    xs = [mx.nd.ones((64, 64)) for _ in range(20)]
    ys = [mx.nd.relu(x) + 1 for x in xs]
    mx.nd.waitall()
    del xs, ys
    gc.collect()
    mx.nd.waitall()
events = json.load(open("w.json"))["traceEvents"]
mem = sorted((e["ts"], e["args"]["Memory: cpu/0"]) for e in events
             if e.get("ph") == "C" and e.get("name") == "Memory: cpu/0")
result = {"peak": max(v for _, v in mem), "last": mem[-1][1],
          "report": p.windows[0].attribution.as_dict()}
"""


def test_the_recorder_keeps_nothing_alive(tmp_path):
    r = run_scenario(_ALIVE, tmp_path, timeout=120)
    assert r["peak"] >= 40 * 64 * 64 * 4       # the arrays were there
    assert r["last"] == 0                       # and all freed: back at the baseline
    assert r["report"]["matched"] == 60


def test_an_unknown_grouping_is_an_error_naming_the_choices(tmp_path):
    import pyprof.trace
    from pyprof.errors import TraceError
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ph": "X", "name": "dot", "cat": "operator", "ts": 1, "dur": 2, "pid": 0, "tid": 0}]}')
    with pytest.raises(TraceError, match=r"unknown grouping 'op'\. fix: use one of 'shape', or no grouping"):
        pyprof.trace.stats(path, by="op")
    g = pyprof.trace.stats(path, by="shape").groups
    assert [(x.name, x.input_dims, x.count, x.total_us, x.flops) for x in g] == [("dot", None, 1, 2, None)]
    # a trace without shapes says so, and how to record them, instead of rows of "-" alone
    from pyprof.trace.shapes import NO_SHAPES_NOTE
    assert pyprof.trace.summarize(path, by="shape").endswith(f"\nnote: {NO_SHAPES_NOTE}\n")
    assert json.loads(pyprof.trace.summarize(path, by="shape", fmt="json"))["notes"] == [NO_SHAPES_NOTE]


_OFF = """
import pyprof, mxnet as mx
from mxnet.base import _LIB
from pyprof.attribution.capture import VIEWS
def fns():
    return [getattr(getattr(_LIB, n), "__wrapped__", None) for n in ("MXImperativeInvokeEx", "MXNDArrayFree", *VIEWS, *CACHED)]
CACHED = ("MXInvokeCachedOpEx", "MXInvokeCachedOp", "MXCreateCachedOpEx", "MXCreateCachedOp", "MXFreeCachedOp",
          "MXAutogradBackwardEx", "MXAutogradSetIsRecording")
mx.nd.ones((2, 2)).wait_to_read()
plain = fns()
with pyprof.profile(path="off.json") as p:            # every option off
    during_off = fns()
    mx.nd.ones((2, 2)).wait_to_read()
with pyprof.profile(path="on.json", record_shapes=True) as q:
    during_on = fns()
    mx.nd.ones((2, 2)).wait_to_read()
after = fns()
result = {"off_same": during_off == plain, "on_hooked": during_on != plain,
          "raw_names": [getattr(f, "__name__", "") for f in plain],
          "hooked_names": [getattr(f, "__name__", "") for f in during_on],
          "after_plain": [getattr(f, "__name__", "") for f in after],
          "off_attribution": p.windows[0].attribution, "on_calls": q.windows[0].attribution.calls,
          "views": list(VIEWS), "recorder": q.windows[0].attribution.recorder}
"""


def test_with_every_option_off_the_gated_functions_are_untouched(tmp_path):
    r = run_scenario(_OFF, tmp_path, timeout=120)
    assert r["off_same"] is True and r["off_attribution"] is None
    cached = ["invoke", "invoke", "create", "create", "free", "backward", "set_recording"]
    # the imperative pair: recorder.c's functions when the native recorder runs (shim)
    pair = ["rec_invoke", "rec_free"] if r["recorder"] == "native" else ["invoke", "free"]
    assert r["recorder"] == ("python" if shim.unavailable() else "native")
    assert r["on_hooked"] is True and r["hooked_names"] == pair + ["view"] * len(r["views"]) + cached
    assert r["raw_names"] == r["after_plain"] == [
        "MXImperativeInvokeEx", "MXNDArrayFree", *r["views"], "MXInvokeCachedOpEx", "MXInvokeCachedOp",
        "MXCreateCachedOpEx", "MXCreateCachedOp", "MXFreeCachedOp", "MXAutogradBackwardEx", "MXAutogradSetIsRecording"]
    assert "MXNDArrayReshape64" in r["views"] and "MXNDArraySlice64" in r["views"]
    assert r["on_calls"] == 1


_BOUNDED = """
import json, sys, pyprof, mxnet as mx
from pyprof.attribution import capture, matching
capture.MAX_CALLS = 50
matching.MAX_ANNOTATE_BYTES = BIG
a = mx.nd.ones((4, 4)); mx.nd.waitall()
with pyprof.profile(schedule=pyprof.schedule(active=1, repeat=2), path="b_{window}.json",
                    record_shapes=True) as p:
    for step in range(2):
        for _ in range(200 if step == 0 else 20):
            a = a + 1
        mx.nd.waitall()
        p.step()
def shaped(path):
    return sum(1 for e in json.load(open(path))["traceEvents"]
               if e.get("name") == "_plus_scalar" and "Input Dims" in (e.get("args") or {}))
result = {"reports": [w.attribution and w.attribution.as_dict() for w in p.windows],
          "shaped": [shaped(w.path) for w in p.windows],
          "valid": [pyprof.trace.validate(w.path).ok for w in p.windows]}
"""


def test_a_window_records_at_most_max_calls_and_says_so(tmp_path):
    proc = run_scenario(_BOUNDED.replace("BIG", str(1 << 30)), tmp_path, expect_rc=None)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(next(tmp_path.glob("result-*.json")).read_text())
    # the first window stopped recording calls at 50, the second recorded all of its own again
    assert [rep["calls"] for rep in r["reports"]] == [50, 20]
    assert r["shaped"][0] == 50 and r["shaped"][1] == 20 and r["valid"] == [True, True]
    notes = [line for line in proc.stderr.splitlines() if "stopped recording calls" in line]
    assert len(notes) == 1 and notes[0].startswith("pyprof: window 0 (") and "after 50" in notes[0]
    assert notes[0].endswith("fix: record fewer steps per window")


def test_a_window_too_large_to_annotate_is_kept_as_cut(tmp_path):
    proc = run_scenario(_BOUNDED.replace("BIG", "1000"), tmp_path, expect_rc=None)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(next(tmp_path.glob("result-*.json")).read_text())
    assert r["reports"] == [None, None] and r["shaped"] == [0, 0] and r["valid"] == [True, True]
    notes = [line for line in proc.stderr.splitlines() if "without attribution args" in line]
    assert len(notes) == 2 and "past max_annotate_bytes 1000" in notes[0], proc.stderr


def test_a_fault_in_matching_keeps_the_window_and_never_reaches_the_host(tmp_path):
    """Any exception while annotating (a pyprof bug, as an autograd case once raised TypeError
    out of the session's exit) leaves the window as cut, with one line on stderr."""
    plant = "matching.annotate = lambda *a, **k: None + 1  # a TypeError\n"
    proc = run_scenario(_BOUNDED.replace("BIG", str(1 << 30)).replace(
        "capture.MAX_CALLS = 50\n", plant), tmp_path, expect_rc=None)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(next(tmp_path.glob("result-*.json")).read_text())
    assert r["reports"] == [None, None] and r["shaped"] == [0, 0] and r["valid"] == [True, True]
    notes = [line for line in proc.stderr.splitlines() if "without attribution args" in line]
    assert len(notes) == 2 and "TypeError" in notes[0], proc.stderr


@pytest.mark.parametrize("kind", ["python", "native"])
def test_a_failed_recording_never_reaches_the_caller(tmp_path, kind):
    """The operator ran: a shape query MXNet refuses leaves the call unrecorded, not raised
    (the native recorder's query planted as a C function returning -1, as MXNet's would, with
    the in-place read off: it reads a shape MXNet knows)."""
    if kind == "native" and shim.library() is None:
        pytest.skip(f"the native recorder does not build here: {shim.unavailable()}")
    r = run_scenario("""
import ctypes, pyprof, mxnet as mx
from pyprof.attribution import store
from pyprof.native import capi, shim
def refused(h):
    raise capi.MXNetError("MXNDArrayGetShapeEx", "refused")
REFUSE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(lambda *a: -1)
a = mx.nd.ones((2, 2)); mx.nd.waitall()
with pyprof.profile(path="f.json", record_shapes=True) as p:
    store.PyStore.meta = staticmethod(refused)
    if p._recorder.kind == "native":
        shim.library().rec_layout(None, 1)
        shim.library().rec_set(None, None, ctypes.cast(REFUSE, ctypes.c_void_p), None)
    b = (a + 1).asnumpy().tolist()
result = {"b": b, "kind": p._recorder.kind, "unrecorded": p._recorder.unrecorded,
          "calls": p.windows[0].attribution.calls}
""", tmp_path, env={shim.ENV: kind})
    assert r["kind"] == kind and r["unrecorded"] == 1
    assert r["b"] == [[2.0, 2.0], [2.0, 2.0]] and r["calls"] == 0


def test_a_fork_while_a_thread_records_leaves_a_child_that_runs(tmp_path):
    """A thread inside the recorder's lock at fork: the forked child's own calls still run."""
    r = run_scenario("""
import os, threading, time, pyprof, mxnet as mx
a = mx.nd.ones((2, 2)); mx.nd.waitall()
with pyprof.profile(path="k.json", record_shapes=True) as p:
    (a + 1).wait_to_read()
    rec = p._recorder  # the session's recorder: its lock is what a fork must not inherit held
    held = threading.Event()
    def hold():
        with rec._lock:
            held.set()
            time.sleep(1.0)
    t = threading.Thread(target=hold); t.start(); held.wait()
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if mx.nd.ones((2, 2)).sum().asscalar() == 4.0 else 3)
        except BaseException:
            os._exit(4)
    t.join()
    deadline, status = time.time() + 30, None
    while time.time() < deadline:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(st); break
        time.sleep(0.05)
    if status is None:
        os.kill(pid, 9); os.waitpid(pid, 0)
result = {"child": status}
""", tmp_path)
    assert r["child"] == 0, r
