"""One exception tree for pyprof. Every error names the problem and the fix."""

from __future__ import annotations


class PyprofError(Exception):
    """Base class of every error pyprof raises."""


class MXNetError(PyprofError):
    """A call into libmxnet returned -1.

    Attributes:
        function: name of the C function that failed, e.g. ``"MXDumpProcessProfile"``.
        mxnet_message: the text of ``MXGetLastError()`` read right after the call.
        code, fix, fields: as every catalogue error: ``"mxnet.call_failed"``, the fix, and
            ``{"function": ..., "mxnet_message": ...}``.
    """

    code = "mxnet.call_failed"

    #: the fix when a call gives no hint: the catalogue's ``mxnet.call_failed`` (set by pyprof.rules)
    default_fix: str | None = None

    def __init__(self, function: str, mxnet_message: str, hint: str | None = None):
        self.function = function
        self.mxnet_message = mxnet_message
        hint = hint or self.default_fix
        self.hint = self.fix = hint
        self.fields = {"function": function, "mxnet_message": mxnet_message}
        first = _first_line(mxnet_message)
        text = f"{function} failed: {first}"
        if hint:
            text += f"\n  fix: {hint}"
        super().__init__(text)


class LibraryNotFoundError(PyprofError):
    """libmxnet.so could not be found or loaded. ``tried`` lists every path attempted, as
    ``(path, why)`` pairs (the catalogue error ``library.not_found`` renders them)."""

    tried: list[tuple[str, str]] = []


class ConfigError(PyprofError, ValueError):
    """A profiler configuration key or value that the spec does not accept."""


class StateError(PyprofError, ValueError):
    """A state, process or call order the profiler does not accept."""


class DeviceError(PyprofError):
    """A context (cpu/gpu) this MXNet build or machine cannot provide."""


class JVMError(PyprofError):
    """The JVM bridge could not start, or was used in a state where it cannot work."""


class TraceError(PyprofError):
    """Base class of every error raised by :mod:`pyprof.trace`."""


class TraceNotFoundError(TraceError, FileNotFoundError):
    """A trace file does not exist or cannot be opened."""


class TraceFormatError(TraceError, ValueError):
    """A file holds no recognisable Chrome/MXNet trace events."""


class AggregateFormatError(TraceError, ValueError):
    """MXNet's aggregate statistics (``profiler.dumps(format='json')``) cannot be read."""


def _first_line(message: str) -> str:
    """MXNet appends a C++ stack trace to its messages; keep the human part."""
    lines = [ln for ln in message.strip().splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith("Stack trace") or ln.lstrip().startswith("[bt]"):
            lines = lines[:i]
            break
    text = " ".join(ln.strip() for ln in lines)
    return text.removeprefix("MXNetError: ") or "(MXNet gave no message)"


class LogFormatError(PyprofError, ValueError):
    """A log pyprof was asked to read is missing, empty or not of the expected kind (e.g. a
    oneDNN verbose log, :mod:`pyprof.dnnl`)."""
