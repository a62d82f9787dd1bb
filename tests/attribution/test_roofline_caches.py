"""Roofs for a group's working set (issue 34 item 6): ``pyprof peaks`` lists cpu0's caches from
sysfs and measures the copy bandwidth at L2- and L3-sized working sets; the roofline holds each
group to the best bandwidth measured at a working set holding its own (bytes per call), names
that roof, and marks a group above it with a note: likely cache residency when its working set
fits a cache whose bandwidth was not measured at that size, else counts or load. Exact values
on synthetic peaks and traces (no timing asserted); one real ``pyprof peaks`` run is checked
for its structure only (under load an L2 copy can measure below DRAM's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyprof import trace  # noqa: F401 - pyprof.trace before pyprof.attribution.roofline
from pyprof.attribution import peaks as P
from pyprof.attribution import roofline as R

from tests.attribution.test_roofline import _synthetic

KIB, MIB = 1 << 10, 1 << 20
L1D = P.Cache("L1d", 1, 48 * KIB)
L2 = P.Cache("L2", 2, 1 * MIB, 256 * KIB, 30.0)  # measured at a 512 KiB working set
L3 = P.Cache("L3", 3, 32 * MIB, 8 * MIB, 20.0)  # measured at 16 MiB
# GEMM 100 GFLOP/s, MXNet dot 40, DRAM copy 10 GB/s
PEAKS = P.Peaks(100.0, 10.0, 40.0, {1024: 100.0}, {1024: 40.0}, 64 * MIB, 1.0, (L1D, L2, L3))
NO_CACHES = P.Peaks(100.0, 10.0, 40.0, {1024: 100.0}, {1024: 40.0}, 64 * MIB, 1.0)
COUNTS = "a FLOP or byte count too high, or peaks measured under load"


def _sysfs(root: Path, entries: dict[str, tuple[str, str, str]]) -> Path:
    for name, (level, kind, size) in entries.items():
        d = root / name
        d.mkdir(parents=True)
        for key, v in (("level", level), ("type", kind), ("size", size)):
            if v is not None:
                (d / key).write_text(v + "\n")
    return root


def test_caches_are_read_from_sysfs(tmp_path):
    root = _sysfs(tmp_path / "a", {"index0": ("1", "Data", "48K"), "index1": ("1", "Instruction", "32K"),
                                   "index2": ("2", "Unified", "1024K"), "index3": ("3", "Unified", "32M"),
                                   "index4": ("4", "Unified", None)})  # no size: left out
    assert P.read_caches(root) == (P.Cache("L1d", 1, 48 * KIB), P.Cache("L2", 2, MIB),
                                   P.Cache("L3", 3, 32 * MIB))
    assert P.read_caches(_sysfs(tmp_path / "b", {"index0": ("2", "Unified", "512K")})) == (
        P.Cache("L2", 2, 512 * KIB),)  # a level not split has no d
    assert P.read_caches(tmp_path / "missing") == ()


@pytest.mark.parametrize("working_set, roof, note", [
    # fits L1d, never measured: the best roof holding it is L2's, and the note names L1d
    (40_000, ("L2", 30.0), "likely cache residency: its 39.1 KiB working set fits L1d (48 KiB), "
                           "whose bandwidth pyprof peaks did not measure; its roof is L2's 30.0 GB/s"),
    (512 * KIB, ("L2", 30.0), COUNTS),  # L2's measured working set, exactly
    # fits L2 (1 MiB) but over the 512 KiB it was measured at: L3's roof
    (800_000, ("L3", 20.0), "likely cache residency: its 781 KiB working set fits L2 (1 MiB), whose "
                            "bandwidth pyprof peaks measured at 512 KiB only; its roof is L3's 20.0 GB/s"),
    (16 * MIB, ("L3", 20.0), COUNTS),
    (20 * MIB, ("DRAM", 10.0), "likely cache residency: its 20 MiB working set fits L3 (32 MiB), whose "
                               "bandwidth pyprof peaks measured at 16 MiB only; its roof is DRAM's 10.0 GB/s"),
    (40 * MIB, ("DRAM", 10.0), COUNTS),  # fits no cache
])
def test_the_memory_roof_and_the_note_of_a_working_set(working_set, roof, note):
    assert R.memory_roof(working_set, PEAKS) == roof
    assert R.above_note(working_set, "memory", *roof, PEAKS) == note
    assert R.above_note(working_set, "compute", *roof, PEAKS) == COUNTS  # caches cannot explain it


def test_the_best_roof_holding_a_working_set_wins_over_a_cache_measured_low():
    # under load an L3 copy can measure below DRAM's: the roof is an upper bound, DRAM's then
    low = P.Peaks(100.0, 10.0, None, {}, {}, 64 * MIB, 1.0, (L1D, L2, P.Cache("L3", 3, 32 * MIB, 8 * MIB, 5.0)))
    assert R.memory_roof(MIB, low) == ("DRAM", 10.0)
    assert R.memory_roof(100_000, low) == ("L2", 30.0)
    assert R.memory_roof(MIB, NO_CACHES) == ("DRAM", 10.0)
    assert R.above_note(MIB, "memory", "DRAM", 10.0, NO_CACHES) == (
        "a FLOP or byte count too high, peaks measured under load, or cache residency (the peaks "
        "list no caches: sysfs had none, or an older pyprof peaks wrote them)")


# (name, dur us, flops, bytes) per call; two calls each: the working set is a call's bytes
GROUPS = [("Activation", 80, 180_000, 1_440_000),  # 1.4 MB, 18 GB/s: under L3's 20, 2x DRAM's
          ("relu", 1, 5_000, 40_000),               # 39 KiB, 40 GB/s: over L2's 30, fits L1d
          ("exp", 20, 100_000, 800_000),            # 781 KiB, 40 GB/s: 2x L3's 20, fits L2
          ("add", 2000, 5_000_000, 40_000_000),     # 38 MiB, 20 GB/s: 2x DRAM's
          ("dot", 200, 10_000_000, 60_000)]         # compute-bound, 50 GFLOP/s: 1.25x MXNet's 40


def test_each_group_is_held_to_the_roof_of_its_working_set_and_marked_above_it(tmp_path):
    path = _synthetic(tmp_path / "s.json", [g for g in GROUPS for _ in range(2)])
    r = R.roofline(path, tmp_path / "s.png", peaks=PEAKS, top=0)
    by = {p.group.name: p for p in r.points}
    assert {n: (p.group.count, p.working_set, p.bound, p.memory, p.memory_gbs) for n, p in by.items()} == {
        "Activation": (2, 1_440_000, "memory", "L3", 20.0), "relu": (2, 40_000, "memory", "L2", 30.0),
        "exp": (2, 800_000, "memory", "L3", 20.0), "add": (2, 40_000_000, "memory", "DRAM", 10.0),
        "dot": (2, 60_000, "compute", "L2", 30.0)}
    assert by["Activation"].roof_gflops == pytest.approx(2.5) and by["Activation"].roof_pct == pytest.approx(90.0)
    assert by["relu"].roof_gflops == pytest.approx(3.75) and by["exp"].roof_gflops == pytest.approx(2.5)
    assert by["add"].roof_gflops == pytest.approx(1.25) and by["dot"].roof_gflops == 40.0
    # most over first: exp 2.0x, add 2.0x (ties by time order), relu 1.33x, dot 1.25x
    assert [p.group.name for p in r.above()] == ["add", "exp", "relu", "dot"]
    notes = {p.group.name: p.note for p in r.above()}
    assert notes["relu"].startswith("likely cache residency: its 39.1 KiB working set fits L1d (48 KiB)")
    assert notes["exp"].startswith("likely cache residency: its 781 KiB working set fits L2 (1 MiB)")
    assert notes["add"] == notes["dot"] == COUNTS
    d = {g["name"]: g for g in r.as_dict()["groups"]}
    assert d["Activation"]["above"] is False and d["Activation"]["above_note"] is None
    assert d["relu"]["above"] is True and d["relu"]["above_note"] == notes["relu"]
    assert (d["exp"]["memory_roof"], d["exp"]["memory_gbs"], d["exp"]["working_set"]) == ("L3", 20.0, 800_000)
    assert [g["name"] for g in r.as_dict()["above"]] == ["add", "exp", "relu", "dot"]
    assert r.as_dict()["peaks"]["caches"][1] == {"name": "L2", "level": 2, "size": MIB,
                                                 "copy_bytes": 256 * KIB, "gbs": 30.0}
    text = R.render(r)
    assert text.startswith("roofs: numpy GEMM 100.0 GFLOP/s, MXNet dot 40.0 GFLOP/s, copy 10.0 GB/s, "
                           "L2 (1 MiB) 30.0 GB/s, L3 (32 MiB) 20.0 GB/s (measured in 1.0 s)")
    rows = {line.split()[0]: line.rstrip() for line in text.splitlines()
            if line.split() and line.split()[0] in by and "x2 " in line and ":" not in line}
    assert {n: row.endswith(R.ABOVE_MARK) for n, row in rows.items()} == {
        "Activation": False, "relu": True, "exp": True, "add": True, "dot": True}
    assert "memory (L3)" in rows["Activation"] and "compute (MXNet dot)" in rows["dot"]
    section = text.split("above the roof (4 groups over 1.1x):\n")[1].split("\n\n")[0].splitlines()
    assert section == ["  " + R.above_text(p) for p in r.above()]
    assert section[0] == (f"  add 2000x2: 2.00x of its roof 1.250 GFLOP/s (memory, DRAM 10.0 GB/s; "
                          f"38.1 MiB a call): {COUNTS}")
    assert section[3] == (f"  dot 200x2: 1.25x of its roof 40.000 GFLOP/s (compute, MXNet dot; "
                          f"58.6 KiB a call): {COUNTS}")
    # the case: the 1.4 MB Activation against the DRAM roof alone is above, and says the
    # peaks list no caches
    old = R.roofline(path, tmp_path / "o.png", peaks=NO_CACHES, top=0)
    act = next(p for p in old.points if p.group.name == "Activation")
    assert act.memory == "DRAM" and act.roof_pct == pytest.approx(180.0) and act in old.above()
    assert "the peaks list no caches" in act.note


def test_caches_round_trip_through_a_peaks_file_and_an_older_file_has_none(tmp_path):
    f = tmp_path / "p.json"
    f.write_text(json.dumps(PEAKS.as_dict()))
    assert P.read_peaks(f) == PEAKS
    old = PEAKS.as_dict()
    del old["caches"]
    f.write_text(json.dumps(old))
    assert P.read_peaks(f) == NO_CACHES
    for bad in ([{"name": "L2", "level": 2, "size": 0, "gbs": 1.0}], [{"name": "L2", "level": 2,
                 "size": 1024, "gbs": -1}], {"L2": 1}, [["L2"]]):
        f.write_text(json.dumps({**old, "caches": bad}))
        with pytest.raises(Exception) as e:
            P.read_peaks(f)
        assert getattr(e.value, "code", None) == "roofline.bad_peaks" and "caches is not" in str(e.value)


def test_pyprof_peaks_measures_the_caches_sysfs_lists():
    run = subprocess.run([sys.executable, "-m", "pyprof", "peaks", "--budget", "1", "--no-mxnet",
                          "--format", "json"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    d = json.loads(run.stdout)
    listed = P.read_caches()
    assert [(c["name"], c["level"], c["size"]) for c in d["caches"]] == [
        (c.name, c.level, c.size) for c in listed]
    if os.path.isdir(P.SYSFS_CACHES) and any(c.level == 2 for c in listed):
        assert {c["name"] for c in d["caches"] if c["gbs"] is not None} >= {"L2"}
    for c in d["caches"]:  # structure only: no ordering of bandwidths (the machine is shared)
        if c["level"] in P.CACHE_LEVELS:
            assert c["gbs"] > 0 and c["copy_bytes"] == c["size"] // 4
        else:
            assert c["gbs"] is None and c["copy_bytes"] == 0
    assert d["copy_gbs"] > 0 and d["copy_bytes"] >= 64 * MIB
    assert d["copy_bytes"] >= 2 * max((c.size for c in listed), default=0)
    assert P._parse(run.stdout.encode()).caches == tuple(
        P.Cache(c["name"], c["level"], c["size"], c["copy_bytes"], c["gbs"]) for c in d["caches"])
