"""A session's stop takes the recorder's calls on a thread while MXNet appends the window's last
events, when a core is free (the cut follows the append: ``rawfile.FOLLOW``): the same calls and
matches as taken after the append; a take that fails fails the stop, and leaves no thread."""

from __future__ import annotations

from tests.child import run_scenario

_BODY = """
import threading, pyprof, mxnet as mx
from pyprof.process import rawfile as _rawfile
from pyprof.attribution import capture
takers = []
real = capture.Recorder.take
def take(self):
    takers.append(threading.current_thread().name)
    return real(self)
capture.Recorder.take = take
a = mx.nd.ones((4, 4)); mx.nd.waitall()
reports = {}
for follow in ("always", "never"):
    _rawfile.FOLLOW = follow
    p = pyprof.profile(path=follow + ".json", record_shapes=True, with_flops=True)
    p.start()
    for i in range(300):
        b = mx.nd.dot(a + i, a)
    mx.nd.waitall()
    p.stop()
    r = p.windows[0].attribution.as_dict()
    reports[follow] = [r["calls"], r["matched"], r["unmatched_calls"]]  # labels: the load's
def broken(self):
    raise RuntimeError("planted in take")
capture.Recorder.take = broken
_rawfile.FOLLOW = "always"
p = pyprof.profile(path="broken.json", record_shapes=True)
p.start()
(a + 1).wait_to_read()
try:
    p.stop()
    error = None
except RuntimeError as exc:
    error = str(exc)
# a stop whose append fails while its take fails too: the append's error is the stop's
from pyprof.session import raw as _raw
real_dump = _raw.profiler.dump
def failing_dump(*a, **k):
    raise RuntimeError("planted in the append")
p = pyprof.profile(path="both.json", record_shapes=True)
p.start()
(a + 1).wait_to_read()
_raw.profiler.dump = failing_dump
try:
    p.stop()
    both = None
except RuntimeError as exc:
    both = str(exc)
_raw.profiler.dump = real_dump
result = {"takers": takers, "reports": reports, "error": error, "both": both,
          "left": [t.name for t in threading.enumerate() if t.name == "pyprof-take"]}
"""


def test_calls_taken_during_the_append_are_the_calls_taken_after(tmp_path):
    r = run_scenario(_BODY, tmp_path)
    assert r["takers"] == ["pyprof-take", "MainThread"], r  # following: on its thread
    assert r["reports"]["always"] == r["reports"]["never"], r
    assert r["reports"]["always"] == [600, 600, 0], r  # every dot and add
    assert r["error"] == "planted in take" and r["left"] == [], r
    assert r["both"] == "planted in the append", r
