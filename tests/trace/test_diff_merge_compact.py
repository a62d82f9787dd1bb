import gzip
import json

import numpy as np
import pytest

from pyprof.trace import compact, compare_samples, diff, format_diff, merge, plot, stats
from pyprof.trace.cli import main


def test_compare_samples_verdicts():
    rng = np.random.default_rng(1)
    base = {"a": rng.normal(100, 1, 200), "b": rng.normal(100, 1, 200), "c": rng.normal(50, 1, 200),
            "gone": [1.0]}
    new = {"a": rng.normal(120, 1, 200), "b": rng.normal(100, 1, 200), "c": rng.normal(40, 1, 200),
           "fresh": [3.0]}
    res = compare_samples(base, new, threshold_pct=10)
    v = {r.key: r.verdict for r in res.rows}
    assert v == {"a": "slower", "b": "unchanged", "c": "faster", "gone": "removed", "fresh": "added"}
    assert res.rows[0].key == "a"  # largest absolute impact first
    assert [r.key for r in res.regressions] == ["a"] and res.exit_code == 1
    assert compare_samples(base, new, threshold_pct=50).exit_code == 0
    assert json.loads(format_diff(res, "json"))["exit_code"] == 1


def test_too_few_samples_is_unchanged_and_the_output_says_why():
    res = compare_samples({"x": [1, 1], "y": [1] * 6, "gone": [1]}, {"x": [9, 9], "y": [2] * 6})
    by = {r.name: r for r in res.rows}
    assert by["x"].verdict == "unchanged" and res.exit_code == 1  # y regressed
    assert [r.name for r in res.too_few] == ["x"]  # removed ("gone") is not "too few"
    note = ("1 operator(s) have fewer than 5 calls on a side (x): too few for a noise estimate, "
            "so their verdict is unchanged whatever their change; profile more steps on both "
            "sides for a verdict")
    assert format_diff(res).endswith("\n\nNote: " + note)
    assert json.loads(format_diff(res, "json"))["notes"] == [note]
    enough = compare_samples({"x": [1.0] * 5}, {"x": [1.0] * 5})
    assert enough.too_few == [] and "Note" not in format_diff(enough)


def test_diff_traces(fx):
    res = diff(fx("small.json"), fx("small.json"), threshold=5)
    assert res.exit_code == 0 and all(r.verdict == "unchanged" for r in res.rows)
    assert "no regression" in format_diff(res)


def test_merge_small_ids_and_labels(fx, tmp_path):
    out = tmp_path / "m.json"
    res = merge([fx("small.json"), fx("quote.json")], out, labels=["worker 0", "server"])
    evs = json.loads(out.read_text())["traceEvents"]
    assert res.events == len(evs)
    assert {e["pid"] for e in evs} == set(range(1, 9))  # 4 pids per input
    assert {e["tid"] for e in evs if "tid" in e} == {1, 2, 3, 4}
    names = {e["args"]["name"] for e in evs if e.get("name") == "process_name"}
    assert {"worker 0: cpu/0", "server: cpu/0", "worker 0: operator"} <= names
    assert "worker 0: pid 9785678402843609691" in names  # pid without metadata gets a name
    assert res.pids["worker 0"][0] == 1 and res.pids["server"][0] == 5
    ts = sorted(e["ts"] for e in evs if "ts" in e)
    assert ts[0] == 990  # absolute: unchanged


def test_merge_align_start(fx, tmp_path):
    res = merge([fx("small.json")], tmp_path / "m.json", align="start")
    assert res.offsets_us == {"small.json": -990}
    evs = json.loads((tmp_path / "m.json").read_text())["traceEvents"]
    assert min(e["ts"] for e in evs if "ts" in e) == 0


def test_compact(fx, tmp_path):
    out = tmp_path / "c.json.gz"
    res = compact(fx("small.json"), out)
    evs = json.loads(gzip.decompress(out.read_bytes()))["traceEvents"]
    xs = sorted((e["name"], e["ts"], e["dur"]) for e in evs if e["ph"] == "X")
    assert xs == [("[dot]", 1300, 5), ("dot", 1000, 10), ("dot", 1020, 30), ("dot", 1100, 20), ("relu", 1025, 4)]
    assert res.async_copies_dropped == 2 and res.complete == 5
    assert max(e.get("pid", 0) for e in evs) < 2 ** 53 and max(e.get("tid", 0) for e in evs) < 2 ** 53
    # statistics survive compaction
    assert stats(out).find("dot")[0].total_us == 60


def test_plot(fx, tmp_path):
    out = plot(fx("small.json"), tmp_path / "p.png", top=2)
    assert open(out, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_cli(fx, tmp_path, capsys):
    assert main(["summarize", str(fx("small.json")), "--format", "json", "--top", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["operators"][0]["name"] == "dot"
    assert main(["diff", str(fx("small.json")), str(fx("small.json")), "--threshold", "5"]) == 0
    assert main(["repair", str(tmp_path / "missing.json")]) == 1
    assert "check the path" in capsys.readouterr().err
    assert main(["compact", str(fx("small.json")), "-o", str(tmp_path / "c.json")]) == 0
    assert main(["merge", str(fx("small.json")), "-o", str(tmp_path / "m.json"), "--label", "a"]) == 0
    with pytest.raises(SystemExit) as e:
        main(["summarize"])
    assert e.value.code == 2
