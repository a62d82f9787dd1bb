#!/usr/bin/env bash
# Idempotent set-up on Debian 12 with Python 3.11 and JDK 17: the Debian packages the JVM layer
# needs (and chromium and firefox-esr, the browsers the HTML report's tests drive), the virtual
# environment .venv with pyprof and its test tools, and the compiled jvm/ project. Safe to repeat: each step is skipped when already done.
#
#   scripts/setup.sh                 set up; keep the MXNet build already chosen (CPU at first)
#   scripts/setup.sh --gpu [CUDA]    the CUDA build of mxnet==1.9.1 in place of the CPU one: the
#                                    newest mxnet-cu1xx the NVIDIA driver supports, or CUDA
#                                    (cu112, 112 or 11.2); needs the driver (nvidia-smi)
#   scripts/setup.sh --cpu           back to the CPU build (mxnet==1.9.1)
#   --dry-run                        with --gpu or --cpu: say which build, change nothing
#
# The build chosen is kept in .venv/.pyprof-mxnet, so later runs (scripts/test.sh,
# scripts/matmul.sh) keep it. Without an NVIDIA driver, --gpu exits 1 with one line and
# changes nothing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] %s\n' "$*" >&2; exit 1; }

flavour="" dry_run=0 want_cuda=""
while (($#)); do
  case "$1" in
    --gpu)
      flavour=gpu
      if (($# > 1)) && [[ "$2" =~ ^(mxnet-)?(cu)?[0-9]+(\.[0-9]+)?$ ]]; then want_cuda="$2"; shift; fi ;;
    --gpu=*) flavour=gpu; want_cuda="${1#--gpu=}" ;;
    --cpu) flavour=cpu ;;
    --dry-run) dry_run=1 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1': expected --gpu [CUDA], --cpu or --dry-run (see scripts/setup.sh --help)" ;;
  esac
  shift
done

# --gpu: check the driver and pick the wheel before anything changes.
if [ "$flavour" = gpu ]; then
  command -v nvidia-smi >/dev/null 2>&1 || die "--gpu: no NVIDIA driver on this machine (nvidia-smi not found); install the NVIDIA driver for the GPU and check that nvidia-smi works, or run scripts/setup.sh without --gpu for the CPU build"
  smi_out="$(nvidia-smi 2>&1)" || die "--gpu: nvidia-smi failed ($(printf '%s' "$smi_out" | grep -m1 . || echo "no output")); install or repair the NVIDIA driver until nvidia-smi works, or run scripts/setup.sh without --gpu for the CPU build"
  driver_cuda="$(printf '%s\n' "$smi_out" | sed -n 's/.*CUDA Version: *\([0-9][0-9.]*\).*/\1/p' | head -n1)"
  [ -n "$driver_cuda" ] || die "--gpu: nvidia-smi does not report a CUDA Version; update the NVIDIA driver, or run scripts/setup.sh without --gpu for the CPU build"
  ccs=()
  while read -r c; do [[ "$c" =~ ^[0-9]+\.[0-9]+$ ]] && ccs+=(--cc "$c"); done \
    < <(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null || true)
  want_args=(); [ -z "$want_cuda" ] || want_args=(--want "${want_cuda#mxnet-}")
  err="$(mktemp)"
  mxnet_dist="$(python3 pyprof/gpu.py wheel --driver-cuda "$driver_cuda" "${want_args[@]}" "${ccs[@]}" 2>"$err")" || {
    msg="$(grep -m1 . "$err" || true)"; rm -f "$err"; die "--gpu: ${msg:-choosing the CUDA build failed}"; }
  sed 's/^/[setup] /' "$err" >&2
  rm -f "$err"
elif [ "$flavour" = cpu ]; then
  mxnet_dist=mxnet
else
  mxnet_dist="$(cat .venv/.pyprof-mxnet 2>/dev/null || echo mxnet)"
fi
if ((dry_run)); then
  [ -n "$flavour" ] || die "--dry-run needs --gpu or --cpu"
  echo "$mxnet_dist==1.9.1${driver_cuda:+ (driver supports CUDA $driver_cuda)}"
  exit 0
fi

debs=(leiningen clojure libjna-java libjna-jni libdata-json-clojure libtools-cli-clojure libjackson2-core-java
      chromium firefox-esr)  # the HTML report's tests drive both with Playwright (no browser download)
python3 -c 'import ensurepip, venv' 2>/dev/null || debs+=(python3-venv)
command -v javac >/dev/null || debs+=(openjdk-17-jdk-headless)
command -v cc >/dev/null || debs+=(gcc)  # builds the native recorder (pyprof/native/shim.py)
missing=()
# Not dpkg -s alone: a package removed but not purged still answers it (status config-files).
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
for p in "${debs[@]}"; do installed "$p" || missing+=("$p"); done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  apt_log="$(mktemp)"  # shown only on failure (apt's debconf notes are noise)
  { $sudo apt-get update -q && $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"; } \
    >"$apt_log" 2>&1 || { tail -n 20 "$apt_log" >&2; rm -f "$apt_log"; die "apt-get could not install: ${missing[*]}"; }
  rm -f "$apt_log"
fi

if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  python3 -m venv .venv
fi
# editable_mode=compat: the project root on sys.path (a .pth), so that a directory named pyprof
# in the working directory (the JVM's default output root is <tmp>/pyprof) cannot shadow the
# package the way it shadows setuptools' import-hook editable install.
editable=(--config-settings editable_mode=compat)
stamp="$(printf '%s %s' "$(sha256sum pyproject.toml | cut -c1-16)" "${editable[*]}" | sha256sum | cut -c1-16)"
if [ "$(cat .venv/.pyprof-stamp 2>/dev/null)" != "$stamp" ]; then
  log "installing pyprof and its test tools into .venv"
  pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
  { "${pip[@]}" --upgrade pip && "${pip[@]}" "${editable[@]}" -e '.[test]'; } > .venv/pip.log 2>&1 || {
    tail -n 40 .venv/pip.log >&2; log "pip install failed (log: .venv/pip.log)"; exit 1; }
  echo "$stamp" > .venv/.pyprof-stamp
fi

# The MXNet build: the CPU wheel (pyproject's mxnet==1.9.1) or a CUDA wheel in its place. Both
# install the package directory mxnet/, so the other builds are removed first; the CUDA wheel
# (about 1 GB) is downloaded before anything is removed, so a failed download changes nothing.
installed_mxnet() {
  .venv/bin/python - <<'PY'
import re
from importlib import metadata
names = {(d.metadata["Name"] or "").lower().replace("_", "-"): d.version for d in metadata.distributions()}
print(" ".join(sorted(f"{n}=={v}" for n, v in names.items() if re.fullmatch(r"mxnet(-cu\d+)?", n))))
PY
}
have="$(installed_mxnet)"
if [ "$have" != "$mxnet_dist==1.9.1" ]; then
  log "installing $mxnet_dist==1.9.1 in place of: ${have:-nothing}"
  wheels=.venv/.pyprof-wheels
  rm -rf "$wheels"
  pip=(.venv/bin/python -m pip --disable-pip-version-check -q)
  "${pip[@]}" download --no-deps -d "$wheels" "$mxnet_dist==1.9.1" > .venv/pip.log 2>&1 || {
    tail -n 20 .venv/pip.log >&2; die "downloading $mxnet_dist==1.9.1 failed (log: .venv/pip.log); nothing was changed"; }
  for d in $have; do "${pip[@]}" uninstall -y "${d%%==*}" >> .venv/pip.log 2>&1; done
  "${pip[@]}" install --no-deps "$wheels"/*.whl >> .venv/pip.log 2>&1 || {
    tail -n 20 .venv/pip.log >&2; die "installing $mxnet_dist==1.9.1 failed (log: .venv/pip.log)"; }
  rm -rf "$wheels"
  have="$(installed_mxnet)"
  [ "$have" = "$mxnet_dist==1.9.1" ] || die "after installing $mxnet_dist, .venv holds: $have"
fi
echo "$mxnet_dist" > .venv/.pyprof-mxnet

# The JVM layer: compile the Java sources and cache the classpath for the JPype bridge and
# the tests. pyprof.jvm.classpath() owns the rule for when the cache is stale (missing, another
# checkout's paths, or a JVM source or spec newer than it).
.venv/bin/python -c 'from pyprof import jvm; jvm.classpath()' || {
  log "building jvm/ failed"; exit 1; }
