"""Comparing each language's outcomes with the Python reference's, step by step.

Two outcomes agree when both succeed and the reference's value is contained in the other's
(maps by the reference's keys, lists item by item, floats within 1e-9 relative; a reference
``None`` is a call that returns nothing, so any value agrees), or both raise the same catalogue
code with the same error kind (JVM kinds mapped to Python classes through ``api.json``
``error_kinds``). Paths are compared below each child's own working directory. A few calls'
values are no facts of the API and only success or error is compared (``VALUE_FREE``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pyprof import rules

VALUE_FREE = {"dumps", "raw_trace_path", "dumps_json", "Window.summary", "schedule", "write_windows"}
# the same record, named per language
SAME = {json.dumps({"object": "session"}): {"object": "profile"},
        json.dumps({"object": "ProfilerSession"}): {"object": "profile"}}
# Engine internals each language's workload makes differently (the JVM's NDArray close, its
# waits): only the workload's own operator is compared in written traces.
WORKLOAD_OP = "_random_uniform"
KINDS = {k: v["python"] for k, v in rules.API["error_kinds"].items()}


RAW_DIR = re.compile(r"/pyprof-raw-[^/]*/")  # the session's raw trace: pid and a random part
CODES = {"mxnet": "MXNetError"}  # the JVM's code for MXNet's own error, Python's class name


def normalise(value: Any, root: str) -> Any:
    if isinstance(value, str):
        return RAW_DIR.sub("/pyprof-raw-*/", value.replace(root, "{root}"))
    if isinstance(value, list):
        items = [normalise(v, root) for v in value]
        if items and all(isinstance(v, dict) and "event" in v for v in items):  # a trace summary
            items = [v for v in items if v["event"].get("cat") != "operator"
                     or v["event"].get("name") == WORKLOAD_OP]
            items.sort(key=lambda v: json.dumps(v, sort_keys=True))
        return items
    if isinstance(value, dict):
        out = {str(k): normalise(v, root) for k, v in value.items()}
        return SAME.get(json.dumps(out, sort_keys=True), out)
    return value


def _contained(ref: Any, got: Any) -> bool:
    if isinstance(ref, dict) and isinstance(got, dict):
        return all(k in got and _contained(v, got[k]) for k, v in ref.items())
    if isinstance(ref, list) and isinstance(got, list):
        return len(ref) == len(got) and all(map(_contained, ref, got))
    if isinstance(ref, bool) or isinstance(got, bool):
        return ref is got if isinstance(ref, bool) and isinstance(got, bool) else False
    if isinstance(ref, float) and isinstance(got, (int, float)):
        return abs(ref - got) <= 1e-9 * max(1.0, abs(ref))
    return ref == got and type(ref) is type(got)


def agree(call: str, ref: dict[str, Any], got: dict[str, Any], ref_root: str,
          root: str, on_target: bool = False) -> bool:
    """Whether ``got`` agrees with the reference's ``ref`` (``on_target``: the step is a method
    call, and a reference that had no object - its making failed - is not compared)."""
    if ref.get("skipped") or got.get("skipped"):
        return True
    if on_target and ref.get("error") == "crash" and ref.get("kind") == "AttributeError":
        return True
    if "error" in ref or "error" in got:
        return CODES.get(ref.get("error"), ref.get("error")) == \
            CODES.get(got.get("error"), got.get("error")) and \
            KINDS.get(ref.get("kind"), ref.get("kind")) == KINDS.get(got.get("kind"), got.get("kind"))
    if call in VALUE_FREE or ref.get("ok") is None:
        return "ok" in got
    return _contained(normalise(ref["ok"], ref_root), normalise(got.get("ok"), root))


def first_divergences(batch: list[dict[str, Any]], run: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per language and sequence where it first differs from the reference:
    language, sequence, step, call, the two outcomes (messages dropped) and a class."""
    ref_all = run["outcomes"].get("python")
    if ref_all is None:
        raise AssertionError(f"the Python reference failed: {run['failed'].get('python')}")
    found = []
    for lang, why in run["failed"].items():
        found.append({"language": lang, "sequence": None, "step": None, "call": None,
                      "class": "child failed", "reference": None, "got": why[-500:]})
    for lang, outs in run["outcomes"].items():
        if lang == "python":
            continue
        for i, (scenario, ref_seq, got_seq) in enumerate(zip(batch, ref_all, outs)):
            for j, (step, ref, got) in enumerate(zip(scenario["steps"], ref_seq, got_seq)):
                if not agree(step["call"], ref, got, run["roots"]["python"], run["roots"][lang],
                             "target" in step):
                    strip = lambda o: {k: v for k, v in o.items() if k != "message"}  # noqa: E731
                    found.append({"language": lang, "sequence": i, "step": j,
                                  "call": step["call"], "reference": strip(ref), "got": strip(got),
                                  "class": classify(lang, scenario["steps"][:j + 1], ref, got)})
                    break
    return found


def _has_java(value: Any) -> bool:
    if isinstance(value, dict):
        return "java" in value or any(_has_java(v) for v in value.values())
    if isinstance(value, list):
        return any(map(_has_java, value))
    return False


def _template(steps: list[dict[str, Any]]) -> bool:
    for s in steps:
        for v in (s.get("args") or {}).values():
            text = json.dumps(v)
            if "{" in text.replace("{dir}", "").replace("{window}", ""):
                return True
    return False


def classify(lang: str, steps: list[dict[str, Any]], ref: dict[str, Any],
             got: dict[str, Any]) -> str:
    """The class of a divergence, from what differs and the steps up to it: bridge values,
    error translation, bridge state (through the bridge); templates, window cutting, other
    (a standalone JVM)."""
    if _template(steps) and steps[-1]["call"] in ("profile", "profile.windows", "all_files",
                                                   "traces", "profile.start", "profile.stop"):
        return "templates"
    if any(s["call"] == "raw_event" for s in steps) and "error" in got and "error" not in ref:
        return "window cutting"
    if lang == "bridge":
        if _has_java(got.get("ok")) or (isinstance(ref.get("ok"), int) and "ok" in got):
            return "bridge values"
        if "error" in ref and "error" in got and "." in str(ref["error"]) \
                and "." not in str(got["error"]):
            return "error translation"
        if got.get("error") == "crash" and steps[-1].get("lang") in ("clojure", "java"):
            return "bridge values"  # a value the JVM could not take back
        return "bridge state"
    return "other"
