"""The profiler configuration keys, read from the one spec both languages share.

The spec is ``pyprof/spec/profiler_config.json``; the JVM layer reads the same file from
its classpath. Validation happens here, before MXSetProcessProfilerConfig is called,
so a bad key or value never reaches C.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any, Mapping

from .process import output as _output
from . import rules
from .errors import ConfigError


SPEC_PATH = rules.SPEC_DIR / "profiler_config.json"

_VALUES = rules.API["config_values"]  # accepted spellings and the C strings (api.json)
_GRAMMAR = rules.spec("grammar.json")  # how numbers and booleans are spelt in strings
_NUMBER = re.compile(_GRAMMAR["number"]["regex"])


def _trim(text: str) -> str:
    """``text`` without the ASCII whitespace of grammar.json at either end."""
    return text.strip(_GRAMMAR["whitespace"])


def number(value: Any) -> float | None:
    """``value`` as a float by grammar.json ``native_numbers`` and ``number``, or None: a
    number of Python (not a bool) as the nearest float, a string spelt by the decimal regex
    (after trimming ASCII whitespace) as the float it reads. Infinite results are None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (numbers.Real, Decimal)):
        try:
            result = float(value)
        except (OverflowError, ValueError):  # 10**400: no float holds it; Decimal("sNaN")
            return None
    elif isinstance(value, str) and _NUMBER.fullmatch(_trim(value)):
        result = float(_trim(value))
    else:
        return None
    return result if math.isfinite(result) else None


def boolean(value: Any) -> bool | None:
    """``value`` as a bool by grammar.json ``boolean``, or None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        text = _VALUES["bool_numbers"].get(str(int(value)))
        return None if text is None else text == _VALUES["c_true"]
    if isinstance(value, str) and _trim(value).isascii():
        word = _trim(value).lower()
        if word in _VALUES["bool_true"]:
            return True
        if word in _VALUES["bool_false"]:
            return False
    return None


def flags(**given: Any) -> dict[str, bool]:
    """A session's own boolean options (``steady``, ``record_shapes``, ...), each read by
    :func:`boolean`, as a recording key's value is (``0`` and ``"false"`` are off). Raises
    ConfigError ``session.not_boolean`` for anything else (``"yes"``, ``2``, None)."""
    out = {k: boolean(v) for k, v in given.items()}
    for k, v in out.items():
        if v is None:
            raise rules.error("session.not_boolean", option=k, value=given[k])
    return out  # type: ignore[return-value]


def c_float(number: float) -> str:
    """A float as the C string pyprof sends: the shortest decimal that reads back as
    ``number``, in plain notation, trailing zeros dropped (0.5 -> "0.5", 1.0 -> "1",
    1e-05 -> "0.00001"). The JVM layer formats the same way."""
    return format(Decimal(repr(number)).normalize(), "f")


def accepted(key: ConfigKey) -> str:
    """What ``key`` accepts, in words (errors.json ``accepted``)."""
    forms = rules.CATALOGUE["accepted"]
    if key.type == "float" and key.min_exclusive is not None:
        form = "float_min" if key.max_inclusive is None else "float_range"
        return rules.render(forms[form], {"min": c_float(key.min_exclusive), "unit": key.unit or "units",
                                          "max": c_float(key.max_inclusive or 0.0)})
    return rules.render(forms[key.type], {"unit": key.unit or "units",
                                          "choices": list(key.choices)})


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key: ``type`` is bool, string, float or enum; ``default`` is C's."""

    name: str
    type: str
    default: Any
    doc: str
    choices: tuple[str, ...] = ()
    min_exclusive: float | None = None
    max_inclusive: float | None = None
    unit: str | None = None
    file: bool = False  # a path MXNet writes: checked by validate() (MXNet silently writes nothing)

    def to_c(self, value: Any) -> str:
        """The string MXNet's parameter parser accepts for ``value``; ConfigError otherwise."""
        text = self._convert(value)
        if text is None:
            raise rules.error("config.bad_value", value=value, key=self.name,
                              accepted=accepted(self))
        return text

    def _convert(self, value: Any) -> str | None:
        if self.type == "bool":
            flag = boolean(value)
            return None if flag is None else _VALUES["c_true"] if flag else _VALUES["c_false"]
        if self.type == "string":
            if isinstance(value, (str, os.PathLike)) and str(os.fspath(value)):
                text = str(os.fspath(value))
                problem = _output.text_problem(text)
                if problem is not None:  # C takes UTF-8 text without NUL
                    raise rules.error("config.bad_path", value=text, key=self.name, **problem)
                return text
            return None
        if self.type == "float":
            x = number(value)
            if x is None or (self.min_exclusive is not None and x <= self.min_exclusive) or (
                    self.max_inclusive is not None and x > self.max_inclusive):
                return None
            return c_float(x)
        if self.type == "enum":
            return value if isinstance(value, str) and value in self.choices else None
        raise AssertionError(f"spec: unknown type {self.type!r} for {self.name}; fix: use a type "
                             "the spec defines in pyprof/spec/profiler_config.json")


@lru_cache(maxsize=1)
def keys() -> dict[str, ConfigKey]:
    """All keys of the spec by name, in spec order."""
    raw = rules.spec(SPEC_PATH.name)
    return {
        k["name"]: ConfigKey(
            name=k["name"], type=k["type"], default=k["default"], doc=k["doc"],
            choices=tuple(k.get("choices", ())), min_exclusive=k.get("min_exclusive"),
            max_inclusive=k.get("max_inclusive"), unit=k.get("unit"), file=bool(k.get("file", False)))
        for k in raw["keys"]
    }


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance between ``a`` and ``b``."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            row.append(min(row[-1] + 1, prev[j] + 1, prev[j - 1] + (ca != cb)))
        prev = row
    return prev[-1]


def nearest_key(key: str) -> str:
    """The valid key closest to ``key`` by edit distance (ties: the earlier key in the spec)."""
    return min(keys(), key=lambda name: edit_distance(key, name))


def unknown_key_error(key: str) -> ConfigError:
    nearest = nearest_key(key)
    # nearest_as_written: the key as the caller writes keys (Clojure: a keyword), as a literal
    return rules.error("config.unknown_key", key=key, nearest=nearest,
                       nearest_as_written=repr(nearest),
                       valid=", ".join(keys()))


def unknown_option_error(option: str, valid: list[str]) -> ConfigError:
    """session.unknown_option: ``option`` is none of ``valid``; names the nearest (ties: the
    earlier)."""
    nearest = min(valid, key=lambda name: edit_distance(option, name))
    return rules.error("session.unknown_option", option=option, nearest=nearest,
                       nearest_as_written=repr(nearest), valid=", ".join(valid))


def validate(kwargs: Mapping[str, Any]) -> dict[str, str]:
    """Check ``kwargs`` against the spec and return the C strings, in the given order.

    A worker's filename is made absolute against the working directory of now.
    Raises ConfigError for an unknown key (naming the nearest valid one) or a value the
    key does not accept; for a file key (filename) also config.missing_directory and
    config.bad_path (a directory, an unwritable place, a full disk: see pyprof.process.output).
    """
    spec = keys()
    out: dict[str, str] = {}
    for key, value in kwargs.items():
        if key not in spec:
            raise unknown_key_error(key)
        out[key] = spec[key].to_c(value)
        if spec[key].file:  # only a path the caller gave: defaults are never probed
            _output.check_config_path(key, out[key])
    if "filename" in out and out.get("profile_process") != "server":
        # absolute now: MXNet opens it at each dump, after the program may have changed its
        # working directory (grammar.json paths); the servers prefix their rank to theirs
        out["filename"] = _output.absolute(out["filename"])
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
