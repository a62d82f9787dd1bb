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
libmxnet="$("$root/.venv/bin/python" -c 'import pyprof._capi as c; print(c.library_path())')"
echo "== JVM tests (lein test in jvm/)"
(cd jvm && MXNET_LIBRARY_PATH="$libmxnet" lein test) || status=$?
echo "== The seed's Clojure example (lein test in examples/matmul/)"
(cd examples/matmul && MXNET_LIBRARY_PATH="$libmxnet" lein test) || status=$?
exit $status
