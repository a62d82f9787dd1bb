"""pyprof flamegraph: folded stacks whose totals equal the operator time they stand for (per
operator and overall, against pyprof.trace.stats) on the committed fixture traces and on a
synthetic trace with call-stack args; frames with ';', '%' or line breaks are escaped and spaces
and tabs kept, so that flamegraph.pl's and speedscope's line parsers read every line back."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from urllib.parse import unquote

import pytest

from pyprof import trace
from pyprof.attribution import flamegraph as fg

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "tests" / "fixtures" / "traces").glob("*.json"))
FIXTURES = [p for p in FIXTURES if not p.name.endswith(".stats.json")]
FLAMEGRAPH_PL = re.compile(r"^(.*)\s+?(\d+(?:\.\d*)?)$")  # flamegraph.pl's line pattern
SPEEDSCOPE = re.compile(r"^(.*) (\d+)$")  # speedscope's folded-stack importer


def _parse(text: str) -> list[tuple[list[str], int]]:
    """Each line as (unescaped frames, weight), checked with both readers' patterns."""
    out = []
    for line in text.splitlines():
        a, b = FLAMEGRAPH_PL.match(line), SPEEDSCOPE.match(line)
        assert a and b and a.groups() == b.groups(), line
        stack, n = a.groups()
        assert "\n" not in stack and "\r" not in stack
        out.append(([unquote(f) for f in stack.split(";")], int(n)))
    return out


def _by_operator(parsed):
    totals = defaultdict(int)
    for frames, n in parsed:
        totals[(frames[0], frames[-1])] += n
    return dict(totals)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_totals_equal_the_operator_time(path, tmp_path):
    out = tmp_path / "out.folded"
    res = fg.write_folded(path, out)
    parsed = _parse(out.read_text())
    st = trace.stats(path, categories={"operator"})
    expected = {(r.device, r.name): r.total_us for r in st.operators if r.total_us > 0}
    assert expected, "the fixture has operator time"
    assert _by_operator(parsed) == expected
    assert sum(n for _, n in parsed) == sum(expected.values()) == res.total_us
    assert len({";".join(f) for f, _ in parsed}) == len(parsed) == res.stacks  # one line per stack


def _synthetic(path: Path) -> Path:
    stack_a = ["train.py:10 main", "model.py:42 forward; with a semicolon", "50% done\tcall"]
    stack_b = ["train.py:11 main"]
    ev = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "cpu/0"}},
          {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "worker 7"}},
          # B/E with a stack on the begin; nested different operator; an unnamed end
          {"ph": "B", "name": "dot", "cat": "operator", "pid": 0, "tid": 7, "ts": 100,
           "args": {fg.STACK_ARG: stack_a}},
          {"ph": "B", "name": "relu", "cat": "operator", "pid": 0, "tid": 7, "ts": 110},
          {"ph": "E", "name": "relu", "cat": "operator", "pid": 0, "tid": 7, "ts": 115},
          {"ph": "E", "cat": "operator", "pid": 0, "tid": 7, "ts": 130},
          # async copies are not counted; X events are, fractional durations too
          {"ph": "b", "name": "dot", "cat": "operator", "pid": 5, "tid": 7, "id": 1, "ts": 100},
          {"ph": "e", "name": "dot", "cat": "operator", "pid": 5, "tid": 7, "id": 1, "ts": 130},
          {"ph": "X", "name": "dot", "cat": "operator", "pid": 0, "tid": 7, "ts": 200, "dur": 10.4,
           "args": {fg.STACK_ARG: stack_a}},
          {"ph": "X", "name": "dot", "cat": "operator", "pid": 0, "tid": 7, "ts": 220, "dur": 10.4,
           "args": {fg.STACK_ARG: stack_b}},
          {"ph": "X", "name": "dot", "cat": "operator", "pid": 0, "tid": 8, "ts": 240, "dur": 3.2},
          # not an operator: left out
          {"ph": "X", "name": "MXNDArrayFree", "cat": "MXNET_C_API", "pid": 0, "tid": 7, "ts": 1, "dur": 50}]
    path.write_text(json.dumps({"traceEvents": ev}))
    return path


def test_stack_args_become_frames_between_thread_and_operator(tmp_path):
    path = _synthetic(tmp_path / "t.json")
    fs = fg.folded(path)
    assert fs.weights == {
        ("cpu/0", "worker 7", "train.py:10 main", "model.py:42 forward; with a semicolon",
         "50% done\tcall", "dot"): 30 + 10.4,
        ("cpu/0", "worker 7", "relu"): 5,
        ("cpu/0", "worker 7", "train.py:11 main", "dot"): 10.4,
        ("cpu/0", "thread 8", "dot"): 3.2}
    assert fs.events == 5
    parsed = _parse(fs.text())
    assert sorted(tuple(f) for f, _ in parsed) == sorted(fs.weights)  # escaping loses nothing
    # whole microseconds that add up to the rounded total
    assert sum(n for _, n in parsed) == round(30 + 5 + 10.4 + 10.4 + 3.2) == 59
    st = trace.stats(path, categories={"operator"})
    assert {(r.device, r.name): r.total_us for r in st.operators} == {
        ("cpu/0", "dot"): pytest.approx(30 + 10.4 + 10.4 + 3.2), ("cpu/0", "relu"): 5}
    assert "model.py:42 forward%3B with a semicolon;50%25 done\tcall;dot 40" in fs.text()


def test_cli_writes_the_file_and_refuses_a_missing_directory(tmp_path):
    path = _synthetic(tmp_path / "t.json")
    out = tmp_path / "t.folded"
    run = subprocess.run([sys.executable, "-m", "pyprof", "flamegraph", str(path), "-o", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"wrote {out}: 4 stacks, 5 operator events")
    assert len(out.read_text().splitlines()) == 4
    bad = subprocess.run([sys.executable, "-m", "pyprof", "flamegraph", str(path),
                          "-o", str(tmp_path / "no" / "such" / "x.folded")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "fix: " in bad.stderr
    (tmp_path / "here").mkdir()
    piped = subprocess.run([sys.executable, "-m", "pyprof", "flamegraph", str(path), "-o", "-",
                            "--no-progress"], capture_output=True, text=True, timeout=120,
                           cwd=tmp_path / "here")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == out.read_text()  # the same stacks, on stdout
    assert piped.stderr.startswith("4 stacks, 5 operator events")
    assert list((tmp_path / "here").iterdir()) == []  # no file named '-'


def test_real_mxnet_trace_totals_equal_the_operator_time(tmp_path):
    """A trace MXNet 1.9.1 really wrote (a child process: the profiler is one per process)."""
    from child import run_scenario

    run_scenario("""
        import mxnet as mx
        import pyprof
        pyprof.set_config(profile_all=True, filename="real.json")
        pyprof.set_state("run")
        x = mx.nd.ones((64, 64))
        for _ in range(5):
            y = mx.nd.relu(mx.nd.dot(x, x) - 1)
            z = mx.nd.Convolution(mx.nd.ones((1, 3, 16, 16)), mx.nd.ones((4, 3, 3, 3)),
                                  kernel=(3, 3), num_filter=4, no_bias=True)
        mx.nd.waitall()
        pyprof.set_state("stop")
        pyprof.dump()
        result = True
    """, tmp_path)
    path = tmp_path / "real.json"
    parsed = _parse(fg.folded(path).text())
    st = trace.stats(path, categories={"operator"})
    expected = {(r.device, r.name): r.total_us for r in st.operators if r.total_us > 0}
    assert {"dot", "relu", "Convolution"} <= {name for _, name in expected}
    assert _by_operator(parsed) == expected
    assert sum(n for _, n in parsed) == sum(expected.values())
    assert all(f[0] == "cpu/0" for f, _ in parsed)  # device;thread;operator, no frames today
    assert all(len(f) == 3 for f, _ in parsed)
