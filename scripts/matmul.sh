#!/usr/bin/env bash
# The main job: set up (once), then profile the dot example and print its statistics.
# Options go to `pyprof matmul` (e.g. --size 512 --binding jvm); see --help.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
exec "$root/.venv/bin/pyprof" matmul "$@"
