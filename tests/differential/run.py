"""The differential test's driver: generate batches (gen.py), run them through every API
(execute.py), compare with the Python reference (compare.py), shrink what differs and print it
as a scenario ready to commit.

    python tests/differential/run.py                      # the suite's fixed seed and budget
    python tests/differential/run.py --long --budget-s N  # batches until N seconds are spent,
                                                          # then figures; --shrink shrinks each
                                                          # class's first case (fresh children)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from differential import compare, execute, gen  # noqa: E402

SEED = 490  # the suite's: its batch (generated only, not run, to choose it) holds an input of each divergence class (bridge state, bridge values, error translation, templates, window cutting)
SIZE = 9  # sequences per batch (one JVM start per language and batch)


def check(seed_value: int = SEED, size: int = SIZE, **run_options: Any) -> dict[str, Any]:
    """One batch: its sequences, the runs and the first divergence per language and sequence
    (the suite's seed and size: with the pinned sequences, gen.PINNED)."""
    batch = gen.suite_batch(size, seed_value) if (seed_value, size) == (SEED, SIZE) else \
        gen.sample(size, seed_value)
    run = execute.run_batch(batch, **run_options)
    return {"batch": batch, "run": run, "divergences": compare.first_divergences(batch, run)}


def _diverges(steps: list[dict[str, Any]], language: str, klass: str,
              **run_options: Any) -> bool:
    batch = [{"steps": steps}]
    run = execute.run_batch(batch, ("python", language), **run_options)
    return any(d["class"] == klass for d in compare.first_divergences(batch, run))


def _core(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first guess at a minimal case: the configuration and state steps, the steps making
    the objects the last step uses (transitively), the raw events, and the last step."""
    keep = {len(steps) - 1}
    wanted = set(json.dumps(steps[-1]).split('"$')[1:])
    for i in range(len(steps) - 2, -1, -1):
        s = steps[i]
        if s["call"] in ("set_config", "set_state", "raw_event", "workload") or any(
                w.startswith(s.get("as", "\0")) for w in wanted):
            keep.add(i)
            wanted |= set(json.dumps(s).split('"$')[1:])
    return [s for i, s in enumerate(steps) if i in keep]


def shrink(batch: list[dict[str, Any]], found: dict[str, Any], *, max_runs: int = 10,
           **run_options: Any) -> list[dict[str, Any]]:
    """The fewest steps (greedy, chunks then single steps, each try in fresh children of the
    reference and the diverging language) that still give a divergence of the same class: the
    divergent sequence up to its divergent step, with the earlier sequences' steps first when
    it needs them."""
    lang, klass = found["language"], found["class"]
    own = batch[found["sequence"]]["steps"][:found["step"] + 1]
    core = _core(own)
    runs = 2
    if _diverges(core, lang, klass, **run_options):
        steps = core
    elif _diverges(own, lang, klass, **run_options):
        steps = own
    else:
        steps = [s for sc in batch[:found["sequence"]] for s in sc["steps"]] + own
    chunk = max(1, len(steps) // 2)
    while chunk >= 1 and runs < max_runs:
        i = 0
        while i < len(steps) and runs < max_runs:
            trial = steps[:i] + steps[i + chunk:]
            runs += 1
            if trial and _diverges(trial, lang, klass, **run_options):
                steps = trial
            else:
                i += chunk
        chunk //= 2
    return steps


def as_scenario(steps: list[dict[str, Any]], klass: str, **run_options: Any) -> dict[str, Any]:
    """A scenario whose expectations are the Python reference's outcomes for ``steps``
    (values that name the working directory, and the calls of compare.VALUE_FREE, left out)."""
    run = execute.run_batch([{"steps": steps}], ("python",), **run_options)
    root = run["roots"]["python"]
    out = []
    for step, ref in zip(steps, run["outcomes"]["python"][0]):
        step = dict(step)
        if "error" in ref:
            step["expect"] = {"error": ref["error"]}
        elif ref.get("ok") is not None and step["call"] not in compare.VALUE_FREE \
                and root not in json.dumps(ref["ok"]):
            step["expect"] = {"events" if step["call"] == "trace" else "ok": ref["ok"]}
        out.append(step)
    return {"about": f"found by the differential test (tests/differential): {klass}",
            "steps": out}


def report(result: dict[str, Any]) -> str:
    lines = []
    for d in result["divergences"]:
        lines.append(f"[{d['class']}] {d['language']}: sequence {d['sequence']}, step "
                     f"{d['step']} ({d['call']}): reference {json.dumps(d['reference'])[:300]}"
                     f"\n    got {json.dumps(d['got'])[:300]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--long", action="store_true", help="batches with seeds 1, 2, ... until the budget")
    ap.add_argument("--budget-s", type=float, default=600)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--size", type=int, default=SIZE)
    ap.add_argument("--shrink", action="store_true", help="shrink each class's first case")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    seeds = [a.seed] if not a.long else iter(range(a.seed, a.seed + 10 ** 6))
    tried = steps = batches = 0
    classes: Counter[str] = Counter()
    first: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {}
    for s in seeds:
        result = check(s, a.size)
        batches += 1
        tried += len(result["batch"])
        steps += sum(len(sc["steps"]) for sc in result["batch"])
        print(f"seed {s}: {len(result['divergences'])} divergences "
              f"({time.monotonic() - t0:.0f} s)\n{report(result)}", flush=True)
        for d in result["divergences"]:
            classes[d["class"]] += 1
            first.setdefault(d["class"], (result["batch"], d))
        if not a.long or time.monotonic() - t0 > a.budget_s:
            break
    elapsed = time.monotonic() - t0
    print(f"\nbatches {batches}, sequences tried {tried}, steps {steps}, "
          f"divergences {sum(classes.values())} ({dict(classes)}), time {elapsed:.0f} s")
    if a.shrink:
        for klass, (batch, d) in first.items():
            if d["sequence"] is None:
                continue
            t1 = time.monotonic()
            small = shrink(batch, d)
            print(f"\n--- {klass} ({d['language']}), shrunk to {len(small)} steps in "
                  f"{time.monotonic() - t1:.0f} s:")
            print(json.dumps(as_scenario(small, klass), ensure_ascii=False, indent=1))
    return 1 if classes else 0


if __name__ == "__main__":
    sys.exit(main())
