"""What a :class:`pyprof.attribution.capture.Recorder` keeps between calls, whichever recorder
runs the imperative hot path: the handle cache (handle -> (shape or None, dtype code, producer
seq, output slot), evicted at ``MXNDArrayFree``), the active flag (``active[0]``), the seq
counter with the window's bound (``capture.max_calls``) and the records not taken yet.

:class:`PyStore` is the Python recorder's (a dict, a list, ints: the Recorder's lock guards
them); :class:`pyprof.native.shim.NativeStore` the C recorder's (``pyprof/native/recorder.c``,
which logs the imperative calls itself), with the same interface. :func:`choose` picks one.
"""

from __future__ import annotations

from typing import Any

from ..native import capi, shim


class PyStore:
    """The Python recorder's state (see the module docstring)."""

    kind = "python"
    #: (shape or None, dtype code) of an NDArray handle, asked of MXNet (NativeStore reads it in place)
    meta = staticmethod(capi.ndarray_meta)

    def __init__(self, seq: int = 0, max_calls: int = 0) -> None:
        self.cache: dict[int, tuple] = {}
        self.links = {}
        self.active = [False]  # a list: the hot path reads it without an attribute lookup
        self._seq, self._used, self._max, self.full = seq, 0, max_calls, False
        self.unrecorded = 0  # (the Recorder counts the Python hooks' own)

    def configure(self, max_calls: int) -> None:
        self._max = max_calls

    #: chunk -> (writer seq, output slot) of the gradients autograd's backwards wrote (:meth:`link`)
    links: dict[int, tuple[int, int]]

    def chunk(self, h: int) -> int | None:
        """The engine variable of NDArray ``h`` (its ``Chunk*``), None when it cannot be read
        (:func:`pyprof.native.shim.chunk_of`)."""
        return shim.chunk_of(h)

    def link(self, links: dict[int, tuple[int, int]]) -> bool:
        """Gradients autograd's backward writes: chunk -> (writer seq, output slot). Each cached
        handle of such a chunk gets the writer as producer now, one first seen later when it
        is read (the recorder's hot path asks :attr:`links`). False when no chunk can be read."""
        if not shim.layout_checked():
            return False
        self.links.update(links)
        for h, e in list(self.cache.items()):
            w = links.get(shim.chunk_of(h))
            if w is not None:
                self.cache[h] = (e[0], e[1], w[0], w[1])
        return True

    def seq(self) -> int:
        return self._seq

    def reserve(self, n: int) -> int:
        """``n`` seqs (the first), or -1 when the window would pass its bound: then recording
        stops until the next window. Under the Recorder's lock."""
        if self._used + n > self._max:
            self.full, self.active[0] = True, False
            return -1
        first = self._seq
        self._seq, self._used = first + n, self._used + n
        return first

    def release(self, n: int) -> None:
        """``n`` reserved calls that were not recorded (their seqs stay spent)."""
        self._used -= n

    def drain(self, reset: bool) -> tuple[Any, bool]:
        """The log of calls recorded outside the Recorder's list (none here: :meth:`records`
        reads it) and whether the window filled; with ``reset`` the window's count and flag
        start again."""
        full = self.full
        if reset:
            self._used, self.full = 0, False
        return None, full

    def records(self, log: Any) -> list:
        """The records (calls.RECORD) of a drained log."""
        return []


def choose(owner: Any, shapes: bool, stack: bool, max_calls: int, seq: int) -> Any:
    """The native store when shapes are recorded without stacks (stacks need Python's frames)
    and the C recorder is available; else a :class:`PyStore`."""
    native = shim.store(owner, seq, max_calls) if shapes and not stack else None
    return native if native is not None else PyStore(seq, max_calls)
