"""Run a profiling scenario in its own child process.

MXNet's profiler is one per process and cannot start a fresh trace session after a
finished dump, so every test that records a session runs it through ``run_scenario``:
the body runs in a fresh interpreter, and whatever it assigns to ``result`` comes back
as JSON. The body may call ``attempt(name, fn)``, which records a pyprof error raised by
``fn`` in the dict ``errors``. Errors in the child surface as an AssertionError carrying its stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import zygote

ROOT = Path(__file__).resolve().parent.parent

#: the flags of a short-lived child JVM (``java ... clojure.main``) a test starts itself, as
#: jvm/test's fast-start-jvm-args and the bridge's PYPROF_JVM_ARGS (tests/conftest.py): C1 only
#: and the serial collector start it with about half the CPU (1.4 s instead of 3.8 s on 2 cores)
FAST_JVM = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]

_PRELUDE = """
import json, os, sys
result = None
errors = {}

def attempt(name, fn):
    \"\"\"Run fn; a pyprof error is recorded as errors[name] = [class name, message].\"\"\"
    import pyprof
    try:
        fn()
    except pyprof.PyprofError as e:
        errors[name] = [type(e).__name__, str(e)]
"""

_EPILOGUE = """
with open(os.environ["PYPROF_CHILD_RESULT"], "w") as _f:
    json.dump(result, _f)
"""


def run_scenario(body: str, workdir: Path, *, env: dict[str, str] | None = None,
                 timeout: float = 300, expect_rc: int | None = 0, fresh: bool = False) -> Any:
    """Execute ``body`` (Python source) in a child interpreter with cwd ``workdir``, forked
    from a warm one (``zygote``) unless ``fresh`` (a test of import order or of first loads).

    Returns the JSON-decoded value of ``result`` set by the body. With ``expect_rc``
    None the completed process is returned instead (for crash tests).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / f"result-{os.getpid()}-{id(body)}.json"
    script = _PRELUDE + textwrap.dedent(body) + _EPILOGUE
    child_env = dict(os.environ)
    child_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), child_env.get("PYTHONPATH", "")])
    child_env["PYPROF_CHILD_RESULT"] = str(out)
    child_env.update(env or {})
    proc = zygote.run(["-c", script], cwd=workdir, env=child_env, timeout=timeout, fresh=fresh)
    if expect_rc is None:
        return proc
    assert proc.returncode == expect_rc, (
        f"child exited {proc.returncode}, expected {expect_rc}\n--- stderr ---\n"
        f"{proc.stderr[-4000:]}\n--- stdout ---\n{proc.stdout[-2000:]}")
    return json.loads(out.read_text()) if out.exists() else None


def run_cli(args: list[str], workdir: Path, *, env: dict[str, str] | None = None,
            timeout: float = 300, fresh: bool = False) -> subprocess.CompletedProcess:
    """Run ``python -m pyprof ARGS`` in a child process (forked from a warm one unless
    ``fresh``: see ``run_scenario``)."""
    child_env = dict(os.environ)
    child_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), child_env.get("PYTHONPATH", "")])
    child_env.update(env or {})
    workdir.mkdir(parents=True, exist_ok=True)
    return zygote.run(["-m", "pyprof", *args], cwd=workdir, env=child_env, timeout=timeout,
                      fresh=fresh)


def cuda_build() -> bool:
    """Whether the MXNet installed here is a CUDA build (an mxnet-cu* wheel, as
    ``scripts/setup.sh --gpu`` installs), read from package metadata without loading it. Tests
    of what a CPU build does with a GPU request skip on it."""
    from importlib import metadata
    return any((d.metadata["Name"] or "").lower().replace("_", "-").startswith("mxnet-cu")
               for d in metadata.distributions())


def load_trace(path: Path) -> list[dict]:
    """The events of a trace file, asserting that it is valid JSON of the object form."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    assert isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list), path
    return doc["traceEvents"]


def device_pids(events: list[dict]) -> set[int]:
    return {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
            and e["args"]["name"].split("/")[0] in ("cpu", "gpu")}


def operator_pairs(events: list[dict], names: tuple[str, ...]) -> list[tuple[dict, dict]]:
    """B/E pairs on device pids whose name is in ``names`` (async b/e copies ignored)."""
    devs = device_pids(events)
    stacks: dict[tuple, list[dict]] = {}
    pairs = []
    for e in events:
        if e.get("pid") not in devs or e.get("name") not in names:
            continue
        key = (e["pid"], e["tid"], e["name"])
        if e["ph"] == "B":
            stacks.setdefault(key, []).append(e)
        elif e["ph"] == "E":
            assert stacks.get(key), f"E without B: {e}"
            pairs.append((stacks[key].pop(), e))
    assert not any(stacks.values()), f"B without E: {stacks}"
    return pairs


#: A real MXNet window whose largest operator by total time is the engine's bookkeeping: the
#: process's one-time ``ResourceParallelRandomSetSeed`` (milliseconds) falls in it, and the
#: first ``wait_to_read`` waits behind it (a ``WaitForVar`` of milliseconds), beside ten tiny
#: dots, additions and relus (microseconds each) and their ``DeleteVariable``s.
BOOKKEEPING_SCRIPT = textwrap.dedent("""
    import sys
    import mxnet as mx
    from mxnet import profiler
    profiler.set_config(filename=sys.argv[1], profile_all=True)
    profiler.set_state('run')
    a = mx.nd.ones((64, 64))
    for _ in range(10):
        b = mx.nd.dot(a, a)
        b.wait_to_read()
        c = (b + 1).relu()
    mx.nd.waitall()
    profiler.set_state('stop')
    profiler.dump()
""")


def bookkeeping_trace(path: Path) -> Path:
    """Write :data:`BOOKKEEPING_SCRIPT`'s trace to ``path`` in a fresh interpreter (not the
    zygote: the one-time seeding must fall in the window) and return ``path``."""
    import sys
    subprocess.run([sys.executable, "-c", BOOKKEEPING_SCRIPT, str(path)], check=True, timeout=120,
                   capture_output=True, cwd=path.parent)
    return path


def zoo_training(model: str, size: int) -> str:
    """Scenario source for one hybridized model-zoo network: ``net`` (``model``, random weights,
    seed 7), an input ``x`` of 1x3x``size``x``size``, its ``label``, and ``train()``, one recorded
    forward, backward and ``waitall``. The body that follows warms it up and profiles it."""
    return f"""
import json, pyprof, mxnet as mx
from mxnet.gluon.model_zoo import vision
mx.random.seed(7)
net = vision.get_model({model!r})
net.initialize()
net.hybridize()
x = mx.nd.random.uniform(shape=(1, 3, {size}, {size}))
label = mx.nd.array([1])
loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()

def train():
    with mx.autograd.record():
        loss = loss_fn(net(x), label)
    loss.backward()
    mx.nd.waitall()
"""
