"""Fast path of :func:`pyprof.trace.stats`: events in MXNet's own layout, without a dict per event.

MXNet 1.9.1 writes every event over about eight lines with a fixed key order::

    {
        "name": "dot",
        "cat": "operator",
        "ph": "B",
        "ts": 1795938169571896,
        "pid": 0,
        "tid": 17378283666853208238
    }

(plus one optional line, ``"args": { "<counter>": <value> },``, ``"id": <id>,`` or ``"s": "p",``,
before ``pid``; metadata events have their own layout). :func:`parse_body` splits a whole chunk of
such events with **one** ``re.split`` whose pattern captures only what the statistics need, and
turns the captures (every 11th item of the split list is one column) into numpy arrays; strings and
ids are decoded once per distinct value.

Exactness: the fast result of a chunk is used only when the chunk provably is nothing but such
events, so that ``orjson`` would have produced exactly the same events from it:

* the matches tile the chunk: every gap between matches in the split list (and before the first,
  after the last) is empty; each match ends with a separator followed by ``{`` (or the end of the
  chunk);
* every captured string is valid JSON as written (no ``"``, back slash, control character; valid
  UTF-8) and holds no brace (so the reader's bytes prefilter splits the chunk exactly into these
  events), numbers have no leading zeros and ids fit in 64 bits (orjson returns larger ones as
  floats);
* events the reader's prefilter would drop unparsed (excluded categories, async operator copies)
  are matched by a separate branch that captures nothing and admits no ``{`` in their strings
  (an event with one is matched as a kept event instead, whose strings are checked).

Anything else (names with quotes, ``X`` events, other layouts, damaged chunks) returns ``None`` and
the caller parses that chunk with orjson, as before. Pairing of begin/end events is vectorised in
:func:`pair_stack` with exactly the stack semantics of the dict-based loop.

Package-internal (used by :mod:`pyprof.trace.statistics`, :mod:`pyprof.trace.accumulate` and
:mod:`pyprof.trace.parallel`), not part of :mod:`pyprof.trace`'s API.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Iterable
from typing import Any

import numpy as np


_SP = rb"\n *"
_SEP = rb"[ \n]*(?:,[ \n]*(?=\{)|\Z)"
_U64_MAX = 2 ** 64 - 1
# An event the prefilter drops unparsed: its contents do not matter, but its extent must be certain,
# and its strings may hold no "{" (so that no "}, {" inside them could mislead the prefilter's split;
# an event with one matches _KEPT instead, whose strings are checked). Group 1 only keeps the
# numbering of the groups (whether it holds args).
_SKIPPED = (rb'[^"{]*",' + _SP + rb'"cat": "[^"{]*",' + _SP + rb'"ph": "[^"{]",' + _SP
            + rb'"ts": [0-9]+,' + _SP + rb'(?:"args": (\{) "[^"{]*": -?[0-9]+ \},' + _SP
            + rb'|"id": [0-9]+,' + _SP + rb'|"s": "[^"{]*",' + _SP + rb')?"pid": [0-9]+,' + _SP
            + rb'"tid": [0-9]+' + _SP + rb"\}")
# Groups of a kept event: name/cat/ph, ts, args key, counter value, id or scope, pid/tid.
_KEPT = (rb'([^"]*",' + _SP + rb'"cat": "[^"]*",' + _SP + rb'"ph": "[^"])",' + _SP
         + rb'"ts": ([0-9]{1,18}),' + _SP
         + rb'(?:("args": \{ "[^"]*": )(-?[0-9]{1,18}) \},' + _SP
         + rb'|("id": [0-9]{1,20}|"s": "[^"]*"),' + _SP + rb")?"
         + rb'("pid": [0-9]{1,20},' + _SP + rb'"tid": [0-9]{1,20})' + _SP + rb"\}")
_META = (rb"\{" + _SP + rb'"ph": "M",' + _SP + rb'"args": \{' + _SP + rb'"name": "([^"]*)"' + _SP
         + rb"\}," + _SP + rb'"pid": ([0-9]{1,20}),' + _SP + rb'"name": "([^"]*)"' + _SP + rb"\}")
# Group numbers (minus one) of the pattern; re.split gives a gap and then the 10 groups per match.
_C_SKIPARGS, _C_KEY, _C_TS, _C_ARGS, _C_VAL, _C_MID, _C_PIDTID, _C_MNAME, _C_MPID, _C_MOUTER = range(10)
_STRIDE = 11

_KEY_BLOB = re.compile(rb'([^"]*)",' + _SP + rb'"cat": "([^"]*)",' + _SP + rb'"ph": "([^"])\Z')
_PIDTID_BLOB = re.compile(rb'"pid": (0|[1-9][0-9]*),' + _SP + rb'"tid": (0|[1-9][0-9]*)\Z')
_ID_BLOB = re.compile(rb'"id": (0|[1-9][0-9]*)\Z')
_S_BLOB = re.compile(rb'"s": "([^"]*)"\Z')
_ARGS_BLOB = re.compile(rb'"args": \{ "([^"]*)": \Z')
_BAD_STRING = re.compile(rb"[\x00-\x1f\\{}]")
_LEADING_ZERO = re.compile(rb" -?0[0-9]")
# Phases that need fields this layout does not hold (dur, metadata args) or pairing it does not
# do (legacy async): such a chunk goes to the dict loop.
_OTHER_FIELDS = frozenset({"X", "S", "F", "M"})


class _Reject(Exception):
    """The chunk is not in the fast layout; parse it with orjson."""


@functools.lru_cache(maxsize=32)
def event_pattern(excluded: frozenset[str], copies: frozenset[str]) -> re.Pattern[bytes]:
    """The compiled split pattern for chunks whose prefilter drops ``excluded`` categories and
    async (``b``/``e``) events of the ``copies`` categories."""
    def alt(cats: Iterable[str]) -> bytes:
        return b"|".join(re.escape(c.encode()) for c in sorted(cats))

    # Which events the prefilter drops is decided by a look-ahead at name and category, so that
    # they cost no captured strings; a dropped event of an unusual shape falls through to _KEPT and
    # is skipped after decoding instead.
    dropped = []
    if excluded:
        dropped.append(rb'(?:' + alt(excluded) + rb')"')
    if copies:
        dropped.append(rb'(?:' + alt(copies) + rb')",' + _SP + rb'"ph": "[be]"')
    if dropped and not any(b in c for c in excluded | copies for b in "{}"):
        skip = (rb'(?=[^"]*",' + _SP + rb'"cat": "(?:' + b"|".join(dropped) + rb'))' + _SKIPPED)
    else:
        skip = rb"(?!)(\{)"  # keeps the group numbering
    event = rb"\{" + _SP + rb'"name": "(?:' + skip + rb"|" + _KEPT + rb")"
    return re.compile(rb"(?:" + event + rb"|" + _META + rb")" + _SEP)


def _string(raw: bytes) -> str:
    if _BAD_STRING.search(raw):
        raise _Reject
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Reject from None


def _uint(raw: bytes) -> int:
    v = int(raw)
    if v > _U64_MAX or (len(raw) > 1 and raw[:1] == b"0"):
        raise _Reject
    return v


def _factorize(col: tuple[bytes, ...]) -> tuple[np.ndarray, list[bytes]]:
    """Codes (int64, first-seen order) and the distinct values of a column."""
    uniq = list(dict.fromkeys(col))
    index = {v: i for i, v in enumerate(uniq)}
    return np.fromiter(map(index.__getitem__, col), np.int64, len(col)), uniq


def _ints(raw: Iterable[bytes], n: int) -> np.ndarray:
    """Parse ``n`` JSON integers (already matched by ``-?[0-9]{1,18}``) exactly."""
    if n == 0:
        return np.zeros(0, np.int64)
    text = b" " + b" ".join(raw)
    if _LEADING_ZERO.search(text):
        raise _Reject
    out = np.fromstring(text, dtype=np.int64, sep=" ")
    if out.size != n:  # pragma: no cover - the pattern admits digits only
        raise _Reject
    return out


class FastChunk:
    """The statistics-relevant content of one chunk, as arrays (all in file order).

    Attributes:
        events: events the reader would have yielded (kept events and metadata).
        phases: events per ``ph`` among them.
        meta: ``(pid, process name)`` of ``process_name`` metadata events, in order.
        sync_keys: distinct ``("B" | "(", pid, tid, name)`` stack keys; ``sync_key``,
            ``sync_begin``, ``sync_ts``, ``sync_cat`` (index into ``cats``) per B/E/(/) event.
        async_keys: distinct ``(pid, cat, id, name)``; ``async_*`` likewise for b/e events.
        ctr_keys: distinct ``(cat, counter name)``; ``ctr_key``, ``ctr_ts``, ``ctr_val`` per C event.
        cats: category strings referenced by ``*_cat``.
    """

    __slots__ = ("events", "phases", "meta", "sync_keys", "sync_key", "sync_begin", "sync_ts",
                 "sync_cat", "async_keys", "async_key", "async_begin", "async_ts", "async_cat",
                 "ctr_keys", "ctr_key", "ctr_ts", "ctr_val", "cats")


def parse_body(body: bytes, pattern: re.Pattern[bytes], excluded: frozenset[str],
               copies: frozenset[str]) -> FastChunk | None:
    """Parse one reader body (complete events, no ``[``/``]``), or ``None`` if not in the fast layout."""
    try:
        return _parse(body, pattern, excluded, copies)
    except _Reject:
        return None


def _take(col: list[Any], idx: list[int]) -> list[Any] | tuple[Any, ...]:
    """``[col[i] for i in idx]`` at C speed."""
    if len(idx) > 1:
        return operator.itemgetter(*idx)(col)
    return [col[i] for i in idx]


def _parse(body: bytes, pattern: re.Pattern[bytes], excluded: frozenset[str],
           copies: frozenset[str]) -> FastChunk:
    first = body.find(b"{")
    if first < 0 or body[:first].strip(b" \n"):
        raise _Reject
    if first:
        body = body[first:]
    # [gap, 10 groups, gap, 10 groups, ..., gap]: empty gaps prove the matches tile the body.
    parts = pattern.split(body)
    n = len(parts) // _STRIDE
    if not n or parts[0::_STRIDE].count(b"") != n + 1:
        raise _Reject  # text outside the matches: not a clean run of events
    keys = parts[1 + _C_KEY::_STRIDE]  # None for skipped and metadata events
    mpids = parts[1 + _C_MPID::_STRIDE]
    n_meta = n - mpids.count(None)
    metas = []
    if n_meta:
        names, outers = parts[1 + _C_MNAME::_STRIDE], parts[1 + _C_MOUTER::_STRIDE]
        metas = [(names[i], mpids[i], outers[i]) for i, v in enumerate(mpids) if v is not None]
    del mpids

    out = FastChunk()
    out.meta = []
    phases: dict[str, int] = {}
    if metas:
        phases["M"] = len(metas)
        for m in metas:
            a, o, p = _string(m[0]), _string(m[2]), _uint(m[1])
            if o == "process_name":
                out.meta.append((p, a))

    key_codes, key_uniq = _factorize(keys)
    del keys
    # Per distinct name/cat/ph: decoded strings and what to do with the event.
    n_u = len(key_uniq)
    u_name: list[str] = [""] * n_u
    u_cat: list[str] = [""] * n_u
    u_ph: list[str] = [""] * n_u
    u_kind = np.zeros(n_u, np.int8)  # 0 skip, 1 counted only, 2 sync, 3 async, 4 counter
    u_begin = np.zeros(n_u, bool)
    cats: list[str] = []
    cat_index: dict[str, int] = {}
    u_catidx = np.zeros(n_u, np.int64)
    for i, blob in enumerate(key_uniq):
        if blob is None:
            continue  # skipped or metadata event
        m = _KEY_BLOB.match(blob)
        if m is None:  # pragma: no cover - the findall pattern guarantees the shape
            raise _Reject
        name, cat, ph = _string(m.group(1)), _string(m.group(2)), _string(m.group(3))
        u_name[i], u_cat[i], u_ph[i] = name, cat, ph
        if cat in excluded or (ph in ("b", "e") and cat in copies):
            continue  # the prefilter drops these unparsed
        if ph in _OTHER_FIELDS:
            raise _Reject
        if cat not in cat_index:
            cat_index[cat] = len(cats)
            cats.append(cat)
        u_catidx[i] = cat_index[cat]
        u_kind[i] = (2 if ph in ("B", "E", "(", ")") else 3 if ph in ("b", "e")
                     else 4 if ph == "C" else 1)
        u_begin[i] = ph in ("B", "(", "b")
    out.cats = cats
    counts = np.bincount(key_codes, minlength=n_u)
    for i in range(n_u):
        if u_kind[i] and counts[i]:
            phases[u_ph[i]] = phases.get(u_ph[i], 0) + int(counts[i])
    out.phases = phases
    kind = u_kind[key_codes]
    all_kept = bool(kind.all())
    kept_idx = None if all_kept else np.flatnonzero(kind)
    out.events = (n if all_kept else int(kept_idx.size)) + len(metas)

    kept_list = None if all_kept else kept_idx.tolist()

    def sel(c: int) -> list[bytes | None] | tuple[bytes | None, ...]:
        """Column ``c``'s values of the events that count."""
        col = parts[1 + c::_STRIDE]
        return col if all_kept else _take(col, kept_list)

    if not all_kept:
        key_codes = key_codes[kept_idx]
        kind = kind[kept_idx]
    nkept = kind.size

    # pid/tid and id/scope, decoded per distinct value.
    pt_codes, pt_uniq = _factorize(sel(_C_PIDTID))
    pt_vals: list[tuple[int, int]] = []
    for blob in pt_uniq:
        m = _PIDTID_BLOB.match(blob)
        if m is None:
            raise _Reject  # leading zero
        pt_vals.append((_uint(m.group(1)), _uint(m.group(2))))
    mid_codes, mid_uniq = _factorize(sel(_C_MID))
    mid_ids: list[int | None] = []
    for blob in mid_uniq:
        if not blob:
            mid_ids.append(None)
            continue
        m = _ID_BLOB.match(blob)
        if m is not None:
            mid_ids.append(_uint(m.group(1)))
            continue
        m = _S_BLOB.match(blob)
        if m is None:
            raise _Reject
        _string(m.group(1))
        mid_ids.append(None)

    # ts of every kept event (checked even where unused: orjson would reject "01").
    ts_all = _ints(sel(_C_TS), nkept)
    # args of kept events: keys decoded, values parsed (also where only counted).
    args_kept = sel(_C_ARGS)
    has_args = np.fromiter(map(bool, args_kept), bool, nkept)
    a_idx = np.flatnonzero(has_args).tolist()
    a_codes, a_uniq = _factorize(_take(args_kept, a_idx))
    a_names = []
    for blob in a_uniq:
        m = _ARGS_BLOB.match(blob)
        if m is None:  # pragma: no cover - the findall pattern guarantees the shape
            raise _Reject
        a_names.append(_string(m.group(1)))
    a_vals = _ints(_take(sel(_C_VAL), a_idx), len(a_idx))
    del parts

    # Begin/end events: one combined code per (name/cat/ph, pid/tid) pair, then stack keys.
    m2 = kind == 2
    out.sync_ts = ts_all[m2]
    out.sync_keys, out.sync_key, out.sync_begin, out.sync_cat = _keys(
        key_codes[m2], pt_codes[m2], None, lambda u, p, _m: (
            "B" if u_ph[u] in ("B", "E") else "(", pt_vals[p][0], pt_vals[p][1], u_name[u]),
        u_begin, u_catidx)
    m3 = kind == 3
    out.async_ts = ts_all[m3]
    out.async_keys, out.async_key, out.async_begin, out.async_cat = _keys(
        key_codes[m3], pt_codes[m3], mid_codes[m3], lambda u, p, m: (
            "b", pt_vals[p][0], u_cat[u], mid_ids[m], u_name[u]),
        u_begin, u_catidx)

    # Counters: (cat, args key) per event.
    m4 = kind == 4
    out.ctr_keys, out.ctr_key = [], np.zeros(0, np.int64)
    out.ctr_ts = out.ctr_val = np.zeros(0, np.int64)
    if m4.any():
        if not has_args[m4].all():
            raise _Reject  # a counter without args (orjson path: no values)
        ca = (np.cumsum(has_args) - 1)[m4]  # rows among the events with args
        na = len(a_uniq)
        uc, inv = np.unique(key_codes[m4] * na + a_codes[ca], return_inverse=True)
        out.ctr_keys = [(u_cat[int(c) // na], a_names[int(c) % na]) for c in uc]
        out.ctr_key = inv.astype(np.int64).reshape(-1)
        out.ctr_ts = ts_all[m4]
        out.ctr_val = a_vals[ca]
    return out


def _keys(kc: np.ndarray, pc: np.ndarray, mc: np.ndarray | None, make: Any, u_begin: np.ndarray,
          u_catidx: np.ndarray) -> tuple[list[tuple[Any, ...]], np.ndarray, np.ndarray, np.ndarray]:
    """Stack keys of one kind of event from the codes of its name/cat/ph, pid/tid and id."""
    if not kc.size:
        e = np.zeros(0, np.int64)
        return [], e, np.zeros(0, bool), e
    if mc is None:
        mc = np.zeros(kc.size, np.int64)
    npc = int(pc.max()) + 1
    nmc = int(mc.max()) + 1
    uc, inv = np.unique((kc * npc + pc) * nmc + mc, return_inverse=True)
    keys: list[tuple[Any, ...]] = []
    index: dict[tuple[Any, ...], int] = {}
    remap = np.empty(len(uc), np.int64)
    for j, c in enumerate(uc.tolist()):
        u, rest = divmod(c, npc * nmc)
        p, m = divmod(rest, nmc)
        # Different begin/end blobs map to one stack key (the "B" of "E").
        key = make(u, p, m)
        if key not in index:
            index[key] = len(keys)
            keys.append(key)
        remap[j] = index[key]
    return keys, remap[inv.reshape(-1)], u_begin[kc], u_catidx[kc]


def pair_stack(keys: np.ndarray, begin: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """Match begin/end events per key exactly like a per-key stack (LIFO) in file order.

    Args:
        keys: int key of each event, in file order.
        begin: True for a begin event, False for an end event.

    Returns:
        ``(end_index, begin_index, unmatched_ends, open_begins)``: the matched pairs sorted by the
        end's position, the number of ends that found an empty stack (ignored, as in the loop), and
        the positions (ascending) of begins still open at the end.
    """
    n = keys.size
    if n == 0:
        e = np.zeros(0, np.int64)
        return e, e, 0, e
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    s = np.where(begin[order], 1, -1).astype(np.int64)
    newg = np.empty(n, bool)
    newg[0] = True
    np.not_equal(k[1:], k[:-1], out=newg[1:])
    g = np.cumsum(newg) - 1
    c = np.cumsum(s)
    seg = c - (c - s)[newg][g]  # depth change since the group start
    big = n + 2
    # Depth of a stack that ignores pops when empty: seg - min(0, running min of seg).
    runmin = np.minimum.accumulate(seg - g * big) + g * big
    depth = seg - np.minimum(runmin, 0)
    prev = np.empty(n, np.int64)
    prev[0] = 0
    prev[1:] = depth[:-1]
    prev[newg] = 0
    is_b = s > 0
    matched_end = ~is_b & (prev > 0)
    unmatched = int(np.count_nonzero(~is_b & (prev == 0)))
    level = np.where(is_b, depth, prev)
    sel = np.flatnonzero(is_b | matched_end)
    o2 = np.lexsort((sel, level[sel], g[sel]))
    t = sel[o2]  # sorted positions: by group, level, file order; B and E alternate per level
    tb = is_b[t]
    ends = np.flatnonzero(~tb)
    if ends.size and (ends[0] == 0 or not tb[ends - 1].all()
                      or (g[t[ends]] != g[t[ends - 1]]).any()
                      or (level[t[ends]] != level[t[ends - 1]]).any()):  # pragma: no cover
        raise AssertionError("begin/end pairing invariant violated; fix: report it as a pyprof bug "
                             "with the trace file (pyprof.trace's slow path reads it meanwhile)")
    end_pos = order[t[ends]]
    begin_pos = order[t[ends - 1]]
    by_end = np.argsort(end_pos, kind="stable")
    end_pos, begin_pos = end_pos[by_end], begin_pos[by_end]
    open_mask = np.asarray(begin, bool).copy()
    open_mask[begin_pos] = False
    return end_pos, begin_pos, unmatched, np.flatnonzero(open_mask)
