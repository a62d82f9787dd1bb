"""Hypothesis strategies for the events of traces in the Trace Event Format as pyprof reads it
(docs/trace-format.md). Used by ``tracetext.py`` and ``test_properties.py``.

* :func:`events` draws a list of events (plain JSON values): ``B``/``E`` (ends with and without a
  name), ``(``/``)``, ``X``, ``b``/``e`` and ``S``/``F`` (numeric and string ``id``, ``id2``),
  counters (``Memory: <device>`` and others, int and float values), ``M`` process and thread
  names, instants, flows, other counted phases, unknown phases, now and then a value that is not
  an event; ``ts`` integers (small, epoch, near 2**63 and 2**64) or floats, sometimes missing or
  not a number; pids and tids small, 64-bit or strings; ``args`` of any JSON shape; names with
  quotes, back slashes, control characters, unicode, commas, brackets and ``}, {``.

``tracetext.py`` writes them as files, valid or damaged.

``PYPROF_PROPERTIES_OFF`` (comma-separated names of :data:`FEATURES`) leaves features out of the
generated traces, to look past a failure that is already known, e.g.
``PYPROF_PROPERTIES_OFF=non_events,legacy``.
"""

from __future__ import annotations

import dataclasses
import os

from hypothesis import strategies as st

#: What PYPROF_PROPERTIES_OFF can leave out.
FEATURES = {
    "float_ts": "float ts, dur and counter values", "huge_ts": "ts beyond 64 bits",
    "big_ts": "ts from 2**63 - 200 (crossing the int64 maximum) and near 2**64",
    "no_ts": "timed events without a numeric ts (missing, string, null), X without a numeric dur",
    "negative": "negative durations (an end before its begin, dur < 0)",
    "separator_in_strings": 'strings holding "}" (so "}, {" inside names and args)',
    "object_lists": 'args holding lists of objects ([{...}, {...}] puts "}, {" in an event)',
    "args": "args on events", "memory": "Memory: <device> counters",
    "bad_counters": "counter values that are not numbers, counter args that are not objects",
    "legacy": "S/F events",
    "copies": "MXNet's async copies of operators (b/e in categories operator, Custom Operator)",
    "id2": 'async ids as id2 {"local": ...} or {"global": ...}', "string_ids": "string async ids",
    "unnamed_end": "end events without a name",
    "uncategorized_end": "E and ) events without a cat (the call takes its begin's)",
    "string_pids": "string pids and tids",
    "big_pids": "64-bit pids and tids", "non_events": "values in traceEvents that are not events",
    "unknown_phases": "phases the format does not define",
    "padding": "an event of about 4 KiB, so that read sizes below it cut the events after it",
    "head_keys": "top-level keys before traceEvents", "tail_keys": "top-level keys after it",
    "nested_tail": "top-level keys after traceEvents whose values nest objects",
    "mxnet": "MXNet 1.9.1's own layout (the fast path of the statistics)",
}
OFF = frozenset(f for f in os.environ.get("PYPROF_PROPERTIES_OFF", "").split(",") if f)
unknown = OFF - set(FEATURES)
assert not unknown, f"PYPROF_PROPERTIES_OFF: unknown {sorted(unknown)}; use {sorted(FEATURES)}"


def on(feature: str) -> bool:
    return feature not in OFF


COPY_CATS = ("operator", "Custom Operator")
CATS = ("operator", "MXNET_C_API", "dom", "dom,frame", "Device Storage", "cpu/0", None)
ODD = '"\\,[]{}: \n\t\x00\x1f\u00e9\u2028\U0001d6fc'
NAMES = ("dot", "[dot]", "A,B", 'q"uote', "back\\slash", "brace}, {inside", "x}, {\"ph\": \"B\"",
         "caf\u00e9", "\U0001d6fc", "tab\there", "", "a [b] (c), d", '"cat": "operator"')
if not on("separator_in_strings"):  # no "}, {" (nor "},{" ...) inside strings
    NAMES = tuple(n for n in NAMES if "}" not in n)
    ODD = ODD.replace("}", "")
names = st.one_of(st.sampled_from(NAMES), st.text(st.one_of(st.sampled_from(ODD), st.characters(
    codec="utf-8", exclude_characters=None if on("separator_in_strings") else "}")), max_size=6))
#: Names as MXNet writes them (nothing to escape), so that its layout goes through the fast path.
MX_NAMES = ("dot", "[dot]", "A,B", "_plus_scalar", "caf\u00e9", "a [b] (c), d", "x:y",
            "MXNDArrayFree")
MX_CATS = ("operator", "MXNET_C_API", "dom", "dom,frame", "Device Storage", "cpu/0")
keys = st.one_of(st.sampled_from(("a", "b", "name", "cat", "ph", "ts", "id", "args", "", "}, {")
                                 [:None if on("separator_in_strings") else -1]), names)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 65), 2 ** 65),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from(("operator", "b", "e", "B", '"ph": "b"', "]}", "}, {")
                                    [:None if on("separator_in_strings") else -1]), names)
json_values = st.recursive(
    scalars, lambda inner: st.one_of(st.lists(inner if on("object_lists") else scalars, max_size=3),
                                     st.dictionaries(keys, inner, max_size=3)), max_leaves=8)
args_values = st.one_of(*([st.just([{"a": 1}, {"b": 2}])] if on("object_lists") else []),
                        st.dictionaries(keys, json_values, max_size=3), json_values)

SMALL_PIDS = st.integers(-1, 3)
BIG_PIDS = st.one_of(st.integers(2 ** 63, 2 ** 64 - 1), st.integers(2 ** 53, 2 ** 63 - 1))
STRING_PIDS = st.sampled_from(("1", "cpu", "0x1f", "p\"q", ""))
TS_BASES = (0, 1000, 1_795_937_667_000_000)
BIG_TS_BASES = (2 ** 63 - 200, 2 ** 64 - 10 ** 4)  # the first crosses the int64 maximum
HUGE_TS_BASES = (2 ** 64 + 10 ** 4, 10 ** 30)
KNOWN_COUNTED = ("n", "R", "T", "p", "P", "N", "O", "D", "c", "V", "v")
UNKNOWN = ("Q", "ZZ", "", "?", "x", "bb")
KINDS = (("slice",) * 6 + ("async",) * 4
         + ("context", "X", "X", "C", "C", "M", "M", "instant", "flow", "counted", "stray_end")
         + (("legacy",) * 2 if on("legacy") else ()) + (("unknown",) if on("unknown_phases") else ())
         + (("non_event",) if on("non_events") else ()))
MX_KINDS = ("slice",) * 6 + ("async",) * 4 + ("context", "C", "C", "M", "instant")


def rare(draw, odds: int) -> bool:
    """True about once in ``odds + 1`` draws (False is what the shrinker goes for)."""
    return draw(st.integers(0, odds)) == odds


@dataclasses.dataclass
class Ctx:
    """What one trace's events share: pools to pick from, and the clock."""
    mxnet: bool
    pids: list
    tids: list
    names: list
    cats: list
    base: int
    ts_kind: str
    thread_cat: dict = dataclasses.field(default_factory=dict)
    clock: int = 0
    named: set = dataclasses.field(default_factory=set)


def _ts(draw, ctx: Ctx, timed: bool = True):
    """The next ``ts``: the clock moves on by a small step, now and then back (negative
    durations); a timed event's ``ts`` is sometimes missing or not a number (None: no key)."""
    ctx.clock += draw(st.integers(-3 if on("negative") else 0, 20))
    if timed and on("no_ts") and rare(draw, 30):
        return draw(st.sampled_from((None, "12", "null")))
    t = ctx.base + ctx.clock
    kind = ctx.ts_kind if ctx.ts_kind != "mixed" else draw(st.sampled_from(("int", "float")))
    if kind == "float":
        return float(t) + draw(st.sampled_from((0.0, 0.5, 0.25, 0.1)))
    return t


def _common(draw, ctx: Ctx, ph: str, *, name=None, cat="pick", timed=True):
    """An event in MXNet's key order: name, cat, ph, ts (pid and tid are added last)."""
    ev = {}
    if name is not None:
        ev["name"] = name
    if cat == "pick":
        cat = draw(st.sampled_from(ctx.cats))
    if cat is not None:
        ev["cat"] = cat
    ev["ph"] = ph
    ts = _ts(draw, ctx, timed)
    if ts == "null":
        ev["ts"] = None
    elif ts is not None:
        ev["ts"] = ts
    return ev


def _place(draw, ev, pid, tid, *, may_drop_pid=False):
    if not (may_drop_pid and rare(draw, 15)):
        ev["pid"] = pid
        ev["tid"] = tid
    return ev


def _maybe_args(draw, ctx, ev):
    if on("args") and not ctx.mxnet and rare(draw, 5):
        ev["args"] = draw(args_values)


def _async_id(draw, ctx):
    forms = ["int"] + (["str"] if on("string_ids") else []) + (["local", "global"] * on("id2"))
    form = "int" if ctx.mxnet and not rare(draw, 9) else draw(st.sampled_from(forms))
    if form in ("local", "global"):
        return "id2", {form: draw(st.one_of(st.integers(0, 1), st.sampled_from(("0x1", "0x2"))))}
    return "id", draw(st.integers(0, 1)) if form == "int" else draw(st.sampled_from(("0x1", "a")))


def _number(draw, normal, odds=9):
    """A value from ``normal``, or now and then a float, a negative number or not a number."""
    if not rare(draw, odds // 2):
        return draw(normal)
    odd = draw(st.sampled_from(("float", "negative", "bad")))
    if odd == "float" and on("float_ts"):
        return draw(st.floats(-1e6, 1e6, width=32))
    if odd == "negative" and on("negative"):
        return draw(st.integers(-5, -1))
    if odd == "bad" and on("bad_counters"):
        return draw(st.sampled_from((None, "5")))
    return draw(normal)


@st.composite
def events(draw, max_items: int = 24, mxnet: bool = False):
    """A list of events (plain JSON values) in file order; ``mxnet``: mostly events as MXNet
    writes them (int ts, pids and tids, plain names, its phases)."""
    if mxnet:
        pid_st = st.one_of(st.integers(0, 3),
                           *([st.integers(2 ** 63, 2 ** 64 - 1)] if on("big_pids") else []))
        name_st = st.sampled_from(MX_NAMES)
    else:
        pid_st = st.one_of(SMALL_PIDS, *([BIG_PIDS] if on("big_pids") else []),
                           *([STRING_PIDS] if on("string_pids") else []))
        name_st = names
    ctx = Ctx(mxnet=mxnet,
              pids=draw(st.lists(pid_st, min_size=1, max_size=3, unique=True)),
              tids=draw(st.lists(pid_st, min_size=1, max_size=2, unique=True)),
              names=draw(st.lists(name_st, min_size=1, max_size=3, unique=True)),
              cats=draw(st.lists(st.sampled_from(MX_CATS if mxnet else CATS), min_size=1, max_size=3,
                                 unique=True)),
              base=draw(st.sampled_from(TS_BASES + (BIG_TS_BASES if on("big_ts") else ())
                                        + (HUGE_TS_BASES if on("huge_ts") else ()))),
              ts_kind="int" if mxnet or not on("float_ts")
              else draw(st.sampled_from(("int", "int", "float", "mixed"))))
    out: list = []
    pending: list = []  # [items left before the end event, its fields]
    for _ in range(draw(st.integers(0, max_items))):
        kind = draw(st.sampled_from(MX_KINDS if mxnet and not rare(draw, 9) else KINDS))
        out.extend(_item(draw, ctx, kind, pending))
        for p in pending:
            p[0] -= 1
        due = [p for p in pending if p[0] < 0]
        pending = [p for p in pending if p[0] >= 0]
        out.extend(_end(draw, ctx, *spec) for _, spec in due)
    out.extend(_end(draw, ctx, *spec) for _, spec in pending)
    return out


def _item(draw, ctx: Ctx, kind: str, pending: list) -> list:
    pid, tid = draw(st.sampled_from(ctx.pids)), draw(st.sampled_from(ctx.tids))
    name = draw(st.sampled_from(ctx.names))
    if kind in ("slice", "context", "async", "legacy"):
        begin_ph, end_ph = {"slice": "BE", "context": "()", "async": "be", "legacy": "SF"}[kind]
        if kind in ("slice", "context"):
            # One category per thread, so that end and begin agree when both have one (an end
            # without a cat takes its begin's).
            if (pid, tid) not in ctx.thread_cat:
                ctx.thread_cat[(pid, tid)] = draw(st.sampled_from(ctx.cats))
            cat = ctx.thread_cat[(pid, tid)]
            ident = None
        else:
            cat = draw(st.sampled_from(ctx.cats))
            if cat in COPY_CATS and (kind == "legacy" or not on("copies")):
                cat = "dom"  # whether S/F copies of operators are skipped too is not defined
            ident = _async_id(draw, ctx)
        ev = _common(draw, ctx, begin_ph, name=name, cat=cat)
        if ident:
            ev[ident[0]] = ident[1]
        _maybe_args(draw, ctx, ev)
        if not rare(draw, 9):  # else: never ends
            keep_name = not on("unnamed_end") or not rare(draw, 2)
            end_cat = (None if ident is None and on("uncategorized_end") and rare(draw, 4)
                       else cat)
            pending.append([draw(st.integers(0, 4)),
                            (end_ph, name if keep_name else None, end_cat, ident, pid, tid)])
        return [_place(draw, ev, pid, tid)]
    if kind == "X":
        ev = _common(draw, ctx, "X", name=name)
        dur = _number(draw, st.integers(0, 50), odds=5)
        if dur is not None:
            ev["dur"] = dur
        _maybe_args(draw, ctx, ev)
        return [_place(draw, ev, pid, tid, may_drop_pid=True)]
    if kind == "C":
        ev = _common(draw, ctx, "C", name=draw(st.sampled_from(("Memory", "ctr", name))),
                     timed=False)
        ctr_names = st.sampled_from(("Memory: cpu/0", "Memory: gpu/0")[:2 if on("memory") else 0]
                                    + ("ctr", "MXNet C API Calls", name))
        values = st.one_of(st.integers(0, 2 ** 40), st.integers(-5, 5))
        if ctx.mxnet:
            ev["args"] = {draw(ctr_names): draw(values)}
        elif on("bad_counters") and rare(draw, 15):  # args missing, or not an object
            args = draw(st.sampled_from((None, [1], "5")))
            if args is not None:
                ev["args"] = args
        else:
            ev["args"] = {k: _number(draw, values)
                          for k in draw(st.lists(ctr_names, min_size=1, max_size=2, unique=True))}
        return [_place(draw, ev, pid, tid)]
    if kind == "M":
        if pid not in ctx.named and (ctx.mxnet or draw(st.booleans())):
            ctx.named.add(pid)
            pname = draw(st.one_of(st.sampled_from(("cpu/0", "gpu/0", "MXNET_C_API", "dom", "operator")),
                                   names))
            return [{"ph": "M", "args": {"name": pname}, "pid": pid, "name": "process_name"}]
        if ctx.mxnet:
            return []
        return [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                 "args": {"name": draw(names)}}]
    if kind == "instant":
        ev = _common(draw, ctx, draw(st.sampled_from("niI" if ctx.mxnet else "iI")), name=name,
                     timed=False)
        ev["s"] = draw(st.sampled_from("pgt"))
        _maybe_args(draw, ctx, ev)
        return [_place(draw, ev, pid, tid, may_drop_pid=not ctx.mxnet)]
    if kind == "flow":
        ev = _common(draw, ctx, draw(st.sampled_from("stf")), name=name, timed=False)
        ev["id"] = draw(st.integers(0, 3))
        if draw(st.booleans()):
            ev["bp"] = "e"
        return [_place(draw, ev, pid, tid)]
    if kind == "stray_end":  # most of them close nothing
        ph = draw(st.sampled_from("E)e" + ("F" if on("legacy") else "")))
        ident = _async_id(draw, ctx) if ph in "eF" else None
        if ph in "E)":  # the thread's category, as above
            if (pid, tid) not in ctx.thread_cat:
                ctx.thread_cat[(pid, tid)] = draw(st.sampled_from(ctx.cats))
            cat = ctx.thread_cat[(pid, tid)]
        else:
            cat = draw(st.sampled_from(ctx.cats))
            if cat in COPY_CATS and (ph == "F" or not on("copies")):
                cat = "dom"
        return [_end(draw, ctx, ph, name if not rare(draw, 2) else None, cat, ident, pid, tid)]
    if kind in ("counted", "unknown"):
        phases = KNOWN_COUNTED if kind == "counted" else UNKNOWN
        ev = _common(draw, ctx, draw(st.sampled_from(phases)), name=name, timed=False)
        _maybe_args(draw, ctx, ev)
        return [_place(draw, ev, pid, tid)]
    return [draw(st.sampled_from(({"foo": 1}, 5, "event", [], None, {"name": "no ph"})))]


def _end(draw, ctx, ph, name, cat, ident, pid, tid):
    ev = _common(draw, ctx, ph, name=name, cat=cat)
    if ident:
        ev[ident[0]] = ident[1]
    _maybe_args(draw, ctx, ev)
    return _place(draw, ev, pid, tid)
