"""The child process that runs one batch of benchmark cases (``python -m pyprof.bench._worker``).

Why a child process: MXNet's profiler is one per process and cannot start a second trace
session after a finished dump, bulk execution (which merges operator names) is configured when
the engine starts, and an operator that crashes the process must not end the run. The parent
(:mod:`pyprof.bench.runner`) sends a job as JSON on stdin and reads JSON lines from stdout:

``{"begin": id}`` before a case, ``{"ran": id, "wall_s": s}`` after its runs, ``{"result": id,
...}`` with its figures (python engine: at once; native engine: after the trace is read),
``{"done": true}`` at the end. A case whose ``begin`` has no ``result`` when the process dies
is the one that killed it.

The native engine records the whole batch in ONE profiler session. Each case's runs sit inside
two pyprof domain tasks (``<id>/forward``, ``<id>/backward``), started and stopped around every
run, with the engine drained (``waitall``) inside the task. Operator events are attributed to
the task window they begin in; see :mod:`pyprof.bench.native`.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

from ..env import BULK_VARIABLES

# Per-operator names in the trace (no "ImperativeBulk" / "[op]" / "A,B" bulk segments): set
# before libmxnet loads (see pyprof.env.per_operator); a value the user set is kept.
for _name in BULK_VARIABLES:
    os.environ.setdefault(_name, "0")

import numpy as np  # noqa: E402

from .. import profiler  # noqa: E402
from .. import rules  # noqa: E402
from ..objects import Domain, Task  # noqa: E402
from .inputs import Tensor  # noqa: E402
from .native import DOMAIN  # noqa: E402

_NOT_DIFFERENTIABLE = ("non-differentiable", "cannot differentiate", "does not have gradient",
                       "FGradient", "require gradients", "does not require gradient")


class _NoTask:
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def close(self) -> None: ...


def decode(value: Any) -> Any:
    """Job JSON -> Python: tensors back to :class:`Tensor`, lists of ints back to tuples."""
    if isinstance(value, dict) and "__tensor__" in value:
        t = value["__tensor__"]
        return Tensor(tuple(t["shape"]), t["fill"], t["low"], t["high"], t["dtype"], t["grad"])
    if isinstance(value, list):
        items = [decode(v) for v in value]
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items)
        return tuple(items) if items and numbers else items
    return value


def _values(t: Tensor, dtype: str, rng: np.random.Generator) -> np.ndarray:
    shape = t.shape
    if t.fill == "normal":
        a = rng.standard_normal(shape)
    elif t.fill == "int":
        a = rng.integers(int(t.low), int(t.high), shape)
    elif t.fill in ("spd", "lower"):
        n = shape[-1]
        x = rng.uniform(t.low, t.high, shape)
        eye = np.eye(n) * n
        a = x @ np.swapaxes(x, -1, -2) + eye if t.fill == "spd" else np.tril(x) + eye
    elif t.fill == "simplex":
        a = rng.uniform(t.low, t.high, shape)
        a /= a.sum(axis=-1, keepdims=True)
    elif t.fill == "roi":  # [batch index, x1, y1, x2, y2] inside a 64x64 image
        a = np.tile(np.array([0.0, 4.0, 4.0, 40.0, 40.0]), (shape[0], 1))
        a[:, 0] = np.arange(shape[0]) % 4
    else:
        a = rng.uniform(t.low, t.high, shape)
    return a.astype(t.dtype or dtype)


class Case:
    """One operator with one set of inputs, ready to run."""

    def __init__(self, spec: dict[str, Any], job: dict[str, Any], mx: Any):
        self.id = spec["id"]
        self.op = spec["op"]
        self.namespace = spec.get("namespace", "nd")
        self.mx = mx
        ctx = mx.gpu(job["device_id"]) if job["ctx"] == "gpu" else mx.cpu(job["device_id"])
        module = {"nd": mx.nd, "np": mx.np, "npx": mx.npx}[self.namespace]
        self.fn = getattr(module, self.op, None)
        if self.fn is None:
            raise rules.error("bench.no_operator", namespace=self.namespace, op=self.op)
        make = mx.np.array if self.namespace in ("np", "npx") else mx.nd.array
        rng = np.random.default_rng(41)
        want_grad = job["run_backward"]
        self.grads: list[Any] = []

        def array(t: Tensor) -> Any:
            arr = make(_values(t, job["dtype"], rng), ctx=ctx, dtype=t.dtype or job["dtype"])
            if want_grad and t.grad and np.issubdtype(arr.dtype, np.floating):
                arr.attach_grad()
                self.grads.append(arr)
            return arr

        self.args: list[Any] = []
        self.kwargs: dict[str, Any] = {}
        for name, value in ((k, decode(v)) for k, v in spec["inputs"].items()):
            if isinstance(value, Tensor):
                self.kwargs[name] = array(value)
            elif isinstance(value, list) and value and all(isinstance(v, Tensor) for v in value):
                self.args.extend(array(v) for v in value)  # variable-length array argument
            else:
                self.kwargs[name] = value
        self.backward = bool(self.grads)
        self.backward_note: str | None = None if self.backward else (
            "not run: no input takes a gradient" if want_grad else None)

    def forward(self) -> Any:
        if self.backward:
            with self.mx.autograd.record():
                out = self.fn(*self.args, **self.kwargs)
        else:
            out = self.fn(*self.args, **self.kwargs)
        self.mx.nd.waitall()
        return out

    def run_backward(self, out: Any) -> None:
        heads = [o for o in (out if isinstance(out, (list, tuple)) else [out])
                 if np.issubdtype(o.dtype, np.floating)]
        self.mx.autograd.backward(heads)
        self.mx.nd.waitall()

    def probe_backward(self) -> None:
        """Run forward+backward once; turn backward off if the operator has no gradient."""
        out = self.forward()
        if not self.backward:
            return
        try:
            self.run_backward(out)
        except Exception as exc:  # noqa: BLE001 - MXNet raises its own MXNetError
            text = str(exc)
            if any(s.lower() in text.lower() for s in _NOT_DIFFERENTIABLE):
                self.backward = False
                self.backward_note = "not run: the operator is not differentiable"
            else:
                raise _PhaseError("backward", exc) from exc


class _PhaseError(Exception):
    def __init__(self, phase: str, exc: BaseException):
        super().__init__(f"{phase}: {_one_line(exc)}")


def _one_line(exc: BaseException) -> str:
    """``Type: message`` on one line, without Python or C++ stack frames.

    MXNet's messages start with ``Traceback ...`` and ``File "...", line N`` frames and put the
    error (``MXNetError: Check failed: ...``) last.
    """
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    keep = [ln for ln in lines if not ln.startswith(("Traceback", "File \"", "Stack trace", "[bt]"))]
    msg = " ".join(keep) or type(exc).__name__
    if not msg.startswith(("MXNetError", type(exc).__name__)):
        msg = f"{type(exc).__name__}: {msg}"
    return msg[:500]


def run_case(case: Case, job: dict[str, Any], tasks: tuple[Any, Any]) -> dict[str, list[float]]:
    """Warm up, then time ``runs`` forward (and backward) passes. Times in ms (python engine)."""
    case.probe_backward()
    for _ in range(max(job["warmup"] - 1, 0)):
        out = case.forward()
        if case.backward:
            case.run_backward(out)
    fwd_task, bwd_task = tasks
    fwd: list[float] = []
    bwd: list[float] = []
    clock = time.perf_counter
    for _ in range(job["runs"]):
        fwd_task.start()
        t0 = clock()
        out = case.forward()
        t1 = clock()
        fwd_task.stop()
        fwd.append((t1 - t0) * 1e3)
        if case.backward:
            bwd_task.start()
            t0 = clock()
            case.run_backward(out)
            t1 = clock()
            bwd_task.stop()
            bwd.append((t1 - t0) * 1e3)
        del out
        case.mx.nd.waitall()  # the output's storage is freed outside the next window
    return {"forward": fwd, "backward": bwd}


def main() -> int:
    job = json.load(sys.stdin)
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr  # library chatter must not reach the protocol stream

    def send(**msg: Any) -> None:
        out.write(json.dumps(msg) + "\n")

    import mxnet as mx

    native = job["engine"] == "native"
    domain = None
    if native:
        profiler.set_config(filename=job["trace"], profile_imperative=True,
                            profile_symbolic=True, profile_memory=True, profile_api=False,
                            continuous_dump=False, aggregate_stats=False)
        domain = Domain(DOMAIN)
        profiler.set_state("run")
    if any(c.get("namespace", "nd") != "nd" for c in job["cases"]):
        mx.npx.set_np()
    ran: list[dict[str, Any]] = []
    for spec in job["cases"]:
        send(begin=spec["id"])
        t0 = time.perf_counter()
        tasks: tuple[Any, Any] = (_NoTask(), _NoTask())
        record: dict[str, Any] = {"result": spec["id"]}
        try:
            case = Case(spec, job, mx)
            if native:
                tasks = (Task(domain, f"{spec['id']}/forward"), Task(domain, f"{spec['id']}/backward"))
            samples = run_case(case, job, tasks)
            record.update(status="ok", backward=case.backward, backward_note=case.backward_note)
            if not native:
                record["samples_ms"] = samples
        except Exception as exc:  # noqa: BLE001 - every failure is recorded, the batch goes on
            record.update(status="failed", error=_one_line(exc) if not isinstance(exc, _PhaseError)
                          else str(exc))
            if os.environ.get("PYPROF_BENCH_DEBUG"):
                traceback.print_exc()
        finally:
            for t in tasks:
                t.close()
            case = None  # free the inputs before the next case
            mx.nd.waitall()
        send(ran=spec["id"], wall_s=time.perf_counter() - t0)
        if native:
            ran.append(record)
        else:
            send(**record)
    if native:
        profiler.set_state("stop")
        profiler.dump(True)
        send(trace_written=job["trace"])
        for record in ran:
            send(**record)
    send(done=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
