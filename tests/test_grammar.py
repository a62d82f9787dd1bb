"""pyprof/spec/grammar.json: numbers and booleans in strings, the C string of a float, paths and
window-path templates. The case tables (tests/grammar/*.json) are run by the JVM too
(jvm/test/pyprof/template_test.clj); the C strings of floats are compared with a JVM child."""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyprof
from pyprof import config, rules
from pyprof.process import output as _output
from pyprof.session import template as _template
from pyprof.errors import ConfigError

from child import FAST_JVM, ROOT, run_scenario

CASES = Path(__file__).resolve().parent / "grammar"
GRAMMAR = rules.spec("grammar.json")


def _cases(name: str) -> list[dict]:
    return json.loads((CASES / name).read_text(encoding="utf-8"))["cases"]


# ------------------------------------------------------------------ window-path templates

@pytest.mark.parametrize("case", _cases("window_path_cases.json"), ids=lambda c: c["template"])
def test_window_path_case_table(case):
    if "error" in case:
        with pytest.raises(ConfigError) as info:
            _template.parse(case["template"])
        assert (info.value.code, info.value.fields["position"]) == (case["error"], case["position"])
        assert str(info.value).startswith(f"window path {case['template']!r} ")
        assert " fix: " in str(info.value)
    else:
        got = _template.parse(case["template"]).fill(**case["fields"])
        assert got == case["expect"]
        assert got == case["template"].format(**case["fields"])  # the subset agrees with Python


@pytest.mark.parametrize("case", _cases("window_path_canonical.json"), ids=lambda c: c["template"])
def test_window_path_canonical_case_table(case):
    assert _template.parse(case["template"]).canonical() == case["canonical"]


@pytest.mark.parametrize("case", [c for c in _cases("window_path_cases.json") if "error" not in c],
                         ids=lambda c: c["template"])
def test_a_canonical_template_fills_as_the_template_and_is_its_own_canonical(case):
    t = _template.parse(case["template"])
    c = _template.parse(t.canonical())
    assert c.fill(**case["fields"]) == t.fill(**case["fields"]) and c.canonical() == t.canonical()


def test_the_example_of_issue_20():
    assert _template.parse("w_{window:02d}.json").fill(window=0, step=0, pid=1) == "w_00.json"
    assert not _template.parse("w_{{window}}.json").has("window")
    assert str(_raises(lambda: _template.parse("w_{windw}.json"))) == (
        "window path 'w_{windw}.json' names the field 'windw' at index 2, which a window path "
        "does not have. fix: use only the fields {window}, {step} or {pid}; write a literal brace "
        "as {{ or }}")


@given(st.text(alphabet="{}:0123dw_windowsteppid.x/", max_size=24))
@settings(max_examples=400, deadline=None)
def test_every_accepted_template_fills_as_str_format(text):
    try:
        t = _template.parse(text)
    except ConfigError as e:
        assert e.code.startswith("template.")
        return
    assert t.fill(window=3, step=41, pid=7) == text.format(window=3, step=41, pid=7)


def _raises(fn):
    try:
        fn()
    except ConfigError as e:
        return e
    raise AssertionError("no ConfigError")


@pytest.mark.parametrize("path, code", [("w_{windw}.json", "template.unknown_field"),
                                        ("w_{window:>3}.json", "template.bad_spec"),
                                        ("w_{window.json", "template.unbalanced")])
def test_a_session_refuses_a_bad_template_when_made(path, code):
    assert _raises(lambda: pyprof.profile(path=path)).code == code


def test_an_escaped_window_is_no_window_field():
    e = _raises(lambda: pyprof.profile(schedule=pyprof.schedule(active=1, repeat=2),
                                       path="w_{{window}}.json"))
    assert e.code == "session.path_needs_window"


def test_windows_are_named_by_the_template(tmp_path):
    """A real session: w_{window:02d}.json gives w_00.json, w_01.json (the issue's example)."""
    r = run_scenario("""
import pyprof, mxnet as mx
with pyprof.profile(schedule=pyprof.schedule(active=1, repeat=2), path="w_{window:02d}.json",
                    profile_imperative=True) as prof:
    for _ in range(3):
        mx.nd.ones((4, 4)).wait_to_read()
        prof.step()
result = [w.path for w in prof.windows]
""", tmp_path)
    assert r == [str(tmp_path / "w_00.json"), str(tmp_path / "w_01.json")]
    assert all(os.path.isfile(p) for p in r)


# ------------------------------------------------------------------ paths

@pytest.mark.parametrize("case", _cases("path_cases.json"), ids=lambda c: c["path"] or "empty")
def test_path_case_table(case):
    cwd = os.getcwd()
    full = _output.absolute(case["path"])
    assert full == case["absolute"].replace("$CWD", cwd)
    if case["directory"] is not None:
        assert os.path.dirname(full) == case["directory"].replace("$CWD", cwd)


# ------------------------------------------------------------------ numbers and booleans

@pytest.mark.parametrize("text, expected", [
    ("1", 1.0), (" 2.5\n", 2.5), ("\v2.5\f\r\t", 2.5), ("+.5", 0.5), ("5.", 5.0),
    ("-1e-3", -0.001), ("1E3", 1000.0), ("00.50", 0.5),
    ("1e400", None), ("1_000", None), ("1e1_0", None), ("\uff11\uff12", None), ("\u0661", None),
    ("\u00a01\u2003", None), ("-inf", None), ("Infinity", None), ("nan", None), ("0x10", None),
    ("1.5f", None), ("", None), (".", None), ("1 0", None), ("\u200b1", None)])
def test_number_strings_follow_the_decimal_regex(text, expected):
    assert config.number(text) == expected


@pytest.mark.parametrize("value, expected", [
    (1, 1.0), (2**53 + 1, 2.0**53), (10**20, 1e20), (Fraction(1, 3), 1 / 3),
    (Decimal("1.50"), 1.5), (1.5, 1.5), (math.inf, None), (math.nan, None), (10**400, None),
    (Decimal("sNaN"), None), (True, None), (None, None), (b"1", None), ([1], None)])
def test_native_numbers_are_numbers_and_booleans_never(value, expected):
    assert config.number(value) == expected


@pytest.mark.parametrize("value, expected", [
    (True, True), (False, False), (1, True), (0, False), (2, None), (1.0, None),
    ("TRUE", True), (" fAlSe\n", False), ("\t1\r", True), ("0", False), ("\u00a0true", None),
    ("fal\u017fe", None), ("yes", None), ("", None), (None, None)])
def test_booleans(value, expected):
    assert config.boolean(value) == expected


def test_accepted_says_what_a_float_key_takes():
    e = _raises(lambda: config.validate({"dump_period": "1_000"}))
    assert "expected a number > 0 and <= 60 s (an int or float, or a decimal string such as '0.5' or " \
           "'2e-3')" in str(e)


def test_whitespace_is_ascii_only():
    assert GRAMMAR["whitespace"] == " \t\n\v\f\r"


# ------------------------------------------------------------------ the C string of a float

def _jvm_c_floats(doubles: list[float]) -> list[str]:
    """pyprof.util/c-float of each double, computed in a JVM child (the cached classpath)."""
    from pyprof import jvm
    cp = ROOT / "jvm" / "target" / "classpath.txt"
    classpath = cp.read_text().strip() if cp.exists() else os.pathsep.join(jvm.classpath())
    form = ("(require 'pyprof.util 'clojure.data.json)"
            "(println (clojure.data.json/write-str (mapv #(pyprof.util/c-float"
            " (Double/longBitsToDouble (Long/parseUnsignedLong % 16)))"
            " (clojure.data.json/read *in*))))")
    bits = [format(struct.unpack(">Q", struct.pack(">d", d))[0], "016x") for d in doubles]
    out = subprocess.run(["java", *FAST_JVM, "-cp", classpath, "clojure.main", "-e", form],
                         input=json.dumps(bits), capture_output=True, text=True, timeout=180,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_c_float_examples():
    assert [config.c_float(x) for x in (0.5, 1.0, 1e-05, 1e22, -0.0, 0.1 + 0.2)] == [
        "0.5", "1", "0.00001", "10000000000000000000000", "-0", "0.30000000000000004"]


def test_c_float_agrees_with_the_jvm_on_many_doubles():
    """Hypothesis draws the doubles (every magnitude, subnormals, powers of two, where the
    shortest decimal is hardest); one JVM child computes the same list."""
    doubles: list[float] = [5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e23,
                            2.82879384806159e17, 9007199254740993.0, 0.1, 2.0**-1074 * 3]
    doubles += [2.0**e for e in range(-1074, 1024, 7)]

    @given(st.floats(allow_nan=False, allow_infinity=False))
    @settings(max_examples=3000, deadline=None, database=None)
    def collect(x):
        doubles.append(x)

    collect()
    assert len(doubles) > 2000
    jvm = _jvm_c_floats(doubles)
    py = [config.c_float(d) for d in doubles]
    differ = [(d, p, j) for d, p, j in zip(doubles, py, jvm) if p != j]
    assert not differ, differ[:5]
    assert all(float(p) == d for p, d in zip(py, doubles))  # each reads back


def test_the_same_file_spelt_another_way_keeps_its_events(tmp_path):
    """grammar.json paths: "./a.json" while "a.json" records is the same file, so the events
    already dumped there are kept (compared as strings, it was a new file that MXNet's config
    deleted). The JVM runs the same (jvm/test/pyprof/template_test.clj)."""
    r = run_scenario("""
import json, mxnet as mx
from pyprof import profiler
profiler.set_config(filename="a.json", profile_imperative=True)
profiler.set_state("run")
mx.nd.ones((4, 4)).wait_to_read()
profiler.dump(finished=False)
profiler.set_config(filename="./a.json", profile_imperative=True)
mx.nd.zeros((4, 4)).wait_to_read()
os.mkdir("sub")  # the OS resolves sub/.. only through an existing sub
profiler.set_config(filename=os.path.join(os.getcwd(), "sub", "..", "a.json"),
                    profile_imperative=True)
mx.nd.full((4, 4), 2).wait_to_read()
profiler.set_state("stop")
profiler.dump()
events = json.load(open("a.json"))["traceEvents"]
result = sorted({e["name"] for e in events if e.get("cat") == "operator"})
""", tmp_path)
    assert {"_ones", "_zeros", "_full"} <= set(r)
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".json"
                  and not p.name.startswith("result")) == ["a.json"]
