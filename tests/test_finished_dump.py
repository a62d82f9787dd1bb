"""The drop-in's finished dump opens exactly in trace viewers (api.json finished_dump): MXNet
writes 64-bit hashes as pids, tids and async ids, which JavaScript viewers round, so the file
it finished is rewritten with the renumbering every writer applies; one over the rule's size
is left as MXNet wrote it, in one line naming ``pyprof repair``. Real MXNet in child processes."""

from __future__ import annotations

from child import run_scenario

_BODY = """
import pyprof.profiler as profiler, pyprof.trace, mxnet as mx
from pyprof import rules
from pyprof.trace.ids import id_values, is_safe_id
LIMIT
profiler.set_config(profile_all=True, filename="drop.json")
profiler.set_state("run")
a = mx.nd.ones((64, 64))
for _ in range(3):
    a = mx.nd.dot(a, a)
a.wait_to_read()
profiler.set_state("stop")
profiler.dump()
events = list(pyprof.trace.iter_events("drop.json"))
result = {"dots": sum(1 for e in events if e.get("name") == "dot" and e.get("ph") == "B"),
          "unsafe": sum(1 for e in events for _, _, v in id_values(e) if not is_safe_id(v)),
          "problems": pyprof.trace.validate("drop.json", progress=False).problems}
"""


def test_the_drop_ins_finished_dump_passes_validate(tmp_path):
    r = run_scenario(_BODY.replace("LIMIT", ""), tmp_path)
    assert r == {"dots": 3, "unsafe": 0, "problems": []}


def test_a_dump_over_the_limit_is_left_as_mxnet_wrote_it_in_one_line(tmp_path):
    # the rule's limit lowered: a file of a few kB stands for one of 256 MiB
    proc = run_scenario(_BODY.replace("LIMIT", 'rules.API["finished_dump"]["max_bytes"] = 100'),
                        tmp_path, expect_rc=None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    notes = [ln for ln in proc.stderr.splitlines() if "is left as MXNet wrote it" in ln]
    assert len(notes) == 1 and "pyprof repair" in notes[0] and "drop.json" in notes[0], proc.stderr
    r = run_scenario("""
import pyprof.trace
from pyprof.trace.ids import id_values, is_safe_id
events = list(pyprof.trace.iter_events("drop.json"))
before = sum(1 for e in events for _, _, v in id_values(e) if not is_safe_id(v))
pyprof.trace.repair("drop.json")
result = [before, pyprof.trace.validate("drop.json", progress=False).problems]
""", tmp_path)
    assert r[0] > 0 and r[1] == []
