"""Worker processes for the fast path of :func:`pyprof.trace.stats` on large plain files.

Only the expensive, stateless step runs in the workers: :func:`~pyprof.trace.fastpath.parse_body`
of one reader body (a byte span of the file the worker reads itself with ``pread``). The parent
computes the spans exactly as the sequential reader would
(:meth:`~pyprof.trace.reader.TraceReader.body_spans`), hands them out round-robin, takes the
:class:`~pyprof.trace.fastpath.FastChunk` results back **in file order** and feeds them to the
same accumulator code as the sequential path (pairing across chunk boundaries, orjson fallback of
chunks not in the fast layout). The statistics are therefore the same as the sequential path's by
construction, durations order included.

Workers are forked (no re-import of :mod:`pyprof` and its start-up hooks); where ``fork`` is not
available the sequential path is used.

Package-internal (used by :mod:`pyprof.trace.statistics`), not part of :mod:`pyprof.trace`'s API.
"""

from __future__ import annotations

import collections
import multiprocessing
from multiprocessing import connection as mp_connection
import os
import re
from collections.abc import Iterator
from typing import Any

from ..process.workers import available, default_workers
from .fastpath import FastChunk, parse_body


#: Spans in flight per worker (bounds memory: each holds one body or one result).
_DEPTH = 2

#: Details of the latest file read by workers: ``workers`` and ``worker_peak_rss_kb`` (each
#: worker's ``ru_maxrss`` at exit, kB). For benchmarks that must count the workers' memory.
LAST_RUN: dict[str, Any] = {}


def pread(fd: int, length: int, offset: int) -> bytes:
    """Exactly ``length`` bytes at ``offset`` (fewer only at end of file)."""
    data = os.pread(fd, length, offset)
    if len(data) == length:
        return data
    parts = [data]
    got = len(data)
    while got < length:
        more = os.pread(fd, length - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _work(conn: Any, path: str, pattern: re.Pattern[bytes], excluded: frozenset[str],
          copies: frozenset[str]) -> None:
    import resource
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            msg = conn.recv()
            if msg is None:
                break
            body = pread(fd, msg[1], msg[0])
            try:
                res = parse_body(body, pattern, excluded, copies)
            except Exception:  # pragma: no cover - the parent parses the chunk itself
                res = None
            del body
            conn.send(res)
        conn.send(("peak_rss_kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
    finally:
        os.close(fd)
        conn.close()


class ChunkPool:
    """``n`` forked workers parsing byte spans of one file; use as a context manager."""

    def __init__(self, path: str, n: int, pattern: re.Pattern[bytes], excluded: frozenset[str],
                 copies: frozenset[str]):
        self.path = path
        self.args = (pattern, excluded, copies)
        ctx = multiprocessing.get_context("fork")
        self.conns: list[Any] = []
        self.procs: list[Any] = []
        self.alive: list[bool] = []
        self.peaks: list[int] = []
        self.asked: list[int] = []  # spans sent to each worker and not yet returned by map()
        self.ready: list[collections.deque[FastChunk | None]] = []  # results received, in order
        try:
            for _ in range(n):
                parent, child = ctx.Pipe()
                p = ctx.Process(target=_work, args=(child, path, *self.args), daemon=True,
                                name="pyprof-trace-worker")
                p.start()
                child.close()
                self.conns.append(parent)
                self.procs.append(p)
                self.alive.append(True)
                self.asked.append(0)
                self.ready.append(collections.deque())
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> ChunkPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def map(self, spans: Iterator[tuple[int, int]],
            fd: int) -> Iterator[tuple[tuple[int, int], FastChunk | None]]:
        """``(span, parse_body result)`` for each span, in order. A span whose worker failed is
        parsed here (``fd``: the file, open for reading)."""
        n = len(self.conns)
        pending: collections.deque[tuple[tuple[int, int], int]] = collections.deque()
        i = 0
        for span in spans:
            w = i % n
            i += 1
            if self.alive[w]:
                try:
                    self.conns[w].send(span)
                    self.asked[w] += 1
                except OSError:
                    self.alive[w] = False
            pending.append((span, w))
            if len(pending) >= n * _DEPTH:
                yield self._result(*pending.popleft(), fd)
        while pending:
            yield self._result(*pending.popleft(), fd)

    def _result(self, span: tuple[int, int], w: int, fd: int) -> tuple[tuple[int, int], FastChunk | None]:
        # Results are taken from every worker as soon as they are sent (each worker answers in
        # request order), so that no worker waits on a full pipe while the parent waits on another.
        while self.alive[w] and not self.ready[w]:
            busy = [self.conns[v] for v in range(len(self.conns))
                    if self.alive[v] and self.asked[v] > len(self.ready[v])]
            for conn in mp_connection.wait(busy):
                v = self.conns.index(conn)
                try:
                    self.ready[v].append(conn.recv())
                except (EOFError, OSError):
                    self.alive[v] = False  # worker died (e.g. out of memory): parse here
        if self.ready[w]:
            self.asked[w] -= 1
            return span, self.ready[w].popleft()
        return span, parse_body(pread(fd, span[1], span[0]), *self.args)

    def close(self) -> None:
        """Stop the workers (collecting their peak memory) and reap them."""
        for w, conn in enumerate(self.conns):
            if self.alive[w]:
                try:
                    conn.send(None)
                    while True:  # results not taken (an error stopped the caller) come first
                        msg = conn.recv()
                        if isinstance(msg, tuple):
                            self.peaks.append(int(msg[1]))
                            break
                except (EOFError, OSError):
                    pass
                self.alive[w] = False
        for p in self.procs:
            p.join(timeout=10)
            if p.is_alive():  # pragma: no cover
                p.terminate()
                p.join()
        for conn in self.conns:
            conn.close()
        self.conns = []
        LAST_RUN.clear()
        LAST_RUN.update(workers=len(self.procs), worker_peak_rss_kb=list(self.peaks))
