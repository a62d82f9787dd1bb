"""stats() with worker processes (large plain files) gives exactly the sequential result."""

import gzip
import os
import random
import sys

import pytest

from pyprof.trace import TraceReader, summarize

from test_fast_path import CLEAN, DOM_PID, KWARGS, TID, canon, ev, kwargs_of, random_events, seed_chunks, write_trace

S = sys.modules["pyprof.trace.statistics"]
from pyprof.trace import parallel as P  # noqa: E402
from pyprof.process import workers as W  # noqa: E402

pytestmark = pytest.mark.skipif(not P.available(), reason="needs fork")


@pytest.fixture
def both(monkeypatch):
    """stats() sequentially and with forced workers; asserts identical results, returns them."""
    def run(paths, chunk=None, workers=(2,), **kw):
        if chunk:
            monkeypatch.setattr(S, "_CHUNK_BYTES", chunk)
        seq = S.stats(paths, _workers=1, **kw)
        for n in workers:
            P.LAST_RUN.clear()
            par = S.stats(paths, _workers=n, **kw)
            assert P.LAST_RUN["workers"] == n
            assert canon(par) == canon(seq)  # durations, in order, included
            assert summarize(par, fmt="markdown") == summarize(seq, fmt="markdown")
            assert par.to_json() == seq.to_json()
        return seq

    return run


@pytest.mark.parametrize(("seed", "chunk"), seed_chunks(3, [1 << 10, 3000, 1 << 14]))
def test_random_traces_many_chunks(both, tmp_path, seed, chunk):
    rng = random.Random(seed)
    p = write_trace(tmp_path / "t.json", random_events(rng, 2500, CLEAN), mid_meta=("dom", DOM_PID))
    for kw in kwargs_of(0, seed + 1):
        st = both(p, chunk=chunk, workers=(2, 3), **kw)
    assert st.unmatched_begin  # nested begins left open at the end


def test_pairs_straddle_every_boundary(both, tmp_path):
    """Deep nesting: every begin in the first half, the ends in the second, unmatched on both sides."""
    evs = [ev("dot", "operator", "E", 1, 0, TID), ev("dot", "operator", "E", 2, 1, TID)]
    for i in range(400):
        evs.append(ev("dot" if i % 3 else "conv", "operator", "B", 10 + i, i % 2, TID))
        evs.append(ev("api", "MXNET_C_API", "b", 10 + i, 7, 7, '        "id": 7,\n'))
    for i in range(399, -1, -1):
        evs.append(ev("dot" if i % 3 else "conv", "operator", "E", 10_000 + 7 * i, i % 2, TID))
        if i % 5:
            evs.append(ev("api", "MXNET_C_API", "e", 10_000 + 3 * i, 7, 7, '        "id": 7,\n'))
    evs += [ev("dot", "operator", "B", 50_000, 0, TID), ev("dot", "operator", "E", 50_001, 1, TID)]
    p = write_trace(tmp_path / "t.json", evs)
    for i, chunk in enumerate((512, 2048, 1 << 20)):
        for kw in kwargs_of(i, i + 3):
            st = both(p, chunk=chunk, workers=(2, 3), **kw)
    d = st.find("dot", device="cpu/0")[0].durations_us.tolist()
    assert d[0] == 10_000 + 7 * 398 - 408  # innermost begin pairs with the first end
    assert st.unmatched_end >= 2 and st.unmatched_begin >= 1


@pytest.mark.parametrize("odd", ['re"lu', "a}, {b", "\xff\xfe"])
def test_fallback_chunks_in_parallel(both, tmp_path, odd):
    """Chunks not in the fast layout are parsed by the parent with orjson, in order."""
    evs = random_events(random.Random(5), 1500, CLEAN + [odd])
    p = tmp_path / "t.json"
    write_trace(p, evs)
    if odd == "\xff\xfe":
        p.write_bytes(p.read_bytes().replace("\xff\xfe".encode(), b"\xff\xfe"))
    for kw in KWARGS:
        both(p, chunk=1 << 11, **kw)


@pytest.mark.parametrize("cut", [0.4, 0.999])
def test_damaged_files_and_several_files(both, tmp_path, cut):
    full = write_trace(tmp_path / "full.json", random_events(random.Random(3), 1500, CLEAN)).read_bytes()
    (tmp_path / "cut.json").write_bytes(full[:int(len(full) * cut)])
    start = full.index(b'\n    {\n        "name"')
    (tmp_path / "nohead.json").write_bytes(b"," + full[start:int(len(full) * cut)])
    (tmp_path / "cut.json.gz").write_bytes(gzip.compress(full[:int(len(full) * cut)]))  # sequential
    names = ["full.json", "cut.json", "nohead.json", "cut.json.gz"]
    for kw in kwargs_of(*((0, 1) if cut < 0.5 else (2, 3))):
        st = both([tmp_path / n for n in names], chunk=1 << 12, **kw)
    assert [r.damaged for r in st.reports] == [False, True, True, True]


def test_fixtures(both, fx):
    names = ["small.json", "quote.json", "missing_tail.json", "missing_head.json", "leading_comma.json"]
    for chunk in (1 << 10, 1 << 20):
        both([fx(n) for n in names], chunk=chunk)


def test_no_events_still_raises(tmp_path):
    p = tmp_path / "junk.json"
    p.write_bytes(b"hello, this is not a trace at all " * 20)
    with pytest.raises(S.TraceError) as seq:
        S.stats(p, _workers=1)
    with pytest.raises(S.TraceError) as par:
        S.stats(p, _workers=2)
    assert type(seq.value) is type(par.value)


@pytest.mark.parametrize("chunk", [1 << 10, 4096, 5000, 1 << 14, 8 << 20])
def test_body_spans_match_bodies(fx, tmp_path, chunk):
    evs = random_events(random.Random(1), 800, CLEAN)
    full = write_trace(tmp_path / "t.json", evs).read_bytes()
    (tmp_path / "cut.json").write_bytes(b"  ,\n" + full[40:len(full) - 500] + b",\n  ")
    (tmp_path / "tiny.json").write_bytes(full[:3000])
    paths = [tmp_path / n for n in ("t.json", "cut.json", "tiny.json")] + [
        fx(n) for n in ("small.json", "quote.json", "missing_tail.json", "missing_head.json",
                        "leading_comma.json")]
    for path in paths:
        data = path.read_bytes()
        a = TraceReader(path, chunk_bytes=chunk, progress=False)
        b = TraceReader(path, chunk_bytes=chunk, progress=False)
        a.record_parsed(0)  # bodies are not parsed here: do not report the file as empty
        assert [data[o:o + n] for o, n in b.body_spans()] == list(a.bodies())
        assert a.report == b.report


def test_worker_count_choice(tmp_path, monkeypatch):
    p = write_trace(tmp_path / "t.json", random_events(random.Random(2), 200, CLEAN))
    monkeypatch.delenv("PYPROF_TRACE_WORKERS", raising=False)
    monkeypatch.setattr(W, "_libmxnet_loaded", lambda: True)
    assert P.default_workers(1 << 30) == 1  # never fork a process that runs MXNet
    monkeypatch.setattr(W, "_libmxnet_loaded", lambda: False)
    assert P.default_workers(10 << 20) == 1
    assert P.default_workers(1 << 30) == max(1, min(2, os.cpu_count() or 1))
    monkeypatch.setenv("PYPROF_TRACE_WORKERS", "1")
    assert P.default_workers(1 << 30) == 1
    monkeypatch.setenv("PYPROF_TRACE_WORKERS", "3")
    assert P.default_workers(1 << 30) == 3
    assert P.default_workers(1 << 20) == 1  # small files: always sequential
    P.LAST_RUN.clear()
    S.stats(p)
    assert not P.LAST_RUN  # small file: no workers
    monkeypatch.setattr(W, "MIN_BYTES", 1)
    S.stats(p)
    assert P.LAST_RUN["workers"] == 3 and len(P.LAST_RUN["worker_peak_rss_kb"]) == 3
    monkeypatch.setenv("PYPROF_TRACE_WORKERS", "1")
    P.LAST_RUN.clear()
    S.stats(p)
    assert not P.LAST_RUN


def test_dead_workers_fall_back_to_parent(both, tmp_path, monkeypatch):
    def die(*_a):
        os._exit(3)

    monkeypatch.setattr(P, "_work", die)  # inherited by the forked workers
    p = write_trace(tmp_path / "t.json", random_events(random.Random(4), 1500, CLEAN))
    both(p, chunk=1 << 12)
    assert P.LAST_RUN["worker_peak_rss_kb"] == []


def test_progress_bar(tmp_path, capsys):
    pytest.importorskip("tqdm")
    p = write_trace(tmp_path / "t.json", random_events(random.Random(6), 500, CLEAN))
    assert canon(S.stats(p, _workers=2, progress=True)) == canon(S.stats(p, _workers=1, progress=False))
    assert "t.json" in capsys.readouterr().err
