"""Dependencies MXNet's engine has that no input handle shows (issue 22's memory check found
them): a view shares its source's engine variable, and an operator that requests temp space
waits for the call that took the same copy before it. Each scenario makes the engine run a
later call first, on one CPU worker; matching must follow it, and a planted bug must not."""

from __future__ import annotations

import json

import pytest

from tests.child import run_scenario

_SCENARIOS = {
    # relu(view of a slow dot's output) waits for the dot; relu(c3), called later, is ready.
    # The dot of 500x500 takes about 3 ms: long enough that a loaded machine still reorders
    # (with 300x300, 1 ms, only 7 of 20 iterations did at a load average of 6)
    "view": """
slow = mx.nd.dot(sq, sq)
a = mx.nd.relu(slow.reshape((250000,)))
b = mx.nd.relu(c3)
""",
    # D takes temp-space copy k and waits for the slow dot; three ready sums take k+1..k+3;
    # X = sum((3, 3)) takes copy k again and waits for D; Y = sum((1, 3)) takes k+1: it runs first
    "temp_space": """
slow = mx.nd.exp(big)
d = mx.nd.sum(slow, axis=1)
s = [mx.nd.sum(c3, axis=1, keepdims=True) for _ in range(3)]
x = mx.nd.sum(c3, axis=0, keepdims=True)
y = mx.nd.sum(row, axis=0, keepdims=True)
""",
}

_BODY = """
import json, pyprof, mxnet as mx
PLANT
big = mx.nd.ones((300, 300)); sq = mx.nd.ones((500, 500)); c3 = mx.nd.ones((3, 3)); row = mx.nd.ones((1, 3))
mx.nd.sum(mx.nd.relu(mx.nd.dot(c3, c3)), axis=1).wait_to_read()
with pyprof.profile(path="w.json", record_shapes=True) as p:
    for i in range(20):
        STEP
        mx.nd.waitall()
events = json.load(open("w.json"))["traceEvents"]
NAME = "relu" if "relu" in '''STEP''' else "sum"
ev = sorted((e for e in events if e.get("ph") == "B" and e.get("name") == NAME), key=lambda e: e["ts"])
result = {"report": p.windows[0].attribution.as_dict(),
          "rows": [[e["args"]["Input Dims"], e["args"]["pyprof.output_dims"], e["args"]["pyprof.match"],
                    e["args"].get("pyprof.memory_check")] for e in ev]}
"""

_PLANTS = {
    "view": """
from pyprof.attribution import capture as _c
_c.VIEWS = ()  # views not hooked: a view looks made before the window, ready at once
""",
    "temp_space": """
from pyprof.attribution import matching as _m
_m.temp_chain = lambda calls, devices, env: {}  # the round robin of temp-space copies not modelled
""",
}


def _run(tmp_path, case: str, plant: str = ""):
    body = _BODY.replace("PLANT", plant).replace("STEP", _SCENARIOS[case].strip().replace("\n", "\n        "))
    return run_scenario(body, tmp_path, timeout=120)


@pytest.mark.parametrize("case", sorted(_SCENARIOS))
def test_a_call_held_back_by_a_hidden_dependency_is_matched_to_its_own_event(tmp_path, case):
    r = _run(tmp_path, case)
    rep = r["report"]
    assert rep["matched"] == rep["calls"] == rep["events"]
    # a few not checked or labelled where a push raced a completion (under load). Failed checks:
    # how many, the engine's timing decides (0 on a quiet machine; 1, then 2 of 140 in loaded CI
    # runs), so the test asserts what it cannot move: each is written as no exact match (a label
    # is a proof), and they stay below the 10 the hidden dependency unmodelled fails at least
    unchecked = sum(rep["memory_unchecked"].values())
    assert rep["memory_checked"] == rep["matched"] - unchecked, rep
    failed = [row for row in r["rows"] if row[3] is False]
    assert rep["memory_checked"] - rep["memory_passed"] == len(failed) < 10, (rep, failed)
    assert all(row[2] != "exact" for row in failed), failed
    # (load-dependent: 7 of 60 seen in a clean-clone CI run; the random loop allows a quarter too)
    assert unchecked <= rep["matched"] // 4, rep
    # which call the engine runs first, load decides (the slow producer may end before the
    # ready call is pushed): not asserted. Per iteration the calls are the same whatever the
    # order, and every row's shapes are one of them: totals the matching cannot get wrong
    per = 2 if case == "view" else 6
    want = ([[[250000]], [[3, 3]]] if case == "view" else
            [[[300, 300]], [[3, 3]], [[3, 3]], [[3, 3]], [[3, 3]], [[1, 3]]])
    for i in range(0, len(r["rows"]), per):
        got = sorted(json.dumps(row[0]) for row in r["rows"][i:i + per])
        assert got == sorted(json.dumps(w) for w in want), (i, r["rows"][i:i + per])
    # a label is a proof: no row the counter contradicts is exact (the planted dependencies
    # above are caught by the failed checks they cause: 10 or more where the engine reorders)
    assert all(row[2] != "exact" for row in r["rows"] if row[3] is False)
    labels = [m for _, _, m, _ in r["rows"]]
    assert set(labels) <= {"exact", "memory", "ambiguous"}
    assert labels.count("exact") >= 0.9 * len(labels), labels


@pytest.mark.parametrize("case", sorted(_SCENARIOS))
def test_the_hidden_dependency_not_modelled_fails_the_memory_check(tmp_path, case):
    rep = _run(tmp_path, case, _PLANTS[case])["report"]
    assert rep["memory_checked"] - rep["memory_passed"] >= 10, rep


_THREADS = """
import copy, json, threading, pyprof, mxnet as mx
PLANT
mx.nd.ones((1,)).wait_to_read()
def work(n):
    x = mx.nd.ones((n,))
    for _ in range(100):
        y = x * 2  # _mul_scalar requests temp space
    y.wait_to_read()
with pyprof.profile(path="t.json", record_shapes=True, profile_memory=True) as p:
    ts = [threading.Thread(target=work, args=(n,)) for n in (2, 64)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    mx.nd.waitall()
result = p.windows[0].attribution.as_dict()
"""

_ONE_ROUND_ROBIN = """
from pyprof.attribution import matching as _m
_chain = _m.temp_chain
def _one(calls, devices, env):  # every thread's calls in one round robin
    calls = [copy.copy(c) for c in calls]
    for c in calls:
        c.thread = 0
    return _chain(calls, devices, env)
_m.temp_chain = _one
"""


@pytest.mark.parametrize("plant", ["", _ONE_ROUND_ROBIN], ids=["per thread", "one round robin"])
def test_two_threads_take_temp_space_copies_of_their_own(tmp_path, plant):
    # MXNet's resource manager is thread-local: each thread's calls chain through its own
    # copies; one chain through both threads' calls matched about half wrongly, labelled exact
    # The planted chain goes wrong only where the threads' calls interleave, which the scheduler
    # decides: under load one thread's 100 calls may all come first (1 run in 6 on 2 busy
    # cores). So the plant must show in one of 3 runs; the right matching passes every run.
    for attempt in range(3 if plant else 1):
        rep = run_scenario(_THREADS.replace("PLANT", plant), tmp_path / str(attempt), timeout=120)
        # a sample in a microsecond two slices share is nobody's (shared_stamp): not a give-up
        shared = rep["memory_unchecked"].get("shared_stamp", 0)
        assert rep["matched"] == rep["calls"] == 202 and rep["memory_checked"] + shared >= 190, rep
        failed = rep["memory_checked"] - rep["memory_passed"]
        if not plant or failed >= 20:
            break
    if plant:
        assert failed >= 20, rep
    else:
        # a sample stamped in a microsecond two slices share was the counter model's miss (13 in
        # a CI run under load); told apart now (shared_stamp), a miss is a wrong match, well
        # below the planted chain's 20, and each is written ambiguous, never exact
        assert failed < 10 and rep["exact"] >= 0.9 * rep["matched"], rep
        assert rep["ambiguous"] >= failed, rep


_WARMUP = """
import json, threading, pyprof, mxnet as mx
x = mx.nd.ones((2,)); big = mx.nd.ones((1 << 20,)); mx.nd.waitall()
def work(a, n):
    for _ in range(n):
        y = a * 2; s = mx.nd.sum(y)
    mx.nd.waitall()
with pyprof.profile(schedule=pyprof.schedule(warmup=1, active=1, repeat=1), path="w_{window}.json",
                    record_shapes=True, profile_memory=True) as p:
    for step in range(2):  # the warm-up step's calls run while the profiler records no window
        ts = [threading.Thread(target=work, args=(a, 30)) for a in (x, big, x)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        p.step()
result = p.windows[0].attribution.as_dict()
events = json.load(open(p.windows[0].path))["traceEvents"]
result["failed_exact"] = sum(1 for e in events if (e.get("args") or {}).get("pyprof.memory_check") is False
                             and e["args"].get("pyprof.match") == "exact")
"""


def test_a_warm_up_steps_calls_are_not_the_windows(tmp_path):
    # three threads, a warm-up step and an active one: the window holds the active step's calls
    # only (before, both steps' calls: half left unmatched, the rest matched to the warm-up's
    # calls, labelled exact, failing the memory check)
    rep = run_scenario(_WARMUP, tmp_path, timeout=120)
    assert rep["calls"] == rep["events"] == rep["matched"] == 180 and rep["unmatched_calls"] == 0, rep
    # the memory check: how many of its samples the counter model misses is the load's (0 to 8
    # a run on a quiet machine, 28 in one of 7 runs beside two busy loops and a clean-clone
    # run); a miss is written ambiguous, never exact (a label is a proof)
    assert rep["memory_checked"] > 0 and rep["failed_exact"] == 0, rep
    assert rep["ambiguous"] >= rep["memory_checked"] - rep["memory_passed"], rep
