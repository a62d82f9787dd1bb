"""Benchmark results: the :class:`Report` document, its JSON and Markdown forms.

JSON (``schema: pyprof.bench/1``) keeps every figure with its unit in the key (``*_ms`` for
times, ``*_bytes`` for memory), the per-run samples (so two files can be compared later with a
noise estimate), failures with their error, and the registered operators no benchmark covers.
Markdown starts with the MXNet build's runtime features, then one table per category.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import time
from collections import Counter
from typing import Any

from .. import rules


SCHEMA = "pyprof.bench/1"


def environment() -> dict[str, Any]:
    """pyprof and MXNet versions, the library, the build's runtime features, the machine."""
    import mxnet as mx

    from .. import __version__
    from ..native import capi as _capi
    features = {name: bool(f.enabled) for name, f in sorted(mx.runtime.Features().items())}
    return {"pyprof": __version__, "mxnet": mx.__version__, "mxnet_version": _capi.version(),
            "library": _capi.library_path(), "runtime_features": features,
            "python": platform.python_version(), "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count()}


@dataclasses.dataclass
class Report:
    """Everything one benchmark run produced.

    Attributes:
        results: one dict per case: ``operator``, ``namespace``, ``category``, ``inputs``,
            ``status`` (``ok``/``failed``), ``error``, ``forward``/``backward`` statistics
            (``count, mean_ms, median_ms, p90_ms, p99_ms, iqr_ms, min_ms, max_ms``),
            ``memory`` (native engine: ``forward_peak_bytes``, ``backward_peak_bytes``,
            ``unit: "bytes"``), ``kernels`` (native: the operators each phase ran),
            ``samples_ms``, ``warnings``, ``wall_s``.
        settings: engine, context, dtype, warmup, runs, ...
        environment: see :func:`environment`.
        no_benchmark: registered operators no category covers, with the reason.
    """

    results: list[dict[str, Any]]
    settings: dict[str, Any]
    environment: dict[str, Any]
    started: float = dataclasses.field(default_factory=time.time)
    duration_s: float = 0.0
    no_benchmark: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.results if r["status"] != "ok"]

    def find(self, operator: str, namespace: str = "nd") -> list[dict[str, Any]]:
        """The cases of one operator."""
        return [r for r in self.results
                if r["operator"] == operator and r.get("namespace", "nd") == namespace]

    def by_operator(self) -> dict[str, list[dict[str, Any]]]:
        """opperf's shape: ``{operator: [case, ...]}``."""
        out: dict[str, list[dict[str, Any]]] = {}
        for r in self.results:
            key = r["operator"] if r.get("namespace", "nd") == "nd" else \
                f"{r['namespace']}.{r['operator']}"
            out.setdefault(key, []).append(r)
        return out

    def summary(self) -> dict[str, Any]:
        ops = {(r.get("namespace", "nd"), r["operator"]) for r in self.results}
        failed_ops = {(r.get("namespace", "nd"), r["operator"]) for r in self.failed}
        reasons = Counter(_reason(r["error"]) for r in self.failed)
        return {"operators": len(ops), "cases": len(self.results),
                "ok_cases": len(self.results) - len(self.failed), "failed_cases": len(self.failed),
                "failed_operators": len(failed_ops), "duration_s": round(self.duration_s, 1),
                "failure_reasons": dict(reasons.most_common()),
                "no_benchmark": len(self.no_benchmark)}

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "units": {"time": "ms", "memory": "bytes"},
                "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
                "duration_s": round(self.duration_s, 3), "settings": self.settings,
                "environment": self.environment, "summary": self.summary(),
                "results": self.results, "no_benchmark": self.no_benchmark}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def to_markdown(self) -> str:
        return _markdown(self)

    def save(self, path: str | os.PathLike[str], fmt: str | None = None) -> None:
        """Write JSON or Markdown; ``fmt`` None picks it from the suffix (``.md`` -> Markdown)."""
        fmt = fmt or ("md" if os.fspath(path).endswith(".md") else "json")
        if fmt not in ("json", "md"):
            raise rules.error("bench.report_format", fmt=fmt)
        text = self.to_json() if fmt == "json" else self.to_markdown()
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")


def load(path: str | os.PathLike[str]) -> Report:
    """Read a JSON result file written by :meth:`Report.save`. Raises PyprofError
    ``bench.cannot_read`` (no such file, not JSON) or ``bench.not_a_result``."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:  # a bare errno or JSONDecodeError named no fix
        raise rules.error("bench.cannot_read", path=os.fspath(path),
                          why=getattr(exc, "strerror", None) or str(exc)) from exc
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise rules.error("bench.not_a_result", path=os.fspath(path),
                          schema=doc.get("schema") if isinstance(doc, dict) else None,
                          expected=SCHEMA)
    import calendar
    started = calendar.timegm(time.strptime(doc["started_utc"], "%Y-%m-%dT%H:%M:%SZ"))
    return Report(doc["results"], doc["settings"], doc["environment"], started,
                  doc["duration_s"], doc.get("no_benchmark", {}))


def _reason(error: str) -> str:
    """A failure's error without case-specific detail (node names, argument lists)."""
    for cut in (" in operator ", " Possible Arguments", "(name="):
        error = error.split(cut)[0]
    return error[:140]


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _inputs_text(inputs: dict[str, Any]) -> str:
    def one(v: Any) -> str:
        if isinstance(v, list) and all(isinstance(x, int) for x in v):
            return "(" + ", ".join(map(str, v)) + ")"
        if isinstance(v, dict) and "shape" in v:
            extra = ", ".join(f"{k}={val}" for k, val in v.items() if k != "shape")
            return one(v["shape"]) + f" [{extra}]"
        if isinstance(v, list):
            return "[" + ", ".join(one(x) for x in v) + "]"
        return str(v)
    return "; ".join(f"{k}: {one(v)}" for k, v in inputs.items()).replace("|", "\\|")


def _markdown(rep: Report) -> str:
    s = rep.settings
    env = rep.environment
    summ = rep.summary()
    lines = [f"# MXNet operator benchmarks ({s['profiler']} engine, {s['ctx']}, {s['dtype']})", "",
             f"MXNet {env.get('mxnet')} ({env.get('library')}), pyprof {env.get('pyprof')}, "
             f"Python {env.get('python')}, {env.get('platform')}, {env.get('cpus')} CPUs.", "",
             f"Warm-up {s['warmup']}, runs {s['runs']}, backward {'on' if s['run_backward'] else 'off'}"
             f"{', large tensors' if s.get('large_tensor') else ''}. "
             f"{summ['operators']} operators, {summ['cases']} cases, {summ['failed_cases']} failed, "
             f"{rep.duration_s:.0f} s.", "",
             "Times in milliseconds per run (median, p90, p99, IQR over the timed runs). "
             "Memory: peak storage MXNet's pooled allocator handed out during the phase, in "
             "bytes (native engine only).", "", "## Runtime features", ""]
    feats = env.get("runtime_features", {})
    lines.append(", ".join(f"{'✔' if on else '✖'} {name}" for name, on in feats.items()) or "—")
    if feats.get("PROFILER") is False:  # a new user read it as "no profiler" (observed: it works)
        lines += ["", "✖ PROFILER is a build flag the published wheels leave off; MXNet's "
                  "built-in profiler, which these figures come from, works without it."]
    native = s["profiler"] == "native"
    head = ["Operator", "Inputs", "Fwd median", "Fwd p90", "Fwd p99", "Fwd IQR",
            "Bwd median", "Bwd p99"]
    if native:
        head += ["Fwd peak mem (bytes)", "Bwd peak mem (bytes)"]
    by_cat: dict[str, list[dict[str, Any]]] = {}
    for r in rep.results:
        by_cat.setdefault(r["category"], []).append(r)
    for cat, rows in by_cat.items():
        lines += ["", f"## {cat}", "", "| " + " | ".join(head) + " |",
                  "|" + "|".join("---" for _ in head) + "|"]
        for r in sorted(rows, key=lambda r: (r["operator"], r.get("namespace", "nd"))):
            name = r["operator"] if r.get("namespace", "nd") == "nd" else \
                f"{r['namespace']}.{r['operator']}"
            if r["status"] != "ok":
                cells = [f"**{name}**", _inputs_text(r["inputs"]),
                         "failed: " + r["error"].replace("|", "\\|")[:160]]
                cells += [""] * (len(head) - len(cells))
            else:
                f, b, m = r.get("forward") or {}, r.get("backward") or {}, r.get("memory") or {}
                cells = [name, _inputs_text(r["inputs"]), _fmt(f.get("median_ms")),
                         _fmt(f.get("p90_ms")), _fmt(f.get("p99_ms")), _fmt(f.get("iqr_ms")),
                         _fmt(b.get("median_ms")), _fmt(b.get("p99_ms"))]
                if native:
                    cells += [_fmt(m.get("forward_peak_bytes")), _fmt(m.get("backward_peak_bytes"))]
                if r.get("warnings"):
                    cells[0] += " ⚠"
            lines.append("| " + " | ".join(cells) + " |")
    if rep.failed:
        lines += ["", "## Failures by reason", ""]
        lines += [f"- {n} × {reason}" for reason, n in summ["failure_reasons"].items()]
    warned = [r for r in rep.results if r.get("warnings")]
    if warned:
        lines += ["", "## Warnings (⚠)", ""]
        lines += [f"- {r['operator']} {_inputs_text(r['inputs'])}: {'; '.join(r['warnings'])}"
                  for r in warned]
    if rep.no_benchmark:
        lines += ["", "## Registered operators without a benchmark", ""]
        lines += [f"- `{op}`: {why}" for op, why in sorted(rep.no_benchmark.items())]
    return "\n".join(lines)
