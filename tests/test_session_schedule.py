"""The session schedule follows pyprof/spec/schedule.json (no MXNet needed).

Two kinds of checks: the interpreter performs exactly the operations each row of the file lists
(table-driven), and a model of MXNet's profiler driven through the file's table puts every
step's events into the right window (so a wrong row fails here, whatever the interpreter does).
"""

import json
from pathlib import Path

import pytest

import pyprof
from pyprof import Action
from pyprof.session import scheduling as spec

SPEC = json.loads((Path(pyprof.__file__).parent / "spec" / "schedule.json").read_text())


def test_the_file_defines_every_transition_once():
    pairs = [(row["from"], row["to"]) for row in SPEC["transitions"]]
    assert sorted(pairs) == sorted((a, b) for a in SPEC["actions"] for b in SPEC["actions"])
    assert [a.value for a in Action] == list(SPEC["actions"])
    assert {op for row in SPEC["transitions"] for op in row["do"]} <= set(SPEC["operations"])


class Recording(pyprof.profile):
    """A session whose operations only record their names (no profiler calls)."""

    def __init__(self):
        super().__init__(path="unused_{window}.json")
        self.calls = []

    def _save(self):
        self.calls.append("save")

    _OPERATIONS = {op: (lambda name: lambda self: self.calls.append(name))(op)
                   for op in ("stop", "open", "run")}


@pytest.mark.parametrize("row", SPEC["transitions"], ids=lambda r: f"{r['from']}->{r['to']}")
def test_interpreter_performs_the_operations_of_each_row(row):
    s = Recording()
    s._transition(Action(row["from"]), Action(row["to"]))
    assert s.calls == row["do"]
    assert s.current_action is Action(row["to"])


@pytest.mark.parametrize("params", [
    dict(skip_first=1, wait=1, warmup=1, active=2, repeat=2),
    dict(wait=0, warmup=0, active=3, repeat=0),
    dict(wait=2, warmup=0, active=1, repeat=0, skip_first=3),
])
def test_schedule_walks_the_phases_of_the_file(params):
    """Each step's action, computed here from the file's phases, equals schedule(step)."""
    values = {p["name"]: params.get(p["name"], p["default"]) for p in SPEC["parameters"]}
    expected = [SPEC["skip_first"]["action"]] * values[SPEC["skip_first"]["steps"]]
    for _ in range(values[SPEC["cycles"]] or 3):
        for phase in SPEC["cycle"]:
            n = values[phase["steps"]]
            expected += [phase["action"]] * (n - 1)
            if n:
                expected.append(phase.get("last_step_action", phase["action"]))
    if values[SPEC["cycles"]]:
        expected += [SPEC["after_cycles"]] * 4
    sched = pyprof.schedule(**params)
    assert [sched(i).value for i in range(len(expected))] == expected


class Simulated(pyprof.profile):
    """A model of MXNet's profiler under the file's transition table.

    Each step makes one event (its step number). MXNet keeps an event when it is recording, and
    also while it is neither running nor paused (before its first run: custom objects); stopping
    pauses it. ``stop`` appends what was kept to the raw list and ends the open window there,
    ``open`` (stopped) appends what MXNet queued meanwhile and marks a window's start, ``save``
    cuts the window that ended.
    """

    def __init__(self, sched):
        super().__init__(schedule=sched, path="unused_{window}.json")
        self.recording = self.paused = False
        self.queue, self.raw, self.saved = [], [], []
        self.start = self.ended = None

    def event(self, step):
        if self.recording or not self.paused:
            self.queue.append(step)

    def _flush(self):
        self.raw += self.queue
        self.queue = []

    def _stop_model(self):
        if self.recording:
            self.recording, self.paused = False, True
            self._flush()
        if self.start is not None:
            assert self.ended is None, "a window ends before the last one was saved"
            self.ended, self.start = (self.start, len(self.raw)), None

    def _open_model(self):
        assert not self.recording, "a window opens with the profiler stopped"
        assert self.start is None, "one window records at a time"
        self.paused = True  # drain: the first run/stop pause MXNet
        self._flush()
        self.start = len(self.raw)

    def _run_model(self):
        self.recording, self.paused = True, False

    def _save(self):
        if self.ended is not None:
            self.saved.append(self.raw[slice(*self.ended)])
            self.ended = None

    _OPERATIONS = {"stop": _stop_model, "open": _open_model, "run": _run_model}


def simulate(sched, steps):
    s = Simulated(sched)
    s._state = "open"
    s._transition(s._action, s._action_for(0))
    for step in range(steps):
        s.event(step)
        s.step()
    s.stop()
    assert s.start is None and s.ended is None, "every window was saved"
    return s.saved


@pytest.mark.parametrize("params, steps, windows", [
    (dict(wait=1, active=1, repeat=3), 8, [[1], [3], [5]]),
    (dict(skip_first=2, wait=1, warmup=1, active=2, repeat=2), 12, [[4, 5], [8, 9]]),
    (dict(warmup=2, active=1, repeat=2), 8, [[2], [5]]),
    (dict(active=2), 5, [[0, 1], [2, 3], [4]]),              # the last window saved at stop
    (dict(wait=1, warmup=1, active=1), 7, [[2], [5]]),        # stop in a warm-up: nothing saved
])
def test_every_window_holds_exactly_its_active_steps(params, steps, windows):
    assert simulate(pyprof.schedule(**params), steps) == windows


def test_without_schedule_one_window_holds_every_step():
    assert simulate(None, 4) == [[0, 1, 2, 3]]


def test_custom_schedules_through_any_transition():
    """Every pair of actions in a row, as a custom schedule may return them."""
    order = [Action.RECORD, Action.WARMUP, Action.RECORD_AND_SAVE, Action.RECORD_AND_SAVE,
             Action.NONE, Action.RECORD, Action.NONE, Action.WARMUP, Action.NONE,
             Action.RECORD_AND_SAVE, Action.WARMUP, Action.WARMUP, Action.RECORD,
             Action.RECORD, Action.RECORD_AND_SAVE, Action.RECORD]
    saved = simulate(lambda step: order[step] if step < len(order) else Action.NONE, len(order))
    assert saved == [[0], [2], [3], [5], [9], [12, 13, 14], [15]]


def test_spec_schedule_errors_name_the_limit():
    with pytest.raises(pyprof.ConfigError) as e:
        pyprof.schedule(active=0)
    assert (e.value.code, str(e.value)) == (
        "schedule.bad_value", "invalid schedule active=0: expected an integer >= 1. "
        "fix: pass an integer >= 1")
    for p in SPEC["parameters"]:   # every option's minimum comes from the file
        with pytest.raises(pyprof.ConfigError) as e:
            pyprof.schedule(**{p["name"]: p["min"] - 1})
        assert e.value.code == "schedule.bad_value"
        assert e.value.fields == {"option": p["name"], "value": p["min"] - 1, "min": p["min"]}
    with pytest.raises(pyprof.ConfigError) as e:
        pyprof.schedule(cycles=2)
    assert (e.value.code, str(e.value)) == (
        "schedule.unknown_option", "unknown schedule option(s) 'cycles': expected one of "
        "'wait', 'warmup', 'active', 'repeat', 'skip_first'. fix: use only those options")
    with pytest.raises(pyprof.ConfigError) as e:
        spec.check_action("record", 7)
    assert e.value.code == "schedule.bad_action"
    assert e.value.fields == {"value": "record", "step": 7, "choices": list(SPEC["actions"])}
    assert spec.saves_many(pyprof.schedule(active=1, repeat=2))
    assert not spec.saves_many(pyprof.schedule(active=3, repeat=1))
