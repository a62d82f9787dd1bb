"""A real MXNet trace, produced in a child process (one profiler session per process)."""

import subprocess
import sys
import textwrap

import pytest

from pyprof.trace import cross_check, repair, stats, validate

pytest.importorskip("mxnet")

SCRIPT = textwrap.dedent("""
    import sys
    import mxnet as mx
    from mxnet import profiler
    fn = sys.argv[1]
    profiler.set_config(filename=fn, profile_all=True, aggregate_stats=True, continuous_dump=True)
    profiler.set_state('run')
    a = mx.nd.ones((32, 32)); b = mx.nd.ones((32, 32))
    for _ in range(7):
        c = mx.nd.dot(a, b)
        d = (c + 1).relu()
    d.wait_to_read()
    ex = mx.sym.dot(mx.sym.var('A'), mx.sym.var('B')).bind(mx.cpu(), {'A': a, 'B': b})
    for _ in range(3):
        ex.forward()[0].wait_to_read()
    dom = profiler.Domain('dom')
    t = profiler.Task(dom, 'ta"sk'); t.start(); t.stop()
    mx.nd.waitall()
    profiler.set_state('stop')
    profiler.dump()
    open(fn + '.agg.json', 'w').write(profiler.dumps(format='json'))
""")


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("mx") / "profile.json"
    subprocess.run([sys.executable, "-c", SCRIPT, str(path)], check=True, timeout=120,
                   capture_output=True)
    return path


def test_matches_mxnet_aggregate(real_trace):
    s = stats(real_trace)
    check = cross_check(s, str(real_trace) + ".agg.json")
    assert check.ok, check.mismatches
    assert check.checked > 5
    assert s.find("dot", category="operator")[0].count == 7
    assert s.find("[dot]")[0].count == 3 and "[dot]" in s.bulk_names
    assert s.find('ta"sk')[0].count == 1
    assert s.memory and s.memory[0].device == "cpu/0"


def test_real_trace_repair_roundtrip(real_trace, tmp_path):
    res = repair(real_trace, tmp_path / "fixed.json")
    assert res.report.escaped_names == 2  # the task's quote, begin and end
    assert stats(tmp_path / "fixed.json").find("dot")[0].total_us == stats(real_trace).find("dot")[0].total_us


TWO_DUMPS = textwrap.dedent("""
    import sys
    import mxnet as mx
    from mxnet import profiler
    profiler.set_config(filename=sys.argv[1], profile_all=True)
    for _ in range(2):  # the second dump() is appended after the first, finished trace
        profiler.set_state('run')
        a = mx.nd.ones((8, 8))
        (mx.nd.dot(a, a) + 1).wait_to_read()
        mx.nd.waitall()
        profiler.set_state('stop')
        profiler.dump()
""")


def test_two_dumps_in_one_file_lose_nothing(tmp_path):
    path = tmp_path / "two.json"
    subprocess.run([sys.executable, "-c", TWO_DUMPS, str(path)], check=True, timeout=120,
                   capture_output=True)
    written = path.read_bytes().count(b'"ph"')
    res = repair(path, tmp_path / "fixed.json")
    assert res.report.inner_tails == 1 and not res.report.dropped_fragments
    assert res.events == written - res.slices.complete  # each B/E pair is one X event
    assert not res.slices.dropped and validate(tmp_path / "fixed.json").ok
    assert stats(path).find("dot", category="operator")[0].count == 2
