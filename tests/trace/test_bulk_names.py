"""Every bulk segment name MXNet 1.9.1 writes is recognised; the summaries, diff and the matmul
example give each segment's share of the time and the fix, and name a segment of one operator
(``[dot]``) as such, with no advice (patterns and wording from pyprof/spec/trace.json's "bulk"
section)."""

import json
from pathlib import Path

import pytest

from pyprof import env
from pyprof.examples import matmul
from pyprof.trace import BULK_NOTE, diff, format_diff, is_bulk_name, stats, summarize
from pyprof.trace import naming

SPEC = json.loads((Path(naming.__file__).parents[1] / "spec" / "trace.json").read_text())["bulk"]

# Names seen in MXNet 1.9.1 traces (the CNN of seed 000 and tests/test_per_operator.py).
BULK = [
    "ImperativeBulk",                                   # engine bulk: CachedOp, autograd, engine.bulk
    "[dot]", "[Convolution,relu,Pooling,Flatten,FullyConnected]",   # bound symbols
    "[_identity_with_attr_like_rhs,_backward_FullyConnected,_backward_copy,_zeros_without_dtype,"
    "_backward_Pooling,_backward_relu,_ba",             # ... cut at 127 characters: no "]"
    "Activation,Pooling,Convolution,Activation,Pooling,Flatten,FullyConnected,Activation",  # static
]
ONE_DOT = "'[dot]' is a bulk segment of one operator: its time is that operator's time"
NOT_BULK = ["dot", "Convolution", "_backward_Convolution", "multi_sgd_update", "DeleteVariable",
            "WaitForVar", "MyAddOne::pure_python", "ImperativeBulkhead", "MXImperativeInvokeEx"]


@pytest.mark.parametrize("name", BULK)
def test_every_segment_name_is_bulk(name):
    assert is_bulk_name(name)


@pytest.mark.parametrize("name", NOT_BULK)
def test_operator_names_are_not(name):
    assert not is_bulk_name(name)


def test_patterns_and_note_are_the_specs():
    assert naming.BULK_PATTERNS == tuple(n["pattern"] for n in SPEC["names"])
    assert BULK_NOTE == SPEC["note"]
    for var in env.BULK_VARIABLES:  # the note names every variable per-operator mode sets
        assert f"{var}=0" in BULK_NOTE
    assert "PYPROF_PER_OPERATOR=1" in BULK_NOTE and "mx.engine.bulk" in BULK_NOTE
    assert "ImperativeBulk" in BULK_NOTE


def _trace(path: Path, ops: list[tuple[str, int]], device: str = "cpu/0") -> Path:
    """A trace with one B/E pair per (name, duration) on ``device``, back to back."""
    events = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": device}}]
    t = 1000
    for name, dur in ops:
        events += [{"ph": "B", "name": name, "cat": "operator", "pid": 0, "tid": 1, "ts": t},
                   {"ph": "E", "name": name, "cat": "operator", "pid": 0, "tid": 1, "ts": t + dur}]
        t += dur
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_summary_gives_each_segments_share_and_the_fix(tmp_path):
    t = _trace(tmp_path / "t.json", [("ImperativeBulk", 600), ("ImperativeBulk", 150),
                                     ("multi_sgd_update", 200), ("[dot]", 50)])
    text = summarize(t, progress=False)
    notes = text.split("Notes:\n", 1)[1]
    # [dot] is one operator: named apart, no share, no advice; the advice is for ImperativeBulk
    assert notes.rstrip().split("\n") == [
        f"- {ONE_DOT}",
        f"- bulk segments hold 75.0% of cpu/0 / operator (ImperativeBulk 75.0%): {BULK_NOTE}"]
    as_json = json.loads(summarize(t, fmt="json", progress=False))
    assert as_json["notes"] == [n[2:] for n in notes.rstrip().split("\n")]
    # the statistics keep their own note (count and names, no shares): what the JVM computes too
    assert stats(t).notes == [f"1 bulk-merged name(s) (ImperativeBulk): {BULK_NOTE}", ONE_DOT]


def test_no_bulk_no_note(tmp_path):
    t = _trace(tmp_path / "t.json", [("Convolution", 600), ("_backward_Convolution", 400)])
    assert "Notes:" not in summarize(t, progress=False)
    assert "Note: bulk" not in format_diff(diff(t, t, progress=False))


def test_diff_gives_the_shares_of_each_side(tmp_path):
    # five calls a side: enough for a verdict, so the bulk note is the only one
    base = _trace(tmp_path / "base.json", [("ImperativeBulk", 900), ("multi_sgd_update", 100)] * 5)
    new = _trace(tmp_path / "new.json", [("Convolution", 500), ("multi_sgd_update", 100)] * 5)
    res = diff(base, new, progress=False)
    text = format_diff(res)
    assert text.endswith(f"Note: bulk segments hold 90.0% of cpu/0 / operator (ImperativeBulk "
                         f"90.0%) in base: {BULK_NOTE}")
    assert json.loads(format_diff(res, "json"))["notes"] == [text.split("Note: ", 1)[1]]


def test_matmul_example_names_its_dot_a_segment_of_one_operator_without_advice(fx):
    # small.json on cpu/0: dot 60 us, [dot] 5 us, relu 4 us
    note = matmul.bulk_note(str(fx("small.json")))
    assert note == ONE_DOT
    assert "MXNET_EXEC" not in note and "PYPROF_PER_OPERATOR" not in note
    assert stats(str(fx("small.json"))).notes == [ONE_DOT]


def test_matmul_example_note_with_a_merged_segment_too(tmp_path):
    t = _trace(tmp_path / "t.json", [("[dot]", 100), ("[dot,relu]", 300), ("relu", 100)])
    assert matmul.bulk_note(str(t)) == (
        f"{ONE_DOT}; bulk segments hold 60.0% of cpu/0 / operator ([dot,relu] 60.0%): {BULK_NOTE}")


def test_merged_and_one_operator_segments_as_the_jvm_notes_them(tmp_path):
    # the same trace as jvm/test/pyprof/bulk_note_test.clj
    t = _trace(tmp_path / "t.json", [("ImperativeBulk", 10), ("[dot]", 5), ("[dot,relu]", 7),
                                     ("[a]", 1), ("relu", 3)])
    assert stats(t).notes == [
        f"2 bulk-merged name(s) (ImperativeBulk, [dot,relu]): {BULK_NOTE}",
        "'[a]', '[dot]' are bulk segments of one operator each: each one's time is that "
        "operator's time"]


ONE_OPERATOR = ["[dot]", "[relu]", "[_backward_FullyConnected]"]
NOT_ONE_OPERATOR = ["ImperativeBulk", "[dot,relu]", "[Convolution,relu,Pooling", "[_backward_Poo",
                    "Activation,Pooling", "dot", "[a]b]", "x[dot]"]


@pytest.mark.parametrize("name", ONE_OPERATOR)
def test_a_segment_of_one_operator(name):
    assert naming.is_one_operator_segment(name) and is_bulk_name(name)


@pytest.mark.parametrize("name", NOT_ONE_OPERATOR)
def test_not_a_segment_of_one_operator(name):
    assert not naming.is_one_operator_segment(name)


def test_one_operator_notes_name_each_segment_with_no_advice():
    one = SPEC["one_operator"]
    assert naming.one_operator_note(["[dot]"]) == ONE_DOT == one["note"].format(names="'[dot]'")
    assert naming.one_operator_note(["[a]", "[b]"]) == (
        "'[a]', '[b]' are bulk segments of one operator each: each one's time is that "
        "operator's time")
    assert naming.one_operator_note(["[a]", "[b]", "[c]", "[d]"]).startswith(
        "'[a]', '[b]', '[c]', ... are bulk segments")
    for text in (one["note"], one["note_many"]):
        assert "MXNET_" not in text and "{names}" in text
