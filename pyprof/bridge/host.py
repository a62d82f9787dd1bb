"""The JPype bridge: the JVM layer (``jvm/``) loaded into this Python process (the entry is
:mod:`pyprof.jvm`, which re-exports the public names; this module is package-internal).

Both languages then drive the one MXNet profiler singleton: the JVM is started with
``-Dmxnet.library.path`` set to the libmxnet.so Python already loaded, so JNA's dlopen
returns that same library instead of loading a second copy (which would abort).

The JVM starts once per process (JPype cannot restart one). ``start()`` twice, or after
``shutdown()``, raises JVMError; ``call`` and ``require`` start it on first use.

One profiler, one record of it: ``start()`` joins the two API gates and makes Python's tracker
the JVM layer's (``pyprof.bridge.tracker``), so state, session ownership and the kept trace file
are the same facts in both languages. Values cross exactly (``pyprof.bridge.values``: big and
unsigned integers, booleans, strings, maps, vectors, nil), and JVM errors become the Python
classes api.json ``error_kinds`` names.
"""

from __future__ import annotations

import atexit
import difflib
import fcntl
import functools
import os
import shlex
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

from . import metadata as _bridge_metadata, signals as _bridge_signals, tracker as _bridge_tracker
from .values import Keyword, StringKey, to_clojure, to_python, translate_exception
from .. import rules
from ..native import capi as _capi
from ..native.gate import GATE
from ..errors import JVMError

_lock = threading.RLock()
_state = "new"  # new -> running -> shut down; "forked" in a forked child of a running JVM
_clj: dict[str, Any] = {}


def _after_fork_in_child() -> None:
    global _state, _lock
    _lock = threading.RLock()  # a parent thread may have held it at fork
    if _state == "running":
        _state = "forked"
        import jpype.config  # the JVM's threads stayed in the parent: shutting it down hangs
        jpype.config.onexit = False


os.register_at_fork(after_in_child=_after_fork_in_child)


_broken: list[JVMError] = []  # why the JVM that runs here cannot serve pyprof (state "broken")


def _usable() -> None:
    """Raise JVMError where the JVM cannot be used: a forked child, after shutdown(), or a JVM
    without pyprof's classes (the same error on every call, never a KeyError)."""
    if _state == "forked":
        raise rules.error("jvm.forked")
    if _state == "shut down":
        raise rules.error("jvm.shut_down")
    if _state == "broken":
        raise _broken[0]


def _break(exc: JVMError) -> JVMError:
    global _state
    _state = "broken"
    _broken[:] = [exc]
    return exc


def _check_classes(jpype: Any, entries: list[str]) -> None:
    """Raise jvm.bad_classpath when the running JVM cannot load pyprof's classes and specs."""
    loader = jpype.JClass("java.lang.ClassLoader").getSystemClassLoader()
    missing = [n for n in ("clojure.java.api.Clojure", "pyprof.jvm.capi.Gate",
                           "pyprof.jvm.Profiler", "pyprof.jvm.Tracker") if loader.getResource(n.replace(".", "/")
                                                                      + ".class") is None]
    missing += [] if missing or loader.getResource("api.json") else ["api.json (pyprof/spec)"]
    if missing:
        source = "PYPROF_JVM_CLASSPATH" if os.environ.get("PYPROF_JVM_CLASSPATH") else "the cache"
        raise _break(rules.error("jvm.bad_classpath", missing=", ".join(missing), source=source,
                                 entries=os.pathsep.join(entries)))


def jvm_dir() -> Path:
    """The Leiningen project: ``$PYPROF_JVM_DIR``, else ``jvm/`` beside the package."""
    env = os.environ.get("PYPROF_JVM_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "jvm"


def classpath() -> list[str]:
    """Entries for the JVM: ``$PYPROF_JVM_CLASSPATH``, or the Leiningen project's
    classpath (compiled Java classes, Clojure sources, resources and the jars, all
    local), cached in ``jvm/target/classpath.txt``.

    The cache is rebuilt (``lein do javac, classpath``, after removing compiled classes)
    when it is missing, when it names another checkout's sources (a copied repository), or
    when a JVM source, ``project.clj`` or a spec file is newer than it. ``scripts/setup.sh``
    builds it through this function; processes that find it stale at once build it once
    (``jvm/target/classpath.lock``). Raises JVMError when it cannot be built, saying how.

    The first entry, ``jvm/target/aot``, holds the Clojure namespaces compiled ahead of time
    when the cache was built: a JVM then loads them instead of compiling pyprof's sources (about
    3 s of CPU less per JVM start). Clojure loads a compiled namespace only when it is newer
    than its source, so an edited source is read as it is.
    """
    env = os.environ.get("PYPROF_JVM_CLASSPATH")
    if env:
        return [p for p in env.split(os.pathsep) if p]
    d = jvm_dir().resolve()
    cache = d / "target" / "classpath.txt"
    if stale_reason(d, cache):
        (d / "target").mkdir(exist_ok=True)
        with open(d / "target" / "classpath.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time, across processes
            why = stale_reason(d, cache)  # (another process may have built it meanwhile)
            if why:
                _build_classpath(d, cache, why)
    return [p for p in cache.read_text().strip().split(os.pathsep) if p]


def stale_reason(d: Path, cache: Path) -> str | None:
    """Why the cached classpath of project ``d`` must be rebuilt, or None."""
    if not cache.is_file() or not (d / "target" / "classes").is_dir():
        return f"{cache} is missing"
    entries = set(cache.read_text().strip().split(os.pathsep))
    own = {str(d / "src" / "clj"), str(d / "target" / "classes")}
    if not own <= entries:
        return f"{cache} names another checkout's sources"
    built = cache.stat().st_mtime
    sources = [d / "project.clj", *(d / "src").rglob("*"), *_example_java(d),
               *(d.parent / "pyprof" / "spec").glob("*")]
    newer = next((p for p in sources if p.is_file() and p.stat().st_mtime > built), None)
    return f"{newer} is newer than {cache}" if newer else None


def _example_java(d: Path) -> list[Path]:
    """The Java sources of the example (``examples/matmul/java``: ``pyprof.jvm.example.*``), which
    the project's :dev profile compiles and puts on this classpath beside the example's
    namespaces (``pyprof.example.*``, ``org.apache.clojure-mxnet.*``): the library jar holds
    none of them, ``pyprof matmul --binding jvm`` and the bridge tests run them."""
    return sorted((d.parent / "examples" / "matmul" / "java").rglob("*.java"))


def _build_classpath(d: Path, cache: Path, why: str) -> None:
    lein = shutil.which("lein")
    if lein is None or not (d / "project.clj").is_file():
        raise rules.error("jvm.no_lein", why=why, project=f"{d}/project.clj")
    built = cache.stat().st_mtime if cache.is_file() else 0.0
    java = [d / "project.clj", *(d / "src" / "java").rglob("*.java"), *_example_java(d)]
    foreign = "another checkout" in why
    if not built or foreign or any(p.stat().st_mtime > built for p in java):
        # Java changed: recompile from scratch, so no class of a deleted source stays visible.
        # (Clojure sources and specs are read from their folders: only the cache is rewritten.)
        shutil.rmtree(d / "target" / "classes", ignore_errors=True)
    proc = subprocess.run([lein, "do", "javac,", "classpath"], cwd=d, text=True,
                          capture_output=True)
    if proc.returncode != 0:
        raise rules.error("jvm.lein_failed", directory=d, why=why, stderr=proc.stderr[-2000:])
    entries = proc.stdout.strip().splitlines()[-1].split(os.pathsep)
    aot = d / "target" / "aot"
    _compile_namespaces(d, aot, entries)
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp")
    tmp.write_text(os.pathsep.join([str(aot), *entries]))
    os.replace(tmp, cache)


def _compile_namespaces(d: Path, aot: Path, entries: list[str]) -> None:
    """Compile every namespace under ``d/src/clj`` into ``aot`` (emptied first: no class of a
    deleted source stays), in a child JVM. A failure leaves ``aot`` empty: JVMs then compile
    from source, slower but the same."""
    shutil.rmtree(aot, ignore_errors=True)
    aot.mkdir(parents=True)
    src = d / "src" / "clj"
    names = sorted(str(p.relative_to(src).with_suffix("")).replace(os.sep, ".").replace("_", "-")
                   for p in src.rglob("*.clj"))
    form = (f'(binding [*compile-path* "{aot}"] '
            f'(doseq [n (quote [{" ".join(names)}])] (compile n)))')
    proc = subprocess.run(["java", "-cp", os.pathsep.join([str(aot), *entries]), "clojure.main",
                           "-e", form], cwd=d, text=True, capture_output=True)
    if proc.returncode != 0:
        shutil.rmtree(aot, ignore_errors=True)
        aot.mkdir()


def start(extra_jvm_args: list[str] | None = None) -> None:
    """Start the JVM in this process with the pyprof classpath, its API gate joined with
    Python's and Python's tracker its tracker (one record of the profiler). JVM options:
    ``$PYPROF_JVM_ARGS`` (split as a shell does, e.g. ``-Xmx2g``), then ``extra_jvm_args``.
    Raises JVMError when a JVM runs already or ran before (JPype cannot start a second one)."""
    global _state
    import jpype

    with _lock:
        _usable()
        if _state == "running":
            raise rules.error("jvm.already_running")
        if jpype.isJVMStarted():  # another library started it, without pyprof's setup
            raise _break(rules.error("jvm.started_elsewhere"))
        args = [f"-Dmxnet.library.path={_capi.library_path()}", "-Xss4m"]
        args += shlex.split(os.environ.get("PYPROF_JVM_ARGS", ""))  # e.g. -Xmx2g
        args += list(extra_jvm_args or ())
        saved = _bridge_signals.saved_handlers()
        entries = classpath()
        try:
            # interrupt=False: the JVM does not shut down on Ctrl+C, so the program can still
            # stop the profiler and dump its trace.
            jpype.startJVM(*args, classpath=entries, convertStrings=False, interrupt=False)
        except (OSError, RuntimeError) as exc:
            raise rules.error("jvm.did_not_start", reason=exc) from exc
        _bridge_signals.install(saved)  # Ctrl+C stays Python's: docs/concurrency.md
        _check_classes(jpype, entries)
        _state = "running"
        _capi.note_user("a JVM (pyprof.jvm)")
        _join_gates()
        _bridge_tracker.install()  # before any JVM code reads the tracker
        _bridge_metadata.install()  # likewise the metadata events of the raw traces
        atexit.register(_part_gates)  # runs before JPype's own exit handler (LIFO)
        rt = jpype.JClass("clojure.java.api.Clojure")
        _clj["var"] = rt.var
        _clj["read"] = rt.read
        _clj["require"] = rt.var("clojure.core", "require")


class _JVMGate:
    """The JVM layer's API gate as a peer of Python's: a Python switch closes it second."""

    def __init__(self, gate: Any) -> None:
        self._gate = gate

    def acquire(self) -> None:
        self._gate.acquireForPeer()

    def release(self) -> None:
        self._gate.releaseForPeer()


def _part_gates() -> None:
    """At interpreter exit, before JPype shuts the JVM down: the JVM's gate stops asking
    Python's, so no switch of the JVM's exit hooks calls back into a Python that is exiting
    (it hung there, at exit, in about 1 run in 3 under load); likewise its tracker becomes a
    local one that starts as Python's is now."""
    import jpype

    if _state == "forked" or not jpype.isJVMStarted():
        return  # a forked child: any JVM call would wait for the parent's threads for ever
    try:  # what the JVM's shutdown hook does, which JPype's JVM has not: its open sessions'
        # windows saved, its raw trace finished (a JVM session through the bridge was lost)
        _clj["var"]("pyprof.profiler", "-run-exit-actions!").invoke()
    except Exception:  # noqa: BLE001 - pyprof.profiler never loaded: nothing to save
        pass
    try:
        jpype.JClass("pyprof.jvm.capi.Gate").setPeer(None)
        _bridge_tracker.uninstall()
        _bridge_metadata.uninstall()
    except Exception:  # noqa: BLE001 - exiting: nothing left to report to
        pass
    for peer in [p for p in GATE.peers() if isinstance(p, _JVMGate)]:
        GATE.remove_peer(peer)


def _join_gates() -> None:
    """One gate across both languages: a switch in either closes Python's gate, then the JVM's.

    A Python switch closes its own gate and then the JVM's (``Gate.acquireForPeer``); a JVM
    switch asks Python first (this proxy, ``Gate.Peer``), then closes its own. Same order, so
    no switch waits for another that waits for it.
    """
    import jpype

    gate = jpype.JClass("pyprof.jvm.capi.Gate")

    @jpype.JImplements("pyprof.jvm.capi.Gate$Peer")
    class PythonGate:
        @jpype.JOverride
        def acquire(self) -> None:
            GATE.acquire(peers=False)

        @jpype.JOverride
        def release(self) -> None:
            GATE.release()

    gate.setPeer(PythonGate())
    GATE.add_peer(_JVMGate(gate))


def shutdown() -> None:
    """Stop the JVM. After this, no JVM can run in this process again."""
    global _state
    import jpype

    with _lock:
        if _state == "running":
            _clj.clear()
            for peer in [p for p in GATE.peers() if isinstance(p, _JVMGate)]:
                GATE.remove_peer(peer)
            _bridge_tracker.uninstall()
            _bridge_metadata.uninstall()
            jpype.shutdownJVM()
            _state = "shut down"


def is_running() -> bool:
    return _state == "running"


def _ensure() -> None:
    global _state
    import jpype

    with _lock:
        _usable()
        if _state == "running" and not jpype.isJVMStarted():
            _state = "shut down"  # someone called jpype.shutdownJVM() directly
            _usable()
        if _state != "running":
            start()


class Namespace:
    """A Clojure namespace seen from Python: ``ns["dump-profile"](...)`` or
    ``ns.dump_profile(...)`` (underscores become hyphens). Arguments and results are
    converted exactly (``to_clojure``/``to_python``: dicts <-> maps with keyword keys, lists <->
    vectors, big and unsigned integers, bool, str, None), and a JVM error of pyprof becomes its
    Python class (``translate_exception``)."""

    def __init__(self, name: str):
        self.name = name

    def __getitem__(self, fn: str):
        _ensure()
        core = functools.partial(_clj["var"], "clojure.core")
        v = core("find-var").invoke(core("symbol").invoke(self.name, fn))
        if v is None:  # Clojure.var would intern it: an unbound var, a bare Java error
            publics = sorted(str(s) for s in core("keys").invoke(core("ns-publics").invoke(
                core("symbol").invoke(self.name))) or ())
            # a name that holds the one given ("set-config": profiler-set-config), else the closest
            near = min((p for p in publics if fn in p), key=len, default=None) or \
                (difflib.get_close_matches(fn, publics, n=1, cutoff=0) or [""])[0]
            attribute = near.replace("-", "_")  # ns["start!"]: no Python attribute has a "!"
            raise rules.error("jvm.no_function", fn=fn, ns=self.name, nearest=near,
                              attribute=f".{attribute}" if attribute.isidentifier()
                              else f"[{near!r}]")

        def invoke(*args, **kwargs):
            if kwargs:  # a Clojure function takes its options as one map
                raise rules.error("jvm.keyword_arguments", fn=fn, ns=self.name,
                                  names=", ".join(kwargs), arglists=str(core("get").invoke(
                                      core("meta").invoke(v), core("keyword").invoke("arglists"))))
            if _state != "running":
                _usable()
            return _translated(lambda: v.invoke(*[to_clojure(a) for a in args]))

        invoke.__name__ = fn
        return invoke

    def __getattr__(self, fn: str):
        if fn.startswith("__"):
            raise AttributeError(fn)
        return self[fn.replace("_", "-")]


def _translated(call: Any) -> Any:
    """``call()``'s result converted, with a JVM error of pyprof raised as its Python class."""
    import jpype

    try:
        with _bridge_signals.jvm_call():
            return to_python(call())
    except jpype.JException as exc:
        translated = translate_exception(exc)
        if translated is None:
            raise
        raise translated from exc


def require(ns: str) -> Namespace:
    """Load Clojure namespace ``ns`` in the JVM (starting it if needed). Raises JVMError
    ``jvm.no_namespace`` when the classpath has no such namespace."""
    import jpype

    if not isinstance(ns, str):
        raise rules.error("jvm.no_namespace", ns=ns, why="a namespace is named by a str")
    _ensure()
    try:
        _clj["require"].invoke(_clj["read"](ns))
    except jpype.JException as exc:
        text = str(exc.getMessage())
        if not text.startswith("Could not locate "):
            raise
        raise rules.error("jvm.no_namespace", ns=ns, why=text.split(" on classpath")[0]) from exc
    return Namespace(ns)


def eval_clojure(source: str) -> Any:
    """Read and evaluate one Clojure form in the JVM; return the converted result (a JVM error
    of pyprof raised as its Python class)."""
    _ensure()
    return _translated(lambda: _clj["var"]("clojure.core", "eval").invoke(_clj["read"](source)))


def call(ns: str, fn: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``ns/fn`` with converted ``args`` and return the converted result (keyword
    arguments: JVMError ``jvm.keyword_arguments``, Clojure takes them by position)."""
    return require(ns)[fn](*args, **kwargs)
