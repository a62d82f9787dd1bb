"""A real MXNet trace, produced in a child process (one profiler session per process)."""

import json
import subprocess
import sys
import textwrap

import pytest

from pyprof.trace import cross_check, repair, stats, summarize, validate

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


@pytest.fixture(scope="module")
def bookkeeping_window(tmp_path_factory):
    from child import bookkeeping_trace
    return bookkeeping_trace(tmp_path_factory.mktemp("bk") / "bk.json")


def _operator_group(s):
    return [o for o in s.operators if o.device == "cpu/0" and o.category == "operator"]


def test_summarize_ranks_the_engine_bookkeeping_after_compute(bookkeeping_window):
    """A real window whose largest operator is bookkeeping (the one-time seeding and a
    WaitForVar behind it): summarize's first row is compute, bookkeeping comes after, marked, and
    nothing is lost (the group's total, every record, shares adding up to 100)."""
    from pyprof.trace.naming import BOOKKEEPING
    s = stats(bookkeeping_window, exclude_categories=("MXNET_C_API",))
    group = _operator_group(s)
    by_total = sorted(group, key=lambda o: (-o.total_us, o.name))
    assert by_total[0].name in BOOKKEEPING  # the trace is the case: bookkeeping has the most time
    names = {o.name for o in group}
    assert {"WaitForVar", "DeleteVariable", "ResourceParallelRandomSetSeed"} <= names
    compute = [o for o in by_total if o.name not in BOOKKEEPING]
    apart = [o for o in by_total if o.name in BOOKKEEPING]
    group_us = sum(o.total_us for o in group)

    ops = [r for r in json.loads(summarize(bookkeeping_window, fmt="json"))["operators"]
           if r["device"] == "cpu/0" and r["category"] == "operator"]
    assert [r["name"] for r in ops] == [o.name for o in compute + apart]
    assert ops[0]["name"] == compute[0].name and ops[0]["bookkeeping"] is False
    assert [r["bookkeeping"] for r in ops] == [False] * len(compute) + [True] * len(apart)
    assert sum(r["total_us"] for r in ops) == group_us
    assert sum(r["share_pct"] for r in ops) == pytest.approx(100.0)
    wait = next(r for r in ops if r["name"] == "WaitForVar")
    assert wait["share_pct"] == pytest.approx(100.0 * s.find("WaitForVar")[0].total_us / group_us)

    text = summarize(bookkeeping_window)
    head, _, tail = text.partition("\nbookkeeping: ")
    assert tail, text  # the section of its own, titled with its time, calls and share
    bk_us = sum(o.total_us for o in apart)
    assert tail.startswith(f"{bk_us / 1e3:.3f} ms in {sum(o.count for o in apart)} calls, "
                           f"{100.0 * bk_us / group_us:.2f}% of cpu/0 / operator; the engine's own "
                           "work (waits, deletions, seeding), not compute")
    assert f"cpu/0 / operator: {group_us / 1e3:.3f} ms in {sum(o.count for o in group)} calls" in head
    rows = [line.split()[0] for line in head.splitlines()[4:] if line.strip()]
    assert rows == [o.name for o in compute]  # the compute table: no bookkeeping row
    assert [line.split()[0] for line in tail.split("\n\n")[1].splitlines()[2:]] == [o.name for o in apart]

    # top cuts compute only; bookkeeping stays whole
    top = json.loads(summarize(bookkeeping_window, fmt="json", top=1))["operators"]
    assert [r["name"] for r in top if r["category"] == "operator"] == [compute[0].name] + [o.name for o in apart]
    # rank_bookkeeping=True: one ranking, as any operator; the records still marked
    ranked = json.loads(summarize(bookkeeping_window, fmt="json", rank_bookkeeping=True))["operators"]
    ranked = [r for r in ranked if r["category"] == "operator"]
    assert [r["name"] for r in ranked] == [o.name for o in by_total]
    assert ranked[0]["bookkeeping"] is True
    assert "\nbookkeeping: " not in summarize(bookkeeping_window, rank_bookkeeping=True)


def test_summarize_by_shape_puts_bookkeeping_after_compute(bookkeeping_window):
    from pyprof.trace.naming import BOOKKEEPING
    s = stats(bookkeeping_window, exclude_categories=("MXNET_C_API",))
    group = sorted(_operator_group(s), key=lambda o: (-o.total_us, o.name))
    groups = [g for g in json.loads(summarize(bookkeeping_window, fmt="json", by="shape"))["groups"]
              if g["category"] == "operator"]
    marks = [g["bookkeeping"] for g in groups]
    assert marks == sorted(marks) and marks[0] is False and marks[-1] is True
    assert groups[0]["name"] == next(o.name for o in group if o.name not in BOOKKEEPING)
    assert {g["name"] for g in groups if g["bookkeeping"]} == {o.name for o in group if o.name in BOOKKEEPING}
    assert sum(g["total_us"] for g in groups) == sum(o.total_us for o in group)
    text = summarize(bookkeeping_window, by="shape", fmt="markdown")
    compute, _, apart = text.partition("\n#### bookkeeping: ")
    assert "WaitForVar" in apart and "WaitForVar" not in compute and "| dot " in compute
    assert "| dot " not in apart
