"""The steps of a session's window as instant events in its trace (schedule.json ``step_marks``).

A window holds the operators of its active steps but, from MXNet, nothing that says where one
step ends and the next begins. When a window is cut, :func:`step_events` gives one instant event
per recorded step (``"ph": "i"``, global scope, category ``pyprof``, named ``ProfilerStep#N`` as
torch names its steps), at the time the step began (the window's start for its first step), on
the process's main thread (``pid`` this process, ``tid`` its main thread's native id), with
``args`` ``{"step", "window", "step_us"}``: the last step runs to the window's end. Instants are
counted, never timed, so ``pyprof summarize`` figures do not change; ``pyprof report`` draws
them (:data:`SPEC` ``name`` and ``cat`` say which instants are steps). Package-internal.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from .. import rules


#: schedule.json ``step_marks``: the phase, scope, category and name template of the events.
SPEC: dict[str, Any] = rules.spec("schedule.json")["step_marks"]


def step_events(window: int, starts: Sequence[tuple[int, int]], last_step: int,
                end_us: int) -> list[dict[str, Any]]:
    """The step marks of window ``window``.

    Args:
        window: the window's index.
        starts: ``(step, began_us)`` for each step the window recorded, in order (microseconds
            since the epoch, the clock of MXNet's ``ts``); steps after ``last_step`` are ignored.
        last_step: the window's last step (included).
        end_us: when the window stopped recording (the last step's end).

    Returns:
        One event per step up to ``last_step``; none when ``starts`` is empty.
    """
    kept = [(s, t) for s, t in starts if s <= last_step]
    pid, tid = os.getpid(), threading.main_thread().native_id
    out = []
    for i, (step, began) in enumerate(kept):
        end = kept[i + 1][1] if i + 1 < len(kept) else max(end_us, began)
        out.append({"name": rules.render(str(SPEC["name"]), {"step": step}), "cat": SPEC["cat"],
                    "ph": SPEC["ph"], "s": SPEC["scope"], "ts": began, "pid": pid, "tid": tid,
                    "args": {"step": step, "window": window, "step_us": end - began}})
    return out
