"""When a trace tells the memory counter's rise inside an event (pyprof.attribution.memory):
samples are stamped just after their update, so two threads' samples whose possible update
moments overlap leave the rise unknown. Synthetic traces, every number chosen by hand."""

from __future__ import annotations

import random

from pyprof.attribution.memory import UNCHECKED, CounterSamples

_NAME = "Memory: cpu/0"


def _c(ts, tid, value):
    return {"ph": "C", "name": _NAME, "ts": ts, "pid": 1, "tid": tid, "args": {_NAME: value}}


def _slice(name, b, e, tid):
    return [{"ph": "B", "name": name, "cat": "operator", "ts": b, "pid": 0, "tid": tid},
            {"ph": "E", "name": name, "cat": "operator", "ts": e, "pid": 0, "tid": tid}]


def _trace(free_b, free_ts):
    # worker 1: a sample at 5 (the window's first), then relu [10, 14] allocating 100 at 13;
    # thread 2 frees 40 inside its DeleteVariable [free_b, free_ts + 1], stamped at free_ts
    ev = [_c(5, 1, 1000)] + _slice("relu", 10, 14, 1) + _slice("DeleteVariable", free_b, free_ts + 1, 2)
    if free_ts < 13:
        ev += [_c(free_ts, 2, 960), _c(13, 1, 1060)]
    else:
        ev += [_c(13, 1, 1100), _c(free_ts, 2, 1060)]
    return ev


def test_a_rise_the_stamps_order_is_told():
    s = CounterSamples(_trace(20, 21))  # the free comes after the relu's event
    assert s.rise("cpu/0", 1, 10, 14) == (100, None)
    assert s.rise("cpu/0", 2, 20, 22) == (-40, None)
    s = CounterSamples(_trace(6, 7))  # before the relu began: ordered too
    assert s.rise("cpu/0", 1, 10, 14) == (100, None)


def test_another_threads_sample_that_may_come_between_leaves_it_unknown():
    # the free's update lies in (11, 12], the relu's in (10, 13]: either came first
    s = CounterSamples(_trace(11, 12))
    assert s.rise("cpu/0", 1, 10, 14) == (None, "interleaved")
    # stamped after the relu's sample, but possibly updated before it: unknown as well
    s = CounterSamples(_trace(12, 13.5))
    assert s.rise("cpu/0", 1, 10, 14) == (None, "interleaved")


def test_the_first_sample_and_a_device_without_samples_say_so():
    ev = _slice("relu", 4, 6, 1) + [_c(5, 1, 1000)]
    s = CounterSamples(ev)
    assert s.rise("cpu/0", 1, 4, 6) == (None, "first_sample")
    assert s.rise("gpu/0", 1, 4, 6) == (None, "no_samples")
    assert s.rise("cpu/0", 1, 7, 9) == (0, None)  # no sample inside: nothing allocated
    assert set(UNCHECKED) >= {"first_sample", "no_samples", "interleaved", "no_shapes"}


def _tied(free_end, next_begin):
    # one worker: DeleteVariable [6, free_end] frees 40, stamped at 10; relu [10, 14] allocates
    # 100, stamped at 13; the next DeleteVariable [next_begin, 18] frees 100, stamped at 14
    return ([_c(5, 1, 1000)] + _slice("DeleteVariable", 6, free_end, 1) + [_c(10, 1, 960)]
            + _slice("relu", 10, 14, 1) + [_c(13, 1, 1060)]
            + _slice("DeleteVariable", next_begin, 18, 1) + [_c(14, 1, 960)])


def test_a_sample_in_a_microsecond_two_slices_share_is_nobodys():
    # stamps are whole microseconds (the seed's 13 misses in a CI run were these): a sample at
    # the relu's begin where the DeleteVariable before it ends is either slice's
    assert CounterSamples(_tied(10, 16)).rise("cpu/0", 1, 10, 14) == (None, "shared_stamp")
    # at its end where the next slice begins: the same
    assert CounterSamples(_tied(9, 14)).rise("cpu/0", 1, 10, 14) == (None, "shared_stamp")
    # no other slice in those microseconds: the samples are the relu's (the check's premise)
    assert CounterSamples(_tied(9, 16)).rise("cpu/0", 1, 10, 14) == (-40 + 100 - 100, None)
    assert "shared_stamp" in UNCHECKED


def _certain_rises(events):
    """The module's rule by brute force over one device's samples: each sample's ``lo`` by
    scanning, then its rise certain when its predecessor is surely before it and every other
    sample surely before the predecessor or surely after it."""
    bounds, slices, raw = CounterSamples.collect(events)
    s = sorted(raw.get("cpu/0", []), key=lambda x: (x[0], x[1]))
    lo = []
    for k, (ts, _, tid, _) in enumerate(s):
        low = max([b for b in bounds.get(tid, []) if b < ts], default=float("-inf"))
        low = max([low] + [x[0] for x in s[:k] if x[2] == tid])
        begun = sorted(x for x in zip(*slices.get(tid, ([], []))) if x[0] <= ts)
        if begun:
            b, e = begun[-1]
            if e >= ts and (b < ts or ts not in slices[tid][1]):
                low = max(low, b)
        lo.append(low)

    def before(q, p):  # q's update surely came before p's
        return s[q][2] == s[p][2] and q < p or s[q][0] < lo[p]

    rises = [None] * len(s)
    for k in range(1, len(s)):
        p = k - 1
        if before(p, k) and all(before(q, p) for q in range(p)) \
                and all(before(k, q) for q in range(k + 1, len(s))):
            rises[k] = s[k][3] - s[p][3]
    return rises


def test_the_certain_rises_are_the_rules_by_brute_force():
    # 3,000 seeded random traces: ties in whole microseconds, fractional stamps, three threads,
    # and events without one, B/E and X slices, samples inside and outside them, stamps past
    # 2**53 (compared exactly)
    rng = random.Random(7)
    checked = certain = 0
    for n in range(3000):
        base = 2 ** 60 if n % 5 == 4 else 0
        frac = n % 4 == 3

        def stamp():
            x = rng.randint(0, 30) + base
            return x + 0.5 if frac and rng.random() < 0.3 else x
        ev, value = [], 0
        for _ in range(rng.randint(1, 40)):
            kind, tid = rng.random(), rng.choice((1, 2, 3, 3, None))  # None: no tid
            if kind < 0.3:
                ev.append({"ph": "X", "name": "op", "ts": stamp(), "dur": rng.randint(0, 5),
                           "pid": 0, "tid": tid})
            elif kind < 0.45:
                b = stamp()
                ev += _slice("op", b, b + rng.randint(0, 4), tid)
            elif kind < 0.9:
                value += rng.randint(-50, 80)
                ev.append(_c(stamp(), tid, value))
            else:
                ev.append({"ph": "i", "name": "m", "ts": stamp(), "pid": 0, "tid": tid})
        samples = CounterSamples(ev)
        got = samples.series.get("cpu/0", ([], [], []))[2]
        want = _certain_rises(ev)
        assert got == want, f"trace {n}"
        for _ in range(5):  # an event's rise: its thread's samples inside it, by a scan
            tid, start = rng.choice((1, 2, 3, None)), rng.randint(0, 30) + base
            end = start + rng.randint(0, 6)
            stamps, tids, rises = samples.series.get("cpu/0", ([], [], []))
            inside = [k for k, (t, i) in enumerate(zip(stamps, tids)) if i == tid and start <= t <= end]
            r = samples.rise("cpu/0", tid, start, end)
            if not stamps:
                assert r == (None, "no_samples")
            elif inside and inside[0] == 0:
                assert r == (None, "first_sample")
            elif any(rises[k] is None for k in inside):
                assert r == (None, "interleaved")
            else:
                assert r in ((sum(rises[k] for k in inside), None), (None, "shared_stamp"))
        checked += len(want)
        certain += sum(r is not None for r in want)
    assert checked > 20000 and 1000 < certain < checked - 1000  # both outcomes, often


def test_stamps_past_any_float_are_compared_exactly():
    big = 10 ** 400  # no float64 holds it: the stamps are compared as Python integers
    ev = ([_c(big + 5, 1, 1000)] + _slice("relu", big + 10, big + 14, 1)
          + [_c(big + 13, 1, 1100)] + _slice("DeleteVariable", big + 20, big + 22, 2)
          + [_c(big + 21, 2, 1060)])
    s = CounterSamples(ev)
    assert s.series["cpu/0"][2] == _certain_rises(ev) == [None, 100, -40]
    assert s.rise("cpu/0", 1, big + 10, big + 14) == (100, None)
