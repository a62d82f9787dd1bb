"""What MXNet 1.9.1's engine does that no NDArray handle shows, for :mod:`pyprof.attribution.matching`
(``attribution.json matching``): how many workers run a device's operators, and the round robin
of temp-space copies that makes an operator wait for another. Pure Python; no C function is
called here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from .. import rules
from .calls import HANDLES, Call


_SPEC: dict[str, Any] = rules.spec("attribution.json")
_M: dict[str, Any] = _SPEC["matching"]
_RES: dict[str, Any] = _M["resources"]
_EXECUTOR: str = _SPEC["capture"]["sources"]["executor"]


def workers_per_device(device: str, env: dict[str, str] | None = None) -> int:
    """Worker threads MXNet's engine runs per device (``cpu/0`` -> ``MXNET_CPU_WORKER_NTHREADS``,
    default 1); 1 under an engine that runs operators inside the call (NaiveEngine)."""
    env = os.environ if env is None else env
    if env.get(_M["engine"]["variable"], "") in _M["engine"]["inline"]:
        return 1
    kind = device.split("/")[0].split(" ")[0]
    var, default = _M["workers"].get(kind, (None, 1))
    try:
        return max(1, int(env.get(var, default))) if var else 1
    except ValueError:
        return default


def temp_chain(calls: Sequence[Call], devices: Iterable[str],
               env: dict[str, str] | None) -> dict[int, int]:
    """call seq -> the seq of the call that took the same temp-space copy before it, in the
    window (attribution.json matching.resources); empty unless every device of the window's
    operator events is a CPU. MXNet's resource manager is thread-local (``ResourceManager::Get``,
    src/resource.cc): each calling thread takes its own copies round robin, so the chain runs
    through one thread's calls."""
    devices = list(devices)
    if not devices or any(d.split("/")[0] != "cpu" for d in devices):
        return {}
    env = os.environ if env is None else env
    var, default = _RES["copies"]["cpu"]
    try:
        n = max(1, int(env.get(var, default)))
    except ValueError:
        n = default
    temp = {HANDLES[name] for name in _RES["temp_space"] if name in HANDLES}
    # an executor's node took its copy when it was bound (attach_op_resource_pass): not per call
    users: dict[int, list[int]] = {}
    for c in calls:
        if c.op in temp and c.source != _EXECUTOR:
            users.setdefault(c.thread, []).append(c.seq)
    return {u[k]: u[k - n] for u in users.values() for k in range(n, len(u))}
