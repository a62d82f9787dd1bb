"""No silent loss across processes (issue 21 item 4, MXNet #16702).

Several processes configured with one trace filename used to overwrite each other's file at
every dump: with two processes of 50 operators each the file held 50 events and neither said a
word. Now the first claims the file (api.json ``trace_claims``) and every later one is refused
at set_config with ``config.filename_claimed``, naming the owner's pid and a file with its own
pid in it; it configures that one and profiles. Real MXNet, real JVMs, real files: each test
starts 2 or 4 child processes (Python, forked from the warm interpreter of tests/zygote.py;
Clojure; Java facade) that all try the shared file, wait until all have tried, then profile 50
operators each and dump. Then every file must hold 50 operators for each process that
configured it without an error: every event of every process is in a file that process named.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import pyprof

import zygote
from child import FAST_JVM, ROOT, load_trace, operator_pairs, run_scenario

OPS = 50
_OPS = ("_mul_scalar", "_random_uniform")

# A Python child: the same steps as jvm/test/pyprof/claim_child.clj.
_PY_CHILD = r"""
import json, os, sys, time
import mxnet as mx
import pyprof
from pyprof import profiler
shared, d, n, ops = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def configure(path):
    try:
        profiler.set_config(filename=path, profile_imperative=True)
    except pyprof.PyprofError as e:
        return {"code": e.code, "fields": {k: str(v) for k, v in e.fields.items()},
                "message": str(e)}
err = configure(shared)
path = err["fields"]["example"] if err else shared
retry = configure(path) if err else None
open(os.path.join(d, f"configured-{os.getpid()}"), "w").close()
deadline = time.monotonic() + 180  # a JVM under load starts slowly
while sum(f.startswith("configured-") for f in os.listdir(d)) < n and time.monotonic() < deadline:
    time.sleep(0.02)
if not retry:
    x = mx.nd.ones((4, 4))
    mx.nd.waitall()
    profiler.set_state("run")
    for _ in range(ops):
        y = x * 2.0
    mx.nd.waitall()
    profiler.set_state("stop")
    profiler.dump()
print(json.dumps({"pid": os.getpid(), "lang": "python", "api": "python", "file": path,
                  "op": "_mul_scalar", "code": err and err["code"],
                  "fields": err and err["fields"], "message": err and err["message"],
                  "retry": retry and retry["message"]}))
"""


# A Python session child: the same steps with pyprof.profile and a window-path template.
_PY_SESSION_CHILD = r"""
import json, os, sys, time
import mxnet as mx
import pyprof
shared, d, n, ops = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def start(path):
    s = pyprof.profile(path=path, profile_imperative=True)
    try:
        s.start()
        return s, None
    except pyprof.PyprofError as e:
        return None, {"code": e.code, "fields": {k: str(v) for k, v in e.fields.items()},
                      "message": str(e)}
s, err = start(shared)
s, retry = start(err["fields"]["example"]) if err else (s, None)
open(os.path.join(d, f"configured-{os.getpid()}"), "w").close()
deadline = time.monotonic() + 180  # a JVM under load starts slowly
while sum(f.startswith("configured-") for f in os.listdir(d)) < n and time.monotonic() < deadline:
    time.sleep(0.02)
if s is not None:
    x = mx.nd.ones((4, 4))
    for _ in range(ops):
        y = x * 2.0
    mx.nd.waitall()
    s.stop()
print(json.dumps({"pid": os.getpid(), "lang": "python", "api": "session",
                  "file": s.windows[0].path if s else None, "op": "_mul_scalar",
                  "code": err and err["code"], "fields": err and err["fields"],
                  "message": err and err["message"], "retry": retry and retry["message"]}))
"""


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))


def _command(kind: str, shared: Path, n: int) -> list[str]:
    d = str(shared.parent / "markers")
    if kind in ("python", "python-session"):
        child = _PY_CHILD if kind == "python" else _PY_SESSION_CHILD
        return [sys.executable, "-c", child, str(shared), d, str(n), str(OPS)]
    from pyprof import jvm

    call = "run-session" if kind == "clojure-session" else f"run {json.dumps(kind)}"
    form = (f"(require (quote pyprof.claim-child)) "
            f"(pyprof.claim-child/{call} {json.dumps(str(shared))} {json.dumps(d)} {n} {OPS})")
    return ["java", *FAST_JVM, "-cp", os.pathsep.join(jvm.classpath()), "clojure.main", "-e", form]


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """One child to its end: a Python one forked from the warm interpreter (tests/zygote.py:
    its own process, holding no claim), a JVM started."""
    if cmd[0] == sys.executable:
        return zygote.run(cmd[1:], cwd=cwd, env=_env(), timeout=300)
    return subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)


def _run_all(kinds: list[str], tmp_path: Path, name: str = "trace.json") -> tuple[Path, list[dict]]:
    """Start one child per entry of ``kinds`` at once, all configured with one filename (a
    child that fails leaves the others waiting for it at most their 180 s deadline)."""
    shared = tmp_path / name
    (tmp_path / "markers").mkdir()
    with ThreadPoolExecutor(max_workers=len(kinds)) as pool:
        futures = [pool.submit(_run, _command(k, shared, len(kinds)), tmp_path) for k in kinds]
    results = []
    for f in futures:
        p = f.result()
        assert p.returncode == 0, f"child exited {p.returncode}\n{p.stderr[-3000:]}"
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        assert lines, f"no result line\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
        results.append(json.loads(lines[-1]))
    return shared, results


def _ops_in(path: Path) -> int:
    return len(operator_pairs(load_trace(path), _OPS))


def _check(shared: Path, results: list[dict], code: str = "config.filename_claimed",
           own: str = "trace-{pid}.json", first: str | None = None) -> None:
    """One process got the shared file; every other one was refused before profiling, naming
    the owner, and profiled into the file the fix named; every file holds 50 operators for each
    process that configured it without an error."""
    by_file: dict[str, list[dict]] = {}
    for r in results:
        by_file.setdefault(r["file"], []).append(r)
    for f, rs in by_file.items():
        # every event of every process is in a file that process named
        assert _ops_in(Path(f)) == OPS * len(rs), \
            f"{f} holds {_ops_in(Path(f))} operators of the {OPS * len(rs)} of processes {[r['pid'] for r in rs]}"
    owners = [r for r in results if r["code"] is None]
    assert len(owners) == 1, f"{len(owners)} processes configured {shared} without a word"
    owner = owners[0]
    assert owner["file"] == (first or str(shared))
    for r in results:
        if r is owner:
            continue
        assert r["code"] == code, r
        assert f"process {owner['pid']}" in r["message"], r["message"]
        assert r["retry"] is None, f"the fix's file was refused too: {r['retry']}"
        assert r["file"] == str(shared.parent / own.format(pid=r["pid"]))
    assert len(by_file) == len(results)


@pytest.mark.parametrize("n", [2, 4])
def test_python_processes_with_one_filename(tmp_path, n):
    _check(*_run_all(["python"] * n, tmp_path))


@pytest.mark.parametrize("kinds", [["clojure", "java"], ["clojure", "java", "clojure", "java"]],
                         ids=["2", "4"])
def test_jvm_processes_with_one_filename(tmp_path, kinds):
    _check(*_run_all(kinds, tmp_path))


def test_a_python_and_a_jvm_process_with_one_filename(tmp_path):
    _check(*_run_all(["python", "clojure"], tmp_path))


@pytest.mark.parametrize("kinds", [["python-session", "python-session"],
                                   ["python-session", "clojure-session"]],
                         ids=["python", "python-jvm"])
def test_sessions_with_one_window_path(tmp_path, kinds):
    """A session claims its window path (a template: all its windows) while open: another
    process's session with that path is refused at start (session.path_claimed) and starts at
    the path the fix names, with {pid} in it."""
    shared, results = _run_all(kinds, tmp_path, "w_{window}.json")
    _check(shared, results, "session.path_claimed", "w_0-{pid}.json",
           first=str(tmp_path / "w_0.json"))
    refused = [r for r in results if r["code"]]
    assert [r["fields"]["example"] for r in refused] == [str(tmp_path / "w_{window}-{pid}.json")]


_HOLDER = r"""
import os, sys, time
from pyprof import profiler
profiler.set_config(filename=sys.argv[1])
print("claimed", flush=True)
time.sleep(120)
"""

_TAKER = r"""
import json, sys
import mxnet as mx
import pyprof
from pyprof import profiler
try:
    profiler.set_config(filename=sys.argv[1], profile_imperative=True)
except pyprof.PyprofError as e:
    print(json.dumps({"code": e.code, "pid": str(e.fields["pid"])}))
    sys.exit(0)
x = mx.nd.ones((4, 4))
profiler.set_state("run")
for _ in range(50):
    y = x * 2.0
mx.nd.waitall()
profiler.set_state("stop")
profiler.dump()
print(json.dumps({"code": None}))
"""


def _taker(shared: Path) -> dict:
    p = subprocess.run([sys.executable, "-c", _TAKER, str(shared)], cwd=shared.parent,
                       env=_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.splitlines()[-1])


def test_a_sigkilled_owner_gives_its_claim_back(tmp_path):
    shared = tmp_path / "trace.json"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(shared)], cwd=tmp_path,
                              env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "claimed"
        assert _taker(shared) == {"code": "config.filename_claimed", "pid": str(holder.pid)}
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert holder.returncode == -signal.SIGKILL
    assert _taker(shared) == {"code": None}  # the OS dropped the lock with the process
    assert _ops_in(shared) == OPS


def test_a_finished_dump_gives_the_claim_back_and_a_config_away_before_running(tmp_path):
    """In one process: a claim lasts until the finished dump; a config away from a file before
    the profiler ever ran gives that file back. Another process (the taker, which profiles 50
    operators into the file when it gets it) sees both."""
    body = r"""
import json, subprocess, sys
import mxnet as mx
from pyprof import profiler
from pyprof.process import claim
def other(path):  # another process: the code of its refusal, or None when it profiled there
    p = subprocess.run([sys.executable, "-c", sys.argv[1], path], capture_output=True, text=True)
    return json.loads(p.stdout.splitlines()[-1])["code"]
profiler.set_config(filename="a.json")
out = {"held_a": claim.held()}
profiler.set_config(filename="b.json", profile_imperative=True)   # away from a.json, never ran
out["held_b"] = claim.held()
out["a"] = other("a.json")
x = mx.nd.ones((2, 2))
profiler.set_state("run"); y = x * 2.0; mx.nd.waitall(); profiler.set_state("stop")
profiler.dump(finished=False)
out["b_open"] = other("b.json")
profiler.dump()
out["held_after"] = claim.held()
out["b_after"] = other("b.json")
print(json.dumps(out))
"""
    p = subprocess.run([sys.executable, "-c", body, _TAKER], cwd=tmp_path, env=_env(),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.splitlines()[-1])
    assert out["held_a"] == [str(tmp_path / "a.json")]
    assert out["held_b"] == [str(tmp_path / "b.json")]
    assert out["a"] is None and _ops_in(tmp_path / "a.json") == OPS
    assert out["b_open"] == "config.filename_claimed"
    assert out["held_after"] == []
    assert out["b_after"] is None and _ops_in(tmp_path / "b.json") == OPS  # after our finish


def test_claim_files_follow_the_rule(tmp_path, monkeypatch):
    """api.json trace_claims: the private per-user directory under $PYPROF_CLAIM_DIR, named by the
    hash of the absolute path; relative and absolute spellings are one claim."""
    import hashlib

    from pyprof.process import claim

    monkeypatch.setenv("PYPROF_CLAIM_DIR", str(tmp_path / "base"))
    monkeypatch.chdir(tmp_path)
    f = claim.claim_file("x/../t.json")
    digest = hashlib.sha256(str(tmp_path / "t.json").encode()).hexdigest()[:32]
    assert f == str(tmp_path / "base" / f"pyprof-claims-{os.getuid()}" / f"{digest}.claim")
    assert claim.claim_file(str(tmp_path / "t.json")) == f
    monkeypatch.delenv("PYPROF_CLAIM_DIR")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    assert claim.base_dir() == str(tmp_path / "tmp")
    monkeypatch.delenv("TMPDIR")
    assert claim.base_dir() == "/tmp"


def test_a_hosted_jvm_claims_through_python(tmp_path):
    """Python and the JVM it hosts (JPype) are one process: one holder of its claims, Python's
    (POSIX locks are per process; a second descriptor's close would drop Python's lock). The
    JVM's config of Python's file passes, moves the claim as Python's would, and a file another
    process holds is refused with the same catalogue error, as its Python class."""
    body = r"""
import json, subprocess, sys, time
import pyprof
from pyprof import jvm, profiler
from pyprof.process import claim
jvm.start()
jvm.require("pyprof.profiler")
holder = subprocess.Popen([sys.executable, "-c", sys.argv[1], "c.json"], stdout=subprocess.PIPE,
                          text=True)
assert holder.stdout.readline().strip() == "claimed"
out = {}
profiler.set_config(filename="a.json")
jvm.eval_clojure('(pyprof.profiler/profiler-set-config {:filename "a.json"})')
out["a"] = claim.held()
jvm.eval_clojure('(pyprof.profiler/profiler-set-config {:filename "b.json"})')
out["b"] = claim.held()
try:
    jvm.eval_clojure('(pyprof.profiler/profiler-set-config {:filename "c.json"})')
except pyprof.PyprofError as e:
    out["c"] = [type(e).__name__, e.code, str(e.fields["pid"]) == str(holder.pid)]
out["after_c"] = claim.held()
out["jvm_holds_b"] = bool(jvm.eval_clojure(
    '(.holds (pyprof.jvm.Tracker/current) (pyprof.output/abspath "b.json"))'))
holder.kill(); holder.wait()
print(json.dumps(out))
"""
    p = subprocess.run([sys.executable, "-c", body, _HOLDER], cwd=tmp_path, env=_env(),
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.splitlines()[-1])
    assert out["a"] == [str(tmp_path / "a.json")]
    assert out["b"] == [str(tmp_path / "b.json")]
    assert out["c"] == ["ConfigError", "config.filename_claimed", True]
    assert out["after_c"] == [str(tmp_path / "b.json")]
    assert out["jvm_holds_b"] is True


def test_a_claim_directory_that_is_not_private_is_refused(tmp_path, monkeypatch):
    """config.claim_failed, before anything is configured, when the claim directory is another's
    or open to others (a planted directory must not collect claims)."""
    from pyprof.process import claim

    monkeypatch.setenv("PYPROF_CLAIM_DIR", str(tmp_path / "base"))
    os.makedirs(claim.claim_dir(), mode=0o755)
    os.chmod(claim.claim_dir(), 0o755)
    with pytest.raises(pyprof.ConfigError) as e:
        claim.claim("filename", str(tmp_path / "t.json"))
    assert e.value.code == "config.claim_failed"
    assert str(e.value).endswith("fix: set PYPROF_CLAIM_DIR to a directory of your own on a local "
                                 "file system with POSIX locks")
    assert claim.held() == []
    os.chmod(claim.claim_dir(), 0o700)
    assert claim.claim("filename", str(tmp_path / "t.json")) is True
    claim.release_all()
    assert claim.held() == [] and (tmp_path / "base").exists()


def test_a_forked_child_holds_no_claim_and_leaves_the_parents(tmp_path):
    """fork() does not pass POSIX locks on: the child's config of its parent's file is refused
    (by the claim, or before it by the fork guard), and the child's exit, which closes its
    copies of the claim descriptors, leaves the parent's claim in place."""
    body = r"""
import json, os, subprocess, sys
import pyprof
from pyprof import profiler
from pyprof.process import claim
profiler.set_config(filename="t.json")
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    out = {"held": claim.held()}
    try:
        profiler.set_config(filename="t.json")
        out["code"] = None
    except pyprof.PyprofError as e:
        out["code"] = e.code
    os.write(w, json.dumps(out).encode())
    os._exit(0)
os.close(w)
child = json.loads(os.read(r, 65536).decode())
os.waitpid(pid, 0)
p = subprocess.run([sys.executable, "-c", sys.argv[1], "t.json"], capture_output=True, text=True)
print(json.dumps({"child": child, "other": json.loads(p.stdout.splitlines()[-1]),
                  "held": claim.held(), "pid": os.getpid()}))
"""
    p = subprocess.run([sys.executable, "-c", body, _TAKER], cwd=tmp_path, env=_env(),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.splitlines()[-1])
    assert out["child"]["held"] == []
    assert out["child"]["code"] in ("process.forked", "config.filename_claimed"), out["child"]
    assert out["other"] == {"code": "config.filename_claimed", "pid": str(out["pid"])}
    assert out["held"] == [str(tmp_path / "t.json")]


def test_templates_that_fill_alike_are_one_claim(tmp_path):
    """A new user's find: {window} and {window:1d} name the same files, and were two claims.
    A session claims its template's canonical text (tests/grammar/window_path_canonical.json)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, pyprof\n"
         "s = pyprof.profile(path='w_{window}.json'); s.start(); print('open', flush=True)\n"
         "sys.stdin.readline(); s.stop()"],
        cwd=tmp_path, env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        codes = run_scenario("""
import pyprof
out = []
for path in ("w_{window:1d}.json", "./w_{window:01d}.json", "w_{window:d}.json"):
    try:
        pyprof.profile(path=path).start()
        out.append(None)
    except pyprof.PyprofError as e:
        out.append(e.code)
result = out
""", tmp_path)
        from pyprof import jvm  # the JVM's session claims the same text (template/canonical)
        form = ("(require 'pyprof.session) (println (try (pyprof.session/start! (pyprof.session/profile"
                " {:path \"w_{window:01d}.json\"})) :started (catch Exception e"
                " (:pyprof/code (ex-data e)))))")
        java = subprocess.run(["java", *FAST_JVM, "-cp", os.pathsep.join(jvm.classpath()),
                               "clojure.main", "-e", form], cwd=tmp_path, env=_env(),
                              capture_output=True, text=True, timeout=300)
    finally:
        holder.communicate("\n", timeout=120)
    assert codes == ["session.path_claimed"] * 3
    assert java.stdout.split()[-1:] == ["session.path_claimed"], java.stdout + java.stderr[-2000:]
    assert holder.returncode == 0


# A session of three windows, one step each, with 20 operators a step; prints its windows.
_PY_WINDOWS = r"""
import json
import mxnet as mx
import pyprof
x = mx.nd.ones((4, 4))
with pyprof.profile(schedule=pyprof.schedule(active=1, repeat=3), path="w_{window}.json",
                    profile_imperative=True) as s:
    for _ in range(3):
        for _ in range(20):
            y = x * 2.0
        mx.nd.waitall()
        s.step()
print(json.dumps([w.path for w in s.windows]))
"""

_CLJ_WINDOWS = ("(require '[pyprof.session :as s] '[pyprof.example.ndarray :as nd] "
                "'[clojure.data.json :as json]) "
                "(let [p (s/start! (s/profile {:schedule (s/schedule {:active 1 :repeat 3})"
                " :path \"w_{window}.json\" :profile-imperative true}))]"
                " (dotimes [_ 3] (dotimes [_ 20] (with-open [a (nd/random-uniform -1 1 [4 4])]"
                " (nd/wait-to-read a))) (s/step! p))"
                " (println (json/write-str (mapv :path (s/stop! p)))))")

_HOLD_WINDOW = r"""
import sys
import mxnet as mx
import pyprof
with pyprof.profile(path="w_{window}.json", profile_imperative=True) as s:
    print("open", flush=True)
    sys.stdin.readline()
print("saved", flush=True)
sys.stdin.readline()
"""


def test_a_window_never_replaces_another_processs_trace(tmp_path):
    """A session claims its template, and each window its own file while it records (a new
    user's find: another process's plain trace at w_1.json was replaced by window 1 without a
    word). A window whose file another process holds goes to the file with this process's pid,
    said on stderr, in Python and on the JVM; the other process's trace stays whole. And a
    plain config of a window's file while that window records is refused."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER.replace(
        'print("claimed"', 'import mxnet as mx\nprofiler.set_state("run")\n'
        'x = mx.nd.ones((4, 4))\nfor _ in range(50):\n    y = x * 2.0\nmx.nd.waitall()\n'
        'profiler.set_state("stop")\nprofiler.dump(finished=False)\nprint("claimed"'),
        str(tmp_path / "w_1.json")], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "claimed"
        held = (tmp_path / "w_1.json").read_bytes()
        assert len(held) > 1000
        py = zygote.run(["-c", _PY_WINDOWS], cwd=tmp_path, env=_env(), timeout=300)
        from pyprof import jvm
        clj = subprocess.run(["java", *FAST_JVM, "-cp", os.pathsep.join(jvm.classpath()),
                              "clojure.main", "-e", _CLJ_WINDOWS], cwd=tmp_path, env=_env(),
                             capture_output=True, text=True, timeout=300)
        assert (tmp_path / "w_1.json").read_bytes() == held  # the holder's, untouched
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    for p in (py, clj):
        assert p.returncode == 0, p.stderr[-3000:]
        paths = json.loads(p.stdout.splitlines()[-1])
        pid = int(Path(paths[1]).stem.rsplit("-", 1)[1])
        assert paths == [str(tmp_path / "w_0.json"), str(tmp_path / f"w_1-{pid}.json"),
                         str(tmp_path / "w_2.json")], paths
        assert f"window 1's file {tmp_path / 'w_1.json'} is claimed by process {holder.pid}" \
            in p.stderr, p.stderr[-2000:]
        assert _ops_in(Path(paths[1])) == 20
    # the other way round: a window's file is refused to a plain config while it records
    window = subprocess.Popen([sys.executable, "-c", _HOLD_WINDOW], cwd=tmp_path, env=_env(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert window.stdout.readline().strip() == "open"
        assert _taker(tmp_path / "w_0.json") == {"code": "config.filename_claimed",
                                                 "pid": str(window.pid)}
        window.stdin.write("\n")
        window.stdin.flush()
        assert window.stdout.readline().strip() == "saved"
        assert _taker(tmp_path / "w_0.json") == {"code": None}  # saved: free again
    finally:
        window.communicate("\n", timeout=120)
    assert window.returncode == 0
