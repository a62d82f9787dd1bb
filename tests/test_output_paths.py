"""Trace paths: checked before profiling and around each dump, never a silent loss (issue 12).

The C-level behaviour these guard against (observed with mxnet==1.9.1): MXNet opens its trace
file with std::ofstream at each dump and ignores a failure, so a directory, /proc/x.json or a
vanished directory give no error and no file. Sessions run in child processes (one trace
session per process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyprof.process import output as _output
from pyprof import config, errors, rules, trace
from tests.child import run_scenario


def _code(exc_info) -> str:
    return exc_info.value.code


@pytest.mark.parametrize("name, value, problem", [
    ("directory", "{tmp}", "is a directory"),
    ("proc", "/proc/pyprof-x.json", "no file can be created in directory '/proc'"),
    ("device", "/dev/null", "is not a regular file"),
    ("nul", "{tmp}/a\0b.json", "NUL character at character"),
    ("surrogate", "{tmp}/\udcff.json", "lone surrogate U+DCFF at character"),
])
def test_set_config_refuses_paths_mxnet_cannot_write(tmp_path, name, value, problem):
    path = value.replace("{tmp}", str(tmp_path))
    with pytest.raises(errors.ConfigError) as e:
        config.validate({"filename": path})
    assert _code(e) == "config.bad_path"
    assert problem in str(e.value) and " fix: " in str(e.value)
    assert os.listdir(tmp_path) == []  # the probe left nothing behind


def test_a_missing_directory_keeps_its_own_error(tmp_path):
    with pytest.raises(errors.ConfigError) as e:
        config.validate({"filename": str(tmp_path / "no" / "t.json")})
    assert _code(e) == "config.missing_directory"


def test_low_free_space_is_refused_with_the_threshold_named(tmp_path, monkeypatch):
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    problem = _output.file_problem(str(tmp_path / "t.json"), min_free=free + (1 << 40))
    assert problem is not None and "bytes free, less than the" in problem["problem"]
    assert _output.file_problem(str(tmp_path / "t.json"), min_free=0) is None
    monkeypatch.setenv("PYPROF_MIN_FREE_BYTES", str(free + (1 << 40)))
    with pytest.raises(errors.ConfigError) as e:
        config.validate({"filename": str(tmp_path / "t.json")})
    assert "free some space" in str(e.value)


def test_defaults_are_never_probed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config.effective({})  # the default 'profile.json' is converted, not checked
    assert os.listdir(tmp_path) == []


def test_name_with_a_lone_surrogate_is_a_catalogue_error():
    import pyprof
    with pytest.raises(errors.ConfigError) as e:
        pyprof.Domain("d\udcff")
    assert _code(e) == "object.name_not_unicode"
    assert "U+DCFF at character 1" in str(e.value)
    assert rules.lone_surrogate("a\U0001F600b") is None  # a paired (astral) character is fine


_DUMP_AFTER_RMDIR = """
import shutil, pyprof
from pyprof import profiler
import mxnet as mx
os.mkdir('gone')
profiler.set_config(filename='gone/t.json', profile_imperative=True, profile_api=False,
                    profile_memory=False, continuous_dump=CD)
profiler.set_state('run')
for _ in range(3):
    (mx.nd.ones((4, 4)) * 7).wait_to_read()
profiler.set_state('stop')
shutil.rmtree('gone')
attempt('dump', lambda: profiler.dump(True))
profiler.set_config(filename='saved.json', profile_imperative=True, profile_api=False,
                    profile_memory=False, continuous_dump=CD)
profiler.dump(True)
result = {'errors': errors, 'state': profiler.state()}
"""


@pytest.mark.parametrize("continuous", [True, False])
def test_a_dump_into_a_removed_directory_is_an_error_and_the_events_survive(tmp_path,
                                                                          continuous):
    r = run_scenario(_DUMP_AFTER_RMDIR.replace("CD", str(continuous)), tmp_path)
    kind, message = r["errors"]["dump"]
    assert kind == "StateError" and "does not exist" in message
    assert "the events MXNet holds are kept" in message and " fix: " in message
    assert r["state"]["finished"] is True
    saved = tmp_path / "saved.json"
    assert trace.validate(saved).problems == []
    ops = [e for e in json.loads(saved.read_text())["traceEvents"]
           if e.get("name") == "_mul_scalar" and e.get("ph") == "B"]
    assert len(ops) == 3  # recorded before the failed dump, written to the new file


_SWITCH = """
import time, pyprof
from pyprof import profiler
import mxnet as mx
opts = dict(profile_imperative=True, profile_api=False, profile_memory=False,
            continuous_dump=CD, dump_period=0.2)
profiler.set_config(filename='a.json', **opts)
profiler.set_state('run')
for _ in range(2):
    (mx.nd.ones((4, 4)) * 7).wait_to_read()
time.sleep(SLEEP)  # with continuous dump: the timer has appended to a.json
profiler.set_config(filename='b.json', **opts)
for _ in range(3):
    (mx.nd.ones((4, 4)) + 7).wait_to_read()
profiler.set_config(filename='c.json', **opts)
for _ in range(4):
    (mx.nd.ones((4, 4)) - 7).wait_to_read()
profiler.set_state('stop')
profiler.dump(True)
result = profiler.state()
"""


@pytest.mark.parametrize("continuous, sleep", [(True, 0), (True, 0.6), (False, 0)])
def test_a_new_filename_while_running_finishes_the_old_file(tmp_path, continuous, sleep):
    state = run_scenario(_SWITCH.replace("CD", str(continuous)).replace("SLEEP", str(sleep)),
                         tmp_path)
    assert state["finished"] is True
    counts = {}
    for name in "abc":
        path = tmp_path / f"{name}.json"
        assert trace.validate(path).problems == [], name
        events = json.loads(path.read_text())["traceEvents"]
        counts[name] = {op: sum(1 for e in events if e.get("name") == op and e.get("ph") == "B")
                        for op in ("_mul_scalar", "_plus_scalar", "_minus_scalar")}
        assert any(e.get("name") == "process_name" for e in events), name
    assert counts == {"a": {"_mul_scalar": 2, "_plus_scalar": 0, "_minus_scalar": 0},
                      "b": {"_mul_scalar": 0, "_plus_scalar": 3, "_minus_scalar": 0},
                      "c": {"_mul_scalar": 0, "_plus_scalar": 0, "_minus_scalar": 4}}


_SWITCH_AWAY_FROM_GONE = """
import shutil, pyprof
from pyprof import profiler
import mxnet as mx
os.mkdir('gone')
profiler.set_config(filename='gone/a.json', profile_imperative=True, profile_api=False,
                    profile_memory=False)
profiler.set_state('run')
for _ in range(2):
    (mx.nd.ones((4, 4)) * 7).wait_to_read()
shutil.rmtree('gone')
profiler.set_config(filename='b.json', profile_imperative=True, profile_api=False,
                    profile_memory=False)
for _ in range(3):
    (mx.nd.ones((4, 4)) + 7).wait_to_read()
profiler.set_state('stop')
profiler.dump(True)
"""


def test_switching_away_from_a_vanished_directory_keeps_the_queued_events(tmp_path):
    run_scenario(_SWITCH_AWAY_FROM_GONE, tmp_path)
    path = tmp_path / "b.json"
    assert trace.validate(path).problems == []
    events = json.loads(path.read_text())["traceEvents"]
    assert sum(1 for e in events if e.get("name") == "_mul_scalar" and e.get("ph") == "B") == 2
    assert sum(1 for e in events if e.get("name") == "_plus_scalar" and e.get("ph") == "B") == 3


_CUT = """
import pyprof
from pyprof import profiler
import mxnet as mx
profiler.set_config(filename='small/t.json', profile_all=True, continuous_dump=False)
with open('small/filler', 'wb') as f:   # leave about 2 KiB: MXNet's write is cut short
    f.write(b'x' * (os.statvfs('small').f_bavail * os.statvfs('small').f_frsize - 2048))
profiler.set_state('run')
for _ in range(50):
    (mx.nd.ones((4, 4)) * 7).wait_to_read()
profiler.set_state('stop')
attempt('dump', lambda: profiler.dump(True))
result = errors
"""


def test_a_dump_cut_short_by_a_full_disk_is_an_error(tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(small)],
                           capture_output=True, text=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({mount.stderr.strip()})")
    try:
        errs = run_scenario(_CUT, tmp_path, env={"PYPROF_MIN_FREE_BYTES": "0"})
    finally:
        subprocess.run(["umount", str(small)], check=False)
    kind, message = errs["dump"]
    assert kind == "StateError" and "closing bytes" in message and "pyprof repair" in message


def test_the_threshold_is_documented():  # docs/configuration.md names the number
    doc = (config.SPEC_PATH.parent.parent.parent / "docs" / "configuration.md").read_text()
    assert str(rules.API["output_paths"]["min_free_bytes"]) in doc.replace(",", "")


@pytest.mark.parametrize("path, problem", [
    ("{tmp}", "is a directory"),
    ("/proc/w_{window}.json", "no file can be created in directory '/proc'"),
    ("{tmp}/no/w_{window}.json", "does not exist"),
])
def test_a_session_window_path_is_checked_when_the_session_is_made(tmp_path, path, problem):
    import pyprof
    with pytest.raises(errors.ConfigError) as e:
        pyprof.profile(path=path.replace("{tmp}", str(tmp_path)))
    assert _code(e) == "session.bad_path" and problem in str(e.value)


_BRIDGE = """
import pyprof
from pyprof import jvm
if OTHER:
    import jpype
    jpype.startJVM(convertStrings=False)
out = []
for call in (lambda: jvm.require('pyprof.profiler'), lambda: jvm.call('pyprof.profiler', 'state'),
             lambda: jvm.require('pyprof.profiler')):
    try:
        call()
        out.append(['ok'])
    except Exception as e:
        out.append([type(e).__name__, str(e)])
result = out
"""


@pytest.mark.parametrize("other, env, words", [
    (False, {"PYPROF_JVM_CLASSPATH": "/no/such/dir"}, "cannot load clojure.java.api.Clojure"),
    (True, {}, "another library started the JVM"),
])
def test_a_jvm_pyprof_cannot_use_gives_the_same_clear_error_on_every_call(tmp_path, other, env,
                                                                         words):
    pytest.importorskip("jpype")
    out = run_scenario(_BRIDGE.replace("OTHER", str(other)), tmp_path, env=env)
    assert [o[0] for o in out] == ["JVMError"] * 3
    assert all(words in o[1] and " fix: " in o[1] for o in out)
    assert out[0][1] == out[1][1] == out[2][1]


# A JVM under the C locale (Docker images, systemd services): a probe's find. JNA sent "?" for
# every non-ASCII character of a name, and a file name the JVM cannot encode was a bare
# InvalidPathException, after which no trace was written.
_C_LOCALE = r"""
(require '[pyprof.profiler :as p] '[pyprof.objects :as o])
(println "refused" (try (p/profiler-set-config {:filename "\u00e9.json"}) nil
                        (catch Exception e (:pyprof/code (ex-data e)))))
(p/profiler-set-config {:filename "names.json" :profile-all true})
(p/profiler-set-state :run)
(let [d (o/domain "d\u00e9") t (o/task d "t\ud83d\ude00")] (o/start t) (o/stop t))
(p/profiler-set-state :stop)
(p/dump-profile)
"""


def test_a_jvm_in_the_c_locale_writes_names_as_utf8_and_refuses_what_it_cannot_name(tmp_path):
    from pyprof import jvm
    from tests.child import FAST_JVM
    env = {k: v for k, v in os.environ.items() if not k.startswith("LC_")}
    p = subprocess.run(["java", *FAST_JVM, "-cp", os.pathsep.join(jvm.classpath()),
                        "clojure.main", "-e", _C_LOCALE], cwd=tmp_path, env={**env, "LANG": "C"},
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "refused config.bad_path" in p.stdout, p.stdout
    events = json.loads((tmp_path / "names.json").read_bytes().decode("utf-8"))["traceEvents"]
    assert {"d\u00e9", "t\U0001F600"} <= {e.get("name") for e in events} | {e.get("cat") for e in events}
    assert sorted(os.listdir(tmp_path)) == ["names.json"]
    problem = rules.CATALOGUE["path_problems"]["not_in_file_names"]
    assert "LANG=C.UTF-8" in problem["fix"]
    # a relative file in a working directory the JVM cannot name (a reviewer's find: a bare
    # InvalidPathException; MXNet would write there, but nothing the JVM checks would hold)
    odd = tmp_path / "d\u00efr"
    odd.mkdir()
    p = subprocess.run(["java", *FAST_JVM, "-cp", os.pathsep.join(jvm.classpath()),
                        "clojure.main", "-e", "(require '[pyprof.profiler :as p]) (println (try "
                        "(p/profiler-set-config {:filename \"t.json\"}) (catch Exception e "
                        "(str (:pyprof/code (ex-data e)) \" | \" (ex-message e)))))"],
                       cwd=odd, env={**env, "LANG": "C"}, capture_output=True, text=True,
                       timeout=300)
    assert p.stdout.startswith("config.bad_path | ") and "cannot name its working directory" \
        in p.stdout, p.stdout + p.stderr[-2000:]


def test_a_file_name_too_long_for_the_parts_beside_it_is_refused_before_profiling(tmp_path):
    """A probe's find: a legal file name of 230 bytes failed in the middle, once a config kept
    the file (its hidden part's name was over 255 bytes), with a bare OSError in Python and a
    FileSystemException on the JVM, and the later events were lost. Now a name over
    api.json output_paths max_name_bytes is config.bad_path before anything runs."""
    most = rules.API["output_paths"]["max_name_bytes"]
    long = str(tmp_path / ("\u00e9" * ((most - 6) // 2) + "xx.json"))  # most + 1 bytes
    with pytest.raises(errors.ConfigError) as e:
        config.validate({"filename": long})
    assert _code(e) == "config.bad_path"
    assert f"its file name is {most + 1} bytes of UTF-8, more than the {most}" in str(e.value)
    config.validate({"filename": long.replace("xx.json", "x.json")})  # exactly `most`: taken
    from pyprof import session
    with pytest.raises(errors.ConfigError) as e:
        session.profile(path=long.replace("xx.json", "{window}x.json"))
    assert _code(e) == "session.bad_path"
    session.profile(path=str(tmp_path / ("a" * 190 + "{window:03d}.json")))  # filled: 198 bytes


def test_a_file_that_is_no_trace_is_never_replaced(tmp_path):
    """A new user's find: set_config(filename="victim.py") deleted the source at once (MXNet's
    config deletes the file it names), and a session's window would replace it too. A file with
    no trace in its head is refused; a trace (of a rerun, or MXNet's headless continuation) and
    an empty file are taken."""
    import pyprof
    source = tmp_path / "victim.py"
    source.write_text("import mxnet\n" * 400)
    with pytest.raises(errors.ConfigError) as e:
        config.validate({"filename": str(source)})
    assert _code(e) == "config.bad_path" and "exists and is no trace" in str(e.value)
    with pytest.raises(errors.ConfigError) as e:
        pyprof.profile(path=str(source))
    assert _code(e) == "session.bad_path" and "exists and is no trace" in str(e.value)
    assert source.read_text() == "import mxnet\n" * 400
    for text in ('{\n    "traceEvents": [\n', ',\n    {"name": "x", "ph": "B"}', ""):
        (tmp_path / "t.json").write_text(text)
        config.validate({"filename": str(tmp_path / "t.json")})
        pyprof.profile(path=str(tmp_path / "t.json"))


def test_a_relative_filename_stays_where_it_was_configured(tmp_path):
    """A new user's find: with filename="rel.json" and an os.chdir while profiling, MXNet (which
    opens the file at each dump) split the trace into two invalid halves, rel.json without its
    end and sub/rel.json without its head, and nothing said so. The filename is made absolute
    when configured, for MXNet and for pyprof's checks alike."""
    r = run_scenario("""
import os, time
import mxnet as mx
from pyprof import profiler
os.mkdir("sub")
profiler.set_config(filename="rel.json", profile_imperative=True, dump_period=0.1)
profiler.set_state("run")
(mx.nd.ones((4, 4)) * 2).wait_to_read()
time.sleep(0.3)                     # the dump timer has written rel.json here
os.chdir("sub")
(mx.nd.ones((4, 4)) * 3).wait_to_read()
profiler.set_state("stop")
profiler.dump()
result = {"config": profiler.current_config()["filename"], "sub": os.listdir(".")}
""", tmp_path)
    assert r == {"config": str(tmp_path / "rel.json"), "sub": []}
    events = json.loads((tmp_path / "rel.json").read_text())["traceEvents"]  # valid JSON
    assert sum(e.get("name") == "_mul_scalar" and e.get("ph") == "B" for e in events) == 2


def test_a_gzip_trace_may_be_replaced_and_a_later_window_never_replaces_a_file_of_notes(tmp_path):
    """A reviewer's finds: a gzip trace (pyprof compact --gzip) was refused as no trace; and the
    no-trace check looked at window 0's file only, so window 1 replaced a file of notes. A later
    window whose file holds no trace goes beside it, said on stderr, in Python and Clojure; a
    FIFO there too (reading its head to tell hung the program for ever)."""
    import gzip
    (tmp_path / "t.json").write_bytes(gzip.compress(b'{"traceEvents": []}'))
    config.validate({"filename": str(tmp_path / "t.json")})
    assert _output.holds_no_trace(b"notes") and not _output.holds_no_trace(b"")
    body = """
import mxnet as mx, pyprof
with pyprof.profile(schedule=pyprof.schedule(active=1, repeat=3), path="w_{window}.json",
                    profile_imperative=True) as s:
    for _ in range(3):
        mx.nd.ones((2, 2)).wait_to_read()
        s.step()
print([w.path for w in s.windows])
"""
    clj = ("(require '[pyprof.session :as s] '[pyprof.example.ndarray :as nd]) "
           "(let [p (s/start! (s/profile {:schedule (s/schedule {:active 1 :repeat 3}) "
           ":path \"w_{window}.json\" :profile-imperative true}))] "
           "(dotimes [_ 3] (with-open [a (nd/random-uniform -1 1 [2 2])] (nd/wait-to-read a)) "
           "(s/step! p)) (println (mapv :path (s/stop! p))))")
    from pyprof import jvm
    from tests.child import FAST_JVM
    for lang, cmd in (("python", [sys.executable, "-c", body]),
                      ("clojure", ["java", *FAST_JVM, "-cp", os.pathsep.join(jvm.classpath()),
                                   "clojure.main", "-e", clj])):
        d = tmp_path / lang
        d.mkdir()
        (d / "w_1.json").write_text("my notes\n")
        os.mkfifo(d / "w_2.json")
        p = subprocess.run(cmd, cwd=d, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
        assert p.returncode == 0, p.stderr[-3000:]
        assert (d / "w_1.json").read_text() == "my notes\n", lang
        for i in (1, 2):
            beside = [f for f in os.listdir(d) if f.startswith(f"w_{i}-") and f.endswith(".json")]
            assert len(beside) == 1 and beside[0] in p.stdout, (lang, os.listdir(d), p.stdout)
        assert f"window 1's file {d / 'w_1.json'} exists and holds no trace" in p.stderr, p.stderr
