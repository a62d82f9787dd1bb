"""The steps of a schedule as instant events in each window trace (schedule.json ``step_marks``),
written by a real session around real MXNet operators; ``pyprof validate`` passes and
``pyprof summarize`` gives the same figures as on the window without them."""

import json

from child import run_cli, run_scenario

from pyprof import rules

SPEC = rules.spec("schedule.json")["step_marks"]

SESSION = """
import os, threading, time
import mxnet as mx
import pyprof
with pyprof.profile(schedule=pyprof.schedule(wait=1, warmup=1, active=2, repeat=2),
                    path="w_{window}.json") as prof:
    a = mx.nd.ones((64, 64))
    for i in range(9):
        (mx.nd.dot(a, a) + 1).wait_to_read()
        time.sleep(0.01 * (i % 3))
        prof.step()
result = {"pid": os.getpid(), "tid": threading.main_thread().native_id,
          "windows": [[w.path, w.first_step, w.last_step, w.start_us, w.end_us]
                      for w in prof.windows]}
"""


def test_windows_carry_one_mark_per_step(tmp_path):
    got = run_scenario(SESSION, tmp_path)
    assert [w[1:3] for w in got["windows"]] == [[2, 3], [6, 7]]
    for index, (path, first, last, start_us, end_us) in enumerate(got["windows"]):
        events = json.loads(open(path).read())["traceEvents"]
        marks = [e for e in events if e.get("cat") == SPEC["cat"]]
        assert [m["name"] for m in marks] == [f"ProfilerStep#{s}" for s in range(first, last + 1)]
        assert all(m["ph"] == "i" and m["s"] == "g" and m["pid"] == got["pid"]
                   and m["tid"] == got["tid"] for m in marks)
        assert [m["args"]["step"] for m in marks] == list(range(first, last + 1))
        assert {m["args"]["window"] for m in marks} == {index}
        # Back to back from the window's start to its end: each step runs to the next one.
        assert marks[0]["ts"] == start_us
        for a, b in zip(marks, marks[1:]):
            assert a["ts"] + a["args"]["step_us"] == b["ts"] and a["args"]["step_us"] > 0
        assert marks[-1]["ts"] + marks[-1]["args"]["step_us"] == end_us
        # The operators of the window's steps lie within its marks' span.
        ops = [e for e in events if e.get("cat") == "operator" and e.get("ph") == "B"
               and e["name"] == "dot"]
        assert len(ops) == last - first + 1
        assert all(start_us <= e["ts"] <= end_us for e in ops)

        res = run_cli(["validate", path], tmp_path)
        assert res.returncode == 0, res.stderr
        stripped = tmp_path / f"stripped_{index}.json"
        stripped.write_text(json.dumps({"traceEvents": [e for e in events if e not in marks]}))
        with_marks = run_cli(["summarize", path, "--format", "json"], tmp_path)
        without = run_cli(["summarize", str(stripped), "--format", "json"], tmp_path)
        assert with_marks.returncode == 0 and json.loads(with_marks.stdout) == json.loads(without.stdout)
        assert json.loads(with_marks.stdout)["operators"]
