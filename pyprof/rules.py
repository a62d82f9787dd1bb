"""The rules pyprof's Python package and its JVM layer share, read from ``pyprof/spec/``.

``api.json`` holds the constants of the profiler API (C codes of states, processes, dumps
formats and sort keys; marker scopes; name and counter limits; accepted config strings;
reserved session keys; error kinds). ``errors.json`` is the error catalogue: every error's
kind, message and fix. The JVM layer reads the same files from its classpath
(``pyprof.rules`` in Clojure), so neither language restates a rule by hand.

:func:`error` renders a catalogue entry as the Python exception to raise: the message is
``"<message> fix: <fix>"``, values in ``{field!r}`` appear as Python literals and API names
(``{api.stop}``) as Python spells them. The exception carries ``code`` (the catalogue key),
``fix`` and ``fields``.

:func:`spec` is the package's one reader of ``pyprof/spec/*.json`` (each file parsed once).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from . import errors as _errors


#: pyprof's version (``pyprof.__version__``; pyproject.toml says the same), here so that every
#: layer can name it without importing the package's facade.
VERSION = "0.1.0"

SPEC_DIR = Path(__file__).resolve().parent / "spec"


@functools.lru_cache(maxsize=None)
def spec(name: str) -> dict[str, Any]:
    """``pyprof/spec/<name>`` parsed, read once per process: the one reader of the spec files
    for the whole package (pyprof.trace included). Shared: do not modify what it returns."""
    return json.loads((SPEC_DIR / name).read_text(encoding="utf-8"))


API: dict[str, Any] = spec("api.json")
CATALOGUE: dict[str, Any] = spec("errors.json")

STATES: dict[str, int] = API["states"]
PROCESSES: dict[str, int] = API["processes"]
DUMPS_FORMATS: dict[str, int] = API["dumps_formats"]
DUMPS_SORT_KEYS: dict[str, int] = API["dumps_sort_keys"]
MARKER_SCOPES: tuple[str, ...] = tuple(API["marker_scopes"])
DEFAULT_MARKER_SCOPE: str = API["default_marker_scope"]
NAME_MAX_BYTES: int = API["names"]["max_bytes"]
COUNTER_MAX: int = API["counter"]["max"]
COUNTER_STEP_MIN: int = API["counter"]["step_min"]
COUNTER_STEP_MAX: int = API["counter"]["step_max"]
_SURROGATE_MIN, _SURROGATE_MAX = API["names"]["surrogates"]

_FIELD = re.compile(r"\{(api\.)?([a-z_]+)(!r)?\}")


def render(template: str, fields: dict[str, Any], language: str = "python") -> str:
    """Fill a catalogue template: ``{f}`` as text (a list or tuple as its items' literals,
    comma-joined), ``{f!r}`` as a literal, ``{api.x}`` as the API name in ``language``."""
    def fill(m: re.Match[str]) -> str:
        if m.group(1):
            return CATALOGUE["api"][m.group(2)][language]
        value = fields[m.group(2)]
        if m.group(3):  # a literal, a list too (as Clojure's pr-str): [] was rendered as nothing
            return repr(value)
        if isinstance(value, (list, tuple)):
            return ", ".join(repr(v) for v in value)
        return str(value)
    return _FIELD.sub(fill, template)


def error(code: str, **fields: Any) -> _errors.PyprofError:
    """The exception for catalogue entry ``code`` with ``fields`` filled in (not raised)."""
    entry = CATALOGUE["errors"][code]
    fix = render(entry["fix"], fields)
    cls = getattr(_errors, API["error_kinds"][entry["kind"]]["python"])
    exc = cls(f"{render(entry['message'], fields)} fix: {fix}")
    exc.code, exc.fix, exc.fields = code, fix, fields
    return exc


def lone_surrogate(text: str) -> tuple[int, str] | None:
    """The index and code point (``"U+DCFF"``) of the first lone surrogate in ``text``, which
    has no UTF-8 encoding (api.json ``names.surrogates``), or None."""
    for i, c in enumerate(text):
        if _SURROGATE_MIN <= ord(c) <= _SURROGATE_MAX:
            return i, f"U+{ord(c):04X}"
    return None


def path_problem(code: str, **fields: Any) -> dict[str, str]:
    """The fields ``problem`` and ``path_fix`` of errors.json ``path_problems[code]``, rendered
    for Python: what is wrong with a trace path, and its fix (for the path errors)."""
    entry = CATALOGUE["path_problems"][code]
    return {"problem": render(entry["problem"], fields), "path_fix": render(entry["fix"], fields)}


def fix(code: str, **fields: Any) -> str:
    """The fix of catalogue entry ``code`` with ``fields`` filled in, as Python spells it."""
    return render(CATALOGUE["errors"][code]["fix"], fields)


# MXNet's own failures (MXNetError, built from its message) end in the catalogue's general fix.
_errors.MXNetError.default_fix = fix("mxnet.call_failed")
