"""MXNet's raw trace layout (trace.json mxnet_layout): the bytes MXNet writes, names copied
unescaped, read as MXNet meant them, by the same cases the JVM's raw_layout_test reads
(tests/fixtures/mxnet_layout_cases.json), and in a real session's windows."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyprof.errors import TraceFormatError
from pyprof.trace import mxnet_layout
from pyprof.trace.mxnet_layout import parse_raw, shows_raw_layout

from child import ROOT, load_trace, run_cli, run_scenario

CASES = json.loads((ROOT / "tests" / "fixtures" / "mxnet_layout_cases.json").read_text("utf-8"))

#: Names MXNet copies into the trace as they are; the last five a JSON reader takes for escapes.
NAMES = ["C:\\tmp\\q", 'a"b', "x\\\\y", "tab\\there", "na\u00efve \u2211 \U0001d6fc", "a\\b",
         "uni\\u0041"]


@pytest.mark.parametrize("case", CASES["cases"], ids=lambda c: c["about"][:40])
def test_shared_cases(case, tmp_path):
    if "error" in case:
        with pytest.raises(TraceFormatError) as e:
            parse_raw(case["text"])
        assert e.value.code == case["error"]
        assert "pyprof repair" in str(e.value)
        return
    assert parse_raw(case["text"]) == case["events"]


def test_shared_cases_hold_what_they_claim():
    names = [e.get("name") for e in CASES["cases"][1]["events"]]
    assert names[1:5] == ["x\\\\y", "x\\\\y", "C:\\tmp", "C:\\tmp"]
    assert CASES["cases"][1]["events"][0]["args"] == {"name": 'cpu"0'}
    assert CASES["cases"][0]["events"][-1]["args"] == {"my\\ctr": 7}


def test_escaped_json_is_not_taken_for_mxnet_layout():
    """A trace another writer indented (strings escaped) does not show MXNet's raw layout."""
    doc = {"traceEvents": [{"name": "a\\b", "ph": "B", "ts": 1, "pid": 0, "tid": 0}]}
    assert not shows_raw_layout(json.dumps(doc, indent=4).encode())


def test_session_window_keeps_mxnet_names(tmp_path):
    r = run_scenario(f"""
import mxnet as mx
import mxnet.profiler as mp
import pyprof
names = {NAMES!r}
def record():
    dom = mp.Domain("dom")
    for n in names:
        e = mp.Event(n)
        e.start(); e.stop()
        t = mp.Task(dom, n)
        t.start(); t.stop()
    mx.nd.dot(mx.nd.ones((4, 4)), mx.nd.ones((4, 4))).wait_to_read()
with pyprof.profile(path="w1_{{window}}.json", profile_api=False):
    record()
with pyprof.profile(path="w2_{{window}}.json", profile_api=False):   # a headless range
    record()
result = True
""", tmp_path)
    assert r is True
    for w in ("w1_0.json", "w2_0.json"):
        events = load_trace(tmp_path / w)
        for cat in ("event", "dom"):
            got = [e["name"] for e in events if e.get("cat") == cat and e["ph"] in "BEbe"]
            assert sorted(got) == sorted(NAMES * 2), (w, cat)
        procs = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
        assert "cpu/0" in procs, w
        # byte for byte: the window (valid JSON) holds each name escaped once
        text = (tmp_path / w).read_text("utf-8")
        assert json.dumps("C:\\tmp\\q") in text and json.dumps("x\\\\y") in text
        v = run_cli(["validate", w], tmp_path)
        assert v.returncode == 0, v.stdout + v.stderr


def _escape_every_line(text: str) -> str:
    """The grammar as trace.json states it: every raw-string line's value JSON-escaped."""
    for line in mxnet_layout._LINES:
        text = line.sub(lambda m: m.group(1) + mxnet_layout._escape(m.group(2)) + m.group(3), text)
    return text


_VALUE = st.lists(st.sampled_from(['a', '"', '\\', '\t', '\r', ',', ' ', '{', '}', ':', '\u00e9', '\x01',
                                   '\x7f', 'n', 'u', '"",', '\u2028', ']']), max_size=8).map("".join)
_LINE = st.one_of(
    st.builds(lambda v: f'        "name": "{v}",', _VALUE),
    st.builds(lambda v: f'        "cat": "{v}"', _VALUE),
    st.builds(lambda v, n: f'        "args": {{ "{v}": -{n}.5e+3 }},', _VALUE, st.integers(0, 99)),
    st.builds(lambda v: f'        "ts": 1{v}', _VALUE))


@settings(max_examples=400, deadline=None)
@given(st.lists(_LINE, min_size=1, max_size=6), st.booleans())
def test_escaping_only_the_lines_that_need_it_is_escaping_every_line(lines, newline):
    # escape_lines rewrites only values holding what JSON escapes (a window's millions of
    # plain lines untouched): the same text as escaping every line
    text = "\n".join(lines) + ("\n" if newline else "")
    assert mxnet_layout.escape_lines(text) == _escape_every_line(text)
