"""The API gate: no thread is inside an MXNet C API call while API profiling switches.

MXNet 1.9.1 pushes a per-thread call record in ``on_enter_api`` and pops it in
``on_exit_api`` only while ``IsProfiling(kAPI)`` holds. A call that enters before that
predicate turns true and leaves after it finds an empty stack and aborts the process
(``c_api_profile.cc: Check failed: !thread_profiling_data.calls_.empty()``). The gate is a
readers-writer barrier around the predicate:

* a *reader* is any C API call that runs ``on_enter_api``/``on_exit_api``, whoever makes it:
  pyprof's own calls and, once :func:`pyprof.native.capi.guard_mxnet` has wrapped it, every call
  that MXNet's Python front end makes through ``mxnet.base._LIB``;
* a *writer* is a call that can change the predicate (profiler config, state, finished dump).
  It closes the gate, waits until no reader is in flight, makes its call, and reopens.

Cost on the reader's path (the hot one): a thread id, a list append and remove, and a check
of one flag; no lock. It is correct because the GIL orders those steps: a reader first
registers, then checks the flag; a writer first raises the flag, then waits for the register
to empty. Either the writer sees the reader, or the reader sees the flag and steps back.

A reader already inside a call (a C callback into Python that calls MXNet again) passes a
closed gate: it is counted already, and stopping it would deadlock the writer. Peers (the JVM
layer's own gate, when a JVM runs in this process) are closed after this gate and opened
before it: one lock order for the whole process. See docs/concurrency.md.

This module holds no ctypes: it guards any callable.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from .. import rules


#: How long a writer waits for in-flight MXNet calls before it gives up (seconds);
#: ``$PYPROF_SWITCH_TIMEOUT`` overrides it.
SWITCH_TIMEOUT_S = 60.0
# A writer that has waited this long reopens the gate for a moment: an in-flight call may be
# waiting for work that a held-back reader must do (a custom operator's Python code).
_REOPEN_AFTER_S = 0.5


class Peer(Protocol):
    """Another gate that a writer closes after this one (the JVM layer's)."""

    def acquire(self) -> None: ...

    def release(self) -> None: ...


class Gate:
    """A readers-writer barrier whose read side costs no lock.

    ``wrap(fn)`` returns a callable that calls ``fn`` as a reader. ``exclusive()`` is the
    writer's context manager; ``acquire()``/``release()`` are the same in two calls (for a
    peer that closes this gate from another language).
    """

    def __init__(self) -> None:
        self._inflight: list[int] = []  # thread ids of readers inside a call, one per call
        self._closed = [False]  # a list: closures read it without a global lookup
        self._open = threading.Event()
        self._open.set()
        self._writer = threading.RLock()  # serialises writers; re-entrant for peers
        self._owner: int | None = None
        self._depth = 0
        self._peers: list[Peer] = []
        self._held_peers: list[Peer] = []
        self.switches = 0  # completed writer sections (for tests and benchmarks)

    # ------------------------------------------------------------------ readers

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` as a reader: it never runs while a writer holds the gate."""
        inflight = self._inflight
        enter, leave = inflight.append, inflight.remove
        closed = self._closed
        ident = threading.get_ident
        wait_open = self._wait_open

        def gated(*args: Any) -> Any:
            t = ident()
            try:
                enter(t)  # first call inside try: an interrupt after it still leaves
                if closed[0]:
                    wait_open(t)
                return fn(*args)
            finally:
                leave(t)

        gated.__wrapped__ = fn  # type: ignore[attr-defined]
        gated.__name__ = getattr(fn, "__name__", "gated")
        return gated

    def _wait_open(self, t: int) -> None:
        """Slow path of a reader that found the gate closed. Returns registered."""
        inflight = self._inflight
        if t == self._owner or inflight.count(t) > 1:
            return  # the writer itself, or a nested call already counted
        try:
            inflight.remove(t)
            while self._closed[0]:
                self._open.wait()
        finally:
            inflight.append(t)

    # ------------------------------------------------------------------ writers

    def add_peer(self, peer: Peer) -> None:
        """Close ``peer`` after this gate in every writer section from now on."""
        with self._writer:
            self._peers.append(peer)

    def remove_peer(self, peer: Peer) -> None:
        with self._writer:
            if peer in self._peers:
                self._peers.remove(peer)

    def peers(self) -> list[Peer]:
        return list(self._peers)

    def acquire(self, *, peers: bool = True, timeout: float | None = None) -> None:
        """Close the gate and wait until no reader is inside a call.

        Re-entrant on one thread. Raises StateError when the calling thread is itself inside
        a gated call (a switch there would abort MXNet) or when calls stay in flight longer
        than ``timeout`` seconds (default ``$PYPROF_SWITCH_TIMEOUT`` or 60); the gate is open
        again then, and nothing was switched.
        """
        me = threading.get_ident()
        self._writer.acquire()
        if self._owner == me:
            self._depth += 1
            return
        try:
            if me in self._inflight:
                raise rules.error("gate.switch_inside_call")
            self._owner, self._depth = me, 1
            self._close_and_drain(me, _timeout(timeout))
            if peers:
                self._acquire_peers()
        except BaseException:
            self._reopen()
            self._writer.release()
            raise

    def release(self) -> None:
        """Undo one :meth:`acquire` (peers opened first, then this gate)."""
        if self._owner != threading.get_ident():
            raise RuntimeError("Gate.release() by a thread that does not hold it; fix: release the gate "
                               "in the thread that acquired it")
        self._depth -= 1
        if self._depth == 0:
            try:
                for peer in reversed(self._held_peers):
                    peer.release()
            finally:
                self._held_peers = []
                self._reopen()
                self._writer.release()
        else:
            self._writer.release()

    @contextmanager
    def exclusive(self, *, timeout: float | None = None) -> Iterator[None]:
        """Writer section: no gated call of this process (or of a peer) is in flight."""
        self.acquire(timeout=timeout)
        try:
            yield
        finally:
            self.release()

    def _acquire_peers(self) -> None:
        held: list[Peer] = []
        try:
            for peer in list(self._peers):
                peer.acquire()
                held.append(peer)
        except BaseException:
            for peer in reversed(held):
                peer.release()
            raise
        self._held_peers = held

    def _close_and_drain(self, me: int, timeout: float) -> None:
        start = time.monotonic()
        inflight = self._inflight
        while True:
            self._open.clear()
            self._closed[0] = True
            since, pause = time.monotonic(), 0.0
            while inflight:
                now = time.monotonic()
                if now - start > timeout:
                    raise rules.error("gate.switch_timeout", calls=_describe(inflight),
                                      seconds=f"{timeout:g}")
                if now - since > _REOPEN_AFTER_S:
                    break
                time.sleep(pause)
                pause = min(pause * 2 or 1e-5, 1e-3)
            else:
                return
            self._reopen_for_readers()

    def _reopen_for_readers(self) -> None:
        self._closed[0] = False
        self._open.set()
        time.sleep(1e-3)

    def _reopen(self) -> None:
        self._owner, self._depth = None, 0
        self._closed[0] = False
        self._open.set()

    # ------------------------------------------------------------------ fork

    def reset_after_fork(self) -> None:
        """In a forked child: the parent's threads (readers, writer) do not exist here."""
        self._inflight.clear()
        self._closed[0] = False
        self._open = threading.Event()
        self._open.set()
        self._writer = threading.RLock()
        self._owner, self._depth = None, 0
        self._peers = []
        self._held_peers = []

    @property
    def in_flight(self) -> int:
        """Readers inside a gated call right now."""
        return len(self._inflight)


def _timeout(timeout: float | None) -> float:
    if timeout is not None:
        return timeout
    raw = os.environ.get("PYPROF_SWITCH_TIMEOUT")
    try:
        return float(raw) if raw else SWITCH_TIMEOUT_S
    except ValueError:
        return SWITCH_TIMEOUT_S


def _describe(inflight: list[int]) -> str:
    names = {t.ident: t.name for t in threading.enumerate()}
    who = sorted({names.get(i, f"thread {i}") for i in inflight})
    return f"{len(inflight)} call(s) of {', '.join(who)}"


#: The process's one gate: every pyprof C call and every call through mxnet.base._LIB.
GATE = Gate()
os.register_at_fork(after_in_child=GATE.reset_after_fork)
