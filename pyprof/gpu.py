"""CUDA builds of MXNet 1.9.1: which wheel fits a driver, and whether a build can run on a card.

The published wheels are listed in ``spec/gpu.json`` (CUDA version, kernels held). Two uses:

- ``scripts/setup.sh --gpu`` asks :func:`choose_wheel` for the newest wheel whose CUDA the
  driver supports (nvidia-smi's "CUDA Version"). This module uses the standard library only,
  so setup runs it with the system ``python3`` before ``.venv`` exists::

      python3 pyprof/gpu.py wheel --driver-cuda 12.4 [--want cu112] [--cc 9.0]

- :func:`pyprof.context.check_context` asks :func:`unsupported` whether the build in use
  holds kernels for the card's compute capability. A build without them fails at the first
  GPU operator with CUDA's "no kernel image is available for execution on the device"
  (for instance every 1.9.1 wheel on a Hopper card: they stop at sm_86, with no PTX).

The kernels a build holds are read from ``libmxnet.so`` itself (:func:`read_fatbin`: the
``.nv_fatbin`` section, where nvcc puts one entry per kernel image, each naming its
architecture and whether it is SASS or PTX). MXNet exposes no list of its own:
``mx.runtime.Features()`` only says CUDA is on. When the section cannot be read, the
published list of the installed wheel is used; for an unknown build nothing is claimed.
The JVM layer's ``pyprof.gpu`` (Clojure) gives the same answers (its gpu_test compares).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

if __package__:
    from . import rules

    SPEC = rules.spec("gpu.json")
else:  # python3 pyprof/gpu.py (scripts/setup.sh, before .venv exists): the standard library only
    SPEC = json.loads((Path(__file__).resolve().parent / "spec" / "gpu.json").read_text("utf-8"))
MXNET_VERSION: str = SPEC["mxnet_version"]
WHEELS: list[dict] = SPEC["wheels"]

CC = tuple[int, int]

_FATBIN_MAGIC = 0xBA55ED50
_KIND_PTX, _KIND_SASS = 1, 2


def version(text: str) -> tuple[int, int]:
    """'11.7' -> (11, 7); '12' -> (12, 0). ValueError on anything else."""
    m = re.fullmatch(r"\s*(\d+)(?:\.(\d+))?\s*", str(text))
    if not m:
        raise ValueError(f"not a CUDA version: {text!r}; fix: write it as 11.7 (or 12)")
    return int(m.group(1)), int(m.group(2) or 0)


#: The oldest CUDA toolkit that compiles for a compute capability newer than any wheel's.
TOOLKIT_FOR: dict[CC, str] = {version(c): t for c, t in SPEC["toolkit_for"].items()}


def cc(value) -> CC:
    """A compute capability from '8.6', '86', 86 or (8, 6); sm numbers (90, 100) work too."""
    if isinstance(value, tuple):
        return int(value[0]), int(value[1])
    text = str(value).strip()
    if "." in text:
        return version(text)
    n = int(text)
    return n // 10, n % 10


def cc_str(c: CC) -> str:
    return f"{c[0]}.{c[1]}"


def sm(c: CC) -> str:
    return f"sm_{c[0]}{c[1]}"


def runs_on(card: CC, sass, ptx=()) -> bool:
    """Whether kernels built as ``sass``/``ptx`` run on ``card``: SASS for X.Y runs on X.Z with
    Z >= Y; PTX for X.Y is compiled by the driver for any card of X.Y or newer."""
    return any(s[0] == card[0] and s[1] <= card[1] for s in sass) or any(p <= card for p in ptx)


def wheel(name: str) -> dict | None:
    """The wheel called ``name``: 'mxnet-cu117', 'cu117', '117' or the CUDA version '11.7'."""
    key = str(name).strip().lower().replace("_", "-")
    for w in WHEELS:
        if key in (w["name"], w["name"].removeprefix("mxnet-"), w["name"][len("mxnet-cu"):],
                   w["cuda"]):
            return w
    return None


def wheel_sass(w: dict) -> list[CC]:
    return [version(a) for a in w["sass"]]


def _names(ws) -> str:
    return ", ".join(w["name"].removeprefix("mxnet-") for w in ws)


def choose_wheel(driver_cuda: str, want: str | None = None) -> dict:
    """The wheel to install on a driver that supports CUDA ``driver_cuda``: ``want`` when
    given, else the newest the driver runs. ValueError (one line, with the fix) otherwise."""
    drv = version(driver_cuda)
    runnable = [w for w in WHEELS if version(w["cuda"]) <= drv]
    if want:
        w = wheel(want)
        if w is None:
            raise ValueError(f"no MXNet {MXNET_VERSION} build for CUDA {want!r}; fix: choose one of "
                             f"{_names(WHEELS)}")
        if w not in runnable:
            raise ValueError(f"{w['name']} needs a driver for CUDA {w['cuda']} or newer, and this "
                             f"driver supports CUDA {driver_cuda}; fix: update the NVIDIA driver, or "
                             f"choose one of {_names(runnable) or 'none'}")
        return w
    if not runnable:
        raise ValueError(f"the NVIDIA driver supports CUDA {driver_cuda}, older than every MXNet "
                         f"{MXNET_VERSION} CUDA build ({WHEELS[0]['cuda']} to "
                         f"{WHEELS[-1]['cuda']}); fix: update the NVIDIA driver")
    return runnable[-1]


def read_fatbin(path: str) -> tuple[list[CC], list[CC]] | None:
    """(SASS, PTX) compute capabilities of the CUDA kernels in the ELF64 file at ``path``, each
    sorted; None when it has no ``.nv_fatbin`` section (a CPU build) or cannot be parsed.

    Layout (nvcc's fatbin container): a 16-byte header (magic 0xBA55ED50, u16 version, u16
    header size, u64 size of the entries), then entries, each a header (u16 kind: 1 PTX,
    2 SASS; u32 header size at 4; u32 padded payload size at 8; u32 arch at 28, e.g. 86)
    followed by its payload. Only headers are read: a CUDA libmxnet.so is over 1 GB."""
    try:
        with open(path, "rb") as f:
            start, size = _elf_section(f, (b".nv_fatbin", b"__nv_relfatbin"))
            if size == 0:
                return None
            sass, ptx = set(), set()
            pos, end = start, start + size
            while pos + 16 <= end:
                f.seek(pos)
                magic, _, hsize, fsize = struct.unpack("<IHHQ", f.read(16))
                if magic != _FATBIN_MAGIC:
                    f.seek(pos)
                    if any(f.read(8)) or pos % 8:  # only zero padding may lie between them
                        return None
                    pos += 8
                    continue
                entry, last = pos + hsize, pos + hsize + fsize
                if hsize < 16 or last > end:
                    return None
                while entry + 32 <= last:
                    f.seek(entry)
                    head = f.read(32)
                    kind, ehsize, padded = struct.unpack_from("<H2xII", head)
                    arch = struct.unpack_from("<I", head, 28)[0]
                    if ehsize < 32 or entry + ehsize + padded > last:
                        return None  # not the layout described above: claim nothing
                    if kind in (_KIND_PTX, _KIND_SASS) and arch:
                        (ptx if kind == _KIND_PTX else sass).add(cc(arch))
                    entry += ehsize + padded
                pos = last
            return (sorted(sass), sorted(ptx)) if sass or ptx else None
    except (OSError, struct.error, ValueError):
        return None


def _elf_section(f, names: tuple[bytes, ...]) -> tuple[int, int]:
    """(file offset, size) of the first section called one of ``names``; (0, 0) when none."""
    ident = f.read(64)
    if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:  # ELF64, little-endian
        return 0, 0
    shoff, = struct.unpack_from("<Q", ident, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", ident, 0x3A)
    f.seek(shoff)
    table = f.read(shentsize * shnum)
    sections = [struct.unpack_from("<I4x16xQQ", table, i * shentsize) for i in range(shnum)]
    _, str_off, str_size = sections[shstrndx]
    f.seek(str_off)
    strings = f.read(str_size)
    for name_at, off, size in sections:
        if strings[name_at:strings.index(b"\0", name_at)] in names:
            return off, size
    return 0, 0


@dataclass(frozen=True)
class Build:
    """What is known of the MXNet build in ``library``. ``sass``/``ptx`` are None when its
    kernels are unknown; ``source`` says where they came from."""

    library: str
    name: str | None
    cuda: str | None
    sass: tuple[CC, ...] | None
    ptx: tuple[CC, ...] | None
    source: str

    def label(self) -> str:
        return self.name or self.library

    def archs(self) -> str:
        parts = [sm(c) for c in self.sass or ()] + [f"PTX {cc_str(c)}" for c in self.ptx or ()]
        return ", ".join(parts) or "no kernels"


def distribution(library: str) -> str | None:
    """The pip distribution (mxnet, mxnet-cu117, ...) that installed ``library``, from the
    .dist-info folders beside its package; None for a build from source."""
    site = Path(library).resolve().parent.parent
    for info in sorted(site.glob("mxnet*.dist-info")):
        try:
            meta = (info / "METADATA").read_text("utf-8", "replace")
            record = (info / "RECORD").read_text("utf-8", "replace")
        except OSError:
            continue
        m = re.search(r"^Name:\s*(\S+)", meta, re.M)
        if m and "libmxnet.so" in record:
            return m.group(1).lower().replace("_", "-")
    return None


@functools.lru_cache(maxsize=8)
def _describe(library: str, _mtime: float) -> Build:
    name = distribution(library)
    w = wheel(name.removeprefix("mxnet-")) if name and name.startswith("mxnet-cu") else None
    cuda = w["cuda"] if w else None
    found = read_fatbin(library)
    if found:
        return Build(library, name, cuda, tuple(found[0]), tuple(found[1]),
                     "the kernels in libmxnet.so")
    if w:
        return Build(library, name, cuda, tuple(wheel_sass(w)), (),
                     f"the published architecture list of {w['name']}")
    return Build(library, name, cuda, None, None, "unknown")


def describe_build(library: str) -> Build:
    """The :class:`Build` of the libmxnet.so at ``library`` (cached per file and mtime)."""
    return _describe(str(library), os.path.getmtime(library))


def remedy(card: CC, build: Build) -> str:
    """How to get a build with kernels for ``card`` (gpu.json ``remedy``)."""
    words = SPEC["remedy"]
    fits = [w for w in WHEELS if runs_on(card, wheel_sass(w))]
    if fits:
        w = fits[-1]
        return words["wheel"].format(wheel=w["name"], version=MXNET_VERSION, build=build.label(),
                                     short=w["name"].removeprefix("mxnet-"), cuda=w["cuda"])
    newest = WHEELS[-1]
    top = max(wheel_sass(newest))
    toolkit = TOOLKIT_FOR.get(card)
    needs = (words["needs_toolkit"].format(toolkit=toolkit) if toolkit
             else words["needs_any"].format(sm=sm(card)))
    return words["source"].format(version=MXNET_VERSION, cc=cc_str(card), newest=newest["name"],
                                  top=sm(top), needs=needs, major=top[0])


def unsupported(card_name: str, card: CC, build: Build) -> dict | None:
    """The catalogue fields of ``device.gpu_unsupported`` when ``build`` has no kernels that
    run on ``card``; None when it has, or when its kernels are unknown (nothing claimed)."""
    if build.sass is None and build.ptx is None:
        return None
    if runs_on(card, build.sass or (), build.ptx or ()):
        return None
    return {"card": card_name, "cc": cc_str(card), "build": build.label(),
            "cuda": build.cuda or "unknown", "archs": build.archs(),
            "remedy": remedy(card, build)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 pyprof/gpu.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("wheel", help="print the wheel to install for a driver")
    w.add_argument("--driver-cuda", required=True, help="nvidia-smi's CUDA Version, e.g. 12.4")
    w.add_argument("--want", help="a CUDA build asked for: cu112, 112 or 11.2")
    w.add_argument("--cc", action="append", default=[], help="a GPU's compute capability")
    b = sub.add_parser("build", help="print what is known of a libmxnet.so, as JSON")
    b.add_argument("library")
    o = p.parse_args(argv)
    if o.cmd == "build":
        print(json.dumps(describe_build(o.library).__dict__))
        return 0
    try:
        chosen = choose_wheel(o.driver_cuda, o.want)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    for c in dict.fromkeys(cc(x) for x in o.cc):
        if not runs_on(c, wheel_sass(chosen)):
            built = Build("", chosen["name"], chosen["cuda"], tuple(wheel_sass(chosen)), (), "")
            print(f"warning: {chosen['name']} has no kernels for this GPU's compute capability "
                  f"{cc_str(c)} ({built.archs()}), so MXNet cannot run its GPU operators there; "
                  f"fix: {remedy(c, built)}", file=sys.stderr)
    print(chosen["name"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
