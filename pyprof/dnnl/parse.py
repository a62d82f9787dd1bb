"""Lines of oneDNN's verbose log (``DNNL_VERBOSE=1`` or ``2``): what each field is, in every layout.

A verbose line is comma-separated; the first field is the marker (``dnnl_verbose``; MKL-DNN 0.x
and 1.0 wrote ``mkldnn_verbose``, oneDNN 3 ``onednn_verbose``). Layouts, as the libraries print
them (the last field is always the time in milliseconds, the one before it the problem):

==================  =========================================================================
oneDNN 1.2 - 2.x    ``marker,[ts,]op,engine,primitive,impl,prop_kind,mds,attrs,aux,problem,ms``
                    (``ts``: with ``DNNL_VERBOSE_TIMESTAMP=1``, ms since the epoch; MXNet 1.9.1
                    bundles 2.4.4, whose ``op`` is ``exec``, ``create:cache_miss`` or
                    ``create:cache_hit``)
DNNL 1.0 - 1.1      ``marker,op,engine,primitive,impl,prop_kind,mds,aux,problem,ms`` (no attrs)
MKL-DNN 0.x         ``marker,op,primitive,impl,prop_kind,formats,aux,problem,ms`` (no engine)
==================  =========================================================================

Lines ``marker,info,...`` describe the library (version, ISA, runtime, field template). Any
other line (the program's own output mixed into the log) is foreign: counted, skipped.

Fields are therefore read from both ends: marker, an optional numeric timestamp, the operation,
an engine when it is ``cpu`` or ``gpu``, then primitive, implementation, propagation kind and
memory descriptors; from the end, time and problem; what lies between is ``attrs,aux`` (or
``aux`` alone in the older layouts).

Statistics group lines by their *signature* (the line without marker, timestamp and time):
:class:`pyprof.dnnl.scan.Scanner` does it for whole blocks at once, with numpy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator


#: Markers of the verbose lines of oneDNN (and its earlier names), with the trailing comma.
MARKERS: tuple[bytes, ...] = (b"dnnl_verbose,", b"mkldnn_verbose,", b"onednn_verbose,")
_ENGINES = frozenset({"cpu", "gpu"})


@dataclasses.dataclass(frozen=True)
class Signature:
    """The fields of a verbose line that say *what* ran (no timestamp, no time).

    Attributes:
        op: ``exec``, ``create``, ``create:cache_miss``, ``create:cache_hit``, ...
        engine: ``cpu`` or ``gpu`` (empty in MKL-DNN 0.x logs).
        primitive: ``convolution``, ``reorder``, ``pooling_v2``, ``inner_product``, ...
        impl: the implementation, e.g. ``brgconv:avx512_core``, ``jit:uni``, ``x64:gemm:jit``.
        prop_kind: ``forward_inference``, ``backward_data``, ``undef``, ...
        mds: memory descriptors (data types and layouts), space-separated, e.g.
            ``src_f32::blocked:acdb:f0 dst_f32::blocked:abcd:f0``.
        attrs: primitive attributes (empty before oneDNN 1.2).
        aux: auxiliary information (``alg:convolution_direct``, ``num:1``, ...).
        problem: the problem in benchdnn form (``mb2_ic32oc64_ih16oh16kh3...``, ``2x32x16x16``).
    """

    op: str
    engine: str
    primitive: str
    impl: str
    prop_kind: str
    mds: str
    attrs: str
    aux: str
    problem: str

    @property
    def is_exec(self) -> bool:
        return self.op == "exec"

    @property
    def is_create(self) -> bool:
        return self.op.startswith("create")


@dataclasses.dataclass(frozen=True)
class Primitive:
    """One timestamped execution: ``ts_us`` (start, microseconds since the epoch, as MXNet's
    trace ``ts``), ``dur_us`` (microseconds) and its :class:`Signature`."""

    ts_us: float
    dur_us: float
    sig: Signature


@dataclasses.dataclass
class GroupStats:
    """Times of the lines of one signature: ``count``, ``total_ms``, ``min_ms``, ``max_ms``."""

    count: int = 0
    total_ms: float = 0.0
    min_ms: float = float("inf")
    max_ms: float = float("-inf")

    def add(self, other: GroupStats) -> None:
        self.count += other.count
        self.total_ms += other.total_ms
        self.min_ms = min(self.min_ms, other.min_ms)
        self.max_ms = max(self.max_ms, other.max_ms)


@dataclasses.dataclass
class ScanResult:
    """What a :class:`~pyprof.dnnl.scan.Scanner` found in (part of) a log.

    Attributes:
        groups: ``{signature bytes: GroupStats}`` of the exec and create lines.
        info: the ``info`` lines' text after the marker (each once, in order of appearance).
        timestamped: verbose exec/create lines that carried a timestamp.
        other: foreign lines (not verbose lines), skipped.
        malformed: verbose lines whose time or layout could not be read, skipped.
    """

    groups: dict[bytes, GroupStats] = dataclasses.field(default_factory=dict)
    info: list[str] = dataclasses.field(default_factory=list)
    timestamped: int = 0
    other: int = 0
    malformed: int = 0

    def add(self, other: ScanResult) -> None:
        for key, g in other.groups.items():
            mine = self.groups.get(key)
            if mine is None:
                self.groups[key] = g
            else:
                mine.add(g)
        for line in other.info:
            if line not in self.info:
                self.info.append(line)
        self.timestamped += other.timestamped
        self.other += other.other
        self.malformed += other.malformed


def is_verbose_line(line: bytes) -> bool:
    """True when ``line`` starts with a verbose marker (:data:`MARKERS`)."""
    return line.startswith(MARKERS)


def split_signature(sig: bytes | str) -> Signature | None:
    """The :class:`Signature` of the part of a line between marker/timestamp and time
    (``exec,cpu,convolution,...,<problem>``); None when it has too few fields for any layout."""
    text = sig.decode("utf-8", "replace") if isinstance(sig, bytes) else sig
    f = text.split(",")
    op = f[0]
    rest = f[2:] if len(f) > 1 and f[1] in _ENGINES else f[1:]
    engine = f[1] if len(f) > 1 and f[1] in _ENGINES else ""
    if len(rest) < 6:  # primitive, impl, prop_kind, mds, aux, problem at least
        return None
    middle = rest[4:-1]
    attrs = middle[0] if len(middle) >= 2 else ""
    aux = ",".join(middle[1:]) if len(middle) >= 2 else middle[0]
    return Signature(op, engine, rest[0], rest[1], rest[2], rest[3], attrs, aux, rest[-1])


def iter_primitives(lines: Iterable[bytes], counts: ScanResult | None = None) -> Iterator[Primitive]:
    """The timestamped ``exec`` lines of ``lines`` as :class:`Primitive` records, in order.

    ``counts`` (optional) receives the info lines, the foreign lines and the exec lines without
    a timestamp (in ``malformed``: they cannot be placed in time).
    """
    acc = counts if counts is not None else ScanResult()
    for raw in lines:
        line = raw.rstrip(b"\r\n")
        if not line.startswith(MARKERS):
            if line.strip():
                acc.other += 1
            continue
        body = line[line.index(b",") + 1:]
        first, _, rest = body.partition(b",")
        if first == b"info":
            text = body.decode("utf-8", "replace")
            if text not in acc.info:
                acc.info.append(text)
            continue
        try:
            ts_ms = float(first)
        except ValueError:
            if first == b"exec":
                acc.malformed += 1  # no timestamp: cannot be placed on the timeline
            continue
        head, _, t = rest.rpartition(b",")
        sig = split_signature(head)
        if sig is None or not sig.is_exec:
            continue
        try:
            dur_ms = float(t)
        except ValueError:
            acc.malformed += 1
            continue
        acc.timestamped += 1
        yield Primitive(ts_ms * 1e3, dur_ms * 1e3, sig)
