#!/usr/bin/env bash
# Every test: set up (once), then the Python suite (pytest) and the JVM suite (lein test).
# Extra arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"
status=0
echo "== Python tests (pytest)"
.venv/bin/python -m pytest "$@" || status=$?
echo "== JVM tests (lein test)"
(cd jvm && MXNET_LIBRARY_PATH="$("$root/.venv/bin/python" -c 'import pyprof._capi as c; print(c.library_path())')" lein test) || status=$?
exit $status
