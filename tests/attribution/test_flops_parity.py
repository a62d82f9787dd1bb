"""Python and the JVM evaluate pyprof/spec/flops.json identically, beyond the golden cases:
every golden case perturbed at random (shapes scaled, booleans flipped, attributes dropped)
gives, in both languages, the same FLOPs, bytes and output shapes, or the same catalogue error
with the same reason. Both run in one child process over the JPype bridge."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from child import run_scenario

CASES = json.loads((Path(__file__).with_name("flops_cases.json")).read_text())


def _perturbed(n: int, seed: int = 22) -> list[dict]:
    rng = random.Random(seed)
    base = [c for c in CASES["cases"] + CASES["errors"] if c["op"] != "_random_uniform"]
    out = []
    for _ in range(n):
        c = rng.choice(base)
        inputs = [[d * rng.choice((1, 1, 2, 3)) for d in s] for s in c["inputs"]]
        if rng.random() < 0.1 and inputs:
            inputs.pop(rng.randrange(len(inputs)))
        attrs = dict(c["attrs"])
        for k in list(attrs):
            r = rng.random()
            if attrs[k] in ("True", "False") and r < 0.4:
                attrs[k] = "False" if attrs[k] == "True" else "True"
            elif r < 0.1:
                del attrs[k]
        out.append({"op": c["op"], "inputs": inputs, "attrs": attrs})
    return out


def _python(cases: list[dict]) -> list:
    from pyprof import errors
    from pyprof.attribution import flops as F

    res = []
    for c in cases:
        try:
            res.append(["ok", F.flops(c["op"], c["inputs"], c["attrs"]),
                        F.bytes_moved(c["op"], c["inputs"], c["attrs"]),
                        F.output_shapes(c["op"], c["inputs"], c["attrs"])])
        except errors.PyprofError as e:
            res.append([e.code, e.fields.get("why")])
    return res


_JVM = """
(clojure.data.json/write-str
  (for [{:strs [op inputs attrs]} (clojure.data.json/read-str (slurp %s))]
    (try ["ok" (pyprof.flops/flops op inputs attrs) (pyprof.flops/bytes-moved op inputs attrs)
          (pyprof.flops/output-shapes op inputs attrs)]
         (catch clojure.lang.ExceptionInfo e [(:pyprof/code (ex-data e)) (:why (ex-data e))]))))
"""


@pytest.mark.jvm
def test_python_and_the_jvm_agree_on_perturbed_cases(tmp_path):
    cases = _perturbed(400)
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    form = _JVM % json.dumps(str(path))
    got = run_scenario(f"""
from pyprof import jvm
jvm.start()
jvm.require("pyprof.flops")
jvm.require("clojure.data.json")
result = jvm.eval_clojure({form!r})
""", tmp_path, timeout=300)
    jvm_results = json.loads(got)
    py_results = _python(cases)
    assert len(jvm_results) == len(py_results) == 400
    diffs = [(c, p, j) for c, p, j in zip(cases, py_results, jvm_results) if p != j]
    assert diffs == []
    kinds = {r[0] for r in py_results}
    assert "ok" in kinds and "flops.bad_input" in kinds  # both paths are exercised
    assert sum(r[0] == "ok" for r in py_results) > 200
