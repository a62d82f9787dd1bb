"""Matching a window whose calls come from several Python threads, on synthetic calls and
events (pyprof.attribution.matching): a call's seq is taken when it returns, so it does not
order two threads' calls, and MXNet's temp-space copies are taken per thread."""

from __future__ import annotations

import pytest

from pyprof.attribution import matching
from pyprof.attribution.calls import HANDLES, Call

RELU, SUM = 9101, 9102  # operator handles of this test; sum requests temp space


@pytest.fixture(autouse=True)
def handles(monkeypatch):
    monkeypatch.setitem(HANDLES, "relu", RELU)
    monkeypatch.setitem(HANDLES, "sum", SUM)


def _call(seq: int, t: int, pushed: int, op: int, thread: int, producers: tuple = ()) -> Call:
    return Call(seq, t, pushed, op, [], [], None, None, [], [], producers, thread, None,
                (0,) * len(producers))


def _events(*spans: tuple[str, int, int]) -> list[dict]:
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "cpu/0"}}]
    for name, start, end in spans:
        ev += [{"ph": "B", "name": name, "cat": "operator", "pid": 1, "tid": 7, "ts": start},
               {"ph": "E", "name": name, "cat": "operator", "pid": 1, "tid": 7, "ts": end}]
    return ev


def _matched(calls, events) -> list[tuple[int, str]]:
    found, _ = matching.match(calls, events, env={})
    return [(found[i][0].seq, found[i][1]) for i in sorted(found)]


def test_a_call_that_returned_last_but_began_first_is_a_candidate():
    # thread 2's relu began at 100 and returned at 400 (seq 1); thread 1's began at 300 and
    # returned first (seq 0). The event at 200 can only be thread 2's.
    calls = [_call(0, 300, 350, RELU, 1), _call(1, 100, 400, RELU, 2)]
    assert _matched(calls, _events(("relu", 200, 210), ("relu", 500, 510))) == [
        (1, "exact"), (0, "exact")]


def test_each_thread_takes_its_own_temp_space_copies():
    # four copies a thread (MXNet's default): thread 1's fifth sum waits for its first, which a
    # slow producer holds back; thread 2's sums, called after it, are ready and run first
    env = {"MXNET_CPU_TEMP_COPY": "4"}
    slow = _call(0, 0, 10, RELU, 1)
    one = [_call(1, 20, 30, SUM, 1, (0,))] + [_call(s, 10 * s + 20, 10 * s + 30, SUM, 1)
                                               for s in range(2, 6)]
    two = [_call(s, 10 * s + 20, 10 * s + 30, SUM, 2) for s in range(6, 10)]
    events = _events(("relu", 100, 5000), ("sum", 5010, 5020),  # slow, then thread 1's first
                     *(("sum", 200 + 10 * k, 205 + 10 * k) for k in range(7)))  # ready sums
    events = [events[0]] + sorted(events[1:], key=lambda e: e["ts"])
    found, _ = matching.match([slow, *one, *two], events, env=env)
    by_start = {e["ts"]: found[i][0].seq for i, e in enumerate(events) if i in found}
    # the ready sums: thread 1's second to fourth (2, 3, 4), thread 2's four (6..9); the fifth
    # of thread 1 (5) waits for its first (1), which waits for the slow relu
    assert [by_start[200 + 10 * k] for k in range(7)] == [2, 3, 4, 6, 7, 8, 9]
    assert by_start[5010] == 1
    assert 5 not in by_start.values()  # its event is not in this window
