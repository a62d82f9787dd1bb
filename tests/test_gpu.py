"""GPU builds without a GPU: the wheel setup.sh --gpu picks for a driver, the kernels read from
a libmxnet.so, and the one clear error for a card the build has no kernels for."""

from __future__ import annotations

import glob
import shutil
import struct
import subprocess
import sys

import pytest

from child import ROOT
from pyprof.native import capi as _capi
from pyprof import context, gpu
from pyprof.errors import DeviceError


def _fatbin(entries: list[tuple[int, int]]) -> bytes:
    """One fatbin container with (kind, arch) entries laid out as nvcc writes them."""
    body = b""
    for kind, arch in entries:
        payload = b"\xab" * 24
        head = struct.pack("<HHIIIIIII", kind, 0x101, 64, len(payload), 0, len(payload), 0,
                           0x10008, arch)
        body += head.ljust(64, b"\0") + payload
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def _elf(path, sections: dict[bytes, bytes]) -> str:
    """A minimal ELF64 little-endian file holding ``sections`` (name -> bytes)."""
    names = [b""] + list(sections) + [b".shstrtab"]
    strtab = b"".join(n + b"\0" for n in names)
    offsets, data, at = [], b"", 64
    for blob in [*sections.values(), strtab]:
        offsets.append(at + len(data))
        data += blob + b"\0" * (-len(blob) % 8)
    shoff = 64 + len(data)
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x28, shoff)
    struct.pack_into("<HHH", header, 0x3A, 64, len(names), len(names) - 1)
    shdrs = bytes(64)  # the null section
    for i, blob in enumerate([*sections.values(), strtab]):
        name_at = strtab.index(names[i + 1] + b"\0")
        shdrs += struct.pack("<IIQQQQIIQQ", name_at, 1, 0, 0, offsets[i], len(blob), 0, 0, 8, 0)
    path.write_bytes(bytes(header) + data + shdrs)
    return str(path)


def test_fatbin_kernels_are_read_from_the_elf_section(tmp_path):
    lib = _elf(tmp_path / "libmxnet.so", {
        b".text": b"\x90" * 40,
        b".nv_fatbin": _fatbin([(2, 50), (2, 80), (2, 86)]) + b"\0" * 8
        + _fatbin([(2, 86), (1, 86)])})
    assert gpu.read_fatbin(lib) == ([(5, 0), (8, 0), (8, 6)], [(8, 6)])
    # Anything but that layout claims nothing (a partial list could wrongly refuse a card).
    damaged = _elf(tmp_path / "damaged.so", {b".nv_fatbin": _fatbin([(2, 86)]) + b"junk1234"
                                             + _fatbin([(2, 90)])})
    assert gpu.read_fatbin(damaged) is None
    cut = _elf(tmp_path / "cut.so", {b".nv_fatbin": _fatbin([(2, 86), (2, 90)])[:-40]})
    assert gpu.read_fatbin(cut) is None
    cpu_build = _elf(tmp_path / "cpu.so", {b".text": b"\x90" * 8})
    assert gpu.read_fatbin(cpu_build) is None
    (tmp_path / "not-elf.so").write_bytes(b"hello")
    assert gpu.read_fatbin(str(tmp_path / "not-elf.so")) is None


def _nvcc() -> str | None:
    return shutil.which("nvcc") or next(iter(sorted(glob.glob("/usr/local/cuda*/bin/nvcc"))), None)


@pytest.mark.skipif(_nvcc() is None, reason="no CUDA toolkit (nvcc) on this machine")
def test_fatbin_reader_agrees_with_what_nvcc_built(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n"
                   "extern \"C\" void launch(float* x) { k<<<1, 32>>>(x); }\n")
    lib = tmp_path / "libk.so"
    proc = subprocess.run([_nvcc(), "-shared", "-Xcompiler", "-fPIC", "-o", str(lib), str(src),
                           "-gencode", "arch=compute_80,code=sm_80",
                           "-gencode", "arch=compute_86,code=compute_86"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert gpu.read_fatbin(str(lib)) == ([(8, 0)], [(8, 6)])


def test_the_wheel_for_a_driver_is_the_newest_it_runs():
    assert gpu.choose_wheel("12.4")["name"] == "mxnet-cu117"
    assert gpu.choose_wheel("11.4")["name"] == "mxnet-cu114"
    assert gpu.choose_wheel("11.0")["name"] == "mxnet-cu110"
    assert gpu.choose_wheel("12.4", "cu112")["name"] == "mxnet-cu112"
    assert gpu.choose_wheel("12.4", "11.2")["name"] == "mxnet-cu112"
    assert gpu.choose_wheel("12.4", "mxnet-cu102")["name"] == "mxnet-cu102"
    with pytest.raises(ValueError, match="update the NVIDIA driver"):
        gpu.choose_wheel("10.0")
    with pytest.raises(ValueError, match=r"mxnet-cu117 needs a driver for CUDA 11\.7"):
        gpu.choose_wheel("11.2", "cu117")
    with pytest.raises(ValueError, match="no MXNet 1.9.1 build for CUDA 'cu118'"):
        gpu.choose_wheel("12.4", "cu118")


def test_kernel_compatibility_rules():
    sass86 = [(5, 0), (6, 0), (7, 0), (8, 0), (8, 6)]
    assert gpu.runs_on((8, 9), sass86)  # SASS 8.6 runs on 8.9: same major, newer minor
    assert gpu.runs_on((7, 5), sass86)  # SASS 7.0
    assert not gpu.runs_on((9, 0), sass86)  # no SASS of major 9, no PTX
    assert gpu.runs_on((9, 0), sass86, [(8, 6)])  # PTX is compiled by the driver
    assert not gpu.runs_on((8, 0), [(8, 6)])
    assert gpu.cc("90") == gpu.cc(90) == gpu.cc("9.0") == (9, 0)
    assert gpu.cc(100) == (10, 0) and gpu.cc("8.6") == (8, 6)


def _wheel_build(name: str, ptx=()) -> gpu.Build:
    w = gpu.wheel(name)
    return gpu.Build("/x/libmxnet.so", w["name"], w["cuda"], tuple(gpu.wheel_sass(w)), ptx, "t")


def test_unsupported_names_the_card_the_build_and_the_fix():
    f = gpu.unsupported("NVIDIA H200", (9, 0), _wheel_build("cu117"))
    assert f["card"] == "NVIDIA H200" and f["cc"] == "9.0"
    assert f["build"] == "mxnet-cu117" and f["cuda"] == "11.7"
    assert f["archs"] == "sm_50, sm_60, sm_70, sm_80, sm_86"
    assert "no MXNet 1.9.1 wheel has kernels for compute capability 9.0" in f["remedy"]
    assert "CUDA 11.8 or newer" in f["remedy"] and "MXNET_CUDA_ARCH=9.0" in f["remedy"]
    # A newer wheel has kernels for the card: the fix is that wheel.
    f = gpu.unsupported("NVIDIA A100", (8, 0), _wheel_build("cu102"))
    assert f["remedy"].startswith("install mxnet-cu117==1.9.1 in place of mxnet-cu102")
    assert "scripts/setup.sh --gpu cu117" in f["remedy"]
    # Supported: nothing to say. Unknown kernels (a build from source): nothing claimed.
    assert gpu.unsupported("NVIDIA L4", (8, 9), _wheel_build("cu117")) is None
    assert gpu.unsupported("NVIDIA H200", (9, 0), _wheel_build("cu117", ((8, 6),))) is None
    unknown = gpu.Build("/x/libmxnet.so", None, None, None, None, "unknown")
    assert gpu.unsupported("NVIDIA H200", (9, 0), unknown) is None


def _fake_site(tmp_path, dist: str) -> str:
    """site-packages with mxnet/libmxnet.so (no kernels readable) installed by ``dist``."""
    pkg = tmp_path / "site" / "mxnet"
    pkg.mkdir(parents=True)
    (pkg / "libmxnet.so").write_bytes(b"not an ELF file")
    info = tmp_path / "site" / f"{dist.replace('-', '_')}-1.9.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.9.1\n")
    (info / "RECORD").write_text("mxnet/libmxnet.so,sha256=x,15\n")
    return str(pkg / "libmxnet.so")


def test_check_context_refuses_a_card_the_build_has_no_kernels_for(tmp_path, monkeypatch):
    lib = _fake_site(tmp_path, "mxnet-cu117")
    assert gpu.distribution(lib) == "mxnet-cu117"
    monkeypatch.setattr(_capi, "gpu_count", lambda: 1)
    monkeypatch.setattr(_capi, "library_path", lambda: lib)
    monkeypatch.setattr(_capi, "cuda_device", lambda i: ("NVIDIA H200", 9, 0))
    with pytest.raises(DeviceError) as e:
        context.check_context("gpu", 0)
    msg = str(e.value)
    assert e.value.code == "device.gpu_unsupported"
    assert "\n" not in msg
    assert msg.startswith("GPU 0 is NVIDIA H200 (compute capability 9.0), but this MXNet build "
                          "(mxnet-cu117, CUDA 11.7) has no kernels for it (sm_50, sm_60, sm_70, "
                          "sm_80, sm_86)")
    assert "no kernel image is available" in msg
    assert "fix: no MXNet 1.9.1 wheel has kernels for compute capability 9.0" in msg
    assert msg.endswith("; or use --ctx cpu")
    # The escape hatch, and a card the wheel has kernels for.
    monkeypatch.setenv("PYPROF_GPU_ARCH_CHECK", "0")
    context.check_context("gpu", 0)
    monkeypatch.delenv("PYPROF_GPU_ARCH_CHECK")
    monkeypatch.setattr(_capi, "cuda_device", lambda i: ("NVIDIA A100-SXM4-80GB", 8, 0))
    context.check_context("gpu", 0)
    # No driver to ask (cuda_device None): nothing claimed.
    monkeypatch.setattr(_capi, "cuda_device", lambda i: None)
    context.check_context("gpu", 0)


def test_no_driver_means_no_card():
    # This machine has no NVIDIA driver; with one, the answer is the card's name and numbers.
    card = _capi.cuda_device(0)
    assert card is None or (isinstance(card[0], str) and card[1] >= 3)


def test_gpu_py_runs_on_the_system_python_before_the_venv_exists():
    py = shutil.which("python3") or sys.executable
    run = lambda *a: subprocess.run([py, str(ROOT / "pyprof" / "gpu.py"), *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=60, cwd="/")
    p = run("wheel", "--driver-cuda", "12.4")
    assert p.returncode == 0 and p.stdout == "mxnet-cu117\n" and p.stderr == ""
    p = run("wheel", "--driver-cuda", "12.4", "--cc", "9.0")
    assert p.returncode == 0 and p.stdout == "mxnet-cu117\n"
    assert p.stderr.count("\n") == 1 and "no kernels for this GPU's compute capability 9.0" \
        in p.stderr
    p = run("wheel", "--driver-cuda", "9.2")
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1


def test_kernels_are_read_only_on_the_gpu_path(monkeypatch):
    """Reading libmxnet.so (over 1 GB in a CUDA build) happens only for a GPU context: never at
    ``import pyprof``, never for a CPU context."""
    code = ("import sys, pyprof; print(sorted(m for m in ('pyprof.gpu', 'pyprof.context', "
            "'pyprof.trace', 'numpy') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout == "[]\n", p.stderr
    monkeypatch.setattr(gpu, "read_fatbin", lambda path: pytest.fail("read on a CPU path"))
    monkeypatch.setattr(_capi, "cuda_device", lambda i: pytest.fail("driver asked on a CPU path"))
    context.check_context("cpu", 0)
