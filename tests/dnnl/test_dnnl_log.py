"""pyprof.dnnl on committed logs: every layout (MKL-DNN 0.x, DNNL 1.x, oneDNN 2.x with and
without timestamps), totals against an independent sum of the last field, errors, the splitter."""

from __future__ import annotations

import importlib
import json
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dnnl_reference  # noqa: E402

from pyprof import dnnl  # noqa: E402
from pyprof.cli import main  # noqa: E402
from pyprof.dnnl.capture import Splitter  # noqa: E402
from pyprof.errors import ConfigError, LogFormatError  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"
LOGS = sorted(FIXTURES.glob("*.log"))


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
@pytest.mark.parametrize("workers", [1, 2])
def test_totals_equal_an_independent_sum(log, workers):
    text = log.read_text()
    ref = dnnl_reference.sums(text)
    s = dnnl.stats(log, workers=workers)
    assert {r.primitive for r in s.rows} == {p for _, p in ref}
    for r in s.rows:
        n, total = ref.get(("exec", r.primitive), (0, 0.0))
        assert (r.exec_count, r.exec_total_ms) == (n, pytest.approx(total, rel=1e-12))
        n, total = ref.get(("create", r.primitive), (0, 0.0))
        assert (r.create_count, r.create_total_ms) == (n, pytest.approx(total, rel=1e-12))
    assert s.exec_total_ms == pytest.approx(sum(t for (op, _), (_, t) in ref.items() if op == "exec"))
    assert s.other_lines == dnnl_reference.other_lines(text)
    assert sum(r.share for r in s.rows) == pytest.approx(100.0)


@pytest.mark.parametrize("block", [16, 97, 4096])
@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_blocks_of_any_size_give_the_same_result(log, block, monkeypatch, tmp_path):
    # blocks shorter than a line (the reader's buffer grows), cuts anywhere, no final newline
    cut = tmp_path / log.name
    cut.write_bytes(log.read_bytes().rstrip(b"\n"))
    whole = dnnl.stats(cut, by="shape", workers=1)
    monkeypatch.setattr(importlib.import_module("pyprof.dnnl.statistics"), "_BLOCK", block)
    small = dnnl.stats(cut, by="shape", workers=1)
    assert [(r.primitive, r.detail, r.exec_count, r.exec_min_ms, r.exec_max_ms, r.create_count)
            for r in small.rows] == [(r.primitive, r.detail, r.exec_count, r.exec_min_ms,
                                      r.exec_max_ms, r.create_count) for r in whole.rows]
    assert [r.exec_total_ms for r in small.rows] == pytest.approx([r.exec_total_ms for r in whole.rows])
    assert (small.other_lines, small.malformed_lines, small.timestamped, small.info.lines) == (
        whole.other_lines, whole.malformed_lines, whole.timestamped, whole.info.lines)
    ref = dnnl_reference.sums(log.read_text())
    assert small.exec_lines == sum(n for (op, _), (n, _) in ref.items() if op == "exec")


def test_fields_of_each_layout():
    v0 = dnnl.stats(FIXTURES / "v0_mkldnn.log", by="impl")
    assert [(r.primitive, r.detail, r.exec_count) for r in v0.rows] == [
        ("reorder", "jit:uni", 3), ("convolution", "jit:avx2", 1)]  # 1.97 ms before 1.63 ms
    assert v0.info.version.startswith("Intel(R) MKL-DNN v0.18.0")
    v1 = dnnl.stats(FIXTURES / "v1_dnnl.log", by="shape")
    conv = v1.find("convolution")
    assert [(r.detail, r.exec_count, r.create_count) for r in conv] == [
        ("mb32_ic32oc32_ih256oh256kh3sh1dh0ph1_iw256ow256kw3sw1dw0pw1", 3, 1)]
    assert conv[0].exec_min_ms == 19.9031 and conv[0].exec_max_ms == 20.7539
    assert v1.info.isa == "Intel AVX-512 with Intel DL Boost"
    v2 = dnnl.stats(FIXTURES / "v2_timestamps.log")
    assert v2.info.version == "oneDNN v2.4.4 (commit 5818c40f07bdb6307f9bc64e929836fe036da644)"
    assert v2.info.isa == "Intel AVX-512 with Intel DL Boost and bfloat16 support"
    assert v2.info.runtime == "OpenMP"
    assert (v2.timestamped, v2.exec_lines, v2.create_lines, v2.other_lines) == (7, 6, 1, 1)


def test_formats(capsys):
    assert main(["dnnl", str(FIXTURES / "v2_timestamps.log"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rows"][0]["primitive"] == "inner_product"
    assert data["rows"][0]["exec_total_ms"] == 3.28516
    assert main(["dnnl", str(FIXTURES / "v1_dnnl.log"), "--format", "csv", "--by", "impl"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("primitive,implementation,exec,total (ms)")
    row = lines[1].split(",")
    assert row[:3] == ["convolution", "jit:avx512_common", "3"]
    assert float(row[3]) == pytest.approx(20.7539 + 19.9031 + 20.1406)


def test_empty_foreign_missing(tmp_path, capsys):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    foreign = tmp_path / "foreign.log"
    foreign.write_text("hello\nworld, 1, 2\n")
    with pytest.raises(LogFormatError, match="is empty.*fix: "):
        dnnl.stats(empty)
    with pytest.raises(LogFormatError, match=r"none of its 2 line\(s\).*'hello'.*fix: "):
        dnnl.stats(foreign)
    with pytest.raises(LogFormatError, match="does not exist.*fix: "):
        dnnl.stats(tmp_path / "nope.log")
    with pytest.raises(ConfigError, match="unknown grouping 'op'"):
        dnnl.stats(FIXTURES / "v1_dnnl.log", by="op")
    assert main(["dnnl", str(foreign)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "fix: " in err


def test_merge_needs_timestamps(tmp_path):
    from pyprof.dnnl.merge import merge
    with pytest.raises(LogFormatError, match=r"has 6 primitive execution\(s\) but none with a timestamp"):
        merge(FIXTURES / "v2_plain_level2.log", tmp_path / "t.json", tmp_path / "o.json")


def test_truncated_last_line_is_skipped(tmp_path):
    text = (FIXTURES / "v2_timestamps.log").read_text()
    cut = tmp_path / "cut.log"
    cut.write_text(text + "dnnl_verbose,1796121156704.9,exec,cpu,inner_prod")
    s = dnnl.stats(cut)
    assert s.malformed_lines == 1
    assert s.exec_total_ms == pytest.approx(dnnl.stats(FIXTURES / "v2_timestamps.log").exec_total_ms)


@pytest.mark.parametrize("seed", range(5))
def test_splitter_passes_the_rest_through_unchanged(tmp_path, seed):
    rng = random.Random(seed)
    verbose = [ln for ln in (FIXTURES / "v2_timestamps.log").read_bytes().splitlines(keepends=True)
               if ln.startswith(b"dnnl_verbose,")]
    program = [b"plain line\n", b"no newline yet ", b"dnnl_ not a marker\n", b"\n", b"x" * 300 + b"\n",
               b"prompt> "]
    stream, want_out, want_log = b"", b"", b""
    for _ in range(60):
        if rng.random() < 0.5:
            line = rng.choice(verbose)
            stream += line
            want_log += line
        else:
            piece = rng.choice(program)
            stream += piece
            want_out += piece
    out_path = tmp_path / "out"
    with open(out_path, "wb") as out, open(tmp_path / "log", "wb") as log:
        sp = Splitter(out.fileno(), log)
        i = 0
        while i < len(stream):
            n = rng.randint(1, 40)
            sp.feed(stream[i:i + n])
            i += n
        sp.close()
    # a verbose line right after a partial program line still goes to the log, the partial
    # line's bytes to the output: byte counts add up, and each part keeps its order
    got_out, got_log = out_path.read_bytes(), (tmp_path / "log").read_bytes()
    assert got_log == want_log
    assert got_out == want_out
