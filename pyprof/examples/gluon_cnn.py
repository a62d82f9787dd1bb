"""Train the small CNN of MXNet's profiler tutorial with Gluon and profile a schedule of steps.

The network of seed 000 (MXNet's profiler tutorial): two 5x5 convolutions (20 and 50 channels,
ReLU), each followed by 2x2 max pooling with stride 2, then ``Dense(512, relu)`` and
``Dense(10)``; hybridized, softmax cross-entropy loss, SGD with learning rate 0.1, batches of
64 images of 28x28. MNIST is replaced by random MNIST-shaped images and labels made before
profiling (nothing to download, no data operators in the trace). A ``pyprof.profile`` schedule
(``--skip-first``, ``--wait``, ``--warmup``, ``--active``, ``--repeat``) records windows of
training steps; each window's per-operator table is printed.

With MXNet's default bulk execution most of the time sits in ``ImperativeBulk`` segments: the
hybridized block's forward and backward run as bulks of up to 15 operators. ``--per-operator``
(or ``PYPROF_PER_OPERATOR=1``) turns bulk execution off before MXNet loads, and the table
names every operator: ``Convolution``, ``_backward_Convolution``, ``Pooling``,
``FullyConnected``, ``multi_sgd_update``...
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any
from dataclasses import dataclass, field

from ..native import capi as _capi
from .. import env, rules, session
from ..errors import ConfigError
from . import _cli

DEFAULT_OUTPUT = "./cnn_trace_{window}.json"
SCHEDULE_OPTIONS = ("skip_first", "wait", "warmup", "active", "repeat")


@dataclass
class CnnResult:
    """What one run trained and recorded."""

    per_operator: bool
    batch_size: int
    steps: int
    seconds: float
    last_loss: float
    windows: list[dict] = field(default_factory=list)  # path, first_step, last_step
    summaries: list[str] = field(default_factory=list)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch-size", type=int, default=64, help="images per step (default 64)")
    p.add_argument("--skip-first", type=int, default=1,
                   help="steps before the schedule starts, not recorded: the first step shapes "
                        "and allocates everything (default 1)")
    p.add_argument("--wait", type=int, default=0, help="idle steps per cycle (default 0)")
    p.add_argument("--warmup", type=int, default=1,
                   help="recorded but discarded steps per cycle (default 1)")
    p.add_argument("--active", type=int, default=2, help="recorded steps per window (default 2)")
    p.add_argument("--repeat", type=int, default=1, help="windows (cycles) in all (default 1)")
    p.add_argument("--mode", default="symbolic,imperative",
                   help="what to record: symbolic, imperative, api, memory or all, comma-separated "
                        "(default symbolic,imperative)")
    p.add_argument("--per-operator", action="store_true",
                   help="turn bulk execution off (pyprof.env.per_operator) before MXNet loads, "
                        "so every operator has its own row; also PYPROF_PER_OPERATOR=1")
    p.add_argument("--static-alloc", action="store_true",
                   help="hybridize with static_alloc=True, static_shape=True")
    p.add_argument("--output", default=DEFAULT_OUTPUT,
                   help=f"trace path of each window, with {{window}} (default {DEFAULT_OUTPUT})")
    p.add_argument("--top", type=int, default=12, help="rows of each table (default 12; 0: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the data and weights (default 0)")


def check_options(o: argparse.Namespace) -> None:
    """Raise ValueError naming the bad option and what it accepts."""
    if o.batch_size <= 0:
        raise rules.error("example.positive", option="--batch-size", value=o.batch_size)
    if o.active <= 0 or o.repeat <= 0:
        bad = "--active" if o.active <= 0 else "--repeat"
        raise rules.error("example.positive", option=bad, value=min(o.active, o.repeat))
    for name in ("skip_first", "wait", "warmup", "top"):
        if getattr(o, name) < 0:
            raise rules.error("example.non_negative", option=f"--{name.replace('_', '-')}",
                              value=getattr(o, name))
    if o.repeat > 1 and "{window}" not in o.output:
        raise rules.error("example.output_window", output=o.output, placeholder="{window}",
                          repeat=o.repeat)
    try:
        env.parse_mode(o.mode)
    except ConfigError as exc:
        reason = str(exc).removesuffix(f" fix: {exc.fix}").rstrip(".")
        raise rules.error("example.mode", mode=o.mode, reason=reason, fix=exc.fix) from None


def total_steps(o: argparse.Namespace) -> int:
    """Steps the schedule needs: the skipped ones, then ``repeat`` cycles."""
    return o.skip_first + (o.wait + o.warmup + o.active) * o.repeat


def build_net(gluon):
    """The tutorial's network (seed 000), uninitialised."""
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(channels=20, kernel_size=5, activation="relu"),
            gluon.nn.MaxPool2D(pool_size=2, strides=2),
            gluon.nn.Conv2D(channels=50, kernel_size=5, activation="relu"),
            gluon.nn.MaxPool2D(pool_size=2, strides=2),
            gluon.nn.Flatten(),
            gluon.nn.Dense(512, activation="relu"),
            gluon.nn.Dense(10))
    return net


def synthetic_mnist(mx, batch_size: int, batches: int, seed: int) -> list[tuple]:
    """``batches`` (data, label) pairs shaped like MNIST: (batch, 1, 28, 28) floats in [0, 1),
    labels 0..9; made with numpy, so making them records no operator."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [(mx.nd.array(rng.random((batch_size, 1, 28, 28), dtype=np.float32)),
             mx.nd.array(rng.integers(0, 10, batch_size).astype(np.float32)))
            for _ in range(batches)]


def run(o: argparse.Namespace) -> CnnResult:
    """Train and profile in this process (MXNet is loaded here, after per-operator mode)."""
    per_op = o.per_operator or env.per_operator_requested()
    if per_op:
        env.per_operator()  # before libmxnet loads: warns with the fix if it is too late
    _capi.load()  # a bad MXNET_LIBRARY_PATH is one clear error
    import mxnet as mx
    from mxnet import autograd, gluon

    mx.random.seed(o.seed)
    net = build_net(gluon)
    net.initialize(mx.init.Xavier(), ctx=mx.cpu())
    net.hybridize(**({"static_alloc": True, "static_shape": True} if o.static_alloc else {}))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    steps = total_steps(o)
    batches = synthetic_mnist(mx, o.batch_size, min(steps, 4), o.seed)

    def train_step(data, label):
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        trainer.step(data.shape[0])
        return loss

    windows: list[session.Window] = []
    sched = session.schedule(**{k: getattr(o, k) for k in SCHEDULE_OPTIONS})
    t0 = time.perf_counter()
    with session.profile(schedule=sched, path=o.output, on_trace_ready=windows.append,
                         **env.parse_mode(o.mode)) as prof:
        for step in range(steps):
            loss = train_step(*batches[step % len(batches)])
            prof.step()
    seconds = time.perf_counter() - t0
    return CnnResult(
        per_operator=per_op, batch_size=o.batch_size, steps=steps, seconds=seconds,
        last_loss=float(loss.mean().asscalar()),
        windows=[{"path": w.path, "first_step": w.first_step, "last_step": w.last_step}
                 for w in windows],
        summaries=[w.summary(top=o.top or None) for w in windows])


def report(r: CnnResult, file=sys.stdout) -> None:
    """Each window's per-operator table, then what was trained."""
    for w, text in zip(r.windows, r.summaries):
        print(f"window {w['path']} (steps {w['first_step']}-{w['last_step']}):\n", file=file)
        print(text.rstrip() + "\n", file=file)
    mode = "per-operator (bulk execution off)" if r.per_operator else \
        "bulk execution on (MXNet's default; --per-operator names every operator)"
    print(f"trained:      {r.steps} steps of {r.batch_size} synthetic 28x28 images in "
          f"{r.seconds:.2f} s, last loss {r.last_loss:.4f}", file=file)
    print(f"mode:         {mode}", file=file)


def main(argv: list[str] | None = None) -> int:
    return _cli.main(argv, "pyprof train-demo", __doc__, add_arguments, execute)


def execute(o: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    return _cli.execute(o, parser, check_options=check_options, run=run, report=report)


if __name__ == "__main__":
    sys.exit(main())


def register(subparsers: Any) -> None:
    """Add the ``train-demo`` command to ``pyprof``'s subparsers (pyprof/cli.py)."""
    p = subparsers.add_parser("train-demo", help="train the tutorial's Gluon CNN on synthetic data and "
                                  "print each profiled window's per-operator table",
                              description=__doc__.split("\n\n")[0])
    add_arguments(p)
    p.set_defaults(func=lambda a, parser=p: execute(a, parser))
