"""Every error pyprof raises ends in a fix ("... fix: <what to do>").

(a) The catalogue (pyprof/spec/errors.json): every entry has a kind of api.json, a non-empty
    fix, and renders in Python, Clojure and Java with every placeholder filled; the Python
    exception is of its kind's class and its text ends in ``fix: <fix>``. (The JVM reads the same
    file: jvm/test/pyprof/error_catalogue_test.clj.)
(b) A static check over pyprof/**/*.py: no ``raise`` builds a pyprof error class from a literal
    message (those go through ``rules.error``), and any other exception raised with a literal
    message says ``fix:`` in it. A planted raise of each form fails it (``test_scan_finds_planted``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pyprof import errors, rules

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pyprof"
ENTRIES = rules.CATALOGUE["errors"]
_FIELD = re.compile(r"\{(api\.)?([a-z_]+)(!r)?\}")
_LOOKS_LIKE_FIELD = re.compile(r"\{[A-Za-z_.!]+\}")
LANGUAGES = ("python", "clojure", "java")


def _sample_fields(entry: dict) -> dict:
    """A value for every field the entry's templates name (a list for ``choices``)."""
    names = {m.group(2) for t in (entry["message"], entry["fix"]) for m in _FIELD.finditer(t)
             if not m.group(1)}
    return {n: (["a", "b"] if n == "choices" else f"<{n}>") for n in names}


@pytest.mark.parametrize("code", sorted(ENTRIES))
def test_entry_renders_with_a_fix_in_every_language(code):
    entry = ENTRIES[code]
    assert entry["kind"] in rules.API["error_kinds"], f"{code}: kind {entry['kind']!r}"
    assert entry["fix"].strip(), f"{code}: empty fix"
    assert entry["message"].strip(), f"{code}: empty message"
    fields = _sample_fields(entry)
    for template in (entry["message"], entry["fix"]):  # a misspelt placeholder stays unfilled
        assert not _LOOKS_LIKE_FIELD.findall(_FIELD.sub("", template)), f"{code}: {template}"
    for language in LANGUAGES:  # render raises on a field or API name it cannot fill
        fix = rules.render(entry["fix"], fields, language)
        text = f"{rules.render(entry['message'], fields, language)} fix: {fix}"
        assert fix.strip() and text.endswith(f" fix: {fix}"), f"{code} ({language}): {text}"
        for value in fields.values():  # every field shows
            assert not isinstance(value, str) or value in text, f"{code} ({language}): {value}"
    if entry["kind"] == "mxnet":  # built from MXNet's message: see test_mxnet_error_ends_in_a_fix
        return
    exc = rules.error(code, **fields)
    cls = getattr(errors, rules.API["error_kinds"][entry["kind"]]["python"])
    assert type(exc) is cls and isinstance(exc, errors.PyprofError)
    assert str(exc).endswith(f" fix: {exc.fix}") and exc.code == code


def test_mxnet_error_ends_in_a_fix():
    e = errors.MXNetError("MXSetProcessProfilerConfig", "MXNetError: bad key\nStack trace:\n [bt] x")
    assert str(e).startswith("MXSetProcessProfilerConfig failed: bad key")
    assert str(e).endswith("fix: " + rules.fix("mxnet.call_failed"))
    assert str(errors.MXNetError("MXDumpProfile", "x", "dump first")).endswith("fix: dump first")
    # .code, .fix and .fields as every catalogue error (it had none: a parity probe's find)
    assert (e.code, e.fix) == ("mxnet.call_failed", rules.fix("mxnet.call_failed"))
    assert e.fields == {"function": "MXSetProcessProfilerConfig",
                        "mxnet_message": "MXNetError: bad key\nStack trace:\n [bt] x"}


def test_every_error_kind_names_a_pyprof_class():
    for kind, names in rules.API["error_kinds"].items():
        assert issubclass(getattr(errors, names["python"]), errors.PyprofError), kind


# ------------------------------------------------------------------ (b) the static check

def _pyprof_error_names() -> set[str]:
    """Names of pyprof's exception classes: pyprof.errors' tree and every class defined in
    pyprof that derives from one of them (by base name, to a fixed point)."""
    names = {n for n in dir(errors) if isinstance(getattr(errors, n), type)
             and issubclass(getattr(errors, n), errors.PyprofError)}
    defs = [(n.name, {_name(b) for b in n.bases}) for p in PACKAGE.rglob("*.py")
            for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.ClassDef)]
    grew = True
    while grew:
        grew = False
        for name, bases in defs:
            if name not in names and bases & names:
                names.add(name)
                grew = True
    return names


def _name(node: ast.AST) -> str:
    """``X`` for ``X`` or ``mod.X``; '' for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _literal_text(node: ast.AST) -> str | None:
    """The literal text of a message expression (constants of a str, f-string, ``+`` or
    implicit concatenation, joined), or None when it holds no literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant)) or None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        parts = [_literal_text(node.left), _literal_text(node.right)]
        return "".join(p for p in parts if p) or None
    return None


# Exceptions whose argument is a name, by protocol, not a message for a person.
_PROTOCOL = {"AttributeError", "StopIteration", "KeyError"}


def _assigned_texts(tree: ast.AST) -> dict[int, dict[str, str]]:
    """Per function (by id of its node), the literal text last assigned to each plain name in
    it: a message built in a variable first (``msg = f"..."; raise X(msg)``)."""
    out: dict[int, dict[str, str]] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            names = out.setdefault(id(fn), {})
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                        and isinstance(node.targets[0], ast.Name):
                    text = _literal_text(node.value)
                    if text:
                        names[node.targets[0].id] = text
    return out


def scan(source: str, filename: str, pyprof_errors: set[str]) -> list[str]:
    """The raises of ``source`` that break the rule, as 'file:line: why'."""
    out = []
    tree = ast.parse(source)
    texts = _assigned_texts(tree)
    enclosing = {id(child): id(fn) for fn in ast.walk(tree)
                 if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module))
                 for child in ast.walk(fn)}  # inner functions overwrite: walk order is outer first
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
            continue  # a re-raise, or a raise of an exception built elsewhere
        cls = _name(node.exc.func)
        where = f"{filename}:{node.lineno}"
        if cls == "error":  # rules.error(code, ...): the catalogue
            continue
        if cls in pyprof_errors and cls != "MXNetError":
            out.append(f"{where}: raise {cls}(...) with its own message; raise "
                       "rules.error(<code>, ...) with an entry in pyprof/spec/errors.json")
            continue
        if cls in _PROTOCOL or cls == "MXNetError":
            continue
        # The message is the first argument; a one-word literal there is a tag (a phase), not text.
        arg = node.exc.args[0] if node.exc.args else None
        text = _literal_text(arg) if arg is not None else None
        if isinstance(arg, ast.Name):  # a message built in a variable of the same function
            text = texts.get(enclosing.get(id(node), -1), {}).get(arg.id)
        if text and " " in text.strip() and "fix: " not in text:
            out.append(f"{where}: raise {cls}({text[:50]!r}...) without 'fix: '")
    return out


def test_no_raise_with_a_literal_message_lacks_a_fix():
    names = _pyprof_error_names()
    offences = [o for p in sorted(PACKAGE.rglob("*.py"))
                for o in scan(p.read_text(), str(p.relative_to(ROOT)), names)]
    assert not offences, "\n".join(offences)


def test_scan_finds_planted():
    names = _pyprof_error_names()
    assert {"StateError", "TraceFormatError", "AggregateFormatError", "PyprofError"} <= names
    planted = '''
def f(x):
    raise StateError("cannot do that")
def g(x):
    raise errors.TraceFormatError(f"{x}: no events; fix: pass a trace")
def h(x):
    raise ValueError(f"bad {x}: expected an int")
def i(x):
    raise RuntimeError("bad " + x + ", expected more")
def ok(x):
    raise rules.error("trace.empty", path=x)
def ok2(x):
    raise ValueError(f"bad {x}; fix: pass an int")
def ok3(name):
    raise AttributeError(name)
def j(x):
    msg = f"bad value {x} for the option"
    raise ValueError(msg)
def ok4(x):
    msg = f"bad value {x}; fix: pass an int"
    raise ValueError(msg)
'''
    found = scan(planted, "planted.py", names)
    assert [o.split(":")[1] for o in found] == ["3", "5", "7", "9", "18"], found
