"""A set_config without ``filename`` once the profiler has run keeps the file (api.json
``keep_filename``), and loses none of the events already dumped into it (MXNet's config deletes
the file it names): real MXNet, each scenario in its own child process."""

from __future__ import annotations

import json

import pytest

from child import run_scenario
from pyprof import trace

OPS = ("_plus_scalar", "_minus_scalar", "_mul_scalar")

_BODY = """
import time
from pyprof import profiler, StateError
import mxnet as mx
KEYS = dict(profile_imperative=True, profile_api=False, profile_memory=False)
profiler.set_config(filename='t.json', continuous_dump=CD, dump_period=0.1, **KEYS)
profiler.set_state('run')
for _ in range(3):
    (mx.nd.ones((4, 4)) + 7).wait_to_read()
time.sleep(0.3)          # continuous dump: the timer has written t.json
refused = None
if MIDDUMP:
    try:
        profiler.dump(False)  # an intermediate dump
    except StateError as e:  # continuous_dump off: refused, MXNet would close the file
        refused = e.code
profiler.set_config(profile_api=True, continuous_dump=CD, dump_period=0.1)
for _ in range(4):
    (mx.nd.ones((4, 4)) - 7).wait_to_read()
time.sleep(0.3)
if TWICE:
    profiler.set_config(profile_api=True, continuous_dump=CD, dump_period=0.1)
    for _ in range(5):
        (mx.nd.ones((4, 4)) * 7).wait_to_read()
result = {'config': profiler.current_config()['filename'],
          'during': sorted(os.listdir('.')), 'refused': refused}
if FINISH:
    profiler.set_state('stop')
    profiler.dump(True)
"""


def _counts(path):
    events = json.loads(path.read_text())["traceEvents"]
    return {op: sum(1 for e in events if e.get("name") == op and e.get("ph") == "B") for op in OPS}


@pytest.mark.parametrize("continuous", [True, False], ids=["continuous", "no-continuous"])
@pytest.mark.parametrize("middump, twice, finish", [
    (False, False, True), (True, False, True), (False, True, True), (False, True, False)],
    ids=["plain", "after-intermediate-dump", "twice", "exit-without-dump"])
def test_a_config_without_filename_while_running_keeps_every_event(
        tmp_path, continuous, middump, twice, finish):
    body = (_BODY.replace("CD", str(continuous)).replace("MIDDUMP", str(middump))
            .replace("TWICE", str(twice)).replace("FINISH", str(finish)))
    result = run_scenario(body, tmp_path)
    assert result["config"] == str(tmp_path / "t.json")  # made absolute at configuration
    assert result["refused"] == (None if continuous or not middump
                                 else "dump.intermediate_finishes")
    t = tmp_path / "t.json"
    assert trace.validate(t).problems == []
    assert _counts(t) == {"_plus_scalar": 3, "_minus_scalar": 4, "_mul_scalar": 5 if twice else 0}
    events = json.loads(t.read_text())["traceEvents"]
    assert any(e.get("name") == "process_name" for e in events)
    assert any(e.get("cat") == "MXNET_C_API" for e in events)  # profile_api took effect
    # no ./profile.json, no part left behind (the child's result file is the only other one)
    assert "profile.json" not in result["during"]
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("result-"))
    assert left == ["t.json"]


_SAME_FILE_GIVEN_AGAIN = """
import time
from pyprof import profiler
import mxnet as mx
profiler.set_config(filename='t.json', profile_imperative=True, profile_api=False,
                    profile_memory=False, dump_period=0.1)
profiler.set_state('run')
for _ in range(3):
    (mx.nd.ones((4, 4)) + 7).wait_to_read()
time.sleep(0.3)
profiler.set_config(filename='t.json', profile_imperative=True, profile_api=False,
                    profile_memory=False, dump_period=0.1)
for _ in range(4):
    (mx.nd.ones((4, 4)) - 7).wait_to_read()
profiler.set_state('stop')
profiler.dump(True)
"""


def test_the_same_filename_given_again_keeps_the_events_already_dumped(tmp_path):
    run_scenario(_SAME_FILE_GIVEN_AGAIN, tmp_path)
    t = tmp_path / "t.json"
    assert trace.validate(t).problems == []
    assert _counts(t) == {"_plus_scalar": 3, "_minus_scalar": 4, "_mul_scalar": 0}


_NO_HARD_LINKS = """
import time
from pyprof import profiler
import mxnet as mx
def no_link(src, dst, **kw):  # a file system without hard links (vfat, some network mounts)
    raise PermissionError(1, 'Operation not permitted')
os.link = no_link
profiler.set_config(filename='t.json', profile_imperative=True, profile_api=False,
                    profile_memory=False, continuous_dump=True, dump_period=0.1)
profiler.set_state('run')
for _ in range(3):
    (mx.nd.ones((4, 4)) + 7).wait_to_read()
time.sleep(0.3)          # the timer has written t.json: the keep must rename it
assert os.path.exists('t.json')
profiler.set_config(profile_api=True, continuous_dump=True, dump_period=0.1)
for _ in range(4):
    (mx.nd.ones((4, 4)) - 7).wait_to_read()
time.sleep(0.3)
profiler.set_state('stop')
profiler.dump(True)
"""


def test_without_hard_links_the_file_is_renamed_after_the_timer_stopped(tmp_path):
    run_scenario(_NO_HARD_LINKS, tmp_path)
    t = tmp_path / "t.json"
    assert trace.validate(t).problems == []
    assert _counts(t) == {"_plus_scalar": 3, "_minus_scalar": 4, "_mul_scalar": 0}
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("result-")) \
        == ["t.json"]


_STOPPED_THEN_NEW_FILE = """
import time
from pyprof import profiler
import mxnet as mx
profiler.set_config(filename='a.json', profile_imperative=True, profile_api=False,
                    profile_memory=False, continuous_dump=True, dump_period=0.1)
profiler.set_state('run')
for _ in range(3):
    (mx.nd.ones((4, 4)) + 7).wait_to_read()
time.sleep(0.3)
profiler.set_config(profile_api=False, continuous_dump=True, dump_period=0.1)  # keeps a.json
for _ in range(4):
    (mx.nd.ones((4, 4)) - 7).wait_to_read()
time.sleep(0.3)
profiler.set_state('stop')
time.sleep(0.3)
profiler.set_config(filename='b.json', profile_imperative=True, profile_api=False,
                    profile_memory=False, continuous_dump=True, dump_period=0.1)
profiler.set_state('run')
for _ in range(5):
    (mx.nd.ones((4, 4)) * 7).wait_to_read()
profiler.set_state('stop')
profiler.dump(True)
"""


def test_a_new_filename_after_a_keep_leaves_the_kept_events_in_the_kept_file(tmp_path):
    # the parts kept of a.json end in a.json, not in the next file the profiler finishes
    run_scenario(_STOPPED_THEN_NEW_FILE, tmp_path)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert trace.validate(a).problems == []
    assert _counts(a) == {"_plus_scalar": 3, "_minus_scalar": 4, "_mul_scalar": 0}
    assert _counts(b)["_plus_scalar"] == 0 and _counts(b)["_mul_scalar"] == 5
    assert not [p.name for p in tmp_path.iterdir() if ".pyprof-" in p.name]
