#!/usr/bin/env python3
"""The table "jvm/src lines that restate a Python module" of docs/architecture.md, recomputed.

Each row names a jvm/src file, the Python module it restates, its line count before issue 20
(fixed) and now (`wc -l`; 0 for a file gone). Every file the module map marks as restating
(`name=python.module`) is a row: `--write` adds the missing ones (before 0), rewrites the
"after" column and the total, and lowers the ceiling to the total (it never raises it); without
it the table is printed. tests/test_layout.py checks that the document says what this computes
and that the total is at most the ceiling: the ratchet.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- restated-lines: begin -->", "<!-- restated-lines: end -->"
CEILING = re.compile(r"^Ceiling: \*\*(\d+)\*\*")
ROW = re.compile(r"^\| `(?P<file>[^`]+)` \| `(?P<module>[^`]+)` \| (?P<before>\d+) \| (?P<after>\d+) \|$")


def lines_of(rel: str) -> int:
    path = ROOT / "jvm" / "src" / rel
    return len(path.read_text().splitlines()) if path.is_file() else 0


def rows(text: str) -> list[dict]:
    """The table's rows, as written (file, module, before, after), total row left out."""
    body = text.split(BEGIN, 1)[1].split(END, 1)[0]
    return [dict(m.groupdict(), before=int(m["before"]), after=int(m["after"]))
            for line in body.splitlines() if (m := ROW.match(line.strip()))]


def ceiling(text: str) -> int:
    """The ceiling the document records: the most restated lines the tree may hold."""
    body = text.split(BEGIN, 1)[1].split(END, 1)[0]
    return next(int(m[1]) for line in body.splitlines() if (m := CEILING.match(line.strip())))


def marked(text: str) -> dict[str, str]:
    """jvm/src file (relative) -> the Python module it restates, for every ``=`` entry of the
    module map's JVM lines."""
    block = text.split("```modules\n", 1)[1].split("```", 1)[0]
    out = {}
    for line in block.splitlines():
        head, _, names = line.partition(":")
        if not head.startswith(("clojure ", "java ")):
            continue
        for n in (n.strip() for n in names.split(",")):
            name, eq, module = n.partition("=")
            if eq:
                out[_path(head.split()[0], name)] = module
    return out


def _path(language: str, name: str) -> str:
    if language == "java":
        return "java/" + name.replace(".", "/") + ".java"
    return "clj/" + name.replace(".", "/").replace("-", "_") + ".clj"


def render(text: str) -> str:
    """The document with the rows of every marked file, each row's after column, the total and
    the ceiling (the lower of the recorded one and the total) recomputed."""
    table = rows(text)
    known = {r["file"] for r in table}
    table += [{"file": f, "module": m, "before": 0, "after": 0}
              for f, m in sorted(marked(text).items()) if f not in known]
    table.sort(key=lambda r: r["file"])
    head = "| jvm/src file | restates | before | after |\n|---|---|---:|---:|\n"
    lines = [f"| `{r['file']}` | `{r['module']}` | {r['before']} | {lines_of(r['file'])} |"
             for r in table]
    total = (f"| **total** | | **{sum(r['before'] for r in table)}** | "
             f"**{sum(lines_of(r['file']) for r in table)}** |")
    now = sum(lines_of(r["file"]) for r in table)
    cap = f"Ceiling: **{min(ceiling(text), now)}**"
    before, rest = text.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    return (before + BEGIN + "\n" + head + "\n".join(lines) + "\n" + total + "\n\n" + cap + "\n"
            + END + after)


def main(argv: list[str]) -> int:
    text = DOC.read_text()
    new = render(text)
    if "--write" in argv:
        DOC.write_text(new)
    else:
        print(new.split(BEGIN, 1)[1].split(END, 1)[0].strip())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
