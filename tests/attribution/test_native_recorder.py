"""The native recorder (pyprof/native/recorder.c, pyprof.native.shim) against the Python one: the
same seeded imperative loop (frees, views, arrays made by no operator, so addresses are reused
with other shapes), recorded in one process by each in turn, gives the same records: operators,
shapes, dtypes, attributes, producers (as window positions), slots, thread. Handles and times
differ between the two runs, so they are checked apart: handles as the run's own arrays', times
on the trace's clock inside the window."""

from __future__ import annotations

import pytest

from pyprof.native import shim
from tests.child import run_scenario

pytestmark = pytest.mark.skipif(shim.library() is None, reason="the native recorder does not build here")

_BODY = """
import json, os, random, threading, time, numpy as np, pyprof, mxnet as mx
from pyprof.native import shim
PLANT

def loop(seed):
    rng = random.Random(seed)
    live = [mx.nd.ones(s) for s in ((2, 3), (3, 2), (4, 4))]
    for i in range(400):
        if i % 40 == 0:  # dims past the 4 an NDArray holds inline; other dtypes
            h6 = mx.nd.relu(mx.nd.ones((2, 1, 3, 1, 2, i % 7 + 1), dtype="float64"))
            h16 = live[0].astype("float16") + 1
            with mx.util.np_shape(True):  # a dim past 2**31 - 1 (zero-size: no memory)
                big = mx.nd.relu(mx.nd.zeros((3000000000 + i, 0)))
        x = rng.choice(live)
        k = rng.randrange(9)
        if k == 0: y = x + 1
        elif k == 1: y = mx.nd.relu(x)
        elif k == 2: y = x.reshape((x.shape[1], x.shape[0]))  # a view: x's producer
        elif k == 3: y = x[0:1]  # a view too
        elif k == 4: y = mx.nd.dot(x, mx.nd.ones((x.shape[1], 2)))
        elif k == 5: y = mx.nd.sum(x, axis=0, keepdims=True)
        elif k == 6: y = mx.nd.array(np.ones((rng.randrange(1, 5), rng.randrange(1, 5)), "float32"))
        elif k == 7: y = x.detach()
        else: y = mx.nd.broadcast_mul(x, mx.nd.ones((1, x.shape[1])))
        if rng.random() < 0.6:
            live[rng.randrange(len(live))] = y  # the one replaced is freed: its address reused
        else:
            live.append(y)
        if len(live) > 8:
            del live[rng.randrange(len(live))]
    mx.nd.waitall()

def record(kind, shapes=True):
    os.environ[shim.ENV] = kind
    t0 = time.time_ns() // 1000
    name = kind if shapes else "plain"  # a session never replaces an earlier one's window
    with pyprof.profile(path=f"{name}.json", record_shapes=shapes, profile_api=API) as p:
        loop(11)
        ran = p._recorder.kind if shapes else None
        in_place = shim.reads_in_place()
    t1 = time.time_ns() // 1000
    return ran, t0, t1, in_place

out = {}
import pyprof.attribution.capture as capture
real_take = capture.Recorder.take
taken = {}
def take(self):
    calls, full = real_take(self)
    taken[self.kind] = calls
    return calls, full
capture.Recorder.take = take
for kind in ("native", "python"):
    ran, t0, t1, in_place = record(kind)
    calls = taken[ran]
    pos = {c.seq: i for i, c in enumerate(calls)}
    out[kind] = {
        "ran": ran,
        "in_place": in_place,
        "seqs_increase": all(a.seq < b.seq for a, b in zip(calls, calls[1:])),
        "records": [[c.name, c.shapes("in"), c.dtypes("in"), c.shapes("out"), c.dtypes("out"),
                     [k.decode() for k in c.keys], [v.decode() for v in c.vals],
                     [pos.get(p, -1) for p in c.producers], list(c.slots), len(c.inputs),
                     len(c.outputs), c.source, c.invocation, c.stack] for c in calls],
        "handles_are_ints": all(type(h) is int and h > 0 for c in calls for h in (*c.inputs, *c.outputs)),
        "op_handles_known": all(c.name != f"op@{c.op:#x}" for c in calls),
        "threads": sorted({c.thread for c in calls}) == [threading.get_ident()],
        "times": all(t0 <= c.t_us <= c.pushed_us <= t1 for c in calls),
        "in_meta_producers": all(m[2] == p for c in calls for m, p in zip(c.in_meta, c.producers)),
    }
def meta_queries(path):  # MXNet's traced shape and dtype queries: begin and end each
    return sum(1 for e in json.load(open(path))["traceEvents"]
               if e.get("name") in ("MXNDArrayGetShapeEx", "MXNDArrayGetShapeEx64", "MXNDArrayGetDType"))
for kind in out:
    out[kind]["meta_api_events"] = meta_queries(f"{kind}.json")
if API:  # the loop's own queries (x.shape): the same loop, unrecorded
    record("native", shapes=False)
    out["plain_api_events"] = meta_queries("plain.json")
result = out
"""


def _run(tmp_path, plant: str = "", api: bool = False):
    return run_scenario(_BODY.replace("PLANT", plant).replace("API", str(api)), tmp_path, timeout=180)


def test_the_native_and_the_python_recorder_give_the_same_records(tmp_path):
    r = _run(tmp_path)
    native, python = r["native"], r["python"]
    assert native["ran"] == "native" and python["ran"] == "python"
    assert native["in_place"] is True  # shapes read in place (shim.LAYOUT), checked against MXNet's
    assert len(native["records"]) == len(python["records"]) > 250
    for k in ("seqs_increase", "handles_are_ints", "op_handles_known", "threads", "times", "in_meta_producers"):
        assert native[k] and python[k], k
    diff = [(i, a, b) for i, (a, b) in enumerate(zip(native["records"], python["records"])) if a != b]
    assert not diff, diff[:3]
    # int64 dims, whichever reads them (MXNDArrayGetShapeEx's int ones wrap)
    assert [3000000000, 0] in [sh for rec in native["records"] for sh in rec[3]]
    # the loop exercised what it is for: views and producers across them, arrays of no operator
    assert sum(1 for rec in native["records"] for p in rec[7] if p >= 0) > 200
    assert sum(1 for rec in native["records"] for p in rec[7] if p < 0) > 20


@pytest.mark.parametrize("plant", ["no_eviction"])
def test_a_native_recorder_that_does_not_evict_at_free_differs(tmp_path, plant):
    """MXNDArrayFree left unhooked in the native recorder only: stale entries for reused
    addresses give other producers or shapes than the Python recorder's."""
    r = _run(tmp_path, "shim.NativeStore.make_free = lambda self, raw: raw")
    native, python = r["native"], r["python"]
    assert native["ran"] == "native"
    assert native["records"] != python["records"]


# A wrong offset of dtype_ (76: reuse_ and padding) or of ndim_ (20: num_heap_allocated_).
_WRONG = {"dtype": "76", "ndim": "20"}


@pytest.mark.parametrize("field", sorted(_WRONG))
def test_a_wrong_layout_is_refused_and_the_recorder_asks_mxnet(tmp_path, field):
    """check_layout refuses the layout; the native recorder then asks MXNet, records the same as
    the Python one, and with profile_api on the window holds MXNet's traced shape queries (read
    in place, it holds none: the default layout's run in the same child)."""
    r = _run(tmp_path, f"shim.LAYOUT = {{**shim.LAYOUT, {field!r}: {_WRONG[field]}}}", api=True)
    native, python = r["native"], r["python"]
    assert native["ran"] == "native" and native["in_place"] is False
    assert native["records"] == python["records"]
    assert native["meta_api_events"] > r["plain_api_events"] + 2 * len(native["records"])


def test_shapes_read_in_place_leave_no_traced_queries(tmp_path):
    r = _run(tmp_path, api=True)
    plain = r["plain_api_events"]  # the loop's own (x.shape)
    assert r["native"]["in_place"] is True and r["native"]["meta_api_events"] == plain > 0
    assert r["python"]["meta_api_events"] > plain  # the Python recorder asks MXNet: the count sees it
    assert r["native"]["records"] == r["python"]["records"]


@pytest.mark.parametrize("field", sorted(_WRONG))
def test_a_wrong_layout_taken_unchecked_gives_other_records(tmp_path, field):
    """Planted: check_layout says yes to a wrong layout. The comparison with the Python recorder
    sees wrong dtypes or shapes."""
    r = _run(tmp_path, f"shim.LAYOUT = {{**shim.LAYOUT, {field!r}: {_WRONG[field]}}}\n"
                       "shim.check_layout = lambda layout=None: True")
    native, python = r["native"], r["python"]
    assert native["in_place"] is True
    assert native["records"] != python["records"]


def test_pyprof_recorder_is_read_at_each_session(tmp_path):
    """PYPROF_RECORDER=native-api, then native, then native-api again, in one process: each
    session reads in place or asks MXNet as its own setting says (the check runs once)."""
    r = run_scenario("""
import os, pyprof, mxnet as mx
from pyprof.native import shim
seen = []
for i, kind in enumerate(("native-api", "native", "native-api")):
    os.environ[shim.ENV] = kind
    with pyprof.profile(path=f"w{i}.json", record_shapes=True) as p:
        (mx.nd.ones((2, 3)) + 1).wait_to_read()
    seen.append(shim.reads_in_place())
result = seen
""", tmp_path)
    assert r == [False, True, False]


def test_a_layout_check_that_mxnet_refuses_leaves_the_recorder_asking(tmp_path):
    """MXNDArrayCreateEx refuses the check's array (a dtype code MXNet lacks): the check says
    no instead of failing the session, and the calls are recorded through MXNet's queries."""
    r = run_scenario("""
import pyprof, mxnet as mx
from pyprof.native import shim
shim._CHECKS = (((3,), 99),)
with pyprof.profile(path="w.json", record_shapes=True) as p:
    (mx.nd.ones((2, 3)) + 1).wait_to_read()
    in_place = shim.reads_in_place()
result = {"in_place": in_place, "kind": p._recorder.kind, "calls": p.windows[0].attribution.calls}
""", tmp_path)
    assert r == {"in_place": False, "kind": "native", "calls": 2}
