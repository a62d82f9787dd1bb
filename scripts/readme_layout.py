#!/usr/bin/env python3
"""The README's layout table, generated from the module map of docs/architecture.md.

One row per layer of the module map (```modules block: ``language layer: names``): the layer,
its modules written short (``pyprof.session.*``, ``pyprof.{rules,config}``), and what it is
for. The first two columns are computed from the map alone;
the third is kept from the README as written, so a new layer gets a row with an empty purpose
to fill in. `--write` rewrites the table between the README's markers; without it the table is
printed. tests/test_docs_layout.py checks that the README holds what this computes.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- layout: begin -->", "<!-- layout: end -->"
HEAD = "| layer | modules | what |\n|---|---|---|\n"
ROW = re.compile(r"^\| (?P<layer>[^|]+?) \| (?P<modules>[^|]*?) \| (?P<what>.*?) \|$")
def module_map(text: str | None = None) -> list[tuple[str, list[str]]]:
    """(``language layer``, module names without their ``=restated`` part), in the map's order."""
    text = ARCHITECTURE.read_text() if text is None else text
    block = text.split("```modules\n", 1)[1].split("```", 1)[0]
    out = []
    for line in block.splitlines():
        if line.strip():
            head, _, names = line.partition(":")
            out.append((" ".join(head.split()),
                        [n.strip().partition("=")[0] for n in names.split(",") if n.strip()]))
    return out


def where(names: list[str], listed: set[str]) -> str:
    """The layer's modules, written short: ``P.*`` for a package whose every listed descendant
    is in the layer (P itself too, when listed here), ``P.*`` except its subpackages when the
    layer holds all that is directly in P but not what is deeper, else ``P.{a,b}``.
    ``listed`` is every name the map lists for the language, so the table depends on the map
    alone (tests/test_layout.py checks that the map lists the tree)."""
    left = list(names)
    places: list[tuple[int, str]] = []  # (index of the first name, text), in the map's order
    prefixes = {".".join(n.split(".")[:k]) for n in names for k in range(2, n.count(".") + 2)}
    for prefix in sorted(prefixes, key=lambda q: (q.count("."), q)):
        below = {m for m in listed if m.startswith(prefix + ".")}
        mine = below | ({prefix} & set(names))
        if len(mine) > 1 and mine <= set(left):
            # the deepest package that still holds them all (org.apache.clojure-mxnet, not org.apache)
            common = os.path.commonprefix([m.split(".") for m in mine])
            places.append((min(names.index(m) for m in mine), f"`{'.'.join(common)}.*`"))
            left = [n for n in left if n not in mine]
    groups: dict[str, list[str]] = {}
    for n in left:
        groups.setdefault(n.rpartition(".")[0], []).append(n)
    for parent, group in groups.items():
        first = names.index(group[0])
        if len(group) == 1:
            text = f"`{group[0]}`"
        elif parent and set(group) == {m for m in listed if m.rpartition(".")[0] == parent}:
            text = f"`{parent}.*` except its subpackages"  # stays true as classes are added
        else:
            text = f"`{parent}.{{{','.join(n.rpartition('.')[2] for n in group)}}}`"
        places.append((first, text))
    return ", ".join(t for _, t in sorted(places))


def purposes(text: str) -> dict[str, str]:
    """Each row's third column, by layer, as the README has it now."""
    if BEGIN not in text:
        return {}
    body = text.split(BEGIN, 1)[1].split(END, 1)[0]
    return {m["layer"]: m["what"] for line in body.splitlines()
            if (m := ROW.match(line.strip())) and m["layer"] != "layer" and "---" not in line}


def render(text: str, architecture: str | None = None) -> str:
    """The README with its layout table recomputed from the module map."""
    kept = purposes(text)
    layers = module_map(architecture)
    listed: dict[str, set[str]] = {}
    for layer, names in layers:
        listed.setdefault(layer.split()[0], set()).update(names)
    rows = [f"| {layer} | {where(names, listed[layer.split()[0]])} | {kept.get(layer, '')} |"
            for layer, names in layers]
    before, rest = text.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    return before + BEGIN + "\n" + HEAD + "\n".join(rows) + "\n" + END + after


def main(argv: list[str]) -> int:
    text = README.read_text()
    new = render(text)
    if "--write" in argv:
        README.write_text(new)
    else:
        print(new.split(BEGIN, 1)[1].split(END, 1)[0].strip())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
