"""Steady mode's refusals, for the control calls of ``pyprof.profiler`` (api.json ``steady``).

While ``TRACKER.steady`` is set (``pyprof.session.steady`` began it), no call may change
MXNet's ``Profiler::IsProfiling``: a state switch and a finished dump are refused unless pyprof
makes them itself as the owner (steady mode's beginning and end, the exit handler), and a config
that changes a mode key's effective value is refused from anyone. Package-internal.
"""

from __future__ import annotations

import threading

from .. import config, rules
from .tracker import TRACKER


def check_switch(call: str, process_code: int = 0) -> None:
    """Refuse ``call`` (``"set_state('run')"``, ``"dump(finished=True)"``) in steady mode:
    StateError ``steady.finished_dump`` for a dump, else ``steady.set_state``."""
    t = TRACKER
    if process_code == 0 and t.steady is not None and t.internal != threading.get_ident():
        code = "steady.finished_dump" if call.startswith("dump") else "steady.set_state"
        raise rules.error(code, call=call, steady=t.steady)


def check_config(c_values: dict[str, str]) -> None:
    """Refuse a config of C strings ``c_values`` that changes the effective value of a mode key
    (``steady.mode_keys``: MXNet's mode bits, which IsProfiling reads): StateError
    ``steady.config_mode`` naming them."""
    t = TRACKER
    if t.steady is None:
        return
    old, new = t.config or config.effective({}), config.effective(c_values)
    changed = [k for k in rules.API["steady"]["mode_keys"] if old.get(k) != new.get(k)]
    if changed:
        raise rules.error("steady.config_mode", call="set_config()", steady=t.steady,
                          keys=", ".join(changed))
