"""Hypothesis strategies: sequences of public calls with legal but unusual inputs.

A sequence is a scenario (``{"steps": [...]}``, calls named as ``bindings.json`` names them)
drawn from one of five families, each step tagged with the language that makes it through the
bridge (``"lang"``: python, clojure or java; a step on an object uses the language that made
the object; the runner's own calls - workloads, raw MXNet events, files - are Python's):

* config: values in their accepted spellings (bool words in any case, numbers as strings with
  exponents, signs and spaces, small floats), then ``current_config``;
* state: orders of run/stop/pause/resume/dump(unfinished)/dumps/set_config (while paused,
  without a filename after running);
* objects: names (unicode with non-BMP, quotes, backslashes, 127 and 128 bytes, empty) and
  counters at the ends of their range with big increments;
* session: a schedule at its edges, a window-path template (``{window}``, ``{window:02d}``,
  ``{step}``, ``{pid}``, ``{{``, an unknown field), workloads and events MXNet takes but pyprof
  refuses (``raw_event``: a backslash, as in ``C:\\tmp\\q``), then the windows and files;
* a finished dump, only as the batch's last sequence, with what may follow one;
* drawn apart, before the finished dump (:data:`TRACE_FAMILIES`): statistics (categories and
  exclusions as lists, tuples, sets, mappings, strings, None, numbers; traces whose categories
  are numbers, null, lists, objects), attributes (operator events with dimensions near and past
  2^32 and 2^63 and a Convolution kernel in other scripts' digits and Unicode spaces, written
  again by each language's window writer, then the FLOPs Python's readers derive and
  ``validate``), and dump's ``finished`` as a value that is no boolean.

Every sequence ends with ``state``, ``all_files`` and ``traces``, so a difference in what was
written shows up in the sequence that caused it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

LANGS = st.sampled_from(["python", "clojure", "java"])
BOOL_KEYS = ["profile_all", "profile_symbolic", "profile_imperative", "profile_memory",
             "profile_api", "aggregate_stats"]

bool_values = st.one_of(st.booleans(), st.sampled_from([0, 1]),
                        st.sampled_from(["true", "false", "1", "0", " true", "false "]).flatmap(
                            lambda w: st.sampled_from([w, w.upper(), w.capitalize()])))
number_values = st.one_of(
    st.sampled_from([1e-05, 0.5, 1, 2, 100000000, 0.1 + 0.2, 1e-300]),
    st.sampled_from(["2", " 3 ", "+1", "1e1", "2.5E-1", "-0", ".5", "5.", "1_0", "0x10",
                     "inf", "nan", "1e400", "-1"]))
name_values = st.one_of(
    st.sampled_from(["", "a", "op x", "é", "名字", "\U0001F600", "a\"b", "C:\\tmp\\q", "back\\",
                     "x" * 127, "x" * 128, "é" * 63 + "a", "é" * 64, "\U0001F600" * 32,
                     "tab\there", "line\nbreak"]),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x1F64F,
                                   blacklist_categories=("Cs",)), max_size=6))
domain_names = st.sampled_from(["d", "é", "名字", "\U0001F600", "x" * 127])
counter_values = st.sampled_from([0, 1, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1, 2 ** 64, -1, 2 ** 70])
deltas = st.sampled_from([1, 0, -1, 2 ** 62, 2 ** 63 - 1, 2 ** 63, -(2 ** 63), 2 ** 64])
templates = st.sampled_from(["w_{window}.json", "w_{window:02d}.json", "w_{window:3d}.json",
                             "w_{window:03}.json",
                             "w_{window}_{step}.json", "w_{window}_{pid}.json",
                             "w_{{x}}_{window}.json", "w_{window}_{nope}.json",
                             "w_{window!r}.json", "w_{window:>4}.json", "w.json"])


def _step(call: str, lang: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"call": call, "lang": lang or "python", **extra}


@st.composite
def config_seq(draw: Any) -> list[dict[str, Any]]:
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        args: dict[str, Any] = {"filename": "{dir}/c.json", "continuous_dump": False}
        for key in draw(st.lists(st.sampled_from(BOOL_KEYS), max_size=3, unique=True)):
            args[key] = draw(bool_values)
        if draw(st.booleans()):
            args["dump_period"] = draw(number_values)
        steps.append(_step("set_config", draw(LANGS), args=args))
        steps.append(_step("current_config", draw(LANGS)))
    return steps


STATE_CALLS = ["run", "stop", "pause", "resume", "dump", "dumps", "state", "config_nofile",
               "config_file"]


@st.composite
def state_seq(draw: Any) -> list[dict[str, Any]]:
    steps = [_step("set_config", draw(LANGS), args={"filename": "{dir}/s.json",
                                                    "continuous_dump": False})]
    for what in draw(st.lists(st.sampled_from(STATE_CALLS), min_size=2, max_size=8)):
        lang = draw(LANGS)
        if what in ("run", "stop"):
            steps.append(_step("set_state", lang, args={"state": what}))
        elif what == "dump":
            steps.append(_step("dump", lang, args={"finished": False}))
        elif what == "config_nofile":
            steps.append(_step("set_config", lang, args={"profile_api": draw(bool_values)}))
        elif what == "config_file":
            steps.append(_step("set_config", lang, args={"filename": "{dir}/s2.json"}))
        else:
            steps.append(_step(what, lang))
        if draw(st.booleans()):
            steps.append(_step(draw(st.sampled_from(["state", "current_config"])), draw(LANGS)))
    steps.append(_step("set_state", draw(LANGS), args={"state": "stop"}))
    return steps


@st.composite
def objects_seq(draw: Any) -> list[dict[str, Any]]:
    lang = draw(LANGS)
    steps = [_step("set_config", lang, args={"filename": "{dir}/o.json", "continuous_dump": False,
                                              "profile_all": True}),
             _step("set_state", draw(LANGS), args={"state": "run"}),
             # the domain takes names pyprof accepts, so its objects are made (their names
             # carry the edge cases, checked by the same rule)
             _step("Domain", lang, args={"name": draw(domain_names)}, **{"as": "d"})]
    for k in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["Task", "Frame", "Counter", "Event"]))
        name = draw(name_values)
        obj = f"o{k}"
        if kind == "Counter":
            args = {"domain": "$d", "name": name, "value": draw(counter_values)}
            steps.append(_step("Counter", lang, args=args, **{"as": obj}))
            steps.append(_step("Counter.value", lang, target=f"${obj}"))  # as made
            for _ in range(draw(st.integers(1, 3))):
                op = draw(st.sampled_from(["Counter.set_value", "Counter.increment",
                                           "Counter.decrement", "Counter.value"]))
                a = {"value": draw(counter_values)} if op == "Counter.set_value" else \
                    {} if op == "Counter.value" else {"delta": draw(deltas)}
                steps.append(_step(op, lang, target=f"${obj}", args=a))
            steps.append(_step("Counter.value", lang, target=f"${obj}"))
        else:
            args = {"name": name} if kind == "Event" else {"domain": "$d", "name": name}
            steps.append(_step(kind, lang, args=args, **{"as": obj}))
            steps += [_step("Task.start", lang, target=f"${obj}"), _step("workload"),
                      _step("Task.stop", lang, target=f"${obj}")]
    steps.append(_step("set_state", draw(LANGS), args={"state": "stop"}))
    steps.append(_step("dump", draw(LANGS), args={"finished": False}))
    return steps


@st.composite
def session_seq(draw: Any) -> list[dict[str, Any]]:
    lang = draw(LANGS)
    sched = {"wait": draw(st.integers(0, 2)), "active": draw(st.integers(1, 2)),
             "repeat": draw(st.integers(0, 2))}
    if draw(st.booleans()):
        sched["warmup"] = draw(st.integers(0, 1))
    template = draw(st.one_of(st.just("w_{window}.json"), templates))
    opts: dict[str, Any] = {"path": "{dir}/" + template, "profile_imperative": True}
    steps = [_step("schedule", lang, args=sched, **{"as": "sc"})]
    opts["schedule"] = "$sc"
    steps += [_step("profile", lang, args=opts, **{"as": "p"}),
              _step("profile.start", lang, target="$p")]
    n = draw(st.integers(1, 5))
    raw_at = draw(st.integers(0, n))  # one MXNet event in some step (n: none)
    for k in range(n):
        steps.append(_step("workload"))
        if k == raw_at:
            steps.append(_step("raw_event", args={"name": draw(st.sampled_from(
                ["C:\\tmp\\q", "a\\b", "quote\"d", "tab\\t", "plain"]))}))
        steps.append(_step("profile.step", lang, target="$p"))
    steps += [_step("profile.stop", lang, target="$p"),
              _step("profile.windows", lang, target="$p")]
    return steps


@st.composite
def finish_seq(draw: Any) -> list[dict[str, Any]]:
    steps = [_step("set_config", draw(LANGS), args={"filename": "{dir}/f.json",
                                                    "continuous_dump": False}),
             _step("set_state", draw(LANGS), args={"state": "run"}), _step("workload"),
             _step("set_state", draw(LANGS), args={"state": "stop"}),
             _step("dump", draw(LANGS), args={"finished": True})]
    for what in draw(st.lists(st.sampled_from(["dump", "dumps", "run", "state"]), max_size=3)):
        steps.append(_step("set_state", draw(LANGS), args={"state": "run"}) if what == "run"
                     else _step(what, draw(LANGS)))
    return steps


# ---- statistics and attributes (issue 35 item 6): no MXNet, so they run after the others

#: Event categories a trace may hold (the key left out: none): strings, other JSON values.
TRACE_CATS = ["operator", "é", "MXNET_C_API", 5, -1, 2 ** 63, True, None, ["a", 1], {"k": "v"},
              "5", ""]
#: categories= / exclude_categories= values: collections of every kind, and what is none.
CATEGORY_OPTIONS = [None, ["operator"], {"$tuple": ["operator", "5"]}, {"$set": ["é", "5"]},
                    {"operator": 1, "5": 0}, "operator", 5, [5], [], ["MXNET_C_API", ""],
                    [None]]
NO_JAVA_OPTIONS = {"not_in": ["java"], "why": "Profiler.stats takes paths only"}


def _trace_text(events: list[dict[str, Any]]) -> str:
    import json

    return json.dumps({"traceEvents": events}, ensure_ascii=False)


@st.composite
def stats_seq(draw: Any) -> list[dict[str, Any]]:
    """A trace whose events (one name each) have categories of every JSON kind, read by the
    statistics with categories and exclusions of every kind."""
    events = []
    for k in range(draw(st.integers(1, 4))):
        ev: dict[str, Any] = {"name": f"n{k}", "pid": 0, "tid": k}
        absent = draw(st.booleans()) and draw(st.booleans())
        if not absent:
            ev["cat"] = draw(st.sampled_from(TRACE_CATS))
        if draw(st.booleans()):
            events.append({**ev, "ph": "X", "ts": 10 * k, "dur": 3})
        else:
            events += [{**ev, "ph": "B", "ts": 10 * k}, {**ev, "ph": "E", "ts": 10 * k + 2}]
    steps = [_step("write_file", args={"path": "st.json", "text": _trace_text(events)}),
             _step("stats", "java", args={"trace_or_paths": "{dir}/st.json"}, **{"as": "all"}),
             _step("TraceStats.find", "java", target="$all", args={"name": "n0"})]
    for i in range(draw(st.integers(1, 3))):
        args: dict[str, Any] = {"trace_or_paths": "{dir}/st.json"}
        for option in ("categories", "exclude_categories"):
            if draw(st.booleans()):
                args[option] = draw(st.sampled_from(CATEGORY_OPTIONS))
        lang = draw(st.sampled_from(["python", "clojure"]))  # the find in the stats' language
        steps.append(_step("stats", lang, args=args, **{"as": f"s{i}"}, **NO_JAVA_OPTIONS))
        steps.append(_step("TraceStats.find", lang, target=f"$s{i}",
                           args={"name": draw(st.sampled_from([f"n{j}" for j in range(4)]))},
                           **NO_JAVA_OPTIONS))
    return steps


#: Dimensions near and past the ends of 32 and 64 bits; attribute spellings MXNet takes or
#: refuses (other scripts' digits, Unicode spaces).
DIMS = [1, 3, 2 ** 31 - 1, 2 ** 32, 2 ** 32 + 1, 2 ** 62, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1]
KERNELS = ["(3,3)", " (3, 3) ", "(3,3 )", "[3,3]", "(\u0663,\u0663)", "\u00a0(3,3)",
           "(3,\u00a03)", "(3,3)\u3000", "(\uff13,3)", "(3L,3)", "(+3,3)", "()", "(1,1)"]


def _args(ins: list[Any], outs: list[Any], attrs: dict[str, str]) -> dict[str, Any]:
    """An operator event's args as a window carries them (attribution.json trace_args)."""
    from pyprof import rules

    names = rules.spec("attribution.json")["trace_args"]
    return {names["input_dims"]: ins, names["input_type"]: ["float32"] * len(ins),
            names["output_dims"]: outs, names["output_type"]: ["float32"] * len(outs),
            names["attrs"]: attrs}


@st.composite
def attrs_seq(draw: Any) -> list[dict[str, Any]]:
    """Operator events with shapes and attributes as a JVM window carries them (a dot with big
    dimensions, a Convolution whose kernel is spelled oddly), written again by each language's
    window writer, then the FLOPs Python's readers derive from what was written."""
    m, k, n = (draw(st.sampled_from(DIMS)) for _ in range(3))
    kernel = draw(st.sampled_from(KERNELS))
    events = [
        {"name": "dot", "cat": "operator", "ph": "X", "ts": 1, "dur": 5, "pid": 0, "tid": 0,
         "args": _args([[m, k], [k, n]], [[m, n]],
                       {"transpose_a": "False", "transpose_b": "False"})},
        {"name": "Convolution", "cat": "operator", "ph": "X", "ts": 10, "dur": 5, "pid": 0,
         "tid": 0,
         "args": _args([[1, 1, 5, 5], [1, 1, 3, 3]], [[1, 1, 3, 3]],
                       {"kernel": kernel, "num_filter": "1", "no_bias": "True"})}]
    lang = draw(LANGS)
    return [_step("write_file", args={"path": "a.json", "text": _trace_text(events)}),
            _step("write_windows", lang, args={"paths": ["{dir}/a.json"], "out": "{dir}/w.json"}),
            _step("flops", args={"path": "w.json"}), _step("validate", args={"path": "w.json"})]


@st.composite
def dump_arg_seq(draw: Any) -> list[dict[str, Any]]:
    """dump's finished as something other than a boolean (1 finished the retired Clojure
    package's trace, mxnet.profiler's only for the literal True)."""
    return [_step("set_config", draw(LANGS), args={"filename": "{dir}/d.json",
                                                   "continuous_dump": True}),
            _step("set_state", draw(LANGS), args={"state": "run"}), _step("workload"),
            _step("set_state", draw(LANGS), args={"state": "stop"}),
            _step("dump", draw(st.sampled_from(["python", "clojure"])),
                  args={"finished": draw(st.sampled_from([1, 0, "true", None, 1.0]))},
                  not_in=["java"], why="Java's boolean rules the value out"),
            _step("state", draw(LANGS))]


FAMILIES = {"config": config_seq(), "state": state_seq(), "objects": objects_seq(),
            "session": session_seq(), "stats": stats_seq(), "attrs": attrs_seq(),
            "dump_arg": dump_arg_seq()}


def _close(steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {"steps": steps + [_step("state"), _step("all_files"), _step("traces")]}


@st.composite
def batches(draw: Any, size: int, finish: bool = True) -> list[dict[str, Any]]:
    """``size`` sequences (the families in turn, a session first while the profiler is fresh,
    so each batch has all of them), the last a finished dump when ``finish``."""
    names = ["session", "config", "state", "objects"]
    out = [_close(draw(FAMILIES[names[i % len(names)]])) for i in range(size - finish)]
    return out + ([_close(draw(finish_seq()))] if finish else [])


#: Sequences the suite's batch holds whatever hypothesis draws for its seed: divergences found
#: before, committed, so that each planted break of tests/differential/mutations.json is met. A
#: zero-padded window template, and a backslash in an event's name inside a window the JVM cuts
#: (MXNet copies names unescaped into the raw trace): the seed's own backslash fell in a
#: schedule's wait, and its templates had no zero fill.
PINNED = [_close([
    _step("schedule", "java", args={"wait": 0, "active": 2, "repeat": 1}, **{"as": "sc"}),
    _step("profile", "java", args={"path": "{dir}/w_{window:02d}.json",
                                   "profile_imperative": True, "schedule": "$sc"}, **{"as": "p"}),
    _step("profile.start", "java", target="$p"), _step("workload"),
    _step("raw_event", args={"name": "C:\\tmp\\q"}), _step("profile.step", "java", target="$p"),
    _step("workload"), _step("profile.step", "java", target="$p"),
    _step("profile.stop", "java", target="$p"), _step("profile.windows", "java", target="$p")])]


def suite_batch(size: int, seed_value: int) -> list[dict[str, Any]]:
    """The batch of :func:`sample` with :data:`PINNED` before its finished dump."""
    batch = sample(size, seed_value)
    return batch[:-1] + PINNED + batch[-1:]


def sample(size: int, seed_value: int, finish: bool = True) -> list[dict[str, Any]]:
    """One batch drawn with a fixed seed (the same batch on every run): the families of
    :func:`batches`, then (before the finished dump) :data:`TRACE_FAMILIES` sequences of the
    statistics and attribute families, drawn apart so that the others stay what the seed
    gave before them."""
    batch = _draw(batches(size, finish), seed_value)
    extra = _draw(st.tuples(*[FAMILIES[n] for n in TRACE_FAMILIES]), seed_value)
    extra = [_close(steps) for steps in extra]
    return batch[:-1] + extra + batch[-1:] if finish else batch + extra


#: The families drawn apart from the others (issue 35 item 6): two sequences of the
#: statistics and of the attribute families (trace files only, no MXNet), one dump argument.
TRACE_FAMILIES = ["stats", "stats", "attrs", "attrs", "dump_arg"]


def _draw(strategy: Any, seed_value: int) -> Any:
    got: list[Any] = []

    @settings(max_examples=3, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @seed(seed_value)
    @given(strategy)
    def draw(value: Any) -> None:
        got.append(value)

    draw()
    return got[-1]
