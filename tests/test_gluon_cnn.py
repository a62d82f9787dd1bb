"""The tutorial's Gluon CNN (`pyprof train-demo`, examples/gluon_cnn): per-operator mode names
every operator of training; with MXNet's bulk execution the statistics carry the bulk note."""

import json

import pytest

from child import run_cli

from pyprof.trace import BULK_NOTE, is_bulk_name, stats

# Four steps of batch 64: one skipped, one warm-up, two recorded (a few seconds on 2 cores).
TRAINING = {"Convolution", "_backward_Convolution", "Pooling", "_backward_Pooling",
            "FullyConnected", "_backward_FullyConnected", "Activation", "multi_sgd_update"}


def _train(tmp_path, *args, env=None):
    result = tmp_path / "result.json"
    proc = run_cli(["train-demo", "--output", str(tmp_path / "cnn_{window}.json"), *args],
                   tmp_path, env={"PYPROF_RESULT_JSON": str(result), **(env or {})}, timeout=120,
                   fresh=True)  # bulk execution is set up as libmxnet loads
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(result.read_text())
    assert r["steps"] == 4 and r["batch_size"] == 64 and len(r["windows"]) == 1
    assert (r["windows"][0]["first_step"], r["windows"][0]["last_step"]) == (2, 3)
    return proc, r, stats(r["windows"][0]["path"], categories={"operator"}, progress=False)


@pytest.mark.parametrize("how", [{"env": {"PYPROF_PER_OPERATOR": "1"}},
                                 {"args": ["--per-operator", "--static-alloc"]}],
                         ids=["PYPROF_PER_OPERATOR", "--per-operator static_alloc"])
def test_per_operator_mode_names_every_operator(tmp_path, how):
    proc, r, st = _train(tmp_path, *how.get("args", []), env=how.get("env"))
    names = {o.name for o in st.operators}
    assert TRAINING <= names, sorted(names)
    assert not [n for n in names if is_bulk_name(n)], sorted(names)
    assert st.notes == [] and r["per_operator"] is True
    # two steps recorded: every layer's operator twice per step
    assert st.find("Convolution")[0].count == 4 and st.find("multi_sgd_update")[0].count == 4
    assert "libmxnet is already loaded" not in proc.stderr  # applied before MXNet loaded
    table = proc.stdout
    assert "cpu/0 / operator:" in table and "_backward_Convolution" in table
    assert "share (%)" in table and "bulk segments" not in table
    assert "mode:         per-operator (bulk execution off)" in table


def test_bulk_execution_is_noted_with_its_share(tmp_path):
    proc, r, st = _train(tmp_path)
    bulk = st.find("ImperativeBulk")
    assert bulk and r["per_operator"] is False
    assert "Convolution" not in {o.name for o in st.operators}
    assert st.notes == [f"1 bulk-merged name(s) (ImperativeBulk): {BULK_NOTE}"]
    share = 100.0 * bulk[0].total_us / sum(o.total_us for o in st.operators)
    assert f"- bulk segments hold {share:.1f}% of cpu/0 / operator (ImperativeBulk {share:.1f}%): " \
        f"{BULK_NOTE}" in proc.stdout


def test_bad_options_are_usage_errors(tmp_path):
    proc = run_cli(["train-demo", "--active", "0"], tmp_path)
    assert proc.returncode == 2 and "--active must be > 0, got 0. fix: pass --active 1 or more" in proc.stderr
    proc = run_cli(["train-demo", "--repeat", "2", "--output", "t.json"], tmp_path)
    assert proc.returncode == 2 and "needs {window}" in proc.stderr
    assert "usage: pyprof train-demo" in proc.stderr
