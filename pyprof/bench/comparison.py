"""Comparisons: two result files (per case, with a noise estimate), and ``nd`` vs ``np``.

:func:`compare` pairs the cases of two reports by (namespace, operator, inputs, phase) and
hands their per-run samples to :func:`pyprof.trace.compare_samples`, the trace tools'
own comparison: medians, a bootstrap confidence interval of the change, and a verdict
(``slower``, ``faster``, ``unchanged``, ``added``, ``removed``).
"""

from __future__ import annotations

import inspect
import json
import os
from typing import Any

from .. import rules
from ..trace.diffing import DiffResult, compare_samples
from . import registry
from .inputs import Tensor, cases_for
from .report import Report, load


#: nd operator -> its numpy-namespace counterpart, where the names differ (opperf's map).
NP_NAMES = {
    "broadcast_add": "add", "broadcast_sub": "subtract", "broadcast_mul": "multiply",
    "broadcast_div": "divide", "broadcast_power": "power", "broadcast_mod": "mod",
    "broadcast_maximum": "maximum", "broadcast_minimum": "minimum", "elemwise_add": "add",
    "elemwise_sub": "subtract", "elemwise_mul": "multiply", "elemwise_div": "divide",
    "BatchNorm": "npx.batch_norm", "Convolution": "npx.convolution",
    "Deconvolution": "npx.deconvolution", "FullyConnected": "npx.fully_connected",
    "Activation": "npx.activation", "Pooling": "npx.pooling", "Dropout": "npx.dropout",
    "Embedding": "npx.embedding", "LayerNorm": "npx.layer_norm", "softmax": "npx.softmax",
    "log_softmax": "npx.log_softmax", "pick": "npx.pick", "topk": "npx.topk",
    "one_hot": "npx.one_hot", "relu": "npx.relu", "sigmoid": "npx.sigmoid",
    "batch_dot": "npx.batch_dot", "reshape_like": "npx.reshape_like", "SwapAxis": "swapaxes",
    "flatten": "npx.batch_flatten", "Flatten": "npx.batch_flatten", "slice": "npx.slice",
    "RNN": "npx.rnn", "LeakyReLU": "npx.leaky_relu",
}


def _key(r: dict[str, Any], phase: str) -> tuple[str, str, str]:
    name = r["operator"] if r.get("namespace", "nd") == "nd" else f"{r['namespace']}.{r['operator']}"
    return (name, json.dumps(r["inputs"], sort_keys=True, separators=(",", ":")), phase)


def samples_by_case(report: Report) -> dict[tuple[str, str, str], list[float]]:
    """``{(operator, inputs JSON, phase): per-run ms}`` for the successful cases."""
    out = {}
    for r in report.results:
        for phase, samples in (r.get("samples_ms") or {}).items():
            if r["status"] == "ok" and samples:
                out[_key(r, phase)] = samples
    return out


def compare(base: str | os.PathLike[str] | Report, new: str | os.PathLike[str] | Report, *,
            threshold: float = 5.0, **options: Any) -> DiffResult:
    """Per-case change from ``base`` to ``new`` (result files or reports), times in ms.

    ``threshold`` (percent) marks a ``slower`` case as a regression (``exit_code`` 1);
    ``options`` go to :func:`pyprof.trace.compare_samples` (``min_effect_pct``,
    ``confidence``, ``n_boot``, ``min_samples``, ``seed``).
    """
    a = base if isinstance(base, Report) else load(base)
    b = new if isinstance(new, Report) else load(new)
    return compare_samples(samples_by_case(a), samples_by_case(b), threshold_pct=threshold,
                           unit="ms", **options)


def np_counterpart(op: str) -> tuple[str, str]:
    """(namespace, name) of the numpy-interface version of nd operator ``op``."""
    import mxnet as mx

    target = NP_NAMES.get(op, op)
    ns, _, name = target.rpartition(".")
    for namespace in ([ns] if ns else ["np", "npx"]):
        if hasattr(getattr(mx, namespace), name):
            return namespace, name
    raise rules.error("bench.no_np_counterpart", op=op)


def namespace_cases(op: str, *, large_tensor: bool = False) -> list[Any]:
    """The nd case (first default input set) and the same inputs for its np counterpart."""
    import mxnet as mx

    from .runner import Case
    regs = registry.operators()
    if op not in regs:
        raise rules.error("bench.not_an_operator", op=op)
    nd_inputs = cases_for(op, regs[op].arg_names, large_tensor=large_tensor)[0]
    ns, name = np_counterpart(op)
    params = [p for p in inspect.signature(getattr(getattr(mx, ns), name)).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    nd_arrays = [v for k, v in nd_inputs.items() if isinstance(v, Tensor)]
    np_inputs: dict[str, Any] = {}
    for p in params:
        if p.name in nd_inputs:
            np_inputs[p.name] = nd_inputs[p.name]
        elif p.default is p.empty and nd_arrays:
            np_inputs[p.name] = nd_arrays.pop(0)  # lhs, rhs -> x1, x2 by position
    cat = next((c for c, names in registry.by_category().items() if op in names), "custom")
    return [Case(op, nd_inputs, cat, "nd"), Case(name, np_inputs, cat, ns)]


def compare_namespaces(op: str, **options: Any) -> tuple[Report, DiffResult]:
    """Benchmark ``op`` in ``mx.nd`` and its ``mx.np``/``mx.npx`` version on the same inputs.

    ``options`` are those of :func:`pyprof.bench.run_performance_test`. Returns the report with
    both cases and the comparison (base: nd, new: np).
    """
    from .runner import run_cases
    cases = namespace_cases(op, large_tensor=options.get("large_tensor", False))
    report = run_cases(cases, **options)
    nd_rows = [r for r in report.results if r.get("namespace") == "nd"]
    np_rows = [r for r in report.results if r.get("namespace") != "nd"]
    base = {(p,): s for r in nd_rows if r["status"] == "ok"
            for p, s in (r.get("samples_ms") or {}).items()}
    new = {(p,): s for r in np_rows if r["status"] == "ok"
           for p, s in (r.get("samples_ms") or {}).items()}
    return report, compare_samples(base, new, unit="ms")
