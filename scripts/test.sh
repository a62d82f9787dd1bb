#!/usr/bin/env bash
# Every test: set up (once), then the Python suite (pytest) and the JVM suite (lein test).
# Extra arguments go to pytest.
# `--fast` runs only the pure-logic tests (pytest -m fast: no MXNet, no JVM, no child process;
# tests/conftest.py gives the marker and guards the lane), in under a minute.
# `--gpu [CUDA]` first sets up the CUDA build of MXNet (scripts/setup.sh --gpu), and after the
# suites runs the GPU check (scripts/gpu-check.sh) into $GPU_CHECK_OUT (default ./gpu-check-out).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/gpu-args.sh
. "$root/scripts/gpu-args.sh"
fast=0 args=()
for a in "$@"; do if [ "$a" = --fast ]; then fast=1; else args+=("$a"); fi; done
set -- "${args[@]}"
split_gpu_args "$@"
set -- "${rest[@]}"
"$root/scripts/setup.sh" "${setup[@]}"
cd "$root"
took() { echo "== ($1: $((SECONDS - $2)) s)"; }  # each part's wall time, for docs/performance
workers="${PYPROF_TEST_WORKERS:-$(nproc)}"
if ((fast)); then
  # one worker per core, tests handed out one by one (a file of property tests takes 25 s)
  xdist=(); ((workers > 1)) && xdist=(-n "$workers" --dist load)
  echo "== Pure-logic tests (pytest -m fast${xdist:+ on $workers workers})"
  exec .venv/bin/python -m pytest -m fast "${xdist[@]}" "$@"
fi
status=0
libmxnet="$("$root/.venv/bin/python" -c 'import pyprof.native.capi as c; print(c.library_path())')"
# The JVM suite (then the seed's example) runs beside pytest: both are mostly child processes,
# and one after the other left a third of the two cores idle. Its output is kept in a file and shown when it ends.
# PYPROF_TEST_SERIAL=1 runs them one after the other.
jvm_log="$(mktemp "${TMPDIR:-/tmp}/pyprof-lein-test.XXXXXX")"
trap 'rm -f "$jvm_log"' EXIT
# A background job of a script ignores SIGINT: on Ctrl+C or TERM, stop it and its JVMs too.
kill_tree() { local c; for c in $(pgrep -P "$1"); do kill_tree "$c"; done; kill -TERM "$1" 2>/dev/null || true; }
trap '[ -n "${jvm_pid:-}" ] && kill_tree "$jvm_pid"; exit 130' INT TERM
jvm_suite() { (cd jvm && MXNET_LIBRARY_PATH="$libmxnet" lein test); }
example_suite() {
  echo "== The seed's Clojure example (lein test in examples/matmul/)"
  local t=$SECONDS rc=0
  (cd examples/matmul && MXNET_LIBRARY_PATH="$libmxnet" lein test) || rc=$?
  echo "== (lein test in examples/matmul/: $((SECONDS - t)) s)"; return $rc
}
jvm_pid=""
if [ "${PYPROF_TEST_SERIAL:-0}" != 1 ]; then
  echo "== JVM tests (lein test in jvm/), beside pytest: output when they end"
  t_jvm=$SECONDS
  { jvm_suite && rc=0 || rc=$?; echo "== (lein test in jvm/: $((SECONDS - t_jvm)) s, beside pytest)"
    example_suite || rc=$?; exit $rc; } >"$jvm_log" 2>&1 & jvm_pid=$!
fi
# Most tests wait on child processes (MXNet, JVMs): one pytest worker per core keeps both busy.
# Files stay whole on a worker (module fixtures run once). PYPROF_TEST_WORKERS=0 runs serially.
xdist=(); ((workers > 0)) && xdist=(-n "$workers" --dist loadfile)
echo "== Python tests (pytest${xdist:+ on $workers workers})"
t=$SECONDS; .venv/bin/python -m pytest "${xdist[@]}" "$@" || status=$?; took pytest $t
if [ -n "$jvm_pid" ]; then
  jvm_status=0; wait "$jvm_pid" || jvm_status=$?
  echo "== JVM tests (lein test in jvm/, then examples/matmul/): output"
  cat "$jvm_log"
  ((jvm_status == 0)) || status=$jvm_status
else
  echo "== JVM tests (lein test in jvm/)"
  t=$SECONDS; jvm_suite || status=$?; took "lein test in jvm/" $t
  example_suite || status=$?
fi
if ((${#setup[@]})); then
  echo "== The GPU check (scripts/gpu-check.sh)"
  scripts/gpu-check.sh "${GPU_CHECK_OUT:-$root/gpu-check-out}" || status=$?
fi
exit $status
