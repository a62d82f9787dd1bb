#!/usr/bin/env bash
# The GPU path end to end, on a machine with an NVIDIA GPU, in under 5 minutes:
#
#   scripts/gpu-check.sh OUTDIR             run every step; exit 0 when all pass
#   scripts/gpu-check.sh --dry-run OUTDIR   list the steps and their commands; run nothing
#                                           (works on CPU, no GPU needed)
#   --budget SECONDS                        time for all steps (default 290)
#
# Steps: the driver; the MXNet build sees gpu(0) and has kernels for it; the 4096x4096 dot on
# gpu(0) from Python, from the JVM through the bridge and from the seed example under
# `lein run` with gpu? true, one profiled dot each with its GFLOP/s; GPU memory profiling
# (per-device memory, the GPU memory dump file where the build has one); parity of the
# Python and JVM traces; `pyprof bench --ctx gpu --category gemm`; then the same dot and
# bench on CPU for comparison. Each step's output is in OUTDIR/logs/; the results are in
# OUTDIR/summary.md and OUTDIR/summary.json (the dry run writes the same, steps "planned").
#
# Set up first with `scripts/setup.sh --gpu` (the CUDA build of mxnet==1.9.1).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }

args=() out=""
while (($#)); do
  case "$1" in
    --dry-run) args+=(--dry-run) ;;
    --budget) (($# > 1)) || { echo "gpu-check: --budget needs a number of seconds" >&2; exit 2; }
              args+=(--budget "$2"); shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "gpu-check: unknown option '$1' (see scripts/gpu-check.sh --help)" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "gpu-check: one OUTDIR only, got '$out' and '$1'" >&2; exit 2; }
       out="$1" ;;
  esac
  shift
done
[ -n "$out" ] || { echo "gpu-check: missing OUTDIR (usage: scripts/gpu-check.sh [--dry-run] OUTDIR)" >&2; exit 2; }

py="$root/.venv/bin/python"
if [ ! -x "$py" ]; then
  case " ${args[*]-} " in
    *" --dry-run "*) py=python3 ;;  # the dry run needs no pyprof
    *) echo "gpu-check: no .venv; run scripts/setup.sh --gpu first" >&2; exit 1 ;;
  esac
fi
cd "$root"
exec "$py" scripts/gpu_check.py run "${args[@]}" "$out"
