"""Window-path templates, by the grammar of ``pyprof/spec/grammar.json`` ``window_path``.

A template is literal text, fields (``{window}``, ``{step}``, ``{pid}``, optionally with a
spec such as ``{window:02d}``) and the escapes ``{{`` and ``}}``. The JVM implements the same
grammar (``pyprof.session.template``); ``tests/grammar/window_path_cases.json`` holds the cases
both run.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .. import rules


_SPEC = rules.spec("grammar.json")["window_path"]
FIELDS: tuple[str, ...] = tuple(_SPEC["fields"])
WINDOW_FIELD: str = _SPEC["needs_window_field"]  # a schedule saving several windows needs it
_TOKEN = re.compile(_SPEC["token"])
_FIELD = re.compile(_SPEC["field"], re.DOTALL)
_FORMAT = re.compile(_SPEC["spec"])


class _Field(NamedTuple):
    name: str
    fill: str  # "0" or " "
    width: int


class Template(NamedTuple):
    """A parsed window path: ``parts`` are literal strings and fields."""

    text: str
    parts: tuple[str | _Field, ...]

    def has(self, name: str) -> bool:
        """True when the template holds the field ``name`` (an escaped ``{{window}}`` is text)."""
        return any(isinstance(p, _Field) and p.name == name for p in self.parts)

    def canonical(self) -> str:
        """The template written one way for what it names: a field as ``{name}`` when its width
        is 1 or less (``{window:1d}``, ``{window:d}``, ``{window:01d}``), every literal brace
        doubled. Two templates that fill alike have one canonical text (the session claim's)."""
        return "".join(p.replace("{", "{{").replace("}", "}}") if isinstance(p, str)
                       else f"{{{p.name}}}" if p.width <= 1
                       else f"{{{p.name}:{'0' if p.fill == '0' else ''}{p.width}d}}"
                       for p in self.parts)

    def fill(self, **values: int) -> str:
        """The template with every field replaced by its value (a non-negative int)."""
        return "".join(p if isinstance(p, str)
                       else str(values[p.name]).rjust(p.width, p.fill) for p in self.parts)


def parse(text: str) -> Template:
    """Parse the window path ``text``.

    Raises:
        ConfigError: ``template.unknown_field``, ``template.bad_spec``, ``template.unbalanced``
            (each naming the index in ``text``).
    """
    parts: list[str | _Field] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        assert m is not None  # the token regex ends in alternatives that match any character
        token, inside = m.group(0), m.group(1)
        if token in ("{{", "}}"):
            parts.append(token[0])
        elif inside is not None:
            f = _FIELD.fullmatch(inside)
            assert f is not None
            name, spec = f.group(1), f.group(2)
            if name not in FIELDS:
                raise rules.error("template.unknown_field", path=text, field=name, position=pos)
            g = _FORMAT.fullmatch(spec or "")
            if g is None:
                raise rules.error("template.bad_spec", path=text, field=name, spec=spec,
                                  position=pos)
            parts.append(_Field(name, "0" if g.group(1) else " ", int(g.group(2) or 0)))
        elif token in ("{", "}"):
            raise rules.error("template.unbalanced", path=text, brace=token, position=pos)
        else:
            parts.append(token)
        pos = m.end()
    return Template(text, tuple(parts))
