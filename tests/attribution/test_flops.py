"""FLOPs and bytes from pyprof/spec/flops.json: the golden integers of
tests/attribution/flops_cases.json, the output
shapes against real MXNet's shape inference, the operator names against MXNet's registry, and
the grammar check, which names a planted malformed entry."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from pyprof import errors
from pyprof.attribution import flops as F

CASES = json.loads((Path(__file__).with_name("flops_cases.json")).read_text())


def _id(c):
    return f"{c['op']}-{c['inputs']}-{sorted(c['attrs'].items())}"


@pytest.mark.parametrize("case", CASES["cases"], ids=_id)
def test_golden_flops_and_bytes(case):
    got = F.flops(case["op"], case["inputs"], case["attrs"])
    assert got == case["flops"], case.get("why", "")
    got_b = F.bytes_moved(case["op"], case["inputs"], case["attrs"], dtypes=case.get("dtypes"),
                          output_shapes_=case.get("outputs"),
                          output_dtypes=case.get("output_dtypes"))
    assert got_b == case["bytes"]
    fam = F.OPERATORS.get(case["op"], "none")
    assert fam == case["family"]


def test_every_family_has_a_golden_case():
    assert set(F.FAMILIES) <= {c["family"] for c in CASES["cases"]}


def test_the_4096_dot_is_two_times_4096_cubed():
    assert F.flops("dot", [(4096, 4096), (4096, 4096)], {}) == 2 * 4096 ** 3 == 137438953472


@pytest.mark.parametrize("seg", CASES["segments"], ids=lambda s: s["name"])
def test_bulk_segment_is_the_sum_of_its_nodes(seg):
    nodes = [(n["op"], n["inputs"], n["attrs"]) for n in seg["nodes"]]
    assert F.segment_flops(nodes) == seg["flops"]
    assert F.segment_bytes(nodes) == seg["bytes"]


@pytest.mark.parametrize("case", CASES["errors"], ids=lambda c: c["says"])
def test_bad_input_names_the_problem(case):
    with pytest.raises(errors.PyprofError) as e:
        F.flops(case["op"], case["inputs"], case["attrs"])
    assert e.value.code == case["code"] and case["says"] in str(e.value)
    assert repr(case["op"]) in str(e.value) and " fix: " in str(e.value)


def test_mxnet_attribute_strings_parse():
    assert F.parse_attr("(3, 3)") == [3, 3] and F.parse_attr("(5,)") == [5]
    assert F.parse_attr("True") is True and F.parse_attr("false") is False
    assert F.parse_attr("64") == 64 and F.parse_attr("relu") == "relu"
    assert F.parse_attr("()") is None and F.parse_attr("None") is None
    np = pytest.importorskip("numpy")
    assert F.parse_attr(np.int64(16)) == 16 and type(F.parse_attr(np.int64(16))) is int
    assert F.flops("dot", [np.array([4, 8]), (np.int64(8), 2)], {}) == 2 * 4 * 2 * 8
    # native values work as MXNet's strings do
    assert F.flops("Convolution", [(1, 3, 8, 8), (4, 3, 3, 3)], {"kernel": (3, 3), "no_bias": True}) \
        == F.flops("Convolution", [(1, 3, 8, 8), (4, 3, 3, 3)], {"kernel": "(3, 3)", "no_bias": "True"}) \
        == 2 * 4 * 36 * 3 * 9


def test_spec_is_well_formed():
    F.check_spec()


@pytest.mark.parametrize("plant, where", [
    (lambda s: s["families"]["dot"].__setitem__("flops", ["pow", 2, 3]), "families.dot.flops"),
    (lambda s: s["families"]["dot"].__setitem__("flops", ["-", 2]), "families.dot.flops"),
    (lambda s: s["operators"].__setitem__("dot", "matmul"), "operators.dot"),
    (lambda s: s["families"]["_backward_dot"].__setitem__("flops", ["call", "nodot", []]),
     "families._backward_dot.flops"),
    (lambda s: s["families"]["softmax"]["let"].append(["x"]), "families.softmax.let"),
])
def test_planted_malformed_entry_is_a_catalogue_error(plant, where):
    spec = copy.deepcopy(F.SPEC)
    plant(spec)
    with pytest.raises(errors.PyprofError) as e:
        F.check_spec(spec)
    assert e.value.code == "flops.bad_spec" and where in str(e.value) and " fix: " in str(e.value)


def test_unknown_operator_has_no_formula():
    assert F.flops("_random_uniform", [], {}) is None
    assert F.bytes_moved("_random_uniform", [], {}) is None
    assert F.output_shapes("_random_uniform", [], {}) is None
    # recorded outputs give bytes even without a formula
    assert F.bytes_moved("_random_uniform", [], {}, output_shapes_=[(3, 3)]) == 36


def test_every_operator_name_is_registered_in_mxnet():
    import mxnet as mx  # MXNet itself: the full lane
    registered = set(mx.operator.get_all_registered_operators())
    assert [op for op in F.OPERATORS if op not in registered] == []


def test_output_shapes_match_mxnet_shape_inference():
    """Every forward golden case: the spec's output shapes (the visible ones) and, through
    the input list, the parameter and auxiliary-state shapes MXNet infers."""
    import mxnet as mx  # MXNet itself: the full lane
    checked = 0
    for c in CASES["cases"]:
        if c["op"].startswith("_backward") or c["flops"] is None:
            continue
        fn = getattr(mx.sym, c["op"], None) or getattr(mx.sym._internal, c["op"])
        names = [f"x{i}" for i in range(len(c["inputs"]))]
        sym = fn(*[mx.sym.var(n) for n in names], **c["attrs"])
        args, outs, aux = sym.infer_shape(**{n: tuple(s) for n, s in zip(names, c["inputs"])})
        assert [list(a) for a in args + aux] == c["inputs"], c
        mine = F.output_shapes(c["op"], c["inputs"], c["attrs"])
        assert mine[:len(outs)] == [list(o) for o in outs], c
        checked += 1
    assert checked >= 30
