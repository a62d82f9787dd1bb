#!/usr/bin/env bash
# The main job: set up (once), then profile the dot example and print its statistics.
# Options go to `pyprof matmul` (e.g. --size 512 --binding jvm); see --help.
# `--gpu [CUDA]` first sets up the CUDA build of MXNet (scripts/setup.sh --gpu) and runs the
# dot on gpu(0) (--ctx gpu; a --ctx or --device-id of yours still applies).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
setup=() rest=()
while (($#)); do
  if [ "$1" = --gpu ]; then
    setup=(--gpu)
    if (($# > 1)) && [[ "$2" =~ ^(mxnet-)?cu[0-9]+$|^[0-9]+\.[0-9]+$ ]]; then setup+=("$2"); shift; fi
  else
    rest+=("$1")
  fi
  shift
done
"$root/scripts/setup.sh" "${setup[@]}"
ctx=(); ((${#setup[@]} == 0)) || ctx=(--ctx gpu)
exec "$root/.venv/bin/pyprof" matmul "${ctx[@]}" "${rest[@]}"
