"""Shared pytest set-up: the child-process helpers on sys.path, and the test lanes.

**Lanes.** ``pytest -m fast`` (``scripts/test.sh --fast``) runs the pure-logic tests: no MXNet,
no JVM, no child interpreter. A test is in the lane (gets the ``fast`` marker) when its file
does not import mxnet at module level, it has no ``jvm`` or ``slow`` marker (``slow``: pure
logic that takes long, e.g. the smallest chunk size of a parametrized reader test), and neither its body nor the
file's own helpers and fixtures it reaches (followed transitively) use what loads MXNet or the
JVM or starts a process: ``mxnet``, ``jpype``, ``subprocess``, ``multiprocessing``,
``sys.executable``, ``os.fork`` and the trace reader's worker processes (``_workers=``),
a browser (``playwright``), ``child.run_scenario`` and the other helpers of ``tests/child.py``, the
bridge and the profiler API (``pyprof.jvm``, ``pyprof.profiler``, ``pyprof.profile``, ...).
The rule is conservative: a test it cannot see through goes to the full lane only.

During a fast run a guard makes each of those an error that names the test: importing mxnet or
jpype, pyprof loading libmxnet, starting a Python, Java or Leiningen process. So a test that
needs MXNet cannot sit in the fast lane silently: it fails there, and the fix is to let the rule
see it (call the helper from the test, or mark it ``jvm``).
"""

from __future__ import annotations

import ast
import functools
import os
import sys
from pathlib import Path

import pytest

# tests/child.py holds the child-process helpers every suite (tests/trace too) uses.
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: modules whose use puts a test in the full lane (first component, or the whole dotted name)
HEAVY_MODULES = {"mxnet", "jpype", "subprocess", "multiprocessing", "child", "zygote",
                 "stress_harness", "foreign_harness", "pyprof.jvm", "pyprof.native", "pyprof.profiler",
                 "pyprof.session",
                 "pyprof.objects", "pyprof.env", "pyprof.dist", "pyprof.examples",
                 "pyprof.context", "pyprof.gpu", "pyprof.bench.runner", "pyprof.bench.registry",
                 "pyprof.dnnl.capture", "conformance.runner", "runner", "tests.child",
                 "tests.stress_harness", "tests.conformance.runner", "playwright", "report_page"}
#: names of the pyprof package that reach MXNet (``pyprof.profile(...)``, ``from pyprof import jvm``)
HEAVY_PYPROF_NAMES = {"jvm", "native", "bench", "profiler", "session", "objects", "env", "dist",
                      "examples", "context", "gpu", "profile", "schedule", "recover", "set_config",
                      "set_state", "dump", "dumps", "pause", "resume", "Domain", "Task", "Frame",
                      "Event", "Counter", "Marker"}
#: executables a fast test may not start
CHILD_PROGRAMS = ("python", "java", "lein", "pyprof", "clojure")


def _heavy_module(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in HEAVY_MODULES) \
        or name.split(".")[0] in HEAVY_MODULES


class _FileRule:
    """What one test file's source says about its tests' lane."""

    def __init__(self, path: Path):
        tree = ast.parse(path.read_text())
        self.imports_mxnet = False
        self.heavy_names: set[str] = set()
        self.functions: dict[str, list[ast.AST]] = {}   # module-level functions and classes
        for node in tree.body:
            self._module_level(node)
        self._heavy: dict[str, bool] = {}

    def _module_level(self, node: ast.AST) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for base, name, bound in _imported(node):
                if base.split(".")[0] == "mxnet":
                    self.imports_mxnet = True
                if _heavy_module(base) or (base == "pyprof" and name in HEAVY_PYPROF_NAMES) \
                        or _heavy_module(f"{base}.{name}" if name else base):
                    self.heavy_names.add(bound)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.functions.setdefault(node.name, []).append(node)
        elif isinstance(node, (ast.If, ast.Try)):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    self._module_level(child)
                elif isinstance(child, ast.ExceptHandler):
                    for stmt in child.body:
                        self._module_level(stmt)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.Expr)):
            for sub in ast.walk(node):   # pytest.importorskip("mxnet") imports it at collection
                if isinstance(sub, ast.Call) and getattr(sub.func, "attr", "") == "importorskip" \
                        and sub.args and getattr(sub.args[0], "value", "") in ("mxnet", "jpype"):
                    self.imports_mxnet = True
            # module-level constants built from heavy names (``LIB = capi.library_path()``)
            if _uses_heavy(node, self.heavy_names):
                for target in getattr(node, "targets", [getattr(node, "target", None)]):
                    if isinstance(target, ast.Name):
                        self.heavy_names.add(target.id)

    def heavy(self, name: str) -> bool:
        """True when the module-level function or class ``name`` reaches a heavy name."""
        if name not in self._heavy:
            self._heavy[name] = False            # cycles between helpers end here
            nodes = self.functions.get(name, [])
            self._heavy[name] = any(self._node_heavy(n) for n in nodes)
        return self._heavy[name]

    def _node_heavy(self, node: ast.AST) -> bool:
        if _uses_heavy(node, self.heavy_names):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # fixtures a function takes by argument name
            if any(self.heavy(a.arg) for a in node.args.args if a.arg in self.functions):
                return True
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in self.functions and self.heavy(sub.id):
                return True
        return False


def _imported(node: ast.AST):
    """(module, name, bound local name) for each name an import statement binds."""
    if isinstance(node, ast.Import):
        for a in node.names:
            yield a.name, "", (a.asname or a.name.split(".")[0])
    else:
        base = node.module or ""
        for a in node.names:
            yield base, a.name, (a.asname or a.name)


def _uses_heavy(node: ast.AST, heavy_names: set[str]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in heavy_names:
            return True
        if isinstance(sub, (ast.Import, ast.ImportFrom)):
            for base, name, _ in _imported(sub):
                if _heavy_module(base) or (base == "pyprof" and name in HEAVY_PYPROF_NAMES):
                    return True
        if isinstance(sub, ast.keyword) and sub.arg == "_workers":
            return True                  # the trace reader's worker processes (forks)
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name):
            if (sub.value.id, sub.attr) in (("sys", "executable"), ("os", "fork")):
                return True
            if sub.value.id == "sys" and sub.attr == "executable":
                return True
            if sub.value.id == "pyprof" and sub.attr in HEAVY_PYPROF_NAMES:
                return True
    return False


@functools.lru_cache(maxsize=None)
def _rule(path: str) -> _FileRule:
    return _FileRule(Path(path))


def _is_fast(item: pytest.Item) -> bool:
    if not isinstance(item, pytest.Function) or item.get_closest_marker("jvm") \
            or item.get_closest_marker("slow"):
        return False
    rule = _rule(str(item.path))
    if rule.imports_mxnet:
        return False
    if any(rule.heavy(f) for f in item.fixturenames if f in rule.functions):
        return False
    if item.cls is not None:
        return not rule.heavy(item.cls.__name__)
    return not rule.heavy(item.originalname)


def _fast_lane(config: pytest.Config) -> bool:
    return (config.getoption("markexpr", "") or "").strip() == "fast"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fast: pure logic (no MXNet, no JVM, no child process); "
                            "given by tests/conftest.py, never by hand")
    # pytest-xdist's controller runs no test and starts its workers as Python processes: the
    # guards go into the workers (and into a run without workers)
    controller = bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")
    if _fast_lane(config) and not controller:
        _install_guards()
    # The JVMs the tests start through the bridge (in child processes, which inherit this) live
    # seconds: C1 only and the serial collector start them with about half the CPU.
    from child import FAST_JVM  # (tests/ is on sys.path, above)

    os.environ.setdefault("PYPROF_JVM_ARGS", " ".join(FAST_JVM))
    # pytest-xdist (3.6 on) hands files out by their number of tests, most first, unless
    # --no-loadscope-reorder: that put 171 one-millisecond tests first and the longest file
    # late. Collection order (LONG_FIRST) is the order wanted.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config):
    # In the fast lane a file that imports mxnet at module level is not even imported.
    if _fast_lane(config) and collection_path.suffix == ".py" \
            and collection_path.name.startswith("test_") and _rule(str(collection_path)).imports_mxnet:
        return True
    return None


#: the files that take longest (wall seconds on the 2-core machine, PYPROF_TEST_CPU_LOG), run
#: first: ``--dist loadfile`` hands files out in collection order, so a long file collected
#: late (test_trace_claims.py, 140 s) made the tail; the rest keep their order
LONG_FIRST = ("test_trace_claims.py", "test_concurrency.py", "attribution/test_capture.py",
              "attribution/test_cachedop.py", "test_raw_bounds.py", "test_conformance_mutations.py",
              "attribution/test_autograd.py", "dnnl/test_dnnl_mxnet.py", "test_html_report_runs.py",
              "trace/test_parallel.py", "test_jvm_packaging.py", "attribution/test_roofline.py",
              "test_crash_leftovers.py", "test_bridge_tracker.py", "test_bench.py",
              "test_jvm_bridge.py", "trace/test_properties.py", "test_matmul.py")


def _long_first(item: pytest.Item) -> int:
    rel = Path(str(item.path)).relative_to(Path(__file__).resolve().parent).as_posix()
    return LONG_FIRST.index(rel) if rel in LONG_FIRST else len(LONG_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_long_first)  # stable: within a file, and among the others, order is kept
    for item in items:
        if item.get_closest_marker("fast"):
            raise pytest.UsageError(f"{item.nodeid}: the fast marker is given by tests/conftest.py "
                                    "from what the test uses; fix: remove @pytest.mark.fast")
        if _is_fast(item):
            item.add_marker(pytest.mark.fast)


class LaneError(AssertionError):
    """A test in the fast lane used what the lane excludes."""


def _refuse(what: str):
    raise LaneError(f"{what} in a fast-lane test (pytest -m fast: no MXNet, no JVM, no child "
                    f"process); fix: let tests/conftest.py see it (use the helper from the "
                    f"test body, or mark the test jvm)")


class _BlockImports:
    """Meta path finder that refuses mxnet, jpype and playwright while the fast lane runs."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("mxnet", "jpype", "_jpype", "playwright"):
            _refuse(f"import {name}")
        return None


def _install_guards() -> None:
    import subprocess

    sys.meta_path.insert(0, _BlockImports())
    os.environ["PYPROF_TEST_LANE"] = "fast"
    from pyprof.native import capi

    capi.load = lambda *a, **k: _refuse("loading libmxnet")
    popen_init = subprocess.Popen.__init__

    def guarded_init(self, args, *a, **k):
        argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        program = os.path.basename(os.fsdecode(argv[0]).split()[0]) if argv else ""
        if os.fsdecode(argv[0]) == sys.executable or program.startswith(CHILD_PROGRAMS):
            _refuse(f"starting {program!r}")
        popen_init(self, args, *a, **k)

    subprocess.Popen.__init__ = guarded_init


#: where ``PYPROF_TEST_CPU_LOG=FILE`` appends one line per test: CPU seconds of the test's
#: worker and of the child processes it waited for (a forked zygote child is the zygote's,
#: not counted), wall seconds, test id; for finding what makes the suite long
_CPU_LOG = os.environ.get("PYPROF_TEST_CPU_LOG")

if _CPU_LOG:
    import resource
    import time

    def _cpu() -> tuple[float, float]:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        (me0, kids0), t0 = _cpu(), time.monotonic()
        yield
        (me1, kids1), t1 = _cpu(), time.monotonic()
        with open(_CPU_LOG, "a") as f:
            f.write(f"{me1 - me0:.2f}\t{kids1 - kids0:.2f}\t{t1 - t0:.2f}\t{item.nodeid}\n")
