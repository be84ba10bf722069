#!/usr/bin/env bash
# Creates (or reuses) a Python venv with one pinned package for a peer figure of the benchmarks.
#
# usage: venv.sh NAME REQUIREMENT      e.g. venv.sh langfuse langfuse==5.0.4
#
# The venv lives outside the repo ($TOUCHSTONE_CI_CACHE, default /var/cache/touchstone-ci), named
# venv-NAME-<hash of this script and REQUIREMENT>, so changing a pin makes a fresh venv. Quiet on
# reuse; the last line printed (stdout) is the venv's python path. Install progress goes to stderr.
# TOUCHSTONE_BENCH_PYTHON chooses the python that makes the venv (default python3).
set -euo pipefail

name="$1"
requirement="$2"
PYTHON="${TOUCHSTONE_BENCH_PYTHON:-python3}"

script_path="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
hash="$({ cat "$script_path"; echo "$requirement"; } | sha256sum | cut -c1-16)"
cache_root="${TOUCHSTONE_CI_CACHE:-/var/cache/touchstone-ci}"
venv="$cache_root/venv-$name-$hash"

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
    echo "venv.sh: installing $requirement into $venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$requirement"
    "$venv/bin/python" -m pip show "${requirement%%[=<>]*}" | grep -i '^version' | sed 's/^/venv.sh: installed /'
  } >&2
  echo "$requirement" >"$venv/.complete"
fi
echo "$venv/bin/python"
