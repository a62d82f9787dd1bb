#!/usr/bin/env bash
# Idempotent set-up on Debian 12 with Python 3.11 and JDK 17: the Debian packages the
# JVM layer needs, the virtual environment .venv with pyprof and its test tools, and the
# compiled jvm/ project. Safe to repeat: each step is skipped when already done.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
log() { printf '[setup] %s\n' "$*" >&2; }

debs=(leiningen clojure libjna-java libjna-jni libdata-json-clojure libtools-cli-clojure libjackson2-core-java)
python3 -c 'import ensurepip, venv' 2>/dev/null || debs+=(python3-venv)
command -v javac >/dev/null || debs+=(openjdk-17-jdk-headless)
missing=()
for p in "${debs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q >/dev/null
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  python3 -m venv .venv
fi
stamp="$(sha256sum pyproject.toml | cut -c1-16)"
if [ "$(cat .venv/.pyprof-stamp 2>/dev/null)" != "$stamp" ]; then
  log "installing pyprof and its test tools into .venv"
  pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
  { "${pip[@]}" --upgrade pip && "${pip[@]}" -e '.[test]'; } > .venv/pip.log 2>&1 || {
    tail -n 40 .venv/pip.log >&2; log "pip install failed (log: .venv/pip.log)"; exit 1; }
  echo "$stamp" > .venv/.pyprof-stamp
fi

# The JVM layer: compile the Java sources and cache the classpath for the JPype bridge and
# the tests. pyprof.jvm.classpath() owns the rule for when the cache is stale (missing, another
# checkout's paths, or a JVM source or spec newer than it).
.venv/bin/python -c 'from pyprof import jvm; jvm.classpath()' || {
  log "building jvm/ failed"; exit 1; }
