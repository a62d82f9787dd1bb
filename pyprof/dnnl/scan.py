"""The hot path of :func:`pyprof.dnnl.stats`: the lines of a oneDNN verbose log grouped by
signature, block by block, in whole-block passes with no Python bytecode per line.

A block of whole lines goes through four passes:

1. numpy: the offset of every newline and comma (one ``flatnonzero``); from them, per line, its
   first, second and last comma, hence the marker (compared byte for byte), the timestamp (a
   digit after the marker), the signature's span (after marker and timestamp, up to the last
   comma) and the time's span (after the last comma).
2. ``bytes.split``: a copy of the block with its newlines masked and the byte before and after
   each signature set to ``\\n`` splits into ``[junk, sig, junk, sig, ..., junk]``; the
   signatures are ``pieces[1::2]``, one bytes object per verbose line.
3. ``dict.setdefault`` mapped over the signatures numbers them; each *distinct* signature is
   classified once in Python (readable by :func:`~pyprof.dnnl.parse.split_signature`, ``info``,
   or unreadable).
4. numpy: the time fields gathered into a fixed-width ``S`` array and converted by one
   ``astype(float64)`` (correctly rounded, as ``float``; a field it rejects is retried with
   ``float`` and counted as malformed when that fails too); per group the count and sum
   (``bincount``), min and max (a stable sort by group, ``reduceat``).

No per-line Python float exists and timestamps are only counted: ``pyprof dnnl LOG`` needs them
for nothing else (:func:`~pyprof.dnnl.parse.iter_primitives` reads them for the merge).
"""

from __future__ import annotations

import itertools

import numpy as np

from .parse import MARKERS, GroupStats, ScanResult, split_signature


_NL, _COMMA, _ZERO, _NINE = b"\n"[0], b","[0], b"0"[0], b"9"[0]
_NAMES = tuple(m[:-1] for m in MARKERS)  # markers without their comma
_WHITESPACE = np.frombuffer(b" \t\r\x0b\x0c", np.uint8)
_MAX_TIME_WIDTH = 32  # wider time fields (never printed by oneDNN) are read by ``float``
_STEP = 256 << 10  # bytes compared at once by _separators
_SIG, _INFO, _BAD = 0, 1, 2  # kinds of signature


class Scanner:
    """Groups the verbose lines of a log by signature (:meth:`scan`, one block of whole lines
    at a time) and keeps per group the count, sum, min and max of the times in milliseconds
    (:meth:`result`). Info lines are kept as text, foreign lines and unreadable verbose lines
    counted."""

    def __init__(self) -> None:
        self._groups: dict[bytes, int] = {}  # signature -> group number
        self._kinds: list[int] = []          # group number -> _SIG, _INFO or _BAD
        self._count = np.zeros(0, np.int64)
        self._stamped = np.zeros(0, np.int64)
        self._total = np.zeros(0, np.float64)
        self._min = np.zeros(0, np.float64)
        self._max = np.zeros(0, np.float64)
        self._info: dict[str, None] = {}     # info lines in order of appearance
        self.other = 0
        self.malformed = 0

    def scan(self, block: bytearray | memoryview) -> None:
        """Add the lines of ``block``: whole lines, each ending in a newline. ``block`` (writable)
        is the scanner's to overwrite: it becomes the copy split in pass 2."""
        if not len(block):
            return
        b = np.frombuffer(block, np.uint8)
        seps = _separators(b)
        nl = np.flatnonzero(b[seps] == _NL)  # per line: its newline's index in seps
        first = np.concatenate(([0], nl[:-1] + 1))  # per line: its first separator's index
        end = seps[nl]
        start = np.concatenate(([0], end[:-1] + 1))
        commas = nl - first
        c1 = seps[first]                          # first comma (the newline when none)
        c2 = seps[np.minimum(first + 1, nl)]      # second comma (or the newline)
        last = seps[nl - 1]                       # last comma (when commas >= 1)
        marker = (commas >= 1) & _has_marker(b, start, c1)
        digit = b[np.minimum(c1 + 1, b.size - 1)]
        stamped = marker & (c1 + 1 < end) & (digit >= _ZERO) & (digit <= _NINE)
        sig_start = np.where(stamped, c2, c1) + 1
        verbose = marker & (last >= sig_start)
        self.malformed += int(np.count_nonzero(marker & ~verbose))
        self._count_foreign(b, start[~marker], end[~marker])

        rows = np.flatnonzero(verbose)
        if not rows.size:
            return
        b[end] = 0
        b[sig_start[rows] - 1] = _NL
        b[last[rows]] = _NL  # the time fields stay as they are
        sigs = bytes(block).split(b"\n")[1::2]
        gid = self._number(sigs)
        kind = np.array(self._kinds, np.int8)[gid]
        for i in np.flatnonzero(kind == _INFO).tolist():
            text = sigs[i] + b"," + block[last[rows[i]] + 1:end[rows[i]]]
            self._info.setdefault(text.decode("utf-8", "replace").strip())
        self.malformed += int(np.count_nonzero(kind == _BAD))

        keep = np.flatnonzero(kind == _SIG)
        if not keep.size:
            return
        rows, gid = rows[keep], gid[keep]
        times, ok = _times(b, last[rows] + 1, end[rows])
        self.malformed += int(ok.size - np.count_nonzero(ok))
        if not ok.all():
            rows, gid, times = rows[ok], gid[ok], times[ok]
        self._add(gid, times, stamped[rows])

    def _number(self, sigs: list[bytes]) -> np.ndarray:
        """Group number of each signature (new signatures classified once)."""
        local: dict[bytes, int] = {}
        firsts = np.array(list(map(local.setdefault, sigs, itertools.count())), np.int64)
        groups = np.empty(len(sigs), np.int64)
        for sig, pos in local.items():
            g = self._groups.get(sig)
            if g is None:
                g = self._groups[sig] = len(self._kinds)
                self._kinds.append(_classify(sig))
            groups[pos] = g
        return groups[firsts]

    def _add(self, gid: np.ndarray, times: np.ndarray, stamped: np.ndarray) -> None:
        n = len(self._kinds)
        if self._count.size < n:
            grow = n - self._count.size
            self._count = np.concatenate((self._count, np.zeros(grow, np.int64)))
            self._stamped = np.concatenate((self._stamped, np.zeros(grow, np.int64)))
            self._total = np.concatenate((self._total, np.zeros(grow)))
            self._min = np.concatenate((self._min, np.full(grow, np.inf)))
            self._max = np.concatenate((self._max, np.full(grow, -np.inf)))
        if not gid.size:
            return
        self._count += np.bincount(gid, minlength=n)
        self._stamped += np.bincount(gid[stamped], minlength=n)
        self._total += np.bincount(gid, weights=times, minlength=n)
        order = np.argsort(gid, kind="stable")
        gid, times = gid[order], times[order]
        heads = np.flatnonzero(np.concatenate(([True], gid[1:] != gid[:-1])))
        g = gid[heads]
        self._min[g] = np.minimum(self._min[g], np.minimum.reduceat(times, heads))
        self._max[g] = np.maximum(self._max[g], np.maximum.reduceat(times, heads))

    def _count_foreign(self, b: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
        """Count the non-blank lines among the foreign lines ``[start, end)``."""
        filled = start < end
        start, end = start[filled], end[filled]
        # a line not starting with whitespace is not blank; the others are checked one by one
        spaced = np.isin(b[start], _WHITESPACE)
        self.other += int(start.size - np.count_nonzero(spaced))
        for s, e in zip(start[spaced].tolist(), end[spaced].tolist()):
            self.other += bool(b[s:e].tobytes().strip())

    def result(self) -> ScanResult:
        """What was scanned: count, sum, min and max of the times per readable signature."""
        out = ScanResult(info=list(self._info), timestamped=int(self._stamped.sum()),
                         other=self.other, malformed=self.malformed)
        for sig, g in self._groups.items():
            if g < self._count.size and self._count[g]:
                out.groups[sig] = GroupStats(int(self._count[g]), float(self._total[g]),
                                             float(self._min[g]), float(self._max[g]))
        return out


def _separators(b: np.ndarray) -> np.ndarray:
    """Offsets of the newlines and commas of ``b``, found in steps that fit in a CPU cache."""
    found = []
    for at in range(0, b.size, _STEP):
        part = b[at:at + _STEP]
        found.append(np.flatnonzero((part == _NL) | (part == _COMMA)) + at)
    return np.concatenate(found)


def _has_marker(b: np.ndarray, start: np.ndarray, c1: np.ndarray) -> np.ndarray:
    """Per line: the bytes before its first comma are a marker of :data:`MARKERS`."""
    out = np.zeros(start.size, bool)
    for name in _NAMES:
        rows = np.flatnonzero(c1 - start == len(name))
        if rows.size:
            window = np.lib.stride_tricks.sliding_window_view(b, len(name))[start[rows]]
            out[rows[window.view(f"S{len(name)}").ravel() == name]] = True
    return out


def _classify(sig: bytes) -> int:
    if sig == b"info" or sig.startswith(b"info,"):
        return _INFO
    return _BAD if split_signature(sig) is None else _SIG


def _times(b: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fields ``[start, end)`` of ``b`` as float64, and which of them could be read."""
    times, ok = np.zeros(start.size), np.ones(start.size, bool)
    width = int((end - start).max())
    slow = np.arange(start.size)
    if 0 < width <= _MAX_TIME_WIDTH:
        fast = np.flatnonzero(start + width <= b.size)  # all but the block's last lines
        field = np.lib.stride_tricks.sliding_window_view(b, width)[start[fast]]  # a copy
        field[np.arange(width) >= (end - start)[fast, None]] = 0  # NUL padding: not in an S value
        try:
            times[fast] = field.view(f"S{width}").ravel().astype(np.float64)
            slow = np.flatnonzero(start + width > b.size)
        except ValueError:
            pass  # a field that is not a number: read them one by one
    for i in slow.tolist():
        try:
            times[i] = float(b[start[i]:end[i]].tobytes())
        except ValueError:
            ok[i] = False
    return times, ok
