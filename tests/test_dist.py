"""Distributed training on loopback: profile a kvstore server and two workers, merge them."""

import signal
import sys

from child import ROOT, load_trace

import pyprof.dist
from pyprof.trace import stats

WORKER = """
import mxnet as mx
import pyprof, pyprof.dist
kv = mx.kv.create("dist_sync")
rank = kv.rank
shape = (64, 64)
kv.init(7, mx.nd.zeros(shape))
kv._barrier()
server = pyprof.dist.server_profiling(kv, filename="server.json", profile_all=True) \\
    if rank == 0 else None
if server:
    server.__enter__()
with pyprof.profile(path=f"worker{rank}.json", profile_all=True):
    out = mx.nd.zeros(shape)
    for step in range(4):
        kv.push(7, mx.nd.ones(shape) * (rank + 1))
        kv.pull(7, out=out)
        out.wait_to_read()
kv._barrier()            # both workers' pushes reached the server before it stops recording
if server:
    server.__exit__(None, None, None)
kv._barrier()
print("worker", rank, "sum", float(out.sum().asscalar()))
"""


def test_server_and_workers_on_one_timeline(tmp_path):
    (tmp_path / "worker.py").write_text(WORKER)
    cluster = pyprof.dist.launch_local([sys.executable, "worker.py"], num_workers=2,
                                       num_servers=1, timeout=120, cwd=tmp_path,
                                       env={"PYTHONPATH": str(ROOT)})
    assert cluster.ok, "\n".join(f"--- {p.role} {p.index} rc={p.returncode}\n{p.stderr[-2000:]}"
                                 for p in cluster.processes)
    assert len(cluster.by_role("worker")) == 2 and len(cluster.by_role("server")) == 1

    server_trace = tmp_path / pyprof.dist.server_trace_path("server.json", rank=0)
    traces = {"server 0": server_trace, "worker 0": tmp_path / "worker0.json",
              "worker 1": tmp_path / "worker1.json"}
    for path in traces.values():
        load_trace(path)  # each per-process trace is valid JSON
    for rank in (0, 1):
        pushes = stats(traces[f"worker {rank}"]).find("KVStoreDistDefaultPush")
        assert pushes and pushes[0].count == 4
    assert stats(server_trace).operators  # the server recorded its own operators

    merged = tmp_path / "cluster.json"
    result = pyprof.dist.merge(traces, merged)
    events = load_trace(merged)
    assert result.labels == list(traces)
    rows = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    roles = {name.split(":")[0] for name in rows.values()}
    assert roles == {"server 0", "worker 0", "worker 1"}
    assert all(pid < 2 ** 53 for pid in rows)
    # every event sits on a process row of one role and rank
    assert {e["pid"] for e in events if "pid" in e} <= set(rows)


def test_a_failing_worker_stops_the_whole_cluster_fast(tmp_path):
    cluster = pyprof.dist.launch_local([sys.executable, "-c", "import sys; sys.exit(3)"],
                                       num_workers=2, timeout=60, cwd=tmp_path)
    assert not cluster.ok
    codes = {p.returncode for p in cluster.by_role("worker")}
    # the first worker to fail ends the job; the other exits 3 too, or is killed first
    assert 3 in codes and codes <= {3, -signal.SIGKILL, -signal.SIGTERM}
    # the scheduler and server were waiting for the workers: killed, not left running
    assert all(p.returncode is not None for p in cluster.processes)


def test_server_profiling_needs_a_distributed_kvstore():
    class LocalKV:
        type = "local"
        handle = None

    try:
        with pyprof.dist.server_profiling(LocalKV()):
            pass
    except pyprof.StateError as e:
        assert "mx.kv.create('dist_sync')" in str(e)
    else:
        raise AssertionError("expected StateError")
