"""One metadata store in a process: the JVM layer's ``pyprof.jvm.MetadataStore`` is Python's
:data:`pyprof.process.rawfile.METADATA`.

MXNet writes its ``process_name`` events (one per device) only in the first dump of a process,
and every window or finished file carries all of them first. When JPype hosts the JVM,
:func:`install` (called by ``pyprof.jvm.start``) makes a JPype proxy over ``METADATA`` the JVM's
store (``MetadataStore.use``): the metadata either language reads from a raw trace is the one
record, so a Python session after a JVM session (which took the process's first raw file) still
gets the process names, and the other way round. Events cross exactly (string keys, 64-bit ids).
"""

from __future__ import annotations

from typing import Any

from .values import StringKey, to_clojure, to_python
from ..process.rawfile import METADATA, metadata_key


def _plain(x: Any) -> Any:
    """A value read from the JVM with plain ``str`` keys (as Python's reader gives events)."""
    if isinstance(x, dict):
        return {str.__str__(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    return x


def _keyed(x: Any) -> Any:
    """An event for :func:`to_clojure` with string keys (not keywords), as the JVM reads them."""
    if isinstance(x, dict):
        return {StringKey(k): _keyed(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_keyed(v) for v in x]
    return x


def _proxy(jpype: Any) -> Any:
    @jpype.JImplements("pyprof.jvm.MetadataStore")
    class PythonMetadata:
        """pyprof.jvm.MetadataStore over Python's METADATA."""

        @jpype.JOverride
        def remember(self, events: Any) -> Any:
            for ev in _plain(to_python(events)) or []:
                if ev.get("ph") == "M":
                    METADATA.setdefault(metadata_key(ev), ev)
            return jpype.JClass("java.util.ArrayList")(
                [to_clojure(_keyed(ev)) for ev in METADATA.values()])

    return PythonMetadata()


def install() -> None:
    """Make Python's METADATA the JVM layer's metadata store (``MetadataStore.use``), before any
    JVM code reads a raw trace."""
    import jpype

    store = jpype.JClass("pyprof.jvm.MetadataStore")
    store.use(_proxy(jpype))


def uninstall() -> None:
    """At interpreter exit, before JPype shuts the JVM down: the JVM keeps its own store again
    (no late JVM call reaches a Python that is exiting)."""
    import jpype

    if jpype.isJVMStarted():
        jpype.JClass("pyprof.jvm.MetadataStore").use(None)
