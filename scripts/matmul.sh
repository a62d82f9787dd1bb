#!/usr/bin/env bash
# The main job: set up (once), then profile the dot example and print its statistics.
# Options go to `pyprof matmul` (e.g. --size 512 --binding jvm); see --help.
# `--gpu [CUDA]` first sets up the CUDA build of MXNet (scripts/setup.sh --gpu) and runs the
# dot on gpu(0) (--ctx gpu; a --ctx or --device-id of yours still applies).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/gpu-args.sh
. "$root/scripts/gpu-args.sh"
split_gpu_args "$@"
"$root/scripts/setup.sh" "${setup[@]}"
ctx=(); ((${#setup[@]} == 0)) || ctx=(--ctx gpu)
exec "$root/.venv/bin/pyprof" matmul "${ctx[@]}" "${rest[@]}"
