"""Statistics of a oneDNN verbose log: per primitive kind (implementation, problem shape).

:func:`stats` reads the log in large binary blocks (whole lines), groups lines by signature
(:class:`~pyprof.dnnl.scan.Scanner`, numpy passes over whole blocks). Logs of
:data:`pyprof.process.workers.MIN_BYTES` or more are split at line boundaries into byte ranges read by forked
worker processes (as :mod:`pyprof.trace.parallel` does for traces); each returns count, sum, min
and max per signature, which add up exactly the same way in any order up to floating-point
rounding of the sums.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import multiprocessing
import os
import re
from typing import Any

import orjson
from tabulate import tabulate

from .. import rules
from ..process import workers as _workers
from .parse import GroupStats, ScanResult, Signature, split_signature
from .scan import Scanner


#: ``by=`` values: how rows are keyed.
GROUPINGS = ("primitive", "impl", "shape")
FORMATS = ("table", "json", "csv", "markdown")
_BLOCK = 2 << 20  # small enough for the passes over a block to stay in cache (2 MiB: fastest of 1-8)


@dataclasses.dataclass(frozen=True)
class Row:
    """One row: a primitive kind (and implementation or problem, by grouping).

    Attributes:
        primitive: ``convolution``, ``reorder``, ...
        detail: the implementation (``by="impl"``), the problem (``by="shape"``), else ``""``.
        exec_count, exec_total_ms, exec_mean_ms, exec_min_ms, exec_max_ms: executions and
            their times in milliseconds (mean, min and max 0 without executions).
        share: percent of the total execution time of all primitives.
        create_count, create_total_ms: primitive creations (``DNNL_VERBOSE=2``) and their time.
    """

    primitive: str
    detail: str
    exec_count: int
    exec_total_ms: float
    exec_mean_ms: float
    exec_min_ms: float
    exec_max_ms: float
    share: float
    create_count: int
    create_total_ms: float


@dataclasses.dataclass(frozen=True)
class LogInfo:
    """What the ``info`` lines say: ``version`` (e.g. ``oneDNN v2.4.4 (commit ...)``), ``isa``,
    ``runtime`` (``cpu,runtime:OpenMP``), and all of them as ``lines``."""

    version: str
    isa: str
    runtime: str
    lines: list[str]


@dataclasses.dataclass(frozen=True)
class DnnlStats:
    """The result of :func:`stats`.

    Attributes:
        path: the log.
        by: the grouping of ``rows``.
        rows: by exec total time, descending (ties by name).
        info: :class:`LogInfo`.
        exec_lines, create_lines: verbose lines of each operation.
        exec_total_ms: sum of the time of every exec line.
        timestamped: exec/create lines with a timestamp (``DNNL_VERBOSE_TIMESTAMP=1``).
        other_lines: foreign lines (the program's own output), skipped.
        malformed_lines: verbose lines that could not be read (e.g. cut by a crash), skipped.
    """

    path: str
    by: str
    rows: list[Row]
    info: LogInfo
    exec_lines: int
    create_lines: int
    exec_total_ms: float
    timestamped: int
    other_lines: int
    malformed_lines: int

    def find(self, primitive: str) -> list[Row]:
        """The rows of ``primitive``."""
        return [r for r in self.rows if r.primitive == primitive]


def _read_range(path: str, start: int, end: int) -> ScanResult:
    """Scan the whole lines of ``path`` in ``[start, end)`` (both at line starts or file ends),
    :data:`_BLOCK` bytes at a time into one buffer, each block cut after its last newline."""
    scanner = Scanner()
    buf = bytearray(_BLOCK + 1)  # + 1: room for the newline a last line may lack
    fd = os.open(path, os.O_RDONLY)
    try:
        pos = start
        while pos < end:
            view = memoryview(buf)[:min(len(buf) - 1, end - pos)]
            got = os.preadv(fd, [view], pos)
            if got == 0:
                break
            cut = buf.rfind(b"\n", 0, got) + 1
            if pos + got >= end:  # the range's last block: every line, newline or not
                if buf[got - 1] != b"\n"[0]:
                    buf[got] = b"\n"[0]
                    got += 1
                cut = got
            elif cut == 0:  # a line longer than the buffer: grow it
                buf = bytearray(2 * len(buf))
                continue
            scanner.scan(memoryview(buf)[:cut])
            pos += cut
    finally:
        os.close(fd)
    return scanner.result()


def _line_starts(path: str, size: int, n: int) -> list[int]:
    """``n + 1`` offsets splitting the file into about equal ranges, each at a line start."""
    cuts = [0]
    with open(path, "rb") as f:
        for i in range(1, n):
            f.seek(size * i // n)
            f.readline()
            pos = f.tell()
            if cuts[-1] < pos < size:
                cuts.append(pos)
    cuts.append(size)
    return cuts


def _work(args: tuple[str, int, int]) -> ScanResult:
    return _read_range(*args)


def read_log(path: str | os.PathLike[str], *, workers: int | None = None) -> ScanResult:
    """Scan a whole log (:class:`~pyprof.dnnl.parse.ScanResult`), in ``workers`` forked
    processes (default: :func:`pyprof.process.workers.default_workers`).

    Raises:
        LogFormatError: the file does not exist, cannot be read, or is empty.
    """
    p = os.fspath(path)
    try:
        size = os.stat(p).st_size
    except FileNotFoundError:
        raise rules.error("dnnl.log_not_found", path=p) from None
    except OSError as exc:
        raise rules.error("dnnl.log_unreadable", path=p, reason=exc.strerror) from None
    if size == 0:
        raise rules.error("dnnl.log_empty", path=p)
    n = workers if workers is not None else (
        _workers.default_workers(size))
    try:
        if n <= 1 or not _workers.available():
            return _read_range(p, 0, size)
        cuts = _line_starts(p, size, n * 4)
        total = ScanResult()
        with multiprocessing.get_context("fork").Pool(n) as pool:
            for part in pool.imap(_work, [(p, a, b) for a, b in zip(cuts, cuts[1:])]):
                total.add(part)
        return total
    except OSError as exc:
        raise rules.error("dnnl.log_unreadable", path=p, reason=exc.strerror) from None


def _info(lines: list[str]) -> LogInfo:
    version = isa = runtime = ""
    for line in lines:
        text = line.split(",", 1)[1] if "," in line else ""
        if not version and re.search(r"\bv\d+\.\d+", text):
            version = text.split(",")[0] if "(" not in text else text
        if not isa and ("isa:" in text or "Detected ISA" in text):
            isa = text.split("isa:", 1)[1] if "isa:" in text else text.split("Detected ISA is", 1)[1]
            isa = isa.strip()
        if not runtime and "runtime:" in text and text.startswith("cpu"):
            runtime = text.split("runtime:", 1)[1]
    return LogInfo(version, isa, runtime, list(lines))


def _first_line(path: str) -> str:
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                return line.strip()[:80].decode("utf-8", "replace")
    return ""


def stats(path: str | os.PathLike[str], *, by: str = "primitive",
          workers: int | None = None) -> DnnlStats:
    """Per primitive kind of a oneDNN verbose log: executions, their total, mean, min and max
    time in milliseconds and share, and creations (count, time) when the log has them.

    Reads every layout of :mod:`pyprof.dnnl.parse` (with or without timestamps, v0.x to v2.x),
    logs mixed with other output (those lines are counted in ``other_lines``).

    Args:
        path: the log (the program's standard output, or the log ``pyprof run --dnnl`` wrote).
        by: ``"primitive"``, ``"impl"`` (primitive and implementation) or ``"shape"``
            (primitive and problem).
        workers: processes reading the file (see :func:`read_log`).

    Returns:
        :class:`DnnlStats`.

    Raises:
        ConfigError: unknown ``by``.
        LogFormatError: the file is missing, empty, or holds no verbose line.
    """
    if by not in GROUPINGS:
        raise rules.error("dnnl.bad_grouping", by=by, valid=list(GROUPINGS))
    p = os.fspath(path)
    scanned = read_log(p, workers=workers)
    if not scanned.groups and not scanned.info:
        lines = scanned.other + scanned.malformed
        if not lines:
            raise rules.error("dnnl.log_empty", path=p)
        raise rules.error("dnnl.log_foreign", path=p, lines=lines, first=_first_line(p))
    execs: dict[tuple[str, str], GroupStats] = {}
    creates: dict[tuple[str, str], GroupStats] = {}
    exec_lines = create_lines = 0
    for key, g in scanned.groups.items():
        sig = split_signature(key)
        assert sig is not None  # the Scanner keeps readable signatures only
        row_key = (sig.primitive, _detail(sig, by))
        if sig.is_exec:
            target = execs
            exec_lines += g.count
        elif sig.is_create:
            target = creates
            create_lines += g.count
        else:
            continue
        have = target.get(row_key)
        if have is None:
            target[row_key] = dataclasses.replace(g)
        else:
            have.add(g)
    total = sum(g.total_ms for g in execs.values())
    rows = []
    for key in set(execs) | set(creates):
        e = execs.get(key, GroupStats())
        c = creates.get(key, GroupStats())
        rows.append(Row(key[0], key[1], e.count, e.total_ms, e.total_ms / e.count if e.count else 0.0,
                        e.min_ms if e.count else 0.0, e.max_ms if e.count else 0.0,
                        100.0 * e.total_ms / total if total else 0.0, c.count, c.total_ms))
    rows.sort(key=lambda r: (-r.exec_total_ms, -r.create_total_ms, r.primitive, r.detail))
    return DnnlStats(p, by, rows, _info(scanned.info), exec_lines, create_lines, total,
                     scanned.timestamped, scanned.other, scanned.malformed)


def _detail(sig: Signature, by: str) -> str:
    return sig.impl if by == "impl" else sig.problem if by == "shape" else ""


_HEADERS = ["primitive", "exec", "total (ms)", "share (%)", "mean (ms)", "min (ms)", "max (ms)",
            "create", "create (ms)"]
_DETAIL = {"impl": "implementation", "shape": "problem"}


def _table_rows(s: DnnlStats) -> tuple[list[str], list[list[Any]]]:
    headers = list(_HEADERS)
    if s.by in _DETAIL:
        headers.insert(1, _DETAIL[s.by])
    out = []
    for r in s.rows:
        row: list[Any] = [r.primitive, r.exec_count, r.exec_total_ms, r.share, r.exec_mean_ms,
                          r.exec_min_ms, r.exec_max_ms, r.create_count, r.create_total_ms]
        if s.by in _DETAIL:
            row.insert(1, r.detail)
        out.append(row)
    return headers, out


def _summary(s: DnnlStats) -> str:
    lib = s.info.version or "oneDNN (no info line)"
    isa = f", ISA {s.info.isa}" if s.info.isa else ""
    skipped = f"; {s.other_lines} other line(s) skipped" if s.other_lines else ""
    bad = f"; {s.malformed_lines} unreadable verbose line(s) skipped" if s.malformed_lines else ""
    return (f"{lib}{isa}: {s.exec_lines} execution(s), {s.exec_total_ms:.3f} ms; "
            f"{s.create_lines} creation(s){skipped}{bad}")


def format_stats(s: DnnlStats, fmt: str = "table") -> str:
    """``s`` as ``table`` (plain text), ``markdown``, ``csv`` or ``json`` (ends in a newline).

    Raises:
        TraceError: ``trace.format`` for another ``fmt``.
    """
    if fmt not in FORMATS:
        raise rules.error("trace.format", fmt=fmt, choices=list(FORMATS))
    headers, rows = _table_rows(s)
    if fmt == "json":
        data = dataclasses.asdict(s)
        return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(headers)
        w.writerows(rows)
        return buf.getvalue()
    table = tabulate(rows, headers=headers, floatfmt=".4f",
                     tablefmt="github" if fmt == "markdown" else "simple")
    return f"{_summary(s)}\n\n{table}\n"
