"""The Python runner of the conformance suite: one scenario file, one child process.

A scenario (``scenarios/*.json``) is data: a list of steps, each a call of the profiler API
named as the Python reference names it (``bindings.json`` maps every name to the Clojure and
Java functions), with arguments and what to expect. The JVM runner
(``jvm/test/pyprof/conformance.clj``) executes the same files. Both produce the same outcome
records, which :func:`differences` compares with a scenario's expectations:

* a call that returns: ``{"ok": <result as JSON>}`` (objects as ``{"object": kind, "name": n}``);
* a call that raises a pyprof error: ``{"error": <catalogue code>, "kind": <kind>}``;
* ``trace``: the trace's events, normalised (see ``normalise_events``), with counts;
* ``validate``: ``pyprof validate``'s problem lines for a written trace (the JVM runner asks
  Python's validator too); ``flops``: the FLOPs Python's readers derive from a written trace's
  shapes and attributes (the JVM runner asks Python too: the JVM writes, Python derives);
* statistics: calls per operator name; operator records as category, name and count;
* a step for other languages only (``"languages": [...]``, or ``"not_in": [...]`` with a
  ``"why"``, e.g. an input Java's types rule out): ``{"skipped": true}``.

Run ``python tests/conformance/runner.py SCENARIO`` to print the outcomes of one scenario.

Batch mode (the differential test, ``tests/differential``): ``runner.py --batch BATCH WORKDIR
[--bridge]`` runs every sequence of ``BATCH`` (``{"sequences": [scenario, ...]}``) in order in
this one process, sequence i in ``WORKDIR/s<i>`` (``{dir}``), and prints a list of outcomes per
sequence; an exception that is no pyprof error becomes ``{"error": "crash", "kind": <class>}``
instead of ending the child. ``--bridge`` starts the JVM in this process first (``pyprof.jvm``)
and makes each step in the language its ``"lang"`` names (python, clojure or java: see
``bridge.py``); without it, ``"lang"`` is ignored, so the same sequence all in Python is the
bridge's reference. Three calls serve the batch: ``raw_event`` (an event made through MXNet's
own Python API, which takes names pyprof refuses), ``all_files`` (the sequence's files and the
working directory's, pid-free) and ``traces`` (every JSON file of those, summarised by
``trace_summary``).
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SCENARIOS = HERE / "scenarios"
BINDINGS: dict[str, Any] = json.loads((HERE / "bindings.json").read_text())["calls"]


def scenario_files() -> list[Path]:
    return sorted(SCENARIOS.glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


# ------------------------------------------------------------------ executing (in the child)


def _resolve(value: Any, names: dict[str, Any], workdir: str) -> Any:
    if isinstance(value, str) and value.startswith("$"):  # "$name", or "$name.2": an item
        name, _, index = value[1:].partition(".")
        if name not in names:  # an object whose making failed: None, as the JVM runner has nil
            return None
        return names[name][int(index)] if index else names[name]
    if isinstance(value, str):
        return value.replace("{dir}", workdir).replace("{root}", str(ROOT))
    if isinstance(value, list):
        return [_resolve(v, names, workdir) for v in value]
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in COLLECTIONS:
        kind, items = next(iter(value.items()))  # {"$tuple": [...]}: a tuple, {"$set": [...]}
        return COLLECTIONS[kind](_resolve(items, names, workdir))
    if isinstance(value, dict):
        return {k: _resolve(v, names, workdir) for k, v in value.items()}
    return value


#: Arguments JSON cannot spell: ``{"$tuple": [...]}`` (a list on the JVM) and ``{"$set": [...]}``.
COLLECTIONS = {"$tuple": tuple, "$set": set}


def resolve_value(value: Any, names: dict[str, Any], workdir: str) -> Any:
    """A step's argument with ``$name`` references and ``{dir}``/``{root}`` filled in."""
    return _resolve(value, names, workdir)


def _as_json(value: Any) -> Any:
    import pyprof

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    if hasattr(value, "item") and hasattr(value, "dtype"):  # a numpy scalar
        return value.item()
    if isinstance(value, (pyprof.Domain, pyprof.Task, pyprof.Frame, pyprof.Event,
                          pyprof.Counter, pyprof.Marker)):
        return {"object": type(value).__name__, "name": value.name}
    if isinstance(value, pyprof.Window):
        return {"index": value.index, "first_step": value.first_step, "last_step": value.last_step}
    if isinstance(value, pyprof.Action):
        return value.value
    from pyprof.trace.records import OpStats, TraceStats
    if isinstance(value, TraceStats):  # calls per operator name (categories pooled)
        counts: Counter[str] = Counter()
        for op in value.operators:
            counts[op.name] += op.count
        return {"operators": dict(counts)}
    if isinstance(value, OpStats):
        return {"category": value.category, "name": value.name, "count": value.count}
    return {"object": type(value).__name__}


def normalise_events(events: list[dict[str, Any]], cats: list[str] | None,
                     names: list[str] | None, keep: list[str]) -> list[dict[str, Any]]:
    """The events whose category is in ``cats`` and name in ``names`` (when given; C API calls,
    memory counters and metadata never), reduced to the fields ``keep``, with how often each
    occurs, sorted by their JSON text."""
    counts: Counter[str] = Counter()
    for e in events:
        cat = e.get("cat", "")
        if e.get("ph") == "M" or cat == "MXNET_C_API" or str(e.get("name", "")).startswith("Memory:"):
            continue
        if (cats is not None and cat not in cats) or (names is not None
                                                      and e.get("name") not in names):
            continue
        counts[json.dumps({k: e[k] for k in keep if k in e}, sort_keys=True)] += 1
    return [{"event": json.loads(k), "count": n} for k, n in sorted(counts.items())]


def table_order(text: str, category: str) -> list[str]:
    """The row names of ``category``'s block in MXNet's aggregate-statistics table, in order."""
    lines = text.splitlines()
    start = lines.index(category) + 4  # the name, "=====", the column names, "-----"
    rows = []
    for line in lines[start:]:
        if not line.strip():
            break
        rows.append(line.split()[0])
    return rows


def trace_summary(path: str) -> Any:
    """A written trace's events (not metadata, C API calls or memory counters) as name, cat and
    ph (and args for counters), with their counts; ``{"unreadable": True}`` for a file that is no
    complete JSON document."""
    try:
        with open(path, encoding="utf-8") as f:
            events = json.load(f)["traceEvents"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return {"unreadable": True}
    counts: Counter[str] = Counter()
    for e in events:
        if e.get("ph") == "M" or e.get("cat") == "MXNET_C_API" \
                or str(e.get("name", "")).startswith("Memory:"):
            continue
        keep = ("name", "cat", "ph", "args") if e.get("ph") == "C" else ("name", "cat", "ph")
        counts[json.dumps({k: e[k] for k in keep if k in e}, sort_keys=True)] += 1
    return [{"event": json.loads(k), "count": n} for k, n in sorted(counts.items())]


def flops_of(path: str) -> list[Any]:
    """``[name, FLOPs or None]`` of every event of the trace at ``path`` that carries args, in
    file order, as Python's readers derive them (``pyprof.attribution.flops.counted``: the one
    reading of a JVM window's shapes and attributes)."""
    from pyprof import rules
    from pyprof.attribution.flops import counted
    from pyprof.trace import iter_events

    key = rules.spec("attribution.json")["trace_args"]["flops"]
    out = []
    for e in iter_events(path, progress=False):
        if isinstance(e.get("args"), dict) and e.get("ph") in ("B", "X"):
            out.append([e.get("name"), counted(e.get("name"), e["args"]).get(key)])
    return out


def _listed(workdir: str) -> list[str]:
    """The files of the sequence's directory (as "<seq>/name") and the plain files of the
    working directory (where MXNet's default profile.json lands), with the pid in pyprof's
    hidden file names replaced by PID, sorted."""
    root, seq = os.getcwd(), os.path.basename(workdir)
    names = [f for f in os.listdir(root) if os.path.isfile(os.path.join(root, f))]
    if os.path.realpath(workdir) != os.path.realpath(root):
        for base, _, files in os.walk(workdir):
            rel = os.path.relpath(base, workdir)
            names += [f"{seq}/" + (f if rel == "." else f"{rel}/{f}") for f in files]
    pid = f"-{os.getpid()}-"
    return sorted(n.replace(pid, "-PID-") for n in names)


def _call(step: dict[str, Any], names: dict[str, Any], workdir: str) -> Any:
    import mxnet as mx

    import pyprof
    from pyprof import profiler

    call = step["call"]
    args = _resolve(step.get("args", {}), names, workdir)
    if call == "raw_event":  # MXNet's own Python API: no pyprof name check
        event = mx.profiler.Event(args["name"])
        event.start()
        event.stop()
        return None
    if call == "all_files":
        return _listed(workdir)
    if call == "traces":
        pid = f"-{os.getpid()}-"
        return {n: trace_summary(os.path.join(os.path.dirname(workdir) if "/" in n else os.getcwd(),
                                              n.replace("-PID-", pid)))
                for n in _listed(workdir) if n.endswith(".json")}
    if call == "workload":  # the same operators through each binding
        for _ in range(args.get("times", 1)):
            mx.nd.random.uniform(-1, 1, shape=tuple(args.get("shape", [4, 4]))).wait_to_read()
        mx.nd.waitall()
        return None
    if call == "dumps_json":  # the JSON form, parsed (the JVM's dumps parses it itself)
        return json.loads(profiler.dumps(format="json", **args))
    if call == "dumps_has":  # the table form holds a text
        return args["text"] in profiler.dumps()
    if call == "dumps_order":  # the names of one category's rows, as the table sorts them
        text = profiler.dumps(sort_by=args["sort_by"], ascending=args["ascending"])
        return table_order(text, args["category"])
    if call == "write_file":  # a file the step names, with this text (a bad trace)
        with open(os.path.join(workdir, args["path"]), "w", encoding="utf-8") as f:
            f.write(args["text"])
        return None
    if call == "make_dir":  # a directory the step names (removed again by remove_path)
        os.makedirs(os.path.join(workdir, args["path"]))
        return None
    if call == "remove_path":  # a file or a whole directory vanishes (under a running profiler)
        full = os.path.join(workdir, args["path"])
        shutil.rmtree(full) if os.path.isdir(full) else os.remove(full)
        return None
    if call == "make_fifo":  # a named pipe: opening it to write would block
        os.mkfifo(os.path.join(workdir, args["path"]))
        return None
    if call == "truncate_file":  # keep the first fraction of a file's bytes (a cut trace)
        full = os.path.join(workdir, args["path"])
        os.truncate(full, int(os.path.getsize(full) * args["keep"]))
        return None
    if call == "validate":  # pyprof validate's problem lines for a written file ([]: valid)
        from pyprof import trace

        return trace.validate(os.path.join(workdir, args["path"]), progress=False).problems
    if call == "flops":  # Python's reading of a written trace: FLOPs per operator event with args
        return flops_of(os.path.join(workdir, args["path"]))
    if call == "files":  # the names in the working directory (the child's cwd), sorted
        return sorted(os.listdir(workdir))
    if call == "trace":
        with open(os.path.join(workdir, args["path"]), encoding="utf-8") as f:
            events = json.load(f)["traceEvents"]
        return normalise_events(events, args.get("cats"), args.get("names"),
                                args.get("keep", ["name", "cat", "ph"]))
    binding = BINDINGS[call]
    path = binding["python"]
    if "target" in step:  # a method or property: "Task.start" with "target": "$t"
        member = getattr(_resolve(step["target"], names, workdir), path.rsplit(".", 1)[1])
        value = member(**args) if callable(member) else member
    else:
        module, _, attr = path.rpartition(".")
        value = getattr(importlib.import_module(module), attr)(**args)
    return len(list(value)) if binding.get("result") == "count" else value


def execute(scenario: dict[str, Any], workdir: str, *, batch: bool = False,
            bridge: bool = False) -> list[dict[str, Any]]:
    """Run the steps in this process; one outcome per step. ``batch``: an exception that is no
    pyprof error is an outcome too; ``bridge``: a step with ``"lang"`` clojure or java is made
    through the JPype bridge (``bridge.py``)."""
    import pyprof

    names: dict[str, Any] = {}
    outcomes = []
    for step in scenario["steps"]:
        if "python" not in step.get("languages", ["python"]) or "python" in step.get("not_in", ()):
            outcomes.append({"skipped": True})
            continue
        lang = step.get("lang", "python") if bridge else "python"
        try:
            if lang == "python":
                value, as_json = _call(step, names, workdir), _as_json
            else:
                import bridge as jvm_steps

                value, as_json = jvm_steps.call(step, lang, names, workdir), jvm_steps.as_json
        except pyprof.PyprofError as exc:
            outcomes.append({"error": getattr(exc, "code", type(exc).__name__),
                             "kind": type(exc).__name__, "message": str(exc)})
            continue
        except Exception as exc:  # noqa: BLE001 - batch mode: a crash is an outcome to compare
            if not batch:
                raise
            outcomes.append({"error": "crash", "kind": _crash_kind(exc), "message": str(exc)})
            continue
        if "as" in step:
            names[step["as"]] = value
        outcomes.append({"ok": as_json(value)})
    return outcomes


def _crash_kind(exc: BaseException) -> str:
    """A crash's class: a Java exception's Java class name, else the Python class name."""
    java = getattr(exc, "getClass", None)
    return str(java().getName()) if callable(java) else type(exc).__name__


def execute_batch(batch: dict[str, Any], root: str, *, bridge: bool = False) -> list[Any]:
    """Every sequence of ``batch`` in order in this process, sequence i in ``root``/s<i>."""
    if bridge:
        from pyprof import jvm

        jvm.start([f"-Dpyprof.outputRoot={root}"])  # the Java session's root, as the JVM runs'
    out = []
    for i, scenario in enumerate(batch["sequences"]):
        workdir = os.path.join(root, f"s{i}")
        os.makedirs(workdir, exist_ok=True)
        out.append(execute(scenario, workdir, batch=True, bridge=bridge))
    return out


# ------------------------------------------------------------------ driving and comparing


def run(path: Path, *, timeout: float = 300, source: Path = ROOT) -> list[dict[str, Any]]:
    """Execute scenario ``path`` in a fresh child interpreter, with the ``pyprof`` package of
    ``source`` (this checkout; a mutated copy in the mutation tests), forked from a warm one
    where ``tests/zygote.py`` can; its outcomes."""
    import zygote  # tests/: the warm interpreters children are forked from

    with tempfile.TemporaryDirectory(prefix="conformance-") as workdir:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(source), os.environ.get(
            "PYTHONPATH", "")]))
        proc = zygote.run([str(Path(__file__)), str(path.resolve()), workdir], cwd=workdir,
                          env=env, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"{path.name}: the child exited {proc.returncode}\n"
                             f"{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _kind_matches(expected_code: str, kind: str) -> bool:
    from pyprof import rules

    entry = rules.CATALOGUE["errors"].get(expected_code)
    if entry is None:
        return False
    return rules.API["error_kinds"][entry["kind"]]["python"] == kind or entry["kind"] == kind


def _subset(expected: Any, actual: Any) -> bool:
    """``expected`` is contained in ``actual`` (dicts: the keys given; lists: item by item;
    numbers: equal within 1e-9 relative; others: equal)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return all(k in actual and _subset(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(map(_subset, expected, actual))
    if isinstance(expected, float) and isinstance(actual, (int, float)) \
            and not isinstance(actual, bool):
        return abs(expected - actual) <= 1e-9 * max(1.0, abs(expected))
    return expected == actual


def differences(scenario: dict[str, Any], outcomes: list[dict[str, Any]],
                language: str = "python") -> list[str]:
    """Where ``outcomes`` (of ``language``: "python", or "jvm" for the JVM runner's) differ
    from the scenario's expectations, one line each."""
    out = []
    for i, (step, got) in enumerate(zip(scenario["steps"], outcomes)):
        if got.get("skipped"):
            continue
        where = f"step {i} ({step['call']})"
        expect = step.get("expect", {})  # nothing given: the call succeeds
        if "error" in expect:
            code = expect["error"]
            code = code[language] if isinstance(code, dict) else code  # per language
            if got.get("error") != code:
                out.append(f"{where}: expected error {code}, got {got}")
            elif not _kind_matches(code, got.get("kind", "")):
                out.append(f"{where}: error {got['error']} has kind {got.get('kind')}")
            for text in expect.get("message_has", ()):
                if text not in got.get("message", ""):
                    out.append(f"{where}: the message lacks {text!r}: {got.get('message')!r}")
        elif "error" in got:
            out.append(f"{where}: expected success, got error {got['error']} ({got['kind']})")
        elif "ok" in expect and not _subset(expect["ok"], got.get("ok")):
            out.append(f"{where}: expected {json.dumps(expect['ok'])}\n"
                       f"   got {json.dumps(got.get('ok'))}")
        elif "events" in expect:
            exp = {json.dumps(e["event"], sort_keys=True): e["count"] for e in expect["events"]}
            act = {json.dumps(e["event"], sort_keys=True): e["count"] for e in got.get("ok", [])}
            diff = sorted(f"{k}: expected {exp.get(k, 0)}, got {act.get(k, 0)}"
                          for k in exp.keys() | act.keys() if exp.get(k) != act.get(k))
            if diff:
                out.append(f"{where}: trace events differ:\n   " + "\n   ".join(diff))
    if len(outcomes) != len(scenario["steps"]):
        out.append(f"{len(outcomes)} outcomes for {len(scenario['steps'])} steps")
    return out


if __name__ == "__main__":
    if sys.argv[1] == "--batch":
        sys.path.insert(0, str(HERE))
        result = execute_batch(load(Path(sys.argv[2])), sys.argv[3], bridge="--bridge" in sys.argv)
        print(json.dumps(result, default=repr))
        sys.stdout.flush()
        os._exit(0)  # no exit handlers: the JVM's shutdown can hang a bridge child at exit
    scenario_path, work = Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else os.getcwd()
    print(json.dumps(execute(load(scenario_path), work)))
