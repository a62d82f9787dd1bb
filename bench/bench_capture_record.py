"""The recorder's own cost per call, without MXNet's: ``Recorder._record`` replayed on the
ctypes arguments of one real ``a + 1`` call (2x2 float32), best of ``--blocks`` blocks of
``--calls`` each, for shapes, stack and both; and a bare ``sys._getframe`` walk for scale.

    .venv/bin/python bench/bench_capture_record.py [--calls 20000] [--blocks 7]

It measures what ``record_shapes``/``with_stack`` add inside the gated call (the argument
decoding, the cache, one output's ``MXNDArrayGetShapeEx`` + ``MXNDArrayGetDType``, the record,
the stack walk); the profiler is not running, so the shape queries are not traced.
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--blocks", type=int, default=7)
    args = ap.parse_args()
    import mxnet as mx
    from pyprof.native import capi
    from pyprof.attribution.capture import Recorder
    capi.install_import_hook()
    a = mx.nd.ones((2, 2))
    a.wait_to_read()
    out = {}
    for name, shapes, stack in (("record_shapes", True, False), ("with_stack", False, True),
                                ("shapes+stack", True, True)):
        rec = Recorder(shapes=shapes, stack=stack)
        rec.install()
        seen = []
        capi.hook_mxnet("MXImperativeInvokeEx", lambda raw: lambda *x: seen.append(x) or raw(*x))
        b = a + 1
        b.wait_to_read()
        rec.uninstall()
        argv = seen[0]
        best = float("inf")
        for _ in range(args.blocks):
            rec.calls.clear()
            t0 = time.perf_counter()
            for _ in range(args.calls):
                rec._record(0, 0, argv)
            best = min(best, (time.perf_counter() - t0) / args.calls * 1e6)
        out[name] = round(best, 3)
        del b
    print(json.dumps({"us_per_call": out, "calls": args.calls, "blocks": args.blocks}))


if __name__ == "__main__":
    main()
