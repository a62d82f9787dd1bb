"""Trace files for the property tests: the events of :mod:`tracegen` written out as text, valid
or damaged.

* :func:`traces` renders them as a file: an object (other top-level keys before and/or after
  ``traceEvents``) or a bare array, compact, one event per line, pretty-printed or in MXNet 1.9.1's
  own layout (what the statistics' fast path reads), with random whitespace, sometimes padded
  past 4 KiB so that small read sizes cut events.
* :func:`damaged` applies what crashes and repeated sessions do: a cut at any byte, a bare comma
  before the first event, a dropped event, a missing header, a second dump appended.
* :func:`cases` draws either.
"""

from __future__ import annotations

import dataclasses
import json

from hypothesis import strategies as st

from tracegen import events, json_values, keys, names, on, rare


@dataclasses.dataclass
class Rendered:
    """A trace's text in pieces: ``head + events[0] + seps[0] + events[1] + ... + tail``."""
    head: bytes
    events: list
    seps: list
    tail: bytes
    style: str = ""

    def text(self) -> bytes:
        parts = [self.head]
        for i, ev in enumerate(self.events):
            if i:
                parts.append(self.seps[i - 1])
            parts.append(ev)
        parts.append(self.tail)
        return b"".join(parts)


_MX_ORDER = ("name", "cat", "ph", "ts", "pid", "tid")


def _mxnet_event(ev, dumps) -> str | None:
    """``ev`` in MXNet 1.9.1's layout (strings escaped, so still valid JSON), or None when its keys
    are not MXNet's."""
    if not isinstance(ev, dict):
        return None
    if list(ev) == ["ph", "args", "pid", "name"] and list(ev["args"]) == ["name"]:
        return ('{\n            "ph": %s,\n            "args": {\n                "name": %s\n'
                '            },\n            "pid": %s,\n            "name": %s\n        }'
                % (dumps(ev["ph"]), dumps(ev["args"]["name"]), dumps(ev["pid"]), dumps(ev["name"])))
    ks = list(ev)
    extra = [k for k in ks if k not in _MX_ORDER]
    if [k for k in ks if k in _MX_ORDER] != list(_MX_ORDER) or len(extra) > 1:
        return None
    if extra and (extra[0] not in ("args", "id", "s") or ks.index(extra[0]) != 4):
        return None
    lines = [f'"{k}": {dumps(ev[k])}' for k in ("name", "cat", "ph", "ts")]
    if extra:
        v = ev[extra[0]]
        if extra[0] == "args" and isinstance(v, dict) and len(v) == 1:
            (k, x), = v.items()
            lines.append(f'"args": {{ {dumps(k)}: {dumps(x)} }}')
        else:
            lines.append(f'"{extra[0]}": {dumps(v)}')
    lines += [f'"pid": {dumps(ev["pid"])}', f'"tid": {dumps(ev["tid"])}']
    return "{\n        " + ",\n        ".join(lines) + "\n    }"


TOP_KEYS = {
    "displayTimeUnit": st.sampled_from(("ms", "ns")),
    "otherData": st.dictionaries(keys, json_values, max_size=3),
    "metadata": st.dictionaries(keys, st.text(max_size=5), max_size=2),
    "stackFrames": st.dictionaries(st.sampled_from(("1", "2", "3")),
                                   st.fixed_dictionaries({"category": st.just("m"), "name": names}),
                                   max_size=3),
    "samples": st.lists(st.fixed_dictionaries({"sf": st.integers(0, 3), "ts": st.integers(0, 9)}),
                        max_size=2),
}


@st.composite
def traces(draw, max_items: int = 24) -> Rendered:
    """A valid trace file (as :class:`Rendered`)."""
    style = draw(st.sampled_from(("compact", "lines", "pretty") + (("mxnet",) * 2 * on("mxnet"))))
    evs = draw(events(max_items, mxnet=style == "mxnet" and not rare(draw, 4)))
    ascii_ = draw(st.booleans())

    def dumps(v, indent=None):
        seps = (",", ":") if style == "compact" else None
        return json.dumps(v, ensure_ascii=ascii_, indent=indent, separators=seps)

    if on("padding") and rare(draw, 2):  # past 4 KiB: small read sizes cut the events after it
        size = draw(st.integers(3500, 4600))
        pad = ({"name": "." * size, "cat": "pad", "ph": "n", "ts": 0, "s": "p", "pid": 0, "tid": 0}
               if style == "mxnet" else
               {"name": "pad", "ph": "i", "ts": 0, "pid": 0, "tid": 0, "s": "g",
                "args": {"pad": "." * size}})
        evs.insert(draw(st.integers(0, len(evs))), pad)
    indent = draw(st.sampled_from((1, 2, 4, "\t")))
    texts = []
    for ev in evs:
        t = _mxnet_event(ev, dumps) if style == "mxnet" else None
        if t is None:
            if style == "pretty":
                t = dumps(ev, indent).replace("\n", "\n" + (indent if indent == "\t" else " " * indent))
            elif style == "mxnet":
                t = json.dumps(ev, ensure_ascii=ascii_, indent=4).replace("\n", "\n    ")
            else:
                t = dumps(ev)
        texts.append(t.encode())
    if style == "mxnet":
        sep_choices = ("\n,\n    ", ",\n    ")
    elif style == "compact":
        sep_choices = (",",)
    else:
        sep_choices = (",\n", ", ", " ,\n  ", ",\n\n", "\n,\n")
    seps = [draw(st.sampled_from(sep_choices)).encode() for _ in range(max(0, len(texts) - 1))]
    bare = rare(draw, 4)
    ws = "" if style == "compact" else "\n"
    if bare:
        head, tail = "[" + ws, ws + "]" + draw(st.sampled_from(("", "\n")))
    else:
        present = [k for k in TOP_KEYS if draw(st.booleans())]
        before = [k for k in present if on("head_keys") and draw(st.booleans())]
        after = [k for k in present if k not in before and (on("tail_keys") or k == "displayTimeUnit")]
        if not on("nested_tail"):
            after = [k for k in after if k in ("displayTimeUnit", "metadata")]
        kv = ":" if style == "compact" else ": "
        ind = "" if style == "compact" else "    "
        fields = [f"{ind}{json.dumps(k)}{kv}{dumps(draw(TOP_KEYS[k]))}" for k in before]
        if style == "mxnet":
            head = "{\n" + "".join(f + ",\n" for f in fields) + '    "traceEvents": [\n        '
        else:
            head = "{" + ws + "".join(f + "," + ws for f in fields) + f'{ind}"traceEvents"{kv}[' + ws
        tail_fields = [f"{ind}{json.dumps(k)}{kv}{dumps(draw(TOP_KEYS[k]))}" for k in after]
        tail = (ws + "]" + "".join("," + ws + f for f in tail_fields) + ws + "}"
                + draw(st.sampled_from(("", "\n"))))
        if style == "mxnet":
            tail = "\n\n    ]" + "".join(",\n" + f for f in tail_fields) + "\n}\n"
    return Rendered(head.encode(), texts, seps, tail.encode(), style)


DAMAGE = ("truncate", "leading_comma", "drop_event", "missing_head", "appended")


@st.composite
def damaged(draw, r: Rendered) -> tuple[bytes, list[str]]:
    """``r``'s text with one or more kinds of damage; returns (text, what was done)."""
    kinds = draw(st.lists(st.sampled_from(DAMAGE), min_size=1, max_size=3, unique=True))
    head, evs, seps, tail = r.head, list(r.events), list(r.seps), r.tail
    if "drop_event" in kinds and evs:
        i = draw(st.integers(0, len(evs) - 1))
        if draw(st.booleans()) or not seps:
            evs[i] = b""  # leaves its separators: ", ,"
        else:
            del evs[i]
            del seps[min(i, len(seps) - 1)]
    if "missing_head" in kinds:
        head = draw(st.sampled_from((b"", b"\n", b"  ")))
    if "leading_comma" in kinds:
        head += draw(st.sampled_from((b",", b",\n", b"\n,\n    ")))
    text = Rendered(head, evs, seps, tail).text()
    if "appended" in kinds:
        text += draw(st.sampled_from((b"", b"\n", b",\n"))) + r.text()
    if "truncate" in kinds and text:
        text = text[:draw(st.integers(0, len(text) - 1))]
    return text, kinds


@st.composite
def cases(draw, damage: bool | None = None, max_items: int = 24) -> tuple[bytes, list[str]]:
    """(file bytes, damage done); ``damage``: None = either, True = always, False = never."""
    r = draw(traces(max_items))
    if damage is None:
        damage = draw(st.booleans())
    if not damage:
        return r.text(), []
    return draw(damaged(r))
