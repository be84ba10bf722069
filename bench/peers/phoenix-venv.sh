#!/usr/bin/env bash
# Creates (or reuses) a Python venv with Arize Phoenix for the ingest benchmark's peer figure.
# The venv lives outside the repo, keyed by a hash of this script, so changing the pin below
# makes a fresh venv. Quiet on reuse; the last line printed (stdout) is the venv's python path.
# Install progress goes to stderr.
#
# Phoenix version: arize-phoenix==20.26.1 (newest on PyPI when pinned, 2026-11-21).
set -euo pipefail

PHOENIX_VERSION="20.26.1"
PYTHON="${TOUCHSTONE_BENCH_PYTHON:-python3}"

script_path="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
hash="$(sha256sum "$script_path" | cut -c1-16)"
cache_root="${TOUCHSTONE_CI_CACHE:-/var/cache/touchstone-ci}"
venv="$cache_root/venv-phoenix-$hash"

if [[ -f "$venv/.complete" && -x "$venv/bin/python" ]]; then
  echo "$venv/bin/python"
  exit 0
fi

mkdir -p "$cache_root"
# Venvs are not relocatable, so build in place under a lock; a directory without .complete is a
# leftover from an interrupted build and is rebuilt from scratch.
exec 9>"$venv.lock"
flock 9
if [[ ! -f "$venv/.complete" ]]; then
  rm -rf "$venv"
  {
    echo "phoenix-venv: installing arize-phoenix==$PHOENIX_VERSION into $venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      "arize-phoenix==$PHOENIX_VERSION"
    "$venv/bin/python" -c "import phoenix; print('phoenix-venv: installed', phoenix.__version__)"
  } >&2
  echo "$PHOENIX_VERSION" >"$venv/.complete"
fi
echo "$venv/bin/python"
