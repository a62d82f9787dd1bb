import json

import pytest

from pyprof.trace import BULK_NOTE, TraceError, cross_check, is_bulk_name, stats, summarize


def one(s, name):
    [o] = s.find(name)
    return o


def test_exact_numbers(fx):
    s = stats(fx("small.json"))
    dot = one(s, "dot")
    assert (dot.category, dot.device, dot.count, dot.total_us, dot.min_us, dot.max_us) == \
        ("operator", "cpu/0", 3, 60, 10, 30)
    assert dot.mean_us == 20.0 and dot.p50_us == 20.0
    assert dot.p90_us == pytest.approx(28.0) and dot.p99_us == pytest.approx(29.8)
    assert list(dot.durations_us) == [10, 30, 20]
    assert one(s, "relu").total_us == 4  # nested inside dot
    api = one(s, "MXImperativeInvokeEx")
    assert (api.category, api.device, api.count, api.total_us) == ("MXNET_C_API", "", 1, 7)
    assert s.unmatched_begin == s.unmatched_end == 0
    [m] = s.memory
    assert (m.device, m.samples, m.min_bytes, m.max_bytes, m.last_bytes) == ("cpu/0", 3, 16384, 49152, 32768)
    assert m.mean_bytes == 32768.0 and m.time_weighted_mean_bytes == 32768.0 and m.max_kb == 49.152


def test_bulk_names_noted(fx):
    s = stats(fx("small.json"))
    assert s.bulk_names == ["[dot]"]
    # one operator: named as such, no advice to set the bulk variables
    assert s.notes == ["'[dot]' is a bulk segment of one operator: its time is that operator's time"]
    assert not any("MXNET_EXEC_BULK_EXEC_INFERENCE=0" in n for n in s.notes)
    assert is_bulk_name("Activation,Convolution") and not is_bulk_name("dot")
    assert "MXNET_EXEC_BULK_EXEC_TRAIN=0" in BULK_NOTE


def test_truncated_trace(fx):
    s = stats(fx("missing_tail.json"))
    assert one(s, "dot").count == 1 and s.unmatched_begin == 2
    assert any("missing closing" in n for n in s.notes)


def test_multiple_files_pool_by_device(fx):
    s = stats([fx("small.json"), fx("quote.json")])
    assert one(s, "dot").count == 6


def test_exclude_and_categories(fx):
    assert not stats(fx("small.json"), exclude_categories={"MXNET_C_API"}).find("MXImperativeInvokeEx")
    assert {o.category for o in stats(fx("small.json"), categories={"operator"}).operators} == {"operator"}


@pytest.mark.parametrize("option", ["categories", "exclude_categories"])
def test_a_string_of_categories_is_refused(fx, option):
    # a str is an iterable of its characters: it matched nothing, silently (a new user's trial)
    with pytest.raises(TraceError) as e:
        stats(fx("small.json"), **{option: "operator"})
    assert e.value.code == "trace.categories_not_collection"
    assert str(e.value).startswith(f"{option} takes a collection of category names, got the "
                                   "string 'operator'")
    assert e.value.fix == 'pass a set of names, e.g. {"operator"}'
    with pytest.raises(TraceError):
        stats(fx("small.json"), by="shape", **{option: "operator"})
    assert stats(fx("small.json"), **{option: ["operator"]}).operators != stats(fx("small.json")).operators


@pytest.mark.parametrize("top", [0, -1, 1.5, True, "3"])
def test_summarize_refuses_a_top_below_one(fx, top):
    # top=-1 dropped the last operator of each group, top=0 showed all (the CLI refused both)
    with pytest.raises(TraceError) as e:
        summarize(fx("small.json"), top=top)
    assert e.value.code == "trace.top" and f"got {top!r}" in str(e.value)
    assert "1 of" in summarize(fx("small.json"), top=1)


def test_exports(fx, tmp_path):
    s = stats(fx("small.json"))
    d = json.loads(s.to_json(tmp_path / "s.json"))
    assert d["operators"][0]["name"] == "dot" and d["operators"][0]["total_us"] == 60
    assert json.loads((tmp_path / "s.json").read_text()) == d
    csv = s.to_csv().splitlines()
    assert csv[0].startswith("category,name,device,count,total_us") and csv[1].startswith("operator,dot,cpu/0,3,60")
    assert "| operator" in s.to_markdown()
    df = pytest.importorskip("pandas") and s.to_dataframe()
    assert df.loc[df.name == "dot", "count"].item() == 3


def test_cross_check_against_aggregate(fx):
    s = stats(fx("small.json"))
    agg = {"Time": {"operator": {"dot": {"Count": 3, "Total": 0.06, "Min": 0.01, "Max": 0.03, "Avg": 0.02},
                                 "relu": {"Count": 1, "Total": 0.004, "Min": 0.004, "Max": 0.004},
                                 "[dot]": {"Count": 1, "Total": 0.005, "Min": 0.005, "Max": 0.005}},
                    "MXNET_C_API": {"MXImperativeInvokeEx": {"Count": 1, "Total": 0.007, "Min": 0.007, "Max": 0.007}}},
           "Memory": {"Device Storage": {"Memory: cpu/0": {"Count": 3, "Min": 16.38, "Max": 49.15}}}}
    assert cross_check(s, agg).ok
    agg["Time"]["operator"]["dot"]["Count"] = 4
    agg["Time"]["operator"]["relu"]["Total"] = 0.005
    bad = cross_check(s, agg)
    assert {(m.name, m.field) for m in bad.mismatches} == {("dot", "Count"), ("relu", "Total")}


def test_summarize_formats(fx):
    text = summarize(fx("small.json"))
    assert "cpu/0 / operator" in text and "total (ms)" in text and "high water (bytes)" in text
    assert "MXImperativeInvokeEx" not in text  # C API calls only with include_api
    assert "MXImperativeInvokeEx" in summarize(fx("small.json"), include_api=True)
    rows = json.loads(summarize(fx("small.json"), fmt="json", top=1))["operators"]
    assert [(r["name"], r["share_pct"]) for r in rows] == [("dot", pytest.approx(100 * 60 / 69))]
    assert summarize(fx("small.json"), fmt="csv", sort="name").splitlines()[1].startswith("operator,[dot],")
    assert "| dot" in summarize(fx("small.json"), fmt="markdown")
    with pytest.raises(TraceError, match="use one of"):
        summarize(fx("small.json"), sort="speed")
