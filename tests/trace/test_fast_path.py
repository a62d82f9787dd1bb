"""The fast (regex + numpy) path of stats() gives exactly what the orjson + dict loop gives."""

import gzip
import os
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pyprof.trace import summarize

S = sys.modules["pyprof.trace.statistics"]
F = sys.modules["pyprof.trace.fastpath"]

KWARGS = [{}, {"exclude_categories": {"MXNET_C_API"}}, {"categories": {"operator"}},
          {"exclude_categories": {"MXNET_C_API", "dom"}}]
LONG = os.environ.get("PYPROF_LONG_TESTS") == "1"


def kwargs_of(*which: int) -> list[dict]:
    """The category filters a case reads with: the ``KWARGS`` numbered ``which`` (mod 4; the
    cases of a test share them out, so each filter is read somewhere), every one with
    PYPROF_LONG_TESTS=1."""
    return KWARGS if LONG else [KWARGS[i % len(KWARGS)] for i in which]


def seed_chunks(seeds: int, chunks: list) -> list[tuple]:
    """(seed, chunk) cases: each seed with one chunk size (each size at least once); every
    pair with PYPROF_LONG_TESTS=1."""
    n = max(seeds, len(chunks))
    return [(s, c) for s in range(seeds) for c in chunks] if LONG else [(i % seeds, chunks[i % len(chunks)]) for i in range(n)]


def canon(st):
    ops = [(o.category, o.name, o.device, o.count, o.total_us, o.min_us, o.max_us, o.mean_us,
            o.p50_us, o.p90_us, o.p99_us, o.durations_us.tolist()) for o in st.operators]
    reps = [(r.events, r.problems(), r.display_time_unit, r.bytes_read) for r in st.reports]
    return ops, st.memory, st.counters, st.unmatched_begin, st.unmatched_end, st.phase_counts, reps


@pytest.fixture
def engines(monkeypatch):
    """Run stats() with the fast path and without; return both results and the fast-chunk count."""
    used = {"fast": 0, "slow": 0}
    orig = F.parse_body

    def counting(*a, **k):
        r = orig(*a, **k)
        used["fast" if r is not None else "slow"] += 1
        return r

    monkeypatch.setattr(S, "parse_body", counting)

    def run(paths, chunk=None, **kw):
        if chunk:
            monkeypatch.setattr(S, "_CHUNK_BYTES", chunk)
        used.update(fast=0, slow=0)
        monkeypatch.setattr(S, "FAST_PATH", True)
        fast = S.stats(paths, **kw)
        fast_md = summarize(fast, fmt="markdown")
        counts = dict(used)
        monkeypatch.setattr(S, "FAST_PATH", False)
        slow = S.stats(paths, **kw)
        assert canon(fast) == canon(slow)
        assert fast_md == summarize(slow, fmt="markdown")
        return fast, counts

    return run


def ev(name, cat, ph, ts, pid, tid, extra=""):
    """One event exactly as MXNet 1.9.1 writes it."""
    return (f'    {{\n        "name": "{name}",\n        "cat": "{cat}",\n        "ph": "{ph}",\n'
            f'        "ts": {ts},\n{extra}        "pid": {pid},\n        "tid": {tid}\n    }}\n')


def meta(name, pid):
    return ('        {\n            "ph": "M",\n            "args": {\n                "name": "%s"\n'
            '            },\n            "pid": %d,\n            "name": "process_name"\n        }' % (name, pid))


def write_trace(path, events, metas=(("cpu/0", 0), ("cpu/1", 1)), tail=True, mid_meta=None):
    text = '{\n    "traceEvents": [\n' + ",\n".join(meta(n, p) for n, p in metas) + ",\n\n"
    body = ",\n".join(events)
    if mid_meta:  # metadata in the middle of the file, as MXNet writes per category
        half = len(events) // 2
        body = ",\n".join(events[:half]) + ",        " + meta(*mid_meta) + ",\n\n" + ",\n".join(events[half:])
    text += body
    if tail:
        text += '\n\n    ],\n    "displayTimeUnit": "ms"\n}\n'
    path.write_text(text)
    return path


TID = 11063534467229197503
API_PID, OP_PID, MEM_PID, DOM_PID = 849786139768988538, 3060606181218273969, 9785678402843609691, 13643738130282713016


def random_events(rng, n_calls, names, nested=True):
    """Interleaved operators (with async copies), API calls, memory/other counters, tasks, frames."""
    out, ts = [], 1_795_937_667_000_000
    open_ops = {0: [], 1: []}
    for i in range(n_calls):
        r = rng.random()
        dev = rng.randrange(2)
        name = rng.choice(names)
        if r < 0.35:
            out.append(ev(name, "operator", "B", ts, dev, TID + dev))
            out.append(ev(name, "operator", "b", ts, OP_PID, TID + dev, f'        "id": {TID + dev},\n'))
            open_ops[dev].append(name)
            if not nested or len(open_ops[dev]) > 3 or rng.random() < 0.6:
                ts += rng.randrange(0, 50)
                nm = open_ops[dev].pop()
                out.append(ev(nm, "operator", "E", ts, dev, TID + dev))
                out.append(ev(nm, "operator", "e", ts, OP_PID, TID + dev, f'        "id": {TID + dev},\n'))
        elif r < 0.45 and open_ops[dev]:
            nm = open_ops[dev].pop()
            out.append(ev(nm, "operator", "E", ts, dev, TID + dev))
        elif r < 0.6:
            api = rng.choice(["MXImperativeInvokeEx", "MXNDArrayFree"])
            out.append(ev("MXNet C API Calls", "MXNET_C_API", "C", ts, API_PID, 7,
                          f'        "args": {{ "MXNet C API Calls": {i} }},\n'))
            out.append(ev(api, "MXNET_C_API", "b", ts, API_PID, 7, '        "id": 7,\n'))
            out.append(ev(api, "MXNET_C_API", "e", ts + rng.randrange(30), API_PID, 7, '        "id": 7,\n'))
        elif r < 0.75:
            out.append(ev(f"Memory: cpu/{dev}", "Device Storage", "C", ts, MEM_PID, TID,
                          f'        "args": {{ "Memory: cpu/{dev}": {rng.randrange(0, 1 << 40)} }},\n'))
        elif r < 0.82:
            out.append(ev("ctr", "dom", "C", ts - rng.randrange(3), DOM_PID, TID,
                          f'        "args": {{ "ctr": {rng.randrange(-5, 50)} }},\n'))
        elif r < 0.9:
            out.append(ev(name, "dom", "b", ts, DOM_PID, TID, f'        "id": {rng.randrange(3)},\n'))
            out.append(ev(name, "dom", "e", ts + rng.randrange(9), DOM_PID, TID, f'        "id": {rng.randrange(3)},\n'))
        elif r < 0.95:
            out.append(ev(name, "dom,frame", "(", ts, 5, TID))
            out.append(ev(name, "dom,frame", ")", ts + 3, 5, TID))
        else:
            out.append(ev("mk", "dom,instant_marker", "n", ts, 6, TID, '        "s": "p",\n'))
        ts += rng.randrange(1, 100)
    return out


CLEAN = ["dot", "Activation,Convolution", "[dot]", "_plus_scalar", "a [b] (c), d", "naïve", "x:y"]


@pytest.mark.parametrize("kw", KWARGS)
def test_fixtures_identical(engines, fx, kw):
    names = ["small.json", "quote.json", "missing_tail.json", "missing_head.json", "leading_comma.json"]
    for name in names:
        engines(fx(name), **kw)
    engines([fx(n) for n in names], **kw)


@pytest.mark.parametrize(("seed", "chunk"), [pytest.param(s, c, marks=[pytest.mark.slow] if c == 1 << 10 else [])
                                             for s, c in seed_chunks(4, [1 << 10, 1 << 14, 16 << 20])])
def test_random_clean_traces_take_fast_path(engines, tmp_path, seed, chunk):
    rng = random.Random(seed)
    p = write_trace(tmp_path / "t.json", random_events(rng, 3000, CLEAN), mid_meta=("dom", DOM_PID))
    for kw in kwargs_of(seed, seed + 2):
        st, used = engines(p, chunk=chunk, **kw)
        assert used["slow"] == 0 and used["fast"] >= 1
        if not kw:
            assert st.find("dot") and st.memory and st.counters and st.unmatched_begin


@pytest.mark.parametrize("odd", ['re"lu', 'back\\\\slash', "br{ace}", "a}, {b", "tab\there", "ctl\x01x",
                                 "\xff\xfe"])
@pytest.mark.parametrize("chunk", [1 << 11, 16 << 20])
def test_odd_names_fall_back_per_chunk(engines, tmp_path, odd, chunk):
    rng = random.Random(7)
    evs = random_events(rng, 1500, CLEAN + [odd])
    p = tmp_path / "t.json"
    write_trace(p, evs)
    if odd == "\xff\xfe":  # invalid UTF-8 bytes in a name
        p.write_bytes(p.read_bytes().replace("\xff\xfe".encode(), b"\xff\xfe"))
    n = len(odd) + chunk.bit_length()  # a case's two filters: spread over the cases
    for kw in kwargs_of(n, n + 1):
        _, used = engines(p, chunk=chunk, **kw)
        assert used["slow"] >= 1  # the chunk(s) holding the odd name took the orjson path
        if chunk == 1 << 11:
            assert used["fast"] >= 1  # ... and only those: clean chunks stay fast


@pytest.mark.parametrize("cut", [0.3, 0.7, 0.999])
@pytest.mark.parametrize("chunk", [1 << 12, 16 << 20])
def test_damaged_tails_and_heads(engines, tmp_path, cut, chunk):
    rng = random.Random(3)
    full = write_trace(tmp_path / "full.json", random_events(rng, 1500, CLEAN)).read_bytes()
    (tmp_path / "cut.json").write_bytes(full[:int(len(full) * cut)])
    start = full.index(b'\n    {\n        "name"')
    (tmp_path / "nohead.json").write_bytes(b"," + full[start:int(len(full) * cut)])
    gz = tmp_path / "cut.json.gz"
    gz.write_bytes(gzip.compress(full[:int(len(full) * cut)]))
    for i, name in enumerate(("cut.json", "nohead.json", "cut.json.gz")):
        for kw in kwargs_of(i, i + 2):
            st, _ = engines(tmp_path / name, chunk=chunk, **kw)
        assert st.reports[0].damaged


def test_leading_zero_and_huge_ids_fall_back(engines, tmp_path):
    evs = [ev("dot", "operator", "B", 100, 0, TID), ev("dot", "operator", "E", "0110", 0, TID),
           ev("dot", "operator", "B", 200, 0, 2 ** 64), ev("dot", "operator", "E", 210, 0, 2 ** 64)]
    p = write_trace(tmp_path / "t.json", evs)
    st, used = engines(p)
    assert used["fast"] == 0


def test_unmatched_and_nested_same_name(engines, tmp_path):
    evs = [ev("dot", "operator", "E", 5, 0, TID),  # end without begin
           ev("dot", "operator", "B", 10, 0, TID), ev("dot", "operator", "B", 12, 0, TID),
           ev("dot", "operator", "B", 13, 1, TID), ev("dot", "operator", "E", 20, 0, TID),
           ev("dot", "operator", "E", 30, 0, TID), ev("dot", "operator", "E", 31, 0, TID),
           ev("dot", "operator", "B", 40, 0, TID)]  # begin without end
    p = write_trace(tmp_path / "t.json", evs)
    st, used = engines(p, chunk=256)
    assert used["slow"] == 0
    assert st.find("dot", device="cpu/0")[0].durations_us.tolist() == [8, 20]
    assert st.unmatched_end == 2 and st.unmatched_begin == 2


def test_pair_stack_matches_reference():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(0, 60))
        keys = rng.integers(0, 3, n)
        begin = rng.random(n) < 0.55
        stacks, pairs, unmatched = {}, [], 0
        for i in range(n):
            if begin[i]:
                stacks.setdefault(keys[i], []).append(i)
            elif stacks.get(keys[i]):
                pairs.append((i, stacks[keys[i]].pop()))
            else:
                unmatched += 1
        e, b, u, o = F.pair_stack(keys.astype(np.int64), begin)
        assert list(zip(e.tolist(), b.tolist())) == pairs and u == unmatched
        assert o.tolist() == sorted(i for s in stacks.values() for i in s)


REAL = textwrap.dedent("""
    import sys
    import mxnet as mx
    from mxnet import profiler
    profiler.set_config(filename=sys.argv[1], profile_all=True, continuous_dump=True)
    profiler.set_state('run')
    a = mx.nd.ones((16, 16))
    for _ in range(40):
        b = (mx.nd.dot(a, a) + 1).relu()
    b.wait_to_read()
    dom = profiler.Domain('dom')
    for nm in ('ta"sk', 'plain', 'a,b [c]'):
        t = profiler.Task(dom, nm); t.start(); t.stop()
    fr = profiler.Frame(dom, 'fr,a]me'); fr.start(); fr.stop()
    e = profiler.Event('my{ev}'); e.start(); e.stop()
    c = profiler.Counter(dom, 'ctr'); c.set_value(5); c += 3
    profiler.Marker(dom, 'mk').mark('process')
    mx.nd.waitall()
    profiler.set_state('stop')
    profiler.dump()
""")


def test_real_mxnet_trace(engines, tmp_path):
    pytest.importorskip("mxnet")
    path = tmp_path / "real.json"
    subprocess.run([sys.executable, "-c", REAL, str(path)], check=True, timeout=120, capture_output=True)
    for chunk in (1 << 12, 16 << 20):
        for kw in KWARGS:
            st, used = engines(path, chunk=chunk, **kw)
            assert used["fast"] >= 1
    assert st.find("dot") and st.find("dot")[0].count == 40
