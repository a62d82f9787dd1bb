"""A recording window keeps its calls out of the cyclic collector (calls.RECORD): 3,000 recorded
calls, with shapes and with stacks, leave the collector's lists after two passes, so a long
window does not make every full collection walk its calls. A planted bug that keeps Call
objects while recording leaves them all there."""

from __future__ import annotations

import pytest

from tests.child import run_scenario

_BODY = """
import gc, pyprof, mxnet as mx
PLANT
a = mx.nd.ones((2, 2)); a.wait_to_read()
with pyprof.profile(path="w.json", record_shapes=True, with_stack=True, profile_api=False) as p:
    for _ in range(100):
        b = a + 1
    mx.nd.waitall()
    gc.collect()
    gc.disable()  # only the passes below: as a window's records age through generations 0 and 1
    n = len(p._recorder.calls)
    for _ in range(3000):
        b = a + 1
    mx.nd.waitall()
    recorded = p._recorder.calls[n:]
    gc.collect(0); gc.collect(1)
    tracked = sum(gc.is_tracked(r) for r in recorded)
    gc.enable()
result = {"recorded": len(recorded), "tracked": tracked}
"""

_PLANT = """
from pyprof.attribution import capture as _c
_real = _c.Recorder._record
def _as_calls(self, t, q, a):
    _real(self, t, q, a)
    self.calls[-1] = _c.as_call(self.calls[-1])  # a Call object per record, as before
_c.Recorder._record = _as_calls
"""


@pytest.mark.parametrize("plant", [False, True], ids=["records", "planted: Call objects"])
def test_a_window_of_records_leaves_the_collector_after_two_passes(tmp_path, plant):
    r = run_scenario(_BODY.replace("PLANT", _PLANT if plant else ""), tmp_path)
    assert r["recorded"] == 3000, r
    if plant:
        assert r["tracked"] == 3000, r
    else:
        assert r["tracked"] == 0, r
