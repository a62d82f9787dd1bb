"""The codebase's layout rules (docs/architecture.md), checked on the sources themselves:
no import cycle inside pyprof, no module using another's private names, ctypes only in
pyprof.native.capi (libmxnet) and pyprof.native.shim (pyprof's own recorder library); a source
file over 600 lines is a warning (review judges a file by whether it has one purpose)."""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pyprof"
WARN_LINES = 600


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, str, ast.AST]]:
    """(pyprof module imported, the name imported, node) for every import in ``path``, at any
    depth (a function-level import still ties the two modules together)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.append((full if full in modules else base, alias.name, node))
        elif isinstance(node, ast.Import):
            found += [(a.name, a.name, node) for a in node.names]
    return [(m, a, n) for m, a, n in found if m in modules and m != name]


def test_no_import_cycle_inside_pyprof():
    modules = _modules()
    # The package's __init__ re-exports its submodules (a facade); cycles are between modules.
    graph = {name: {m for m, _, _ in _imports(name, path, modules) if m != "pyprof"}
             for name, path in modules.items() if name != "pyprof"}
    cycles = []

    def visit(node, stack, seen):
        for nxt in sorted(graph.get(node, ())):
            if nxt in stack:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in seen:
                seen.add(nxt)
                visit(nxt, stack + [nxt], seen)

    for start in sorted(graph):
        visit(start, [start], {start})
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles[:10])


def test_no_module_uses_another_modules_private_names():
    """Package-internal modules (pyprof.native.capi, ...) may be imported and may be imported; the
    private names inside another module may not (``mod._x``, ``from .mod import _x``)."""
    modules = _modules()
    offences = []
    for name, path in modules.items():
        aliases = {}  # local name -> the pyprof module it stands for
        for imported, what, node in _imports(name, path, modules):
            if isinstance(node, ast.Import):
                continue
            asname = next(a.asname for a in node.names if a.name == what) or what
            if imported.endswith("." + what):  # a module (private modules are package-internal)
                aliases[asname] = imported
            elif what.startswith("_") and not what.startswith("__"):
                offences.append(f"{path.relative_to(ROOT)}:{node.lineno}: "
                                f"from {imported} import {what}")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in aliases and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                offences.append(f"{path.relative_to(ROOT)}:{node.lineno}: "
                                f"{node.value.id}.{node.attr}")
    assert offences == []


# Two native libraries, each with one owner.
CTYPES_OWNERS = ("native/capi.py", "native/shim.py", "native/cutter.py")


def test_ctypes_only_in_capi_and_shim():
    users = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
             if p.relative_to(PACKAGE).as_posix() not in CTYPES_OWNERS and any(
                 isinstance(n, (ast.Import, ast.ImportFrom)) and any(
                     (getattr(n, "module", None) or a.name).split(".")[0] == "ctypes"
                     for a in n.names)
                 for n in ast.walk(ast.parse(p.read_text())))]
    assert users == []


def test_a_source_file_over_600_lines_is_a_warning():
    sources = [*PACKAGE.rglob("*.py"), *(ROOT / "jvm" / "src").rglob("*.clj"),
               *(ROOT / "jvm" / "src").rglob("*.java"), *_example_clojure().values(),
               *_example_java().values()]
    assert len(sources) > 100
    long = {str(p.relative_to(ROOT)): n for p in sources
            if (n := len(p.read_text().splitlines())) > WARN_LINES}
    if long:  # a hint for review, not a rule: one purpose per file is what counts
        warnings.warn(f"source files over {WARN_LINES} lines (one purpose each?): {long}",
                      stacklevel=1)


# --- docs/architecture.md: the module map and the restated-lines table cannot drift ---------

DOC = ROOT / "docs" / "architecture.md"
JVM_SRC = ROOT / "jvm" / "src"
# The example's MXNet and the compat namespaces: in examples/matmul, out of the library jar. Its
# `profiler.core` is MXNet's own example, unchanged, and no module of pyprof's.
EXAMPLE = ROOT / "examples" / "matmul"
SEED = EXAMPLE / "src" / "profiler"


def _module_map() -> dict[tuple[str, str], list[str]]:
    """(language, layer) -> the names the document's ```modules block lists (``=...`` kept)."""
    text = DOC.read_text()
    block = text.split("```modules\n", 1)[1].split("```", 1)[0]
    out = {}
    for line in block.splitlines():
        if line.strip():
            head, _, names = line.partition(":")
            language, layer = head.split(None, 1)
            out[(language, layer.strip())] = [n.strip() for n in names.split(",") if n.strip()]
    return out


def _listed(language: str) -> list[str]:
    return [n.partition("=")[0] for (lang, _), names in _module_map().items()
            if lang == language for n in names]


def _clojure_namespaces() -> dict[str, Path]:
    return {".".join(p.relative_to(JVM_SRC / "clj").with_suffix("").parts).replace("_", "-"): p
            for p in (JVM_SRC / "clj").rglob("*.clj")}


def _java_classes() -> dict[str, Path]:
    return {".".join(p.relative_to(JVM_SRC / "java").with_suffix("").parts): p
            for p in (JVM_SRC / "java").rglob("*.java")}


def _example_clojure() -> dict[str, Path]:
    return {".".join(p.relative_to(EXAMPLE / "src").with_suffix("").parts).replace("_", "-"): p
            for p in (EXAMPLE / "src").rglob("*.clj") if SEED not in p.parents}


def _example_java() -> dict[str, Path]:
    return {".".join(p.relative_to(EXAMPLE / "java").with_suffix("").parts): p
            for p in (EXAMPLE / "java").rglob("*.java")}


def _tree(language: str) -> set[str]:
    """The modules of ``language``: the library's (pyprof/, jvm/src) and, for the JVM, the
    example's (examples/matmul/src and java)."""
    if language == "python":
        return set(_modules())
    if language == "clojure":
        return set(_clojure_namespaces()) | set(_example_clojure())
    return set(_java_classes()) | set(_example_java())


def test_module_map_lists_every_module_and_namespace_once_and_nothing_else():
    languages = {lang for lang, _ in _module_map()}
    assert languages == {"python", "clojure", "java"}
    for language in sorted(languages):
        listed = _listed(language)
        twice = sorted({n for n in listed if listed.count(n) > 1})
        assert twice == [], f"{language}: listed more than once in docs/architecture.md"
        tree = _tree(language)
        assert sorted(tree - set(listed)) == [], \
            f"{language}: in the tree, missing from the module map of docs/architecture.md"
        assert sorted(set(listed) - tree) == [], \
            f"{language}: in the module map of docs/architecture.md, not in the tree"


def test_what_a_jvm_entry_restates_is_a_python_module():
    python = set(_modules())
    restated = {n.partition("=")[2] for (lang, _), names in _module_map().items()
                if lang != "python" for n in names if "=" in n}
    assert sorted(restated - python) == []


EXAMPLE_PREFIXES = ("pyprof.example.", "pyprof.jvm.example.", "org.apache.clojure-mxnet.")


def test_the_library_holds_no_example_and_the_example_only_the_example():
    """jvm/src is the library jar: the example's MXNet and the compat namespaces live in
    examples/matmul, which holds nothing else (its seed aside)."""
    library = {**_clojure_namespaces(), **_java_classes()}
    assert sorted(n for n in library if n.startswith(EXAMPLE_PREFIXES)) == []
    example = {**_example_clojure(), **_example_java()}
    assert sorted(n for n in example if not n.startswith(EXAMPLE_PREFIXES)) == []
    assert len(example) >= 15, sorted(example)


def test_example_namespaces_are_required_only_by_the_example_and_compat():
    """The example's MXNet (pyprof.example.*, pyprof.jvm.example.*) is not the profiler:
    no namespace or class of the profiler uses it."""
    offenders = []
    for name, path in {**_clojure_namespaces(), **_java_classes()}.items():
        if name.startswith(EXAMPLE_PREFIXES):
            continue
        text = path.read_text()
        if "pyprof.example." in text.replace("pyprof.example.context/gpu", "") \
                or "pyprof.jvm.example" in text:
            offenders.append(name)
    assert offenders == []


def _restated_lines():
    import importlib.util
    spec = importlib.util.spec_from_file_location("restated_lines",
                                                  ROOT / "scripts" / "restated_lines.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_restated_lines_table_is_what_the_tree_holds():
    """Every ``=`` entry of the module map is a row; each row's after column is the file's line
    count now (0 once it is gone): fix with ``scripts/restated_lines.py --write``."""
    rl = _restated_lines()
    text = DOC.read_text()
    rows = rl.rows(text)
    files = {r["file"] for r in rows}
    assert len(files) == len(rows), "a file twice in the restated-lines table"
    paths = {**_clojure_namespaces(), **_java_classes()}
    marked = {str(paths[n.partition("=")[0]].relative_to(JVM_SRC)): n.partition("=")[2]
              for (lang, _), names in _module_map().items() if lang != "python"
              for n in names if "=" in n}
    assert sorted(set(marked) - files) == [], "restating files missing from the table"
    for r in rows:
        if r["file"] in marked:
            assert r["module"] == marked[r["file"]], r["file"]
        else:
            assert not (JVM_SRC / r["file"]).exists(), \
                f"{r['file']} is in the table but not marked as restating in the module map"
    assert rl.render(text) == text, "run scripts/restated_lines.py --write"
    assert {r["file"]: r["after"] for r in rows} == {r["file"]: rl.lines_of(r["file"]) for r in rows}


def test_restated_lines_never_grow_above_the_ceiling():
    """The ratchet: the table's total is at most the ceiling it records, and the ceiling is what
    ``scripts/restated_lines.py --write`` leaves (it lowers it to the total, never raises it). A
    JVM file that restates Python grows the total: move the logic to Python, or cut as much."""
    rl = _restated_lines()
    text = DOC.read_text()
    total = sum(rl.lines_of(r["file"]) for r in rl.rows(text))
    ceiling = rl.ceiling(text)
    assert total <= ceiling, (f"jvm/src restates {total} lines of Python, above the ceiling of "
                              f"{ceiling} (docs/architecture.md)")
    assert set(rl.marked(text)) <= {r["file"] for r in rl.rows(text)}


def test_no_submodule_is_shadowed_by_a_name_of_its_package():
    """``pyprof.trace.stats`` is a function, so no module may be called ``pyprof/trace/stats.py``:
    once imported it would be unreachable as ``pyprof.trace.stats`` (``statistics`` is the
    module). Checked for every package on what its ``__init__`` binds."""
    shadowed = []
    for init in PACKAGE.rglob("__init__.py"):
        subs = {p.stem for p in init.parent.glob("*.py") if p.name != "__init__.py"} | \
               {p.name for p in init.parent.iterdir() if (p / "__init__.py").is_file()}
        for node in ast.parse(init.read_text()).body:
            bound = []
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                bound = [node.name]
            elif isinstance(node, ast.ImportFrom) and not (node.level == 1 and node.module is None):
                bound = [a.asname or a.name for a in node.names]
            elif isinstance(node, ast.Assign):
                bound = [t.id for t in node.targets if isinstance(t, ast.Name)]
            shadowed += [f"{init.parent.relative_to(ROOT)}/{n}" for n in bound if n in subs]
    assert shadowed == []


# --- layers that only point down: the module map lists each language's layers bottom up -------

def _layer_of(language: str) -> tuple[list[str], dict[str, int]]:
    """The layers of ``language`` in the module map's order (the lowest first), and each listed
    module's place among them."""
    layers = [layer for lang, layer in _module_map() if lang == language]
    return layers, {n.partition("=")[0]: layers.index(layer)
                    for (lang, layer), names in _module_map().items() if lang == language
                    for n in names}


def _climbing(edges, language: str) -> list[str]:
    """The edges ``(where, importer, imported)`` whose imported module is in a higher layer."""
    layers, place = _layer_of(language)
    return [f"{where}: {a} ({layers[place[a]]}) -> {b} ({layers[place[b]]})"
            for where, a, b in edges if place[b] > place[a]]


def test_python_imports_only_point_down():
    """Every import of a pyprof module, top-level or inside a function, names a module of the
    importer's layer or a lower one (``from .. import __version__`` imports the package's facade
    ``pyprof``, of the api layer). A climbing import is fixed by moving what it needs down, not by
    importing later."""
    modules = _modules()
    edges = [(f"{path.relative_to(ROOT)}:{node.lineno}", name, imported)
             for name, path in sorted(modules.items())
             for imported, _, node in _imports(name, path, modules)]
    assert len(edges) > 300
    climbing = sorted(set(_climbing(edges, "python")))
    print("\n".join(climbing))
    assert climbing == [], "imports that climb a layer (docs/architecture.md, the module map)"


_CLJ_REQUIRE = re.compile(r"\(:require\b")
# a namespace reached at run time: (requiring-resolve 'ns/f), (resolve 'ns/f), (ns-resolve 'ns ..),
# (require 'ns), (quote ...) or (symbol "ns" ...) handed to any of them
_CLJ_DYNAMIC = re.compile(r"\((requiring-resolve|resolve|ns-resolve|require)\s+"
                          r"(?:'\[?|\(quote\s+\[?|\(symbol\s+\")([A-Za-z][\w.\-]*?)(?:/[^\s)\]]*)?"
                          r"[\s)\]\"]")


def _clojure_references(text: str, known: set[str]) -> list[tuple[str, str]]:
    """``(kind, namespace)`` for each namespace of ``known`` that ``text`` requires in its ``ns``
    form (kind ``require``) or reaches at run time (``requiring-resolve`` and its kin)."""
    out = []
    if (m := _CLJ_REQUIRE.search(text)) is not None:
        depth, i = 0, m.start()
        for i in range(m.start(), len(text)):  # the (:require ...) clause, to its closing paren
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            if depth == 0:
                break
        clause = re.sub(r'"[^"]*"', "", text[m.start():i])
        out += [("require", ns) for ns in re.findall(r"[\[\s(]([A-Za-z][\w.\-]*)", clause)
                if ns in known]
    code = "\n".join(line.split(";", 1)[0] for line in text.splitlines())
    out += [(kind, ns) for kind, ns in _CLJ_DYNAMIC.findall(code) if ns in known]
    return out


def test_clojure_requires_and_runtime_lookups_only_point_down():
    """The JVM's Clojure namespaces require, and reach through ``requiring-resolve`` and its kin,
    only namespaces of their own layer or a lower one; no namespace resolves one that requires
    it (what a lookup at run time would otherwise hide from the compiler)."""
    spaces = {**_clojure_namespaces(), **_example_clojure()}
    known = set(spaces)
    edges = [(f"{path.relative_to(ROOT)} {kind}", name, ns)
             for name, path in sorted(spaces.items())
             for kind, ns in _clojure_references(path.read_text(), known) if ns != name]
    assert len(edges) > 60
    climbing = sorted(set(_climbing(edges, "clojure")))
    print("\n".join(climbing))
    assert climbing == [], "requires or run-time lookups that climb a layer (docs/architecture.md)"
    dynamic = [e for e in edges if not e[0].endswith(" require")]
    assert all(b in spaces for _, _, b in dynamic)


# a class of pyprof's named in Java code: an import, or a fully qualified name
_JAVA_REF = re.compile(r"\bpyprof\.jvm(?:\.[a-z]\w*)*\.[A-Z]\w*")
_JAVA_NOT_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"', re.S)


def _java_references(text: str, known: set[str]) -> list[str]:
    """The classes of ``known`` that Java source ``text`` imports or names fully qualified in its
    code (comments and strings left out). A class of its own package needs neither: the module
    map keeps a package's classes in one layer or lists the lower ones' imports."""
    return [c for c in _JAVA_REF.findall(_JAVA_NOT_CODE.sub(" ", text)) if c in known]


def test_java_imports_only_point_down():
    """The JVM's Java classes import (or name fully qualified) only classes of their own layer or
    a lower one, as Python's imports and Clojure's requires."""
    classes = {**_java_classes(), **_example_java()}
    edges = [(str(path.relative_to(ROOT)), name, c)
             for name, path in sorted(classes.items())
             for c in _java_references(path.read_text(), set(classes)) if c != name]
    assert len(edges) >= 10
    climbing = sorted(set(_climbing(edges, "java")))
    print("\n".join(climbing))
    assert climbing == [], "Java imports that climb a layer (docs/architecture.md, the module map)"


def test_the_layout_rules_see_a_planted_climb():
    """The two checks above find a climbing import in the forms they read."""
    known = {"pyprof.session.raw", "pyprof.rules"}
    planted = '(ns a (:require [pyprof.rules :as r]))\n(defn f [] ((requiring-resolve \'pyprof.session.raw/x)))\n' \
              '(defn g [f] (requiring-resolve (symbol "pyprof.session.raw" (name f))))\n' \
              '(defn h [] (require (quote pyprof.session.raw)))'
    java = 'import pyprof.jvm.MXNetException;\n// pyprof.jvm.Profiler\n/** {@link pyprof.jvm.Profiler} */\n' \
           'class A { Object x = pyprof.jvm.capi.LibMXNet.load(); String s = "pyprof.jvm.Profiler"; }'
    assert _java_references(java, {"pyprof.jvm.MXNetException", "pyprof.jvm.Profiler",
                                   "pyprof.jvm.capi.LibMXNet"}) == [
        "pyprof.jvm.MXNetException", "pyprof.jvm.capi.LibMXNet"]
    assert _climbing([("A.java", "pyprof.jvm.capi.LibMXNet", "pyprof.jvm.Profiler")], "java") != []
    assert _clojure_references(planted, known) == [
        ("require", "pyprof.rules"), ("requiring-resolve", "pyprof.session.raw"),
        ("requiring-resolve", "pyprof.session.raw"), ("require", "pyprof.session.raw")]
