"""Step schedules of profiling sessions, interpreted from ``pyprof/spec/schedule.json``.

The file is the one copy of the rules (the JVM layer reads the same file): the actions, the
parameters of :func:`schedule` and their limits, the phases of a cycle with the action of each
step, and the transition table: for the action of the step that ended and the action of the step
that begins, the operations a session performs (``stop``, ``save``, ``open``, ``run``). Nothing
here restates a rule; it reads the file. Package-internal: the public names are re-exported by
:mod:`pyprof.session` (and :mod:`pyprof`).
"""

from __future__ import annotations

import enum
import inspect
import weakref
from collections.abc import Callable
from typing import Any

from .. import rules


SPEC_PATH = rules.SPEC_DIR / "schedule.json"
SPEC: dict[str, Any] = rules.spec(SPEC_PATH.name)

#: What the profiler does during one step (the value of ``schedule(step)``). Its members are
#: the file's actions, upper-cased: NONE, WARMUP, RECORD, RECORD_AND_SAVE.
Action = enum.Enum(  # type: ignore[misc]
    "Action", [(name.upper(), name) for name in SPEC["actions"]],
    module="pyprof.session", qualname="Action")
Action.__doc__ = ("What the profiler does during one step (the value of ``schedule(step)``): "
                  + "; ".join(f"{a.name} = {SPEC['actions'][a.value]}" for a in Action) + ".")

#: Operation names the transition table may use, with what each does.
OPERATIONS: dict[str, str] = dict(SPEC["operations"])


def _load_transitions() -> dict[tuple[Action, Action], tuple[str, ...]]:
    table: dict[tuple[Action, Action], tuple[str, ...]] = {}
    for row in SPEC["transitions"]:
        key = (Action(row["from"]), Action(row["to"]))
        unknown = [op for op in row["do"] if op not in OPERATIONS]
        if unknown or key in table:
            raise ValueError(f"{SPEC_PATH}: bad transition row {row}: "
                             + (f"unknown operations {unknown}" if unknown else "repeated") + "; fix: correct that row of the spec")
        table[key] = tuple(row["do"])
    missing = [(a.value, b.value) for a in Action for b in Action if (a, b) not in table]
    if missing:
        raise ValueError(f"{SPEC_PATH}: no transition row for {missing}; fix: add those rows to the spec")
    return table


#: (previous step's action, next step's action) -> the operations to perform, in order.
TRANSITIONS: dict[tuple[Action, Action], tuple[str, ...]] = _load_transitions()


def _load_steady() -> dict[str, str]:
    mapping = dict(SPEC["steady"]["operations"])
    unknown = [op for pair in mapping.items() for op in pair if op not in OPERATIONS]
    if unknown:
        raise ValueError(f"{SPEC_PATH}: steady operations name unknown operations {unknown}; "
                         "fix: name only operations of the spec's \"operations\"")
    return mapping


#: Steady mode: an operation -> the one a steady session performs in its place (``stop`` ->
#: ``pause``, ``run`` -> ``resume``); operations not named are the same.
STEADY_OPERATIONS: dict[str, str] = _load_steady()

#: The action of every step when a session has no schedule.
DEFAULT_ACTION: Action = Action(SPEC["without_schedule"])
#: The action before step 0 (``start()`` moves from it) and after ``stop()``.
INITIAL_ACTION: Action = Action(SPEC["before_first_step"])
FINAL_ACTION: Action = Action(SPEC["after_stop"])


def operations(prev: Action, cur: Action, steady: bool = False) -> tuple[str, ...]:
    """The operations a session performs when ``prev`` (the step that ended) moves to ``cur``;
    with ``steady``, each replaced as :data:`STEADY_OPERATIONS` says."""
    ops = TRANSITIONS[(prev, cur)]
    return tuple(STEADY_OPERATIONS.get(op, op) for op in ops) if steady else ops


#: the cycles (schedule.json ``cycles``: 0 for ever) of each function :func:`schedule` made
_CYCLES: weakref.WeakKeyDictionary[Callable[[int], Action], int] = weakref.WeakKeyDictionary()


def schedule(**params: int) -> Callable[[int], Action]:
    """A step schedule: the :class:`Action` for each step number (0, 1, 2, ...).

    Keyword arguments ``wait``, ``warmup``, ``active``, ``repeat``, ``skip_first`` (defaults
    0, 0, 1, 0, 0). After ``skip_first`` steps, cycles of ``wait`` idle steps, ``warmup``
    discarded steps and ``active`` recorded steps repeat ``repeat`` times (0 = for ever). Each
    cycle's active steps form one window, saved as one trace file.
    """
    known = [p["name"] for p in SPEC["parameters"]]
    unknown = [k for k in params if k not in known]
    if unknown:
        raise rules.error("schedule.unknown_option", options=unknown, choices=known)
    values: dict[str, int] = {}
    for p in SPEC["parameters"]:
        name, low = p["name"], p["min"]
        value = params.get(name, p["default"])
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise rules.error("schedule.bad_value", option=name, value=value, min=low)
        values[name] = value
    skip = values[SPEC["skip_first"]["steps"]]
    skip_action = Action(SPEC["skip_first"]["action"])
    phases = [(values[ph["steps"]], Action(ph["action"]),
               Action(ph.get("last_step_action", ph["action"]))) for ph in SPEC["cycle"]]
    cycle = sum(n for n, _, _ in phases)
    cycles = values[SPEC["cycles"]]
    after = Action(SPEC["after_cycles"])

    def action(step: int) -> Action:
        if step < skip:
            return skip_action
        step -= skip
        if cycles and step >= cycles * cycle:
            return after
        pos = step % cycle
        for n, each, last in phases:
            if pos < n:
                return last if pos == n - 1 else each
            pos -= n
        raise AssertionError("unreachable: pos < cycle; fix: report it as a pyprof bug with the schedule")

    action.__doc__ = "schedule(" + ", ".join(f"{k}={values[k]}" for k in known) + ")"
    _CYCLES[action] = cycles  # one window each (saves_many)
    return action


schedule.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [inspect.Parameter(p["name"], inspect.Parameter.KEYWORD_ONLY, default=p["default"],
                       annotation=int) for p in SPEC["parameters"]],
    return_annotation=Callable[[int], Action])


def check_action(value: Any, step: int) -> Action:
    """``value`` (what a schedule returned for ``step``) as an :class:`Action`, or ConfigError
    (``schedule.bad_action``, its choices the file's action names)."""
    if not isinstance(value, Action):
        raise rules.error("schedule.bad_action", value=value, step=step,
                          choices=list(SPEC["actions"]))
    return value


def saves_many(sched: Callable[[int], Action], steps: int = 10_000) -> bool:
    """True when ``sched`` saves more than one window: for :func:`schedule`'s, by its cycles
    (0: for ever); for another function, within its first ``steps`` steps."""
    if (cycles := _CYCLES.get(sched)) is not None:
        return cycles != 1
    saves = 0
    prev = INITIAL_ACTION
    for step in range(steps + 1):
        cur = check_action(sched(step), step) if step < steps else FINAL_ACTION
        saves += "save" in operations(prev, cur)
        if saves > 1:
            return True
        prev = cur
    return False
