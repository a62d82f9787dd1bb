#!/usr/bin/env python3
"""The table "jvm/src lines that restate a Python module" of docs/architecture.md, recomputed.

Each row names a jvm/src file, the Python module it restates, its line count before issue 20
(fixed) and now (`wc -l`; 0 for a file gone). `--write` rewrites the "after" column and the
total in the document; without it the table is printed. tests/test_layout.py checks that the
document says what this computes.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- restated-lines: begin -->", "<!-- restated-lines: end -->"
ROW = re.compile(r"^\| `(?P<file>[^`]+)` \| `(?P<module>[^`]+)` \| (?P<before>\d+) \| (?P<after>\d+) \|$")


def lines_of(rel: str) -> int:
    path = ROOT / "jvm" / "src" / rel
    return len(path.read_text().splitlines()) if path.is_file() else 0


def rows(text: str) -> list[dict]:
    """The table's rows, as written (file, module, before, after), total row left out."""
    body = text.split(BEGIN, 1)[1].split(END, 1)[0]
    return [dict(m.groupdict(), before=int(m["before"]), after=int(m["after"]))
            for line in body.splitlines() if (m := ROW.match(line.strip()))]


def render(text: str) -> str:
    """The document with each row's after column and the total recomputed."""
    table = rows(text)
    head = "| jvm/src file | restates | before | after |\n|---|---|---:|---:|\n"
    lines = [f"| `{r['file']}` | `{r['module']}` | {r['before']} | {lines_of(r['file'])} |"
             for r in table]
    total = (f"| **total** | | **{sum(r['before'] for r in table)}** | "
             f"**{sum(lines_of(r['file']) for r in table)}** |")
    before, rest = text.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    return before + BEGIN + "\n" + head + "\n".join(lines) + "\n" + total + "\n" + END + after


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
