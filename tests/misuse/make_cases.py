import json
C = []
def case(name, steps, why=""):
    C.append({"name": name, "steps": steps})
def err(call, args, code, **kw):
    s = {"call": call, "expect": {"error": code}}
    if "message_has" in kw: s["expect"]["message_has"] = kw.pop("message_has")
    if args: s["args"] = args
    s.update(kw); return s
NJ = {"not_in": ["java"], "why": "Java's types rule this input out"}
cfg = lambda **a: {"call": "set_config", "args": a}
run = {"call": "set_state", "args": {"state": "run"}}
stop = {"call": "set_state", "args": {"state": "stop"}}
work = {"call": "workload", "args": {"times": 2}}
dump = {"call": "dump"}
base = cfg(filename="{dir}/t.json", profile_imperative=True, continuous_dump=False)
def trace_of(path, n):
    return {"call": "trace", "args": {"path": path, "cats": ["operator"], "names": ["_random_uniform"]},
            "expect": {"events": [{"event": {"name": "_random_uniform", "cat": "operator", "ph": ph}, "count": n}
                                  for ph in ("B", "E", "b", "e")]}}
trace = trace_of("t.json", 2)
# wrong keys / values / types
case("config unknown key", [err("set_config", {"profile_symbolc": True}, "config.unknown_key")])
case("config bool as text", [err("set_config", {"profile_api": "yes"}, "config.bad_value")])
case("config bool as 2", [err("set_config", {"profile_api": 2}, "config.bad_value")])
case("config dump_period 0", [err("set_config", {"dump_period": 0}, "config.bad_value")])
case("config dump_period negative", [err("set_config", {"dump_period": -1.5}, "config.bad_value")])
case("config dump_period text", [err("set_config", {"dump_period": "soon"}, "config.bad_value")])
# grammar.json: only the decimal regex, ASCII whitespace (no CPython float() spellings)
case("config dump_period with underscores", [err("set_config", {"dump_period": "1_000"}, "config.bad_value")])
case("config dump_period in non-ASCII digits", [err("set_config", {"dump_period": "\u0661\u0662"}, "config.bad_value")])
case("config bool in a no-break space", [err("set_config", {"profile_api": "\u00a0true"}, "config.bad_value")])
case("config empty filename", [err("set_config", {"filename": ""}, "config.bad_value")])
case("config bad profile_process", [err("set_config", {"profile_process": "both"}, "config.bad_value")])
case("config missing directory", [err("set_config", {"filename": "{dir}/missing/t.json"}, "config.missing_directory")])
case("config server without kvstore", [err("set_config", {"profile_process": "server"}, {"python": "process.server_needs_kvstore", "jvm": "process.server_in_jvm"})])
case("legacy mode unknown", [err("profiler_set_config", {"mode": "everything"}, "config.legacy_mode")])
case("state unknown", [err("set_state", {"state": "go"}, "state.invalid")])
case("state bad process", [err("set_state", {"state": "run", "profile_process": "both"}, "process.invalid", not_in=["java"], why="no profile_process in Java")])
case("dumps bad format", [err("dumps", {"format": "xml"}, "dumps.format")])
case("dumps bad sort_by", [err("dumps", {"sort_by": "median"}, "dumps.sort_by")])
case("dumps ascending text", [err("dumps", {"ascending": "yes"}, "dumps.ascending", **NJ)])
case("dumps before profiling", [err("dumps", None, "dumps.empty")])
# bad states and orders
case("dump before run", [err("dump", None, "state.dump_before_run")])
case("stop before run then dump", [base, stop, err("dump", None, "state.dump_before_run")])
case("run twice keeps recording", [base, run, run, work, stop, dump, trace])
case("filename while running, data kept", [base, run, work, cfg(filename="{dir}/other.json", profile_imperative=True, continuous_dump=False), work, stop, dump, trace, trace_of("other.json", 2)])
case("set_config other key while running", [base, run, work, cfg(profile_api=True), work, stop, dump, trace_of("t.json", 4)])
case("new filename while running, both files valid", [base, run, work, cfg(filename="{dir}/other.json"), {"call": "workload", "args": {"times": 3}}, stop, dump, trace, trace_of("other.json", 3)])
case("pause when stopped", [base, {"call": "pause"}, {"call": "resume"}, run, work, stop, dump, trace])
case("second finished dump", [base, run, work, stop, dump, err("dump", None, "state.finished_dump"), trace])
case("run after finished dump", [base, run, work, stop, dump, err("set_state", {"state": "run"}, "state.finished_run"), trace])
case("set_config after finished dump", [base, run, work, stop, dump, err("set_config", {"filename": "{dir}/again.json"}, "state.finished_config"), trace])
case("dump while running keeps data", [base, run, work, dump, err("set_state", {"state": "run"}, "state.finished_run")])
# bad objects
D = {"call": "Domain", "args": {"name": "d"}, "as": "d"}
case("domain empty name", [err("Domain", {"name": ""}, "object.bad_name")])
case("domain quote in name", [err("Domain", {"name": "bad\"name"}, "object.name_bad_char")])
case("domain backslash in name", [err("Domain", {"name": "bad\\name"}, "object.name_bad_char")])
case("domain control char in name", [err("Domain", {"name": "bad\nname"}, "object.name_bad_char")])
case("task name too long", [D, err("Task", {"domain": "$d", "name": "x" * 200}, "object.name_too_long")])
case("task without domain", [err("Task", {"domain": "train", "name": "t"}, "object.needs_domain", **NJ)])
case("task stop without start", [D, {"call": "Task", "args": {"domain": "$d", "name": "t"}, "as": "t"}, err("Task.stop", None, "object.not_started", target="$t")])
case("task started twice", [D, {"call": "Task", "args": {"domain": "$d", "name": "t"}, "as": "t"}, {"call": "Task.start", "target": "$t"}, err("Task.start", None, "object.already_started", target="$t")])
case("task used after close", [D, {"call": "Task", "args": {"domain": "$d", "name": "t"}, "as": "t"}, {"call": "Task.close", "target": "$t"}, err("Task.start", None, "object.closed", target="$t")])
case("event stop without start", [{"call": "Event", "args": {"name": "e"}, "as": "e"}, err("Event.stop", None, "object.not_started", target="$e")])
case("marker bad scope", [D, {"call": "Marker", "args": {"domain": "$d", "name": "m"}, "as": "m"}, err("Marker.mark", {"scope": "galaxy"}, "marker.scope", target="$m")])
C_ = {"call": "Counter", "args": {"domain": "$d", "name": "c"}, "as": "c"}
case("counter negative", [D, C_, err("Counter.set_value", {"value": -1}, "counter.out_of_range", target="$c")])
case("counter 2^64", [D, C_, err("Counter.set_value", {"value": 18446744073709551616}, "counter.out_of_range", target="$c")])
case("counter below zero", [D, C_, err("Counter.decrement", {"delta": 7}, "counter.below_zero", target="$c")])
case("counter step as text", [D, C_, err("Counter.increment", {"delta": "1"}, "counter.not_int", target="$c", **NJ)])
# sessions
S = {"call": "schedule", "args": {"wait": 0, "warmup": 0, "active": 1, "repeat": 2}, "as": "sched", "not_in": ["java"], "why": "no schedule object in Java"}
case("schedule active 0", [err("schedule", {"active": 0}, "schedule.bad_value", not_in=["java"], why="no schedule object in Java")])
case("schedule wait negative", [err("schedule", {"wait": -1}, "schedule.bad_value", not_in=["java"], why="no schedule object in Java")])
case("session reserved filename", [S, err("profile", {"schedule": "$sched", "path": "{dir}/w_{window}.json", "filename": "x.json"}, "session.reserved_option", not_in=["java"], why="no schedule object in Java")])
case("session path without window", [S, err("profile", {"schedule": "$sched", "path": "{dir}/w.json"}, "session.path_needs_window", not_in=["java"], why="no schedule object in Java")])
P = {"call": "profile", "args": {"path": "{dir}/w_{window}.json"}, "as": "s"}
case("step before start", [P, err("profile.step", None, "session.not_open", target="$s")])
case("stats before a window", [P, err("profile.stats", None, "session.no_window", target="$s")])
case("session started twice", [P, {"call": "profile.start", "target": "$s"}, err("profile.start", None, "session.already_started", target="$s"), {"call": "profile.stop", "target": "$s"}])
case("set_state inside a session", [P, {"call": "profile.start", "target": "$s"}, err("set_state", {"state": "stop"}, "state.session_owns"), {"call": "profile.stop", "target": "$s"}])
case("nested sessions", [P, {"call": "profile.start", "target": "$s"}, {"call": "profile", "args": {"path": "{dir}/v_{window}.json"}, "as": "s2"}, err("profile.start", None, "session.nested", target="$s2"), {"call": "profile.stop", "target": "$s"}])
case("recover with nothing to recover", [err("recover", {"path": "{dir}/never.json"}, "session.nothing_to_recover")])
# trace tools on bad files
case("stats of a missing file", [err("stats", {"trace_or_paths": "{dir}/nope.json"}, "trace.cannot_open")])
JVM_READS = "the JVM reads valid traces and MXNet's own layout only: anything else is trace.not_valid, whose fix names pyprof repair (Python's reader)"
case("stats of an empty file", [{"call": "write_file", "args": {"path": "e.json", "text": ""}},
                                err("stats", {"trace_or_paths": "{dir}/e.json"}, "trace.empty", languages=["python"], why=JVM_READS),
                                err("stats", {"trace_or_paths": "{dir}/e.json"}, "trace.not_valid", languages=["clojure", "java"], why=JVM_READS)])
case("stats of a foreign file", [{"call": "write_file", "args": {"path": "f.json", "text": "{\"hello\": [1, 2, 3]}"}},
                                 err("stats", {"trace_or_paths": "{dir}/f.json"}, "trace.no_events", languages=["python"], why=JVM_READS),
                                 err("stats", {"trace_or_paths": "{dir}/f.json"}, "trace.not_valid", languages=["clojure", "java"], why=JVM_READS)])
case("stats of a directory", [err("stats", {"trace_or_paths": "{dir}"}, "trace.cannot_open")])
case("stats of no files", [err("stats", {"trace_or_paths": []}, "trace.no_paths", **NJ)])
case("stats of a truncated trace", [base, run, work, stop, dump, {"call": "truncate_file", "args": {"path": "t.json", "keep": 0.6}}, {"call": "stats", "args": {"trace_or_paths": "{dir}/t.json"}, "expect": {"ok": {"operators": {}}}}])
# output paths MXNet cannot write (issue 12 item 1): refused before profiling, or at the dump with the events kept
def bad_path(name, path, words, pre=()):
    case(name, [*pre, err("set_config", {"filename": path}, "config.bad_path", message_has=[words])])
bad_path("config filename is a directory", "{dir}", "is a directory")
bad_path("config filename in /proc", "/proc/pyprof-x.json", "no file can be created in directory")
bad_path("config filename is a device", "/dev/null", "is not a regular file")
bad_path("config filename is a fifo", "{dir}/p.fifo", "is not a regular file", pre=[{"call": "make_fifo", "args": {"path": "p.fifo"}}])
bad_path("config filename with NUL", "{dir}/a\0b.json", "NUL character at character")
bad_path("config filename with a lone surrogate", "{dir}/\udcff.json", "lone surrogate U+DCFF at character")
# a new user's find: "sub/" was written as a file named "sub"
bad_path("config filename ending in a slash", "{dir}/sub/", "names a directory, not a file")
# a file that is no trace would be deleted by MXNet's config (a new user's find: filename="train.py")
case("config filename names a file that is no trace", [{"call": "write_file", "args": {"path": "train.py", "text": "import mxnet\n"}}, err("set_config", {"filename": "{dir}/train.py"}, "config.bad_path", message_has=["exists and is no trace", "move"]), {"call": "files", "expect": {"ok": ["train.py"]}}])
case("config filename under a file", [{"call": "write_file", "args": {"path": "f.txt", "text": "x"}}, err("set_config", {"filename": "{dir}/f.txt/t.json"}, "config.bad_path", message_has=["is a file, not a directory"])])
case("bad filename while running keeps the trace", [base, run, work, err("set_config", {"filename": "{dir}"}, "config.bad_path"), stop, dump, trace])
case("missing directory while running keeps the trace", [base, run, work, err("set_config", {"filename": "{dir}/no/t.json"}, "config.missing_directory"), stop, dump, trace])
gone = [{"call": "make_dir", "args": {"path": "gone"}}, cfg(filename="{dir}/gone/t.json", profile_imperative=True, continuous_dump=False), run, work, stop, {"call": "remove_path", "args": {"path": "gone"}}]
case("dump after its directory was removed, then a new filename", [*gone, err("dump", None, "dump.unwritable", message_has=["the events MXNet holds are kept"]), cfg(filename="{dir}/saved.json"), dump, trace_of("saved.json", 2)])
case("intermediate dump after its directory was removed", [*gone, err("dump", {"finished": False}, "dump.unwritable"), cfg(filename="{dir}/saved.json"), dump, trace_of("saved.json", 2)])
case("new filename after the old directory vanished while running", [{"call": "make_dir", "args": {"path": "gone"}}, cfg(filename="{dir}/gone/a.json", profile_imperative=True, continuous_dump=False), run, work, {"call": "remove_path", "args": {"path": "gone"}}, cfg(filename="{dir}/b.json"), {"call": "workload", "args": {"times": 3}}, stop, dump, trace_of("b.json", 5)])
case("new filename with continuous dump, both files valid", [cfg(filename="{dir}/t.json", profile_imperative=True, continuous_dump=True), run, work, cfg(filename="{dir}/other.json"), {"call": "workload", "args": {"times": 3}}, stop, dump, trace, trace_of("other.json", 3)])
# names MXNet cannot take: a lone surrogate has no UTF-8 encoding (each object kind)
case("domain name with a lone surrogate", [err("Domain", {"name": "d\udcff"}, "object.name_not_unicode", message_has=["U+DCFF at character 1"])])
for kind in ("Task", "Frame"):
    case(f"{kind.lower()} name with a lone surrogate", [D, err(kind, {"domain": "$d", "name": "\udcfft"}, "object.name_not_unicode", message_has=["U+DCFF at character 0"])])
case("event name with a lone surrogate", [err("Event", {"name": "e\udcff"}, "object.name_not_unicode")])
case("counter name with a lone surrogate", [D, err("Counter", {"domain": "$d", "name": "c\udcff"}, "object.name_not_unicode")])
case("marker name with a lone surrogate", [D, err("Marker", {"domain": "$d", "name": "m\udcff"}, "object.name_not_unicode")])
case("domain NUL in name", [err("Domain", {"name": "bad\0name"}, "object.name_bad_char")])
# counters: the whole unsigned 64-bit range (issue 12 item 2)
def counter_kept(name, value):
    case(name, [cfg(filename="{dir}/t.json", profile_all=False, profile_symbolic=False, profile_imperative=False, profile_memory=False, profile_api=False, continuous_dump=False),
                {"call": "Domain", "args": {"name": "big"}, "as": "d"}, {"call": "Counter", "args": {"domain": "$d", "name": "n"}, "as": "c"}, run,
                {"call": "Counter.set_value", "target": "$c", "args": {"value": value}}, stop, dump,
                {"call": "trace", "args": {"path": "t.json", "cats": ["big"], "keep": ["name", "cat", "ph", "args"]},
                 "expect": {"events": [{"event": {"args": {"n": value}, "cat": "big", "name": "n", "ph": "C"}, "count": 1}]}}])
counter_kept("counter 2^63 is kept", 2 ** 63)
counter_kept("counter 2^64-1 is kept", 2 ** 64 - 1)
case("counter 2^70", [D, C_, err("Counter.set_value", {"value": 2 ** 70}, "counter.out_of_range", target="$c", message_has=["MXNet counters hold 0 ... 18446744073709551615 (2^64-1)."])])
case("counter increment past 2^64-1", [D, C_, {"call": "Counter.set_value", "target": "$c", "args": {"value": 2 ** 64 - 1}}, err("Counter.increment", {"delta": 1}, "counter.above_max", target="$c")])
case("counter value as a float", [D, C_, err("Counter.set_value", {"value": 1.5}, "counter.not_int", target="$c", **NJ)])
# sessions: window paths and schedules
# Java sessions write only under the output root (pyprof.jvm.OutputRoot, -Dpyprof.outputRoot): its own errors
def bad_window(java_code):
    return {"python": "session.bad_path", "jvm": "session.bad_path", "java": java_code} if java_code else "session.bad_path"
for name, path, words, java_code in [("a directory", "{dir}", "is a directory", None), ("in /proc", "/proc/w_{window}.json", "/proc", "root.outside"),
                                     ("in a missing directory", "{dir}/no/w_{window}.json", "does not exist", "root.missing_directory"),
                                     ("with NUL", "{dir}/w\0_{window}.json", "NUL", None),
                                     ("with a lone surrogate", "{dir}/w\udcff_{window}.json", "surrogate", None),
                                     ("ending in a slash", "{dir}/w_{window}/", "names a directory, not a file", None)]:
    case(f"session window path {name}", [err("profile", {"path": path}, bad_window(java_code), message_has=[words])])
case("session window path under a file", [{"call": "write_file", "args": {"path": "f.txt", "text": "x"}}, err("profile", {"path": "{dir}/f.txt/sub/w_{window}.json"}, bad_window("root.file_in_the_way"), message_has=["is a file, not a directory"])])
# grammar.json window_path: refused when the session is made, in every language
for name, path, code in [("unknown field", "{dir}/w_{windw}.json", "template.unknown_field"),
                         ("format spec", "{dir}/w_{window:>3}.json", "template.bad_spec"),
                         ("lone brace", "{dir}/w_{window.json", "template.unbalanced")]:
    case(f"session window path template {name}", [err("profile", {"path": path}, code, message_has=["window path"])])
NS = {"not_in": ["java"], "why": "no schedule object in Java"}
case("schedule repeat negative", [err("schedule", {"repeat": -1}, "schedule.bad_value", **NS)])
case("schedule warmup negative", [err("schedule", {"warmup": -2}, "schedule.bad_value", **NS)])
case("schedule skip_first negative", [err("schedule", {"skip_first": -1}, "schedule.bad_value", **NS)])
case("schedule active as a float", [err("schedule", {"active": 1.5}, "schedule.bad_value", **NS)])
case("schedule wait as text", [err("schedule", {"wait": "2"}, "schedule.bad_value", **NS)])
case("schedule unknown option", [err("schedule", {"cycles": 2}, "schedule.unknown_option", **NS)])
case("dump finished as text", [base, run, work, stop, err("dump", {"finished": "maybe"}, "state.dump_finished_arg", **NJ), dump, trace])
# steady mode (issue 21): the refusals while the profiler stays running
sbegin = lambda **a: {"call": "steady_begin", "args": a}
send = {"call": "steady_end"}
case("steady begin while the profiler runs", [base, run, work, err("steady_begin", {}, "steady.profiler_running"), stop, dump, trace])
case("steady begin twice", [sbegin(), err("steady_begin", {}, "steady.already"), send])
case("steady switch, finished dump and mode change refused", [
    sbegin(filename="{dir}/t.json", profile_imperative=True, continuous_dump=False),
    {"call": "resume"}, work, {"call": "pause"},
    err("set_state", {"state": "stop"}, "steady.set_state"), err("dump", {}, "steady.finished_dump"),
    err("set_config", {"filename": "{dir}/t.json", "profile_imperative": False}, "steady.config_mode"),
    send, trace])
SHARED = {"about": "A case shares a child process with others (one after another, then the probe case, which configures, runs, records, dumps and reads back, so it fails when a case before it changed the profiler) when it has no known_bug and each of its steps is refused with a catalogue error (a refusal changes nothing) or is one of these calls, which make profiler objects, schedules or files of the case's own directory and never configure, run or dump the profiler. Every other case gets a child of its own.",
          "calls": ["Domain", "Task", "Frame", "Event", "Counter", "Marker", "Task.start", "Task.stop",
                    "Task.close", "Event.stop", "Counter.set_value", "Counter.increment",
                    "Counter.decrement", "Marker.mark", "schedule", "write_file", "make_fifo"],
          "probe": "run twice keeps recording"}
doc = {"about": "The misuse matrix (issue 12): each case runs in a child process, in Python (tests/test_misuse.py) and through Clojure and Java (jvm/test/pyprof/misuse_test.clj); shared_child says which cases share one. Every case ends in a catalogue error whose message ends in a fix, or in the documented result; data already collected is still written (a 'trace' step reads it back).",
       "shared_child": SHARED, "cases": C}
open(__import__("os").path.join(__import__("os").path.dirname(__file__), "cases.json"), "w").write(json.dumps(doc, indent=1) + "\n")
print(len(C))
