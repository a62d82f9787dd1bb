"""Custom profiler objects, named and behaving like ``mxnet.profiler`` 1.9.1's.

``Domain`` groups ``Task``, ``Frame``, ``Counter`` and ``Marker`` objects in the trace (their
category is the domain's name); ``Event`` needs no domain. Differences from mxnet.profiler are
deliberate and make misuse loud instead of corrupting the trace:

* Domains are cached by name (``Domain("a") is Domain("a")``) and never destroyed, as in MXNet.
* Every other object owns one native handle, freed exactly once: by ``close()``, by leaving a
  ``with`` block of ``closing(...)``, or by the garbage collector. A second ``close()`` is a no-op;
  using a closed object raises :class:`~pyprof.errors.StateError`.
* ``Task``, ``Frame`` and ``Event`` are also context managers (``with task: ...``) and decorators
  (``@task``). ``stop()`` before ``start()``, or ``start()`` twice, raises: MXNet keeps one start
  time per handle, so both would record a wrong duration. For re-entrant or concurrent use,
  create one object per use.
* ``Counter`` tracks its value: a set or an adjustment that would leave it below zero (MXNet's
  counter is a ``uint64`` and silently wraps to 18446744073709551615) or above 2**64-1 raises and
  leaves the counter unchanged.
* Names are checked: MXNet copies them unescaped into 128-byte buffers, so a quote, a back slash or
  a control character would make the trace invalid JSON, and a longer name would be cut short.

Objects record only while the profiler runs (``set_state('run')`` or inside ``pyprof.profile``).
A duration whose ``stop()`` comes while the profiler is stopped is dropped by MXNet.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any, Callable, TypeVar

from .native import capi as _capi
from . import rules


#: Scopes ``Marker.mark`` accepts (MXNet's ProfileMarker scopes; pyprof/spec/api.json).
MARKER_SCOPES = rules.MARKER_SCOPES

_NAME_BYTES = rules.NAME_MAX_BYTES  # MXNet's profile_stat_string_t: 128 bytes with the NUL
_NAMES = rules.API["names"]
_UINT64_MAX = rules.COUNTER_MAX
_INT64_MIN, _INT64_MAX = rules.COUNTER_STEP_MIN, rules.COUNTER_STEP_MAX
_F = TypeVar("_F", bound=Callable[..., Any])

_fns = _capi.functions()  # the live table: a forked child's refusals show through
_close_lock = threading.RLock()


def _fn(name: str) -> Any:
    """The declared C function ``name`` (the hot paths call it per operation)."""
    f = _fns.get(name)
    return f if f is not None else _capi.fn(name)


def _encode_name(kind: str, name: Any) -> bytes:
    """``name`` as MXNet will copy it; the rules are pyprof/spec/api.json's ``names``."""
    if not isinstance(name, str) or not name:
        raise rules.error("object.bad_name", what=kind, name=name)
    bad = rules.lone_surrogate(name)
    if bad is not None:  # no UTF-8 encoding
        raise rules.error("object.name_not_unicode", what=kind, index=bad[0], point=bad[1])
    raw = name.encode("utf-8")
    if len(raw) > _NAME_BYTES:
        raise rules.error("object.name_too_long", what=kind, shown=name[:_NAMES["shown_chars"]],
                          bytes=len(raw), max=_NAME_BYTES)
    bad = [c for c in name if c in _NAMES["forbidden_chars"] or ord(c) < _NAMES["forbidden_below"]]
    if bad:
        raise rules.error("object.name_bad_char", what=kind, name=name, char=bad[0])
    return raw


def _check_domain(domain: Any, kind: str) -> Domain:
    if not isinstance(domain, Domain):
        raise rules.error("object.needs_domain", what=kind, value=domain)
    return domain


class Domain:
    """A named group of tasks, frames, counters and markers (the trace category).

    ``Domain(name)`` returns the one domain of that name in this process. Domains are never
    destroyed (MXNet does not support it). C: MXProfileCreateDomain.
    """

    _cache: dict[str, Domain] = {}
    _lock = threading.Lock()

    name: str
    handle: _capi.Handle

    def __new__(cls, name: str) -> Domain:
        with cls._lock:
            dom = cls._cache.get(name)
            if dom is None:
                raw = _encode_name("Domain", name)
                dom = super().__new__(cls)
                dom.name = name
                dom.handle = _capi.create_profile_object("MXProfileCreateDomain", raw)
                cls._cache[name] = dom
            return dom

    def __init__(self, name: str) -> None:  # state is set once, in __new__
        pass

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Domain({self.name!r})"

    def new_task(self, name: str) -> Task:
        """A new :class:`Task` in this domain."""
        return Task(self, name)

    def new_frame(self, name: str) -> Frame:
        """A new :class:`Frame` in this domain."""
        return Frame(self, name)

    def new_counter(self, name: str, value: int | None = None) -> Counter:
        """A new :class:`Counter` in this domain, set to ``value`` when given."""
        return Counter(self, name, value)

    def new_marker(self, name: str) -> Marker:
        """A new :class:`Marker` in this domain."""
        return Marker(self, name)


class _Owned:
    """An object owning one native profiler handle, destroyed exactly once."""

    _kind = "object"
    name: str

    def __init__(self, name: str, create: str, *prefix: Any) -> None:
        self._handle: _capi.Handle | None = None  # set first: __del__ may run after a failure
        raw = _encode_name(self._kind, name)
        self.name = name
        self._handle = _capi.create_profile_object(create, *prefix, raw)

    @property
    def handle(self) -> _capi.Handle | None:
        """The native handle, None once closed."""
        return self._handle

    @property
    def closed(self) -> bool:
        return self._handle is None

    def close(self) -> None:
        """Free the native handle. Safe to call more than once. C: MXProfileDestroyHandle."""
        # Take the handle under a lock, so that two threads cannot both free it. An RLock: a
        # garbage collection inside the block may run another object's __del__ -> close().
        with _close_lock:
            handle, self._handle = self._handle, None
        if handle is not None:
            _capi.check(_fn("MXProfileDestroyHandle")(handle), "MXProfileDestroyHandle")

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finaliser (interpreter exit)
            pass

    def _live(self) -> _capi.Handle:
        handle = self._handle
        if handle is None:
            raise rules.error("object.closed", what=self._kind, name=self.name)
        return handle

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}{', closed' if self.closed else ''})"


class _Duration(_Owned):
    """start()/stop() pair; context manager; decorator."""

    def __init__(self, name: str, create: str, *prefix: Any) -> None:
        self._started = False
        super().__init__(name, create, *prefix)

    # start/stop/increment are hot (called per step or per batch): one dict lookup for the C
    # function, and the error path only when the return code says so.
    def start(self) -> None:
        """Begin the duration. C: MXProfileDurationStart."""
        handle = self._handle or self._live()
        if self._started:
            raise rules.error("object.already_started", what=self._kind, name=self.name)
        if _fn("MXProfileDurationStart")(handle):
            _capi.check(-1, "MXProfileDurationStart")
        self._started = True

    def stop(self) -> None:
        """End the duration and record it. C: MXProfileDurationStop."""
        handle = self._handle or self._live()
        if not self._started:
            raise rules.error("object.not_started", what=self._kind, name=self.name)
        self._started = False
        if _fn("MXProfileDurationStop")(handle):
            _capi.check(-1, "MXProfileDurationStop")

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __call__(self, func: _F) -> _F:
        """Use as a decorator: every call of ``func`` is one duration."""
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)
        return wrapper  # type: ignore[return-value]


class Task(_Duration):
    """A named duration in a domain (trace phases ``b``/``e``, category = domain name).

    C: MXProfileCreateTask.
    """

    _kind = "Task"

    def __init__(self, domain: Domain, name: str) -> None:
        self.domain = _check_domain(domain, "Task")
        super().__init__(name, "MXProfileCreateTask", self.domain.handle)


class Frame(_Duration):
    """A named frame in a domain (trace phases ``(``/``)``). C: MXProfileCreateFrame."""

    _kind = "Frame"

    def __init__(self, domain: Domain, name: str) -> None:
        self.domain = _check_domain(domain, "Frame")
        super().__init__(name, "MXProfileCreateFrame", self.domain.handle)


class Event(_Duration):
    """A named duration without a domain (trace phases ``B``/``E``, category ``event``).

    C: MXProfileCreateEvent.
    """

    _kind = "Event"

    def __init__(self, name: str) -> None:
        super().__init__(name, "MXProfileCreateEvent")


class Counter(_Owned):
    """A named unsigned 64-bit counter in a domain (trace phase ``C``).

    ``counter += 3`` and ``counter -= 1`` work as in mxnet.profiler. pyprof tracks the value, so
    a result below zero raises ``StateError`` instead of wrapping around; the counter is left
    unchanged. ``value`` is the last value pyprof set. C: MXProfileCreateCounter.
    """

    _kind = "Counter"

    def __init__(self, domain: Domain, name: str, value: int | None = None) -> None:
        self.domain = _check_domain(domain, "Counter")
        self._value = 0
        self._lock = threading.Lock()
        self._adjust_fn = _fn("MXProfileAdjustCounter")
        super().__init__(name, "MXProfileCreateCounter", self.domain.handle)
        if value is not None:
            self.set_value(value)

    @property
    def value(self) -> int:
        return self._value

    def set_value(self, value: int) -> None:
        """Set the counter to ``value`` (0 ... 2**64-1). C: MXProfileSetCounter."""
        v = self._as_int(value, "value")
        if not 0 <= v <= _UINT64_MAX:
            raise rules.error("counter.out_of_range", name=self.name, value=v)
        with self._lock:
            _capi.check(_fn("MXProfileSetCounter")(self._live(), v), "MXProfileSetCounter")
            self._value = v

    def increment(self, delta: int = 1) -> None:
        """Add ``delta`` (may be negative). C: MXProfileAdjustCounter."""
        if type(delta) is not int:
            delta = self._as_int(delta, "delta")
        with self._lock:  # the hot path: checks in one expression, one C call
            new = self._value + delta
            if 0 <= new <= _UINT64_MAX and _INT64_MIN <= delta <= _INT64_MAX \
                    and self._handle is not None:
                if self._adjust_fn(self._handle, delta):
                    _capi.check(-1, "MXProfileAdjustCounter")
                self._value = new
                return
        self._refuse(delta)

    def decrement(self, delta: int = 1) -> None:
        """Subtract ``delta``. C: MXProfileAdjustCounter."""
        self.increment(-(delta if type(delta) is int else self._as_int(delta, "delta")))

    def _refuse(self, delta: int) -> None:
        self._live()  # closed: raises
        new = self._value + delta
        fields = dict(name=self.name, value=self._value, delta=f"{delta:+d}")
        if new < 0:
            raise rules.error("counter.below_zero", **fields)
        if new > _UINT64_MAX:
            raise rules.error("counter.above_max", **fields)
        raise rules.error("counter.step_range", **fields)

    def _as_int(self, value: Any, what: str) -> int:
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise rules.error("counter.not_int", name=self.name, what=what, value=value)
        return value.__index__()

    def __iadd__(self, delta: int) -> Counter:
        self.increment(delta)
        return self

    def __isub__(self, delta: int) -> Counter:
        self.decrement(delta)
        return self


class Marker:
    """An instant event in a domain (trace phase ``n`` with scope ``s``). Holds no handle."""

    def __init__(self, domain: Domain, name: str) -> None:
        self.domain = _check_domain(domain, "Marker")
        self._raw = _encode_name("Marker", name)
        self.name = name

    def mark(self, scope: str = rules.DEFAULT_MARKER_SCOPE) -> None:
        """Record the marker now. ``scope``: one of :data:`MARKER_SCOPES`.

        C: MXProfileSetMarker.
        """
        if scope not in MARKER_SCOPES:
            raise rules.error("marker.scope", scope=scope, choices=list(MARKER_SCOPES))
        _capi.check(_fn("MXProfileSetMarker")(self.domain.handle, self._raw, scope.encode()),
                    "MXProfileSetMarker")

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Marker({self.name!r})"


def _after_fork_in_child() -> None:
    # Locks a parent thread may have held at fork (that thread does not exist here).
    global _close_lock
    _close_lock = threading.RLock()
    Domain._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
