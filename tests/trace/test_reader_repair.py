import gzip
import json
import shutil

import pytest

from pyprof.trace import TraceFormatError, TraceNotFoundError, TraceReader, iter_events, repair


def _events(path):
    r = TraceReader(path, chunk_bytes=64)  # tiny chunks exercise the carry-over logic
    return list(r), r.report


def test_valid_file_reads_every_event(fx):
    evs, rep = _events(fx("small.json"))
    assert len(evs) == len(json.load(open(fx("small.json")))["traceEvents"]) == 20
    assert not rep.damaged and rep.display_time_unit == "ms"
    assert evs[3]["tid"] == 11063534467229197503  # 64-bit ids kept exactly


@pytest.mark.parametrize("name, flags, n", [
    ("missing_tail.json", {"missing_tail": True, "dropped_fragments": 1}, 9),
    ("missing_head.json", {"missing_head": True}, 17),
    ("leading_comma.json", {"missing_head": True, "leading_comma": True}, 17),
    ("quote.json", {"escaped_names": 2}, 20),
])
def test_damaged_files(fx, name, flags, n):
    evs, rep = _events(fx(name))
    assert len(evs) == n
    for k, v in flags.items():
        assert getattr(rep, k) == v
    assert rep.damaged and rep.problems()


def test_unescaped_quote_is_kept_in_name(fx):
    names = {e.get("name") for e in iter_events(fx("quote.json"))}
    assert 're"lu' in names


def test_gzip_and_phase_filter(fx, tmp_path):
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(fx("small.json").read_bytes()))
    assert [e["ph"] for e in iter_events(gz, phases={"C"})] == ["C"] * 3


def test_errors(tmp_path):
    with pytest.raises(TraceNotFoundError, match="check the path"):
        list(iter_events(tmp_path / "nope.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("hello world, not a trace")
    with pytest.raises(TraceFormatError):
        list(iter_events(bad))


@pytest.mark.parametrize("name", ["missing_tail.json", "missing_head.json", "leading_comma.json", "quote.json"])
def test_repair_in_place_gives_valid_json(fx, tmp_path, name):
    p = tmp_path / name
    shutil.copy(fx(name), p)
    res = repair(p)
    assert res.out == str(p) and res.fixed
    data = json.loads(p.read_text())
    assert len(data["traceEvents"]) == res.events
    assert repair(p).out is None  # now valid: nothing to do, file untouched


def test_repair_output_equals_expected(fx, tmp_path):
    # quote.json is small.json with an unescaped quote in one name: once repaired, the two are
    # the same trace (B/E pairs as X, MXNet's 64-bit ids renumbered: docs/trace-format.md)
    out = tmp_path / "fixed.json"
    res = repair(fx("quote.json"), out)
    fixed = json.loads(out.read_text())["traceEvents"]
    repair(fx("small.json"), tmp_path / "small.json")
    expected = json.loads((tmp_path / "small.json").read_text())["traceEvents"]
    for e in expected:
        if e.get("name") == "relu":
            e["name"] = 're"lu'
    assert fixed == expected
    assert res.report.escaped_names == 2 and res.slices.complete == 5


def test_appended_dump_after_a_repaired_name(tmp_path):
    # A second dump appended after a first whose body needs repair: the piece holding the "]}"
    # seam is split there (not dropped with the events on both sides).
    ev = '{"name": "%s", "ph": "X", "ts": 1, "dur": 2, "pid": 0, "tid": 0}'
    dump = '{"traceEvents": [%s,%s], "displayTimeUnit": "ms"}\n'
    p = tmp_path / "t.json"
    p.write_text(dump % (ev % 'a"b', ev % "c") + dump % (ev % "d", ev % "e"))
    r = TraceReader(p)
    assert [e["name"] for e in r] == ['a"b', "c", "d", "e"]
    assert (r.report.inner_tails, r.report.escaped_names, r.report.dropped_fragments) == (1, 1, 0)
