"""An independent reading of oneDNN verbose logs for the tests: plain ``str.split(',')``,
the time is the last field (no pyprof code)."""

from __future__ import annotations

MARKERS = ("dnnl_verbose", "mkldnn_verbose", "onednn_verbose")


def sums(text: str) -> dict[tuple[str, str], tuple[int, float]]:
    """``{(op, primitive): (lines, total ms)}``; op is ``exec`` or ``create``."""
    out: dict[tuple[str, str], tuple[int, float]] = {}
    for line in text.splitlines():
        f = line.split(",")
        if f[0] not in MARKERS or f[1] == "info":
            continue
        i = 2 if f[1][:1].isdigit() else 1
        op = "create" if f[i].startswith("create") else f[i]
        prim = f[i + 2] if f[i + 1] in ("cpu", "gpu") else f[i + 1]
        n, t = out.get((op, prim), (0, 0.0))
        out[(op, prim)] = (n + 1, t + float(f[-1]))
    return out


def other_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip() and line.split(",")[0] not in MARKERS)
