"""The profiler configuration keys, read from the one spec both languages share.

The spec is ``pyprof/spec/profiler_config.json``; the JVM layer reads the same file from
its classpath. Validation happens here, before MXSetProcessProfilerConfig is called,
so a bad key or value never reaches C.
"""

from __future__ import annotations

import difflib
import json
import math
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from .errors import ConfigError

__all__ = ["ConfigKey", "keys", "validate", "SPEC_PATH"]

SPEC_PATH = Path(__file__).resolve().parent / "spec" / "profiler_config.json"

_TRUE = {"true", "1"}
_FALSE = {"false", "0"}


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key: ``type`` is bool, string, float or enum; ``default`` is C's."""

    name: str
    type: str
    default: Any
    doc: str
    choices: tuple[str, ...] = ()
    min_exclusive: float | None = None
    unit: str | None = None
    file: bool = False  # a path whose directory must exist (MXNet silently writes nothing)

    def to_c(self, value: Any) -> str:
        """The string MXNet's parameter parser accepts for ``value``; ConfigError otherwise."""
        if self.type == "bool":
            if isinstance(value, bool):
                return "true" if value else "false"
            if isinstance(value, int) and value in (0, 1):
                return "true" if value else "false"
            if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
                return "true" if value.strip().lower() in _TRUE else "false"
            raise self._bad(value, "True/False, 1/0, or the strings 'true'/'false'/'1'/'0'")
        if self.type == "string":
            if not (isinstance(value, (str, os.PathLike)) and str(os.fspath(value))):
                raise self._bad(value, "a non-empty string (a file path)")
            text = str(os.fspath(value))
            if self.file:
                parent = os.path.dirname(os.path.abspath(text))
                if not os.path.isdir(parent):
                    raise ConfigError(
                        f"invalid value {text!r} for profiler config key {self.name!r}: "
                        f"directory {parent!r} does not exist. fix: create it first "
                        "(MXNet would silently write no trace)")
            return text
        if self.type == "float":
            try:
                number = float(value) if not isinstance(value, bool) else math.nan
            except (TypeError, ValueError):
                number = math.nan
            if math.isnan(number) or math.isinf(number):
                raise self._bad(value, f"a number of {self.unit or 'units'}")
            if self.min_exclusive is not None and number <= self.min_exclusive:
                unit = f" {self.unit}" if self.unit else ""
                raise self._bad(value, f"a number > {self.min_exclusive:g}{unit}")
            return repr(number)
        if self.type == "enum":
            if isinstance(value, str) and value in self.choices:
                return value
            raise self._bad(value, "one of " + ", ".join(repr(c) for c in self.choices))
        raise AssertionError(f"spec: unknown type {self.type!r} for {self.name}")

    def _bad(self, value: Any, accepted: str) -> ConfigError:
        return ConfigError(
            f"invalid value {value!r} for profiler config key {self.name!r}: expected {accepted}")


@lru_cache(maxsize=1)
def keys() -> dict[str, ConfigKey]:
    """All keys of the spec by name, in spec order."""
    raw = json.loads(SPEC_PATH.read_text(encoding="utf-8"))
    return {
        k["name"]: ConfigKey(
            name=k["name"], type=k["type"], default=k["default"], doc=k["doc"],
            choices=tuple(k.get("choices", ())), min_exclusive=k.get("min_exclusive"),
            unit=k.get("unit"), file=bool(k.get("file", False)))
        for k in raw["keys"]
    }


def unknown_key_error(key: str) -> ConfigError:
    names = list(keys())
    near = difflib.get_close_matches(key, names, n=1, cutoff=0.0)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return ConfigError(
        f"unknown profiler config key {key!r}: {hint}valid keys are {', '.join(names)}")


def validate(kwargs: Mapping[str, Any]) -> dict[str, str]:
    """Check ``kwargs`` against the spec and return the C strings, in the given order.

    Raises ConfigError for an unknown key (naming the nearest valid one) or a value the
    key does not accept.
    """
    spec = keys()
    out: dict[str, str] = {}
    for key, value in kwargs.items():
        if key not in spec:
            raise unknown_key_error(key)
        out[key] = spec[key].to_c(value)
    return out


def effective(c_values: Mapping[str, str]) -> dict[str, str]:
    """The whole configuration in force after a config call: C resets omitted keys."""
    out = {name: spec.to_c(spec.default) for name, spec in keys().items()}
    out.update(c_values)
    return out


def markdown_table() -> str:
    """The spec as the Markdown table in docs/configuration.md (kept in sync by a test)."""
    rows = ["| key | type | C default | meaning |", "|---|---|---|---|"]
    for k in keys().values():
        kind = k.type if not k.choices else " \\| ".join(f"`{c}`" for c in k.choices)
        if k.unit:
            kind += f" ({k.unit})"
        default = k.to_c(k.default)
        rows.append(f"| `{k.name}` | {kind} | `{default}` | {k.doc} |")
    return "\n".join(rows)
