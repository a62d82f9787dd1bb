"""Steps made through the JPype bridge (``runner.py --batch ... --bridge``): a Python process
hosts the JVM (``pyprof.jvm``) and a step whose ``"lang"`` is ``clojure`` or ``java`` calls the
function ``bindings.json`` names for that language, as a Python program using the bridge would:

* clojure: the var through ``pyprof.jvm.require(ns)[fn]`` (the bridge's ``to_clojure`` /
  ``to_python`` convert arguments and result; a map argument has kebab-case keys, which become
  keywords);
* java: the Java facade through JPype (static ``Class.method``, ``#method`` on the target, a
  ``java.util.HashMap`` with the C names for a map argument); a binding that is a Clojure var
  (the runner's adapters) is called as for clojure. The result goes through ``jvm.to_python``
  and a Java exception through ``jvm.translate_exception``.

What comes back is recorded as the Python program sees it (:func:`as_json`): a value that is no
plain Python value (a ``java.lang.Boolean`` where Python has a ``bool``) is recorded as such, so
it differs from the reference's outcome instead of being smoothed over here.
"""

from __future__ import annotations

from typing import Any

import runner


def _binding(call: str, language: str) -> dict[str, Any] | None:
    b = runner.BINDINGS[call]
    b = runner.BINDINGS[b["same_as"]] if "same_as" in b else b
    return b.get(language) or (b.get("clojure") if language == "java" else None)


def _positional(params: list[str], args: dict[str, Any], defaults: dict[str, Any]) -> list[Any]:
    out = []
    for p in params:
        if p in args:
            out.append(args[p])
        elif p in defaults:
            out.append(defaults[p])
        else:
            break
    return out


def _clojure_var(var: str, values: list[Any]) -> Any:
    from pyprof import jvm

    ns, _, fn = var.partition("/")
    return jvm.require(ns)[fn](*values)


def call(step: dict[str, Any], language: str, names: dict[str, Any], workdir: str) -> Any:
    """Make ``step`` through the bridge in ``language`` (clojure or java); its result, or the
    translated error raised (a Java exception the bridge does not translate is raised as is)."""
    import jpype

    from pyprof import jvm

    b = _binding(step["call"], language)
    if b is None:
        raise LookupError(f"{step['call']}: no {language} binding (bindings.json)")
    args = runner.resolve_value(step.get("args", {}), names, workdir)
    target = runner.resolve_value(step["target"], names, workdir) if "target" in step else None
    style = b.get("args", [])
    if style == "map":
        if language == "java" and "method" in b and "/" not in b["method"]:
            m = jpype.JClass("java.util.HashMap")()
            for k, v in args.items():
                m.put(k, jvm.to_clojure(v))
            values: list[Any] = [m]
        else:
            values = [{k.replace("_", "-"): v for k, v in args.items()}]
    else:
        values = _positional(style, args, b.get("defaults", {}))
    if target is not None:
        values = [target, *values]
    if "var" in b:
        value = _clojure_var(b["var"], values)
    elif "/" in b["method"]:
        value = _clojure_var(b["method"], values)
    else:
        try:
            if b["method"].startswith("#"):
                value = getattr(values[0], b["method"][1:])(*values[1:])
            else:
                cls, _, method = b["method"].rpartition(".")
                value = getattr(jpype.JClass(cls), method)(*values)
        except jpype.JException as exc:
            translated = jvm.translate_exception(exc)
            if translated is None:
                raise
            raise translated from exc
        value = jvm.to_python(value)
    return len(list(value)) if runner.BINDINGS[step["call"]].get("result") == "count" else value


def _key(k: Any) -> str:
    return str(k).replace("-", "_")


def as_json(value: Any) -> Any:
    """A value the bridge handed to Python, as the runner records results: JVM profiler objects
    as ``{"object": kind, "name": n}``, a session as ``{"object": "profile"}``, a saved window as
    its index and steps, keywords as their names with ``_``; a value of a type a Python program
    would not get from the reference (a Java object) as ``{"java": <class>}``."""
    import jpype

    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, runner_keyword()):
        return _key(value)
    if isinstance(value, dict):
        keys = {str(k) for k in value}
        if "pyprof.session/name" in keys:
            return {"object": "profile"}
        if {"first-step", "path"} <= keys:
            return {"index": value.get("index"), "first_step": value.get("first-step"),
                    "last_step": value.get("last-step")}
        if "marker" in keys and "domain" in keys:
            return {"object": "Marker", "name": value.get("marker")}
        if "operators" in keys and "units" in keys:
            counts: dict[str, Any] = {}
            for op in value["operators"]:
                counts[op["name"]] = counts.get(op["name"], 0) + op["count"]
            return {"operators": counts}
        return {_key(k): as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    J = jpype.JClass
    if isinstance(value, J("pyprof.jvm.ProfileObject")):
        return {"object": str(value.kind().display()), "name": str(value.name())}
    if isinstance(value, J("pyprof.jvm.ProfileDomain")):
        return {"object": "Domain", "name": str(value.name())}
    if isinstance(value, J("pyprof.jvm.ProfilerSession")):
        return {"object": "profile"}
    java = getattr(value, "getClass", None)
    return {"java": str(java().getName()) if callable(java) else type(value).__name__}


def runner_keyword() -> type:
    from pyprof import jvm

    return jvm.Keyword
