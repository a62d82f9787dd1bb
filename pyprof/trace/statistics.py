"""Exact per-operator statistics from MXNet traces, streamed in bounded memory.

Units: every time field is in **microseconds** (``*_us``); ``ts`` in MXNet traces is integer
microseconds since the epoch, so counts, totals, minima and maxima are exact integers. Memory
fields are in **bytes** (``*_bytes``); MXNet's aggregate table prints them in kB = 1000 bytes
(``*_kb`` properties do the same).

How calls are counted:

* ``B``/``E`` pairs (``ph`` "B" then "E") are matched per ``(pid, tid, name)`` with a stack, so
  nested and interleaved events pair correctly. One pair is one call.
* ``X`` (complete) events count as one call of ``dur`` microseconds (traces written by
  :func:`pyprof.trace.compact`).
* Async ``b``/``e`` pairs are matched per ``(pid, cat, id, name)``; they are the only record of
  C API calls (category ``MXNET_C_API``) and of domain tasks. MXNet also writes every operator a
  second time as an async pair in category ``operator`` (or ``Custom Operator``); those copies,
  the categories in :data:`ASYNC_COPY_CATEGORIES`, are skipped, never counted twice.
* Frames ``(``/``)`` are matched like ``B``/``E``.
* ``C`` counters named ``Memory: <device>`` are memory samples in bytes; other counters are
  summarised as plain value series.

Percentiles: every call's duration is kept in a compact ``array('q')`` (8 bytes a call, per
``(category, name, device)``), so p50/p90/p99 are exact — numpy's default linear interpolation
between order statistics. Memory therefore grows with the number of *calls*, never with the file
size or the number of other events: 10 million calls take 80 MB.

Large plain files (64 MiB and more) are parsed by ``min(2, cpu_count)`` forked worker processes
(``PYPROF_TRACE_WORKERS=N`` sets the number, ``1`` reads sequentially); the parent applies their
results in file order with the sequential code, so the statistics are identical (see
:mod:`~pyprof.trace.parallel`).

This module reads the files (:func:`stats`); the pairing and pooling are in
:mod:`~pyprof.trace.accumulate`, the result records in :mod:`~pyprof.trace.records`, the check
against MXNet's own table in :mod:`~pyprof.trace.crosscheck`. Their public names are importable
from here too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

from . import parallel
from .accumulate import Accumulator
from .filestate import FileState
from .crosscheck import CrossCheck, Mismatch, cross_check, load_aggregate
from .. import rules
from .errors import TraceError
from .fastpath import FastChunk, event_pattern, parse_body
from .jsonscan import no_gc
from .naming import (API_CATEGORY, ASYNC_COPY_CATEGORIES, BULK_NOTE, category_names,
                     is_bulk_name)
from .reader import TraceReader, is_gzip
from .records import CounterStats, MemoryStats, OpStats, TraceStats


_CHUNK_BYTES = 16 << 20  # read size of stats(); memory use is a small multiple of it

#: Use the fast path for chunks in MXNet's layout (``PYPROF_TRACE_FAST=0`` turns it off; results
#: are the same either way, only slower).
FAST_PATH = os.environ.get("PYPROF_TRACE_FAST", "1") not in ("0", "false", "no", "off")


def stats(trace_or_paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
          categories: Iterable[str] | None = None, exclude_categories: Iterable[str] = (),
          progress: bool | None = None, by: str | None = None,
          _workers: int | None = None) -> TraceStats:
    """Exact per-operator and memory statistics of one or more trace files.

    Several files are combined: records with the same ``(category, name, device)`` are pooled
    (device names, not pids, identify a device across files).

    Every category is included by default, C API calls (:data:`API_CATEGORY`, ``MXNET_C_API``)
    too; :func:`~pyprof.trace.summarize` and :func:`~pyprof.trace.diff` leave those out unless
    ``include_api=True`` (pass ``exclude_categories={"MXNET_C_API"}`` here for the same records).

    Args:
        trace_or_paths: a path or a sequence of paths (plain or gzip; damaged files are read as far
            as possible and the damage is listed in ``TraceStats.notes``).
        categories: keep only these categories (e.g. ``{"operator"}``: a collection of strings,
            a mapping's keys); default (``None``) all. A category that is no string in a trace is
            counted under its JSON text (``5`` as ``"5"``), a missing or null one as ``""``.
        exclude_categories: categories skipped before parsing (faster), e.g. ``{"MXNET_C_API"}``
            (C API calls and their counters are a large share of a trace); ``None``: none.
        progress: tqdm bar per file (see :class:`~pyprof.trace.reader.TraceReader`).
        by: ``"shape"``: group by operator and input shapes instead (the ``"Input Dims"``/
            ``"Input type"`` args pyprof's capture writes) and return a
            :class:`~pyprof.trace.shapes.ShapeStats` with GFLOP/s and GB/s per group
            (:mod:`~pyprof.trace.shapes`); the groups of an operator add up to its total here.
        _workers: private, for tests: worker processes for every plain file, whatever its size
            (default: 1 below 64 MiB, else ``PYPROF_TRACE_WORKERS`` or ``min(2, cpu_count)``).

    Returns:
        :class:`TraceStats`; times in integer/float microseconds, memory in bytes.

    Raises:
        TraceNotFoundError: a file cannot be opened.
        TraceFormatError: a file holds no trace events (empty, or JSON that is not a trace).
        TraceError: no paths given, one that is not a path (``trace.not_a_path``), an unknown
        ``by`` (``trace.by``), a string for ``categories`` or ``exclude_categories``
        (``trace.categories_not_collection``), or one that is no collection of strings
        (``trace.category_not_name``).
    """
    kept = category_names("categories", categories)
    excluded = category_names("exclude_categories", exclude_categories, none=frozenset())
    if by is not None:
        from .shapes import check_by, shape_stats
        check_by(by)
        return shape_stats(_as_paths(trace_or_paths), categories=kept,
                           exclude_categories=excluded, progress=progress)
    acc = Accumulator(kept, excluded)
    reports = []
    for path in _as_paths(trace_or_paths):
        reader = TraceReader(path, progress=progress, drop_async_copies=True,
                             exclude_categories=excluded, chunk_bytes=_CHUNK_BYTES)
        with no_gc():
            _add_file(acc, reader, _workers)
        reports.append(reader.report)
    return acc.result(reports)


def _add_file(acc: Accumulator, reader: TraceReader, workers: int | None) -> None:
    """Feed one file to ``acc`` (pids are per file, so names are resolved per file).

    The file is read body by body: bodies in MXNet's own layout go through the fast path
    (:mod:`~pyprof.trace.fastpath`, no dict per event), any other body is parsed by the reader
    with orjson and goes through the reference loop. Both update the same state, with the same
    results (``tests/trace/test_fast_path.py``). ``workers``: see :func:`_workers_for`.
    """
    st = FileState()
    fast = FAST_PATH
    copies = ASYNC_COPY_CATEGORIES if reader.drop_async_copies else frozenset()
    pattern = event_pattern(acc.excluded, copies) if fast else None
    n = _workers_for(reader, workers) if fast else 1
    if n > 1:
        _add_file_parallel(acc, reader, st, n, pattern, copies)
    else:
        for body in reader.bodies():
            chunk = (parse_body(body, pattern, acc.excluded, copies)
                     if fast and st.carry_ok() and not reader.pending
                     and not reader.keeps_end(body) else None)
            _add_body(acc, reader, st, body, chunk)
    acc.end_file(st)


def _add_body(acc: Accumulator, reader: TraceReader, st: FileState, body: bytes | None,
              chunk: FastChunk | None, span: tuple[int, int] | None = None,
              fd: int | None = None) -> None:
    """One reader body: its fast-path result, or (``chunk`` None) the orjson loop. The body
    text may instead be given as a ``span`` of the file open as ``fd``."""
    if chunk is None:
        if body is None:
            body = parallel.pread(fd, span[1], span[0])
        acc.add_events(reader.parse_body(body, span), st)
    else:
        # A fast chunk holds at least one trace event (perhaps only ones skipped on purpose).
        reader.record_parsed(chunk.events)
        acc.add_chunk(chunk, st)


def _workers_for(reader: TraceReader, workers: int | None) -> int:
    """Worker processes for this file: 1 (sequential) unless it is a large plain file.

    ``workers`` (``stats(_workers=)``) overrides the choice by size and ``PYPROF_TRACE_WORKERS``.
    """
    if reader.chunk_bytes <= 0 or not parallel.available():
        return 1
    try:
        if is_gzip(reader.path):
            return 1
        size = os.path.getsize(reader.path)
    except (OSError, TraceError):
        return 1  # the sequential reader reports the problem
    if workers is not None:
        return max(1, workers)
    return parallel.default_workers(size)


def _add_file_parallel(acc: Accumulator, reader: TraceReader, st: FileState, workers: int,
                       pattern: re.Pattern[bytes], copies: frozenset[str]) -> None:
    """The fast path with bodies parsed by worker processes (see :mod:`~pyprof.trace.parallel`),
    results applied here in file order exactly as in the sequential loop."""
    fd = os.open(reader.path, os.O_RDONLY)
    try:
        with parallel.ChunkPool(reader.path, workers, pattern, acc.excluded, copies) as pool:
            for span, chunk in pool.map(reader.body_spans(), fd):
                if chunk is not None and (not st.carry_ok() or reader.pending
                                          or reader.keeps_end(span=span)):
                    chunk = None
                _add_body(acc, reader, st, None, chunk, span, fd)
    finally:
        os.close(fd)
    reader.check_events()


def _as_paths(trace_or_paths: Any) -> list[str]:
    if isinstance(trace_or_paths, (str, os.PathLike)):
        return [os.fspath(trace_or_paths)]
    if not isinstance(trace_or_paths, Iterable) or isinstance(trace_or_paths, bytes):
        raise rules.error("trace.not_a_path", value=trace_or_paths)
    paths = list(trace_or_paths)
    for p in paths:
        if not isinstance(p, (str, os.PathLike)):
            raise rules.error("trace.not_a_path", value=p)
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise rules.error("trace.no_paths")
    return paths
