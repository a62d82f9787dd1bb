"""The device check behind scripts/gpu-check.sh: the GPU path end to end, with a summary.

``run OUTDIR [--dry-run] [--budget S]`` runs the steps of STEPS in order, each as the shell
command it lists (logged to OUTDIR/logs/ID.log), checks what each wrote, and writes
OUTDIR/summary.json and OUTDIR/summary.md. With ``--dry-run`` nothing runs: the steps and
their commands are listed and the same summary is written, every step "planned". That
needs no GPU and no pyprof (the system python3 will do).

The other subcommands are steps themselves (``probe``, ``memory``, ``parity``); they run
in the .venv and import pyprof.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = ".venv/bin/python"
LIBMXNET = f"$({PY} -c 'import pyprof.native.capi as c; print(c.library_path())')"
N = 4096
MATMUL = f"--size {N} --iters 3 --begin 1 --end 2"  # one steady-state profiled iteration
CHECK = "scripts/gpu_check.py"


@dataclass
class Step:
    id: str
    title: str
    command: str
    timeout: int
    status: str = "planned"
    seconds: float | None = None
    details: dict = field(default_factory=dict)
    log: str | None = None


def _lein(out: str, gpu: bool) -> str:
    """The seed example (examples/matmul, unchanged) under `lein run`, its gpu? set."""
    expr = ("(require 'profiler.core 'org.apache.clojure-mxnet.profiler) "
            f"(alter-var-root #'profiler.core/gpu? (constantly {str(gpu).lower()})) "
            f"(alter-var-root #'profiler.core/output-path (constantly \\\"{out}\\\")) "
            "(profiler.core/run) (org.apache.clojure-mxnet.profiler/dump-profile)")
    return (f'export MXNET_LIBRARY_PATH="{LIBMXNET}" && cd examples/matmul && '
            f'lein run -m clojure.main -e "{expr}"')


def steps(out: Path) -> list[Step]:
    o = shlex.quote(str(out))

    def matmul(ctx: str, binding: str) -> str:
        name = f"dot-{ctx}-{binding}"
        dev = " --ctx gpu --device-id 0" if ctx == "gpu" else ""
        return (f"PYPROF_RESULT_JSON={o}/{name}.result.json .venv/bin/pyprof matmul {MATMUL}"
                f"{dev} --binding {binding} --output {o}/{name}.json")

    def bench(ctx: str) -> str:
        return (f".venv/bin/pyprof bench --ctx {ctx} --category gemm --runs 10 --warmup 2 "
                f"--no-progress --output-file {o}/bench-gemm-{ctx}.json")

    return [
        Step("driver", "the NVIDIA driver and GPUs",
             "nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.total "
             "--format=csv,noheader && nvidia-smi | grep 'CUDA Version'", 30),
        Step("context", "the MXNet build in .venv sees gpu(0) and has kernels for it",
             f"{PY} {CHECK} probe {o}/probe.json", 60),
        Step("dot-gpu-python", f"dot {N}x{N} on gpu(0), Python binding",
             matmul("gpu", "python"), 120),
        Step("dot-gpu-jvm", f"dot {N}x{N} on gpu(0), JVM layer through the bridge",
             matmul("gpu", "jvm"), 150),
        Step("dot-gpu-lein", f"dot {N}x{N} on gpu(0), the seed example under lein run (gpu? true)",
             _lein(f"{out}/lein-gpu", True), 240),
        Step("memory-gpu", "GPU memory profiling: per-device memory and the GPU memory dump file",
             f"{PY} {CHECK} memory {o}/memory", 120),
        Step("parity-gpu", "the Python and JVM traces of the GPU dot record the same events",
             f"{PY} {CHECK} parity {o}/dot-gpu-python.json {o}/dot-gpu-jvm.json", 60),
        Step("bench-gemm-gpu", "pyprof bench, gemm category, on gpu", bench("gpu"), 180),
        Step("dot-cpu-python", "the CPU figure: Python binding", matmul("cpu", "python"), 120),
        Step("dot-cpu-jvm", "the CPU figure: JVM layer through the bridge",
             matmul("cpu", "jvm"), 150),
        Step("dot-cpu-lein", "the CPU figure: the seed example under lein run (gpu? false)",
             _lein(f"{out}/lein-cpu", False), 240),
        Step("bench-gemm-cpu", "pyprof bench, gemm category, on cpu (beside the GPU's)",
             bench("cpu"), 180),
    ]


# ---- checks of what each step wrote -------------------------------------------------------

def _dot_trace(trace: Path, device: str) -> dict:
    """The dot's B/E pairs in ``trace``, asserting exactly one, on ``device`` (gpu/0, cpu/0)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from child import load_trace, operator_pairs

    events = load_trace(trace)
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    pairs = operator_pairs(events, ("dot", "[dot]"))
    devices = sorted({names.get(b["pid"], "?") for b, _ in pairs})
    assert len(pairs) == 1, f"{trace.name}: {len(pairs)} profiled dot(s), expected 1"
    assert devices == [device], f"{trace.name}: the dot ran on {devices}, expected {device}"
    b, e = pairs[0]
    ms = (e["ts"] - b["ts"]) / 1000.0
    return {"dot_name": b["name"], "dot_calls": 1, "device": device, "dot_ms": ms,
            "gflops": 2.0 * N ** 3 / (ms / 1e3) / 1e9 if ms > 0 else None}


def check_step(s: Step, out: Path) -> None:
    """Fill ``s.details`` from the files the step wrote; AssertionError when they are wrong."""
    if s.id == "driver":
        return
    if s.id == "context":
        probe = json.loads((out / "probe.json").read_text())
        s.details = probe
        assert probe["context"] == "ok", probe["context"]
        return
    if s.id.startswith("dot-"):
        _, ctx, binding = s.id.split("-")
        device = f"{ctx}/0"
        if binding == "lein":
            trace = out / f"lein-{ctx}" / "profile-matmul-20iter.json"
            s.details = {**_dot_trace(trace, device), "trace": str(trace),
                         "profiled": "iteration 0 of 5, with warm-up (the seed's choice)"}
            return
        r = json.loads((out / f"{s.id}.result.json").read_text())
        s.details = {**_dot_trace(out / f"{s.id}.json", device), "trace": r["trace"],
                     "gflops": r["gflops"], "wall_gflops": r["wall_gflops"],
                     "dot_ms": r["dot_ms"], "profiled": "iteration 1 of 3"}
        assert r["dot_calls"] == 1 and r["gflops"], r
        return
    if s.id == "memory-gpu":
        s.details = json.loads((out / "memory" / "memory.json").read_text())
        return
    if s.id == "parity-gpu":
        s.details = json.loads((out / "parity.json").read_text())
        return
    if s.id.startswith("bench-"):
        doc = json.loads((out / f"{s.id}.json").read_text())
        rows = [{"operator": r["operator"], "inputs": r.get("inputs"), "status": r["status"],
                 "forward_median_ms": (r.get("forward") or {}).get("median_ms"),
                 "backward_median_ms": (r.get("backward") or {}).get("median_ms"),
                 "memory_device": (r.get("memory") or {}).get("device")} for r in doc["results"]]
        s.details = {"cases": rows, "summary": doc.get("summary")}
        bad = [r["operator"] for r in rows if r["status"] != "ok"]
        assert rows and not bad, f"cases not ok: {bad}"


# ---- the step subcommands ------------------------------------------------------------------

def probe(path: Path) -> int:
    """The build and the gpu(0) context: what pyprof and MXNet say, as JSON at ``path``."""
    from pyprof.native import capi as _capi
    from pyprof import context, gpu

    lib = _capi.library_path()
    data = {"library": lib, "build": asdict(gpu.describe_build(lib)),
            "gpu_count": _capi.gpu_count(), "card": _capi.cuda_device(0),
            "gpu_memory_profile_filename_prefix": _knows_prefix_key(lib)}
    try:
        context.check_context("gpu", 0)
        import mxnet as mx
        data["cuda_feature"] = mx.runtime.Features().is_enabled("CUDA")
        x = mx.nd.ones((4, 4), ctx=mx.gpu(0))
        data["kernel_ran"] = float((x * 2).sum().asscalar()) == 32.0
        data["context"] = "ok" if data["kernel_ran"] else "a GPU kernel gave a wrong result"
    except Exception as exc:  # noqa: BLE001 - recorded: the step fails with it
        data["context"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        data["error_code"] = getattr(exc, "code", None)
    path.write_text(json.dumps(data, indent=1))
    print(json.dumps(data, indent=1))
    return 0 if data["context"] == "ok" else 1


def _knows_prefix_key(lib: str) -> bool:
    """Whether libmxnet declares the profiler key gpu_memory_profile_filename_prefix (MXNet's
    GPU memory profiler, apache/mxnet#17656): dmlc parameter names are strings in the binary."""
    import mmap

    with open(lib, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(b"gpu_memory_profile_filename_prefix\0") >= 0


def memory(outdir: Path, kind: str = "gpu") -> int:
    """Profile memory on gpu(0) (``kind`` cpu: the same on cpu(0), to try this code without a
    GPU): three 4096x4096 float32 arrays made while recording."""
    import mxnet as mx

    import pyprof.trace
    from pyprof.native import capi as _capi
    from pyprof import profiler

    outdir.mkdir(parents=True, exist_ok=True)
    trace = outdir / "memory-trace.json"
    prefix = outdir / "gpu_memory_profile"
    cfg = dict(profile_memory=True, profile_symbolic=True, profile_imperative=True,
               profile_api=False, filename=str(trace), aggregate_stats=True,
               continuous_dump=False)
    knows = _knows_prefix_key(_capi.library_path())
    # That key is not among MXNet 1.9.1's (pyprof's spec): a build that has it is driven
    # through MXNet's own front end, which pyprof's gate still covers.
    prof = mx.profiler if knows else profiler
    prof.set_config(**cfg, **({"gpu_memory_profile_filename_prefix": str(prefix)} if knows else {}))
    prof.set_state("run")
    ctx = mx.gpu(0) if kind == "gpu" else mx.cpu(0)
    dev = f"{kind}/0"
    a = mx.nd.random.uniform(-1, 1, (N, N), ctx=ctx)
    b = mx.nd.random.uniform(-1, 1, (N, N), ctx=ctx)
    c = mx.nd.dot(a, b)
    c.wait_to_read()
    del a, b, c
    mx.nd.waitall()
    prof.set_state("stop")
    prof.dump()
    table = prof.dumps()
    (outdir / "aggregate-stats.txt").write_text(table)
    mem = [asdict(m) for m in pyprof.trace.stats(str(trace), progress=False).memory]
    dumps = sorted(str(p) for p in outdir.glob("gpu_memory_profile*"))
    here = [m for m in mem if m["device"] == dev]
    problems = []
    if not here or here[0]["max_bytes"] < 3 * 4 * N * N:
        problems.append(f"no 'Memory: {dev}' high-water mark of 3 arrays in the trace: {mem}")
    if f"Memory: {dev}" not in table:
        problems.append(f"MXNet's aggregate table has no 'Memory: {dev}' row")
    if knows and not dumps:
        problems.append(f"no GPU memory dump file {prefix}-pid_*.csv")
    data = {"trace": str(trace), "memory": mem,
            "aggregate_table_row": f"Memory: {dev}" in table,
            "gpu_memory_profile_filename_prefix": knows, "dump_files": dumps,
            "dump_file_note": None if knows else (
                "this MXNet build has no gpu_memory_profile_filename_prefix key (MXNet's GPU "
                "memory profiler, apache/mxnet#17656, is not in 1.9.1): no dump file to check"),
            "problems": problems}
    (outdir / "memory.json").write_text(json.dumps(data, indent=1))
    print(json.dumps(data, indent=1))
    return 1 if problems else 0


def parity(py_trace: Path, jvm_trace: Path) -> int:
    """The two traces hold the same multiset of (name, category, phase) events, metadata set
    aside (the rule of tests/test_parity.py)."""
    from collections import Counter

    sys.path.insert(0, str(ROOT / "tests"))
    from child import load_trace

    def events(p):
        return Counter(f"{e.get('name')}|{e.get('cat')}|{e['ph']}" for e in load_trace(p)
                       if e["ph"] != "M")
    a, b = events(py_trace), events(jvm_trace)
    data = {"python": dict(a), "jvm": dict(b), "same": a == b,
            "only_python": dict(a - b), "only_jvm": dict(b - a)}
    (py_trace.parent / "parity.json").write_text(json.dumps(data, indent=1))
    print(json.dumps(data, indent=1))
    return 0 if a == b and a else 1


# ---- the run and its summary ---------------------------------------------------------------

def run(out: Path, dry_run: bool, budget: float) -> int:
    if any(c in str(out) for c in '"$`\\'):
        print(f"gpu-check: OUTDIR {str(out)!r} holds a quote, $, ` or \\; choose a plain path",
              file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    plan = steps(out)
    started, status = time.time(), "dry-run" if dry_run else "passed"
    print(f"gpu-check: {len(plan)} steps{' (dry run: nothing runs)' if dry_run else ''}, "
          f"summary in {out}/summary.md and summary.json")
    blocked = None
    if not dry_run:
        for d in ("lein-gpu", "lein-cpu"):
            (out / d).mkdir(exist_ok=True)
    for i, s in enumerate(plan, 1):
        print(f"{i:2}. {s.id}: {s.title}\n    $ {s.command}", flush=True)
        if dry_run:
            continue
        left = budget - (time.time() - started)
        if blocked or left < 10:
            s.status, s.details = "skipped", {"why": blocked or "time budget spent"}
            print(f"    skipped: {s.details['why']}")
            if not blocked and status == "passed":
                status = "incomplete"  # raise --budget, or run the step's command by hand
            continue
        s.log = str(out / "logs" / f"{s.id}.log")
        t0 = time.time()
        with open(s.log, "w") as log:
            try:
                rc = subprocess.run(["bash", "-c", s.command], cwd=ROOT, stdout=log,
                                    stderr=subprocess.STDOUT,
                                    timeout=min(s.timeout, left)).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        s.seconds = round(time.time() - t0, 1)
        try:
            if s.id == "context" and (out / "probe.json").exists():
                s.details = json.loads((out / "probe.json").read_text())
            assert rc == 0, f"exit {rc}; last lines: {_tail(s.log)}"
            check_step(s, out)
            s.status = "passed"
        except (AssertionError, OSError, KeyError, ValueError) as exc:
            s.status, status = "failed", "failed"
            why = s.details.get("context") if s.id == "context" else None
            s.details = {**s.details, "error": why or str(exc)}
        print(f"    {s.status} in {s.seconds} s" + (f": {s.details['error']}"
                                                     if s.status == "failed" else ""), flush=True)
        if s.id in ("driver", "context") and s.status == "failed":
            code = s.details.get("error_code")
            status = "unsupported" if code == "device.gpu_unsupported" else "failed"
            blocked = f"step {s.id} failed; the GPU path cannot run here"
    write_summary(out, plan, status, dry_run, round(time.time() - started, 1))
    print(f"gpu-check: {status}; {out}/summary.md")
    return 0 if status in ("passed", "dry-run") else 1


def _tail(path: str, n: int = 3) -> str:
    lines = [ln for ln in Path(path).read_text(errors="replace").splitlines() if ln.strip()]
    return " | ".join(lines[-n:])


def write_summary(out: Path, plan: list[Step], status: str, dry_run: bool, seconds: float):
    by = {s.id: s for s in plan}
    figures = []
    for binding in ("python", "jvm", "lein"):
        g, c = by[f"dot-gpu-{binding}"].details, by[f"dot-cpu-{binding}"].details
        figures.append({"binding": binding, "gpu_gflops": g.get("gflops"),
                        "cpu_gflops": c.get("gflops"), "gpu_wall_gflops": g.get("wall_gflops"),
                        "speedup": (g["gflops"] / c["gflops"]) if g.get("gflops")
                        and c.get("gflops") else None})
    doc = {"check": "gpu-check", "schema": 1, "dry_run": dry_run, "status": status,
           "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "seconds": seconds, "host": platform.node(), "size": N,
           "steps": [asdict(s) for s in plan], "dot_gflops": figures}
    (out / "summary.json").write_text(json.dumps(doc, indent=1, default=str))
    fmt = lambda v: "—" if v is None else f"{v:.1f}"  # noqa: E731
    md = [f"# gpu-check: {status}", "",
          f"{'Dry run: nothing ran; the steps below are what a run does. ' if dry_run else ''}"
          f"{len(plan)} steps, {seconds} s, on {doc['host']}. Commands run from the repository "
          "root.", ""]
    probe = by["context"].details
    if probe.get("card") or probe.get("build"):
        b, card = probe.get("build") or {}, probe.get("card") or ["unknown", "?", "?"]
        kernels = ", ".join([f"sm_{x}{y}" for x, y in b.get("sass") or []]
                            + [f"PTX {x}.{y}" for x, y in b.get("ptx") or []]) or "unknown"
        md += [f"GPU 0: {card[0]} (compute capability {card[1]}.{card[2]}). MXNet build: "
               f"{b.get('name') or b.get('library')} (CUDA {b.get('cuda')}), kernels {kernels} "
               f"(from {b.get('source')}).", ""]
    md += ["| # | step | status | s | command |", "|---|---|---|---|---|"]
    for i, s in enumerate(plan, 1):
        extra = f" — {s.details['error']}" if s.details.get("error") else ""
        secs = "" if s.seconds is None else s.seconds
        md.append(f"| {i} | {s.id}: {s.title}{extra} | {s.status} | {secs} | "
                  f"`{s.command.replace('|', chr(92) + '|')}` |")
    md += ["", f"## dot {N}x{N} float32, GFLOP/s from the profiler's operator time", "",
           "| binding | GPU | CPU | GPU/CPU | GPU wall-clock |", "|---|---|---|---|---|"]
    for f in figures:
        md.append(f"| {f['binding']} | {fmt(f['gpu_gflops'])} | {fmt(f['cpu_gflops'])} | "
                  f"{fmt(f['speedup'])} | {fmt(f['gpu_wall_gflops'])} |")
    mem = by["memory-gpu"].details
    if mem:
        md += ["", "## GPU memory", "", f"- per device: {mem.get('memory')}",
               f"- dump files: {mem.get('dump_files')} {mem.get('dump_file_note') or ''}"]
    (out / "summary.md").write_text("\n".join(md) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/gpu_check.py")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("outdir")
    r.add_argument("--dry-run", action="store_true")
    r.add_argument("--budget", type=float, default=290.0, help="seconds for all steps")
    sub.add_parser("probe").add_argument("path")
    m = sub.add_parser("memory")
    m.add_argument("outdir")
    m.add_argument("--ctx", choices=("gpu", "cpu"), default="gpu")
    q = sub.add_parser("parity")
    q.add_argument("python_trace")
    q.add_argument("jvm_trace")
    o = p.parse_args(argv)
    if o.cmd == "run":
        return run(Path(o.outdir).resolve(), o.dry_run, o.budget)
    if o.cmd == "probe":
        return probe(Path(o.path))
    if o.cmd == "memory":
        return memory(Path(o.outdir), o.ctx)
    return parity(Path(o.python_trace), Path(o.jvm_trace))


if __name__ == "__main__":
    sys.exit(main())
