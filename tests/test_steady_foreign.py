"""Threads that call libmxnet through their own binding (a ctypes.CDLL of their own; a JNA
Library of their own in Java threads), 8 of them, while windows are taken with profile_api on,
in several child processes: in steady mode 0 aborts, 0 hangs, no state switch while they run,
and every window holds its own marker only (tests/foreign_harness.py). ``FOREIGN_LONG=1`` runs
the long mode (more processes and windows, and the hazard without steady mode); its figures are
in docs/performance.md (``bench/bench_foreign.py``)."""

import os

import pytest

import foreign_harness as harness

LONG = bool(os.environ.get("FOREIGN_LONG"))
PROCESSES = 10 if LONG else 3
WINDOWS = 40 if LONG else 20


def _clean(tally: harness.Tally, windows: int) -> None:
    assert (tally.aborts, tally.hangs, tally.failures) == (0, 0, 0), tally.problems[:3]
    assert tally.windows == tally.processes * windows
    assert tally.bad_windows == 0, tally.problems[:5]
    assert tally.switches == 0, "a state switch while foreign threads ran"
    assert tally.calls > 0 and tally.api_events > 0  # API profiling really recorded them


@pytest.mark.parametrize("case", ["py-session", "py-manual"])
def test_python_threads_through_their_own_ctypes_handle(case, tmp_path):
    tally = harness.run_case(case, processes=PROCESSES, windows=WINDOWS, workdir=tmp_path)
    _clean(tally, WINDOWS)


@pytest.mark.parametrize("case", ["jvm-session", "jvm-jmx"])
def test_java_threads_through_their_own_jna_library(case, tmp_path):
    """A JVM starts in seconds plus Clojure's load from source: 2 processes here."""
    processes = PROCESSES if LONG else 2
    tally = harness.run_case(case, processes=processes, windows=WINDOWS, workdir=tmp_path,
                             timeout=240)
    _clean(tally, WINDOWS)


@pytest.mark.skipif(not LONG, reason="long mode only (FOREIGN_LONG=1): a demonstration of "
                    "the hazard steady mode removes")
@pytest.mark.parametrize("case", ["py-hazard", "jvm-hazard"])
def test_without_steady_mode_the_same_workload_aborts(case, tmp_path):
    tally = harness.run_case(case, processes=PROCESSES, windows=WINDOWS, workdir=tmp_path,
                             timeout=240)
    assert tally.aborts > 0, tally.row()
