"""Python's side of the calls that are forms rather than functions: context managers here,
macros in Clojure (with-task, with-profiling, with-session, ...) and try-with-resources in Java.
The conformance runner calls these through bindings.json like any other function."""

from __future__ import annotations

from typing import Any

import pyprof
from pyprof import profiler


def workload(times: int = 1, shape: tuple[int, ...] = (4, 4)) -> None:
    """``times`` small operators (``_random_uniform``), waited for."""
    import mxnet as mx

    for _ in range(times):
        mx.nd.random.uniform(-1, 1, shape=shape).wait_to_read()
    mx.nd.waitall()


def with_duration(duration: Any, times: int = 1) -> None:
    with duration:
        workload(times)


def with_task(domain: Any, name: str, times: int = 1) -> None:
    with pyprof.Task(domain, name):
        workload(times)


def with_frame(domain: Any, name: str, times: int = 1) -> None:
    with pyprof.Frame(domain, name):
        workload(times)


def with_event(name: str, times: int = 1) -> None:
    with pyprof.Event(name):
        workload(times)


def with_profiling(config: dict[str, Any], times: int = 1) -> None:
    """Configure, run the body, always stop, then write the finished trace."""
    profiler.set_config(**config)
    profiler.set_state("run")
    try:
        workload(times)
    finally:
        profiler.set_state("stop")
        profiler.dump()


def profile_with(options: dict[str, Any], steps: int, times: int = 1) -> list[Any]:
    """A session as a context manager: ``steps`` steps of ``times`` operators each."""
    with pyprof.profile(**options) as prof:
        for _ in range(steps):
            workload(times)
            prof.step()
    return prof.windows
