"""The codebase's layout rules (docs/architecture.md), checked on the sources themselves:
no import cycle inside pyprof, no module using another's private names, ctypes only in
pyprof.native.capi, no source file over about 450 lines."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pyprof"
MAX_LINES = 450


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


def test_ctypes_only_in_capi():
    users = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
             if p.relative_to(PACKAGE).as_posix() != "native/capi.py" and any(
                 isinstance(n, (ast.Import, ast.ImportFrom)) and any(
                     (getattr(n, "module", None) or a.name).split(".")[0] == "ctypes"
                     for a in n.names)
                 for n in ast.walk(ast.parse(p.read_text())))]
    assert users == []


def test_no_source_file_over_450_lines():
    sources = [*PACKAGE.rglob("*.py"), *(ROOT / "jvm" / "src").rglob("*.clj"),
               *(ROOT / "jvm" / "src").rglob("*.java")]
    long = {str(p.relative_to(ROOT)): n for p in sources
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}, "split these by purpose (docs/architecture.md)"
