"""Per-file pairing state of :func:`pyprof.trace.stats`: the begins still open, in the order they
were opened, and what each file's events left out (rules: docs/trace-format.md).

Shared by the reference dict loop and the fast path of :mod:`pyprof.trace.accumulate`; pids are
per file, so the state is too.
"""

from __future__ import annotations

from array import array
from typing import Any


#: The range of the fast path's int64 arrays.
INT64 = (-(2 ** 63), 2 ** 63 - 1)


class FileState:
    """Per-file state shared by the dict loop and the fast path (pids are per file).

    Attributes:
        by_pid: durations per ``(category, name, pid)``, file order (``array('q')``, or
            ``array('d')`` once a float or out-of-int64 duration arrives).
        open_sync, open_async: begin ``ts`` stacks of unmatched begins, per pairing key
            ``(ph, pid, tid, name)`` and ``(ph, pid, cat, id, name)`` (``ph`` of the begin).
        order_sync, order_async: per pairing scope (the key without its name), the keys of its
            open begins in the order they were opened; a nameless end closes the last one.
        cat_of: the category of the latest begin of each pairing key, for an end without one.
        pid_names: process names from the file's metadata events.
        unmatched_end: end events without a begin.
        negative: slices with a negative duration, left out.
        no_ts: events of a timed phase without a numeric ``ts`` (or ``X`` without ``dur``).
        bad_counter: counter values that are not numbers (or memory sizes beyond 64 bits).
    """

    __slots__ = ("by_pid", "open_sync", "open_async", "order_sync", "order_async", "cat_of",
                 "pid_names", "unmatched_end",
                 "negative", "no_ts", "bad_counter")

    def __init__(self) -> None:
        self.by_pid: dict[tuple[str, Any, Any], array] = {}
        self.open_sync: dict[tuple[Any, ...], list[Any]] = {}
        self.open_async: dict[tuple[Any, ...], list[Any]] = {}
        self.order_sync: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        self.order_async: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        self.cat_of: dict[tuple[Any, ...], Any] = {}
        self.pid_names: dict[Any, str] = {}
        self.unmatched_end = 0
        self.negative = 0
        self.no_ts = 0
        self.bad_counter = 0

    def carry_ok(self) -> bool:
        """True when every open begin has an int64 ``ts`` (what the fast path's arrays hold)."""
        lo, hi = INT64
        return all(type(t) is int and lo <= t <= hi
                   for d in (self.open_sync, self.open_async) for stack in d.values() for t in stack)

    @staticmethod
    def push(open_: dict[tuple[Any, ...], list[Any]], order: dict[tuple[Any, ...], list[Any]],
             key: tuple[Any, ...], ts: Any) -> None:
        """Open a begin of pairing ``key`` at ``ts``."""
        stack = open_.get(key)
        if stack is None:
            open_[key] = [ts]
        else:
            stack.append(ts)
        scope = key[:-1]
        keys = order.get(scope)
        if keys is None:
            order[scope] = [key]
        else:
            keys.append(key)

    @staticmethod
    def pop(open_: dict[tuple[Any, ...], list[Any]], order: dict[tuple[Any, ...], list[Any]],
            key: tuple[Any, ...]) -> Any:
        """The ``ts`` of the latest open begin of ``key`` (closed now), or ``None``."""
        stack = open_.get(key)
        if not stack:
            return None
        keys = order.get(key[:-1])
        if keys:
            if keys[-1] == key:
                keys.pop()
            else:  # slices that overlap without nesting: rare, search from the end
                for i in range(len(keys) - 1, -1, -1):
                    if keys[i] == key:
                        del keys[i]
                        break
        return stack.pop()

    @staticmethod
    def pop_innermost(open_: dict[tuple[Any, ...], list[Any]],
                      order: dict[tuple[Any, ...], list[Any]],
                      scope: tuple[Any, ...]) -> tuple[tuple[Any, ...] | None, Any]:
        """Close the begin opened last in ``scope``: ``(its key, its ts)``, or ``(None, None)``."""
        keys = order.get(scope)
        while keys:
            key = keys.pop()
            stack = open_.get(key)
            if stack:
                return key, stack.pop()
        return None, None


def in_opened_order(open_: dict[tuple[Any, ...], list[Any]],
                     opened: dict[tuple[Any, ...], list[Any]]) -> list[tuple[Any, Any]]:
    """Every open ``(key, ts)``, per scope in the order the begins were opened."""
    cursor: dict[tuple[Any, ...], int] = {}
    out = []
    for keys in opened.values():
        for k in keys:
            i = cursor.get(k, 0)
            cursor[k] = i + 1
            out.append((k, open_[k][i]))
    return out
