"""A small surface (docs/architecture.md, "Rules of the layout"; issue 35).

Python: six facades (``pyprof``, ``pyprof.profiler``, ``pyprof.session``, ``pyprof.trace``,
``pyprof.jvm``, ``pyprof.bench``) are the only modules that define ``__all__``, with at most 120
names in all, each of which exists; every other module is package-internal. The functions the
pages call (``python`` code blocks, and inline calls written ``pyprof.x.y(...)``) exist where the
pages say. Clojure: the namespaces of ``jvm/src/clj`` without ``^:no-doc`` are the public ones
jvm/README.md lists.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pyprof"
FACADES = ("pyprof", "pyprof.profiler", "pyprof.session", "pyprof.trace", "pyprof.jvm",
           "pyprof.bench")
MAX_NAMES = 120
#: the pages whose code is Python (README.md and docs/*.md)
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _all_of(tree: ast.Module) -> list | None:
    """The literal ``__all__`` a module assigns at top level (None: none)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return ast.literal_eval(node.value)
    return None


def test_only_the_facades_define___all__():
    modules = _modules()
    assert set(FACADES) <= set(modules), set(FACADES) - set(modules)
    offences = []
    for name, path in sorted(modules.items()):
        if name in FACADES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and node.id == "__all__":
                offences.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offences == [], (
        "only the facades define __all__ (docs/architecture.md: a small surface); these modules "
        "are package-internal, import from the facade instead:\n" + "\n".join(offences))


def test_the_facades_export_at_most_120_names_each_once():
    modules = _modules()
    exported = {}
    for name in FACADES:
        names = _all_of(ast.parse(modules[name].read_text()))
        assert isinstance(names, list) and all(isinstance(n, str) for n in names), \
            f"{name}: __all__ must be a literal list of names"
        assert len(names) == len(set(names)), f"{name}: a name twice in __all__"
        exported[name] = names
    total = sum(len(n) for n in exported.values())
    assert total <= MAX_NAMES, (
        f"the facades' __all__ name {total} names, over {MAX_NAMES}: "
        + ", ".join(f"{k} {len(v)}" for k, v in exported.items()))


def test_every_name_a_facade_exports_exists():
    missing = [f"{name}.{attr}" for name in FACADES
               for attr in importlib.import_module(name).__all__
               if not hasattr(importlib.import_module(name), attr)]
    assert missing == []


# --- what the pages call ----------------------------------------------------------------------

def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)


def _resolve(dotted: list[str]) -> str | None:
    """None when the module path and attributes ``dotted`` (a list, from ``pyprof``) exist as far
    as modules go; else what is missing. Stops at the first attribute that is not a module (the
    rest is a call's result, or a member)."""
    obj = importlib.import_module(dotted[0])
    for i, part in enumerate(dotted[1:], 1):
        if not hasattr(obj, part):
            try:  # a subpackage not imported by its parent
                obj = importlib.import_module(".".join(dotted[:i + 1]))
                continue
            except ImportError:
                return ".".join(dotted[:i + 1])
        obj = getattr(obj, part)
        if not isinstance(obj, type(importlib)):
            return None
    return None


def _chain(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _documented_uses() -> list[tuple[str, list[str]]]:
    """(where, the dotted name from a pyprof module) for each use in the pages' Python code."""
    uses = []
    for page in PAGES:
        text = page.read_text()
        for n, block in enumerate(_python_blocks(text), 1):
            where = f"{page.relative_to(ROOT)} block {n}"
            tree = ast.parse(block)
            aliases: dict[str, list[str]] = {}
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for a in node.names:
                        if a.name.split(".")[0] == "pyprof":
                            uses.append((where, a.name.split(".")))
                            aliases[a.asname or "pyprof"] = \
                                a.name.split(".") if a.asname else ["pyprof"]
                elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pyprof"):
                    for a in node.names:
                        uses.append((where, [*node.module.split("."), a.name]))
                        aliases[a.asname or a.name] = [*node.module.split("."), a.name]
            for node in ast.walk(tree):
                chain = _chain(node) if isinstance(node, ast.Attribute) else None
                if chain and chain[0] in aliases:
                    uses.append((where, aliases[chain[0]] + chain[1:]))
        for m in re.finditer(r"`(pyprof(?:\.[A-Za-z_]\w*)+)\(", text):
            line = text.count("\n", 0, m.start()) + 1
            uses.append((f"{page.relative_to(ROOT)}:{line}", m.group(1).split(".")))
    return uses


def test_the_pages_python_parses_and_calls_pyprof():
    uses = _documented_uses()
    # the quick start, the bench, the bridge and the FLOP table at least
    firsts = {".".join(u[:2]) for _, u in uses}
    assert {"pyprof.profiler", "pyprof.trace", "pyprof.bench", "pyprof.jvm",
            "pyprof.attribution"} <= firsts, firsts


def test_every_function_the_pages_call_exists():
    missing = sorted({f"{where}: {problem}" for where, dotted in _documented_uses()
                      if (problem := _resolve(dotted))})
    assert missing == [], "the pages call what pyprof does not have:\n" + "\n".join(missing)


# --- Clojure ------------------------------------------------------------------------------------

NS = re.compile(r"^\(ns\s+(\^:no-doc\s+|\^\{:no-doc true\}\s+)?([\w.\-!?*]+)", re.M)


def _namespaces() -> dict[str, bool]:
    """Each namespace of jvm/src/clj -> whether its ns form carries ^:no-doc."""
    out = {}
    for path in sorted((ROOT / "jvm" / "src" / "clj").rglob("*.clj")):
        m = NS.search(path.read_text())
        assert m, f"{path}: no ns form"
        out[m.group(2)] = bool(m.group(1))
    return out


def _documented_public_namespaces() -> set[str]:
    text = (ROOT / "jvm" / "README.md").read_text()
    m = re.search(r"^The public Clojure API is (.*?)\.\s*$", text, flags=re.M)
    assert m, "jvm/README.md: the line 'The public Clojure API is `...`, ... and `...`.'"
    return set(re.findall(r"`([\w.\-]+)`", m.group(1)))


def test_the_clojure_namespaces_without_no_doc_are_the_documented_ones():
    namespaces = _namespaces()
    assert len(namespaces) > 15
    public = {ns for ns, no_doc in namespaces.items() if not no_doc}
    documented = _documented_public_namespaces()
    assert public == documented, (
        f"without ^:no-doc but not listed in jvm/README.md: {sorted(public - documented)}; "
        f"listed but ^:no-doc or missing: {sorted(documented - public)}. fix: mark an "
        "implementation namespace (ns ^:no-doc name ...), or list a public one in jvm/README.md")
