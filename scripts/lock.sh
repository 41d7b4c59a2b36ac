#!/usr/bin/env bash
# The dependency locks, made from pyproject.toml with uv (docs/deploy.md, "Dependencies"):
#
#   requirements/image.txt  what the image installs (`pressroom` alone): the Dockerfile
#                           installs exactly these, with --require-hashes
#   requirements/dev.txt    what `make` installs for development and tests
#                           (`pressroom[embedded,test]`), also with --require-hashes
#
# Both are universal (any OS and Python >= 3.11, markers decide), and every file of every
# pinned release carries its sha256. `scripts/lock.sh` updates them after pyproject.toml
# changed, keeping every pin that still fits; `scripts/lock.sh --upgrade` moves every pin to
# the newest release allowed; `scripts/lock.sh --check` fails, printing the difference, if
# either lock is not what pyproject.toml makes of it (CI runs it: tests/deploy/test_lock.py).
set -euo pipefail
cd "$(dirname "$0")/.."
uv=${UV:-.venv/bin/uv}
mode=${1:-}

compile() {  # compile OUTPUT [uv options…]: OUTPUT's own pins are kept where they still fit
  local out=$1
  shift
  "$uv" pip compile --quiet --universal --python-version 3.11 --generate-hashes \
    --custom-compile-command "scripts/lock.sh" --output-file "$out" "$@" pyproject.toml
}

lock() {  # lock NAME [uv options…]
  local name=$1
  shift
  if [ "$mode" = --check ]; then
    local scratch
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' RETURN
    cp "requirements/$name" "$scratch/$name"
    compile "$scratch/$name" "$@"
    if ! diff -u "requirements/$name" "$scratch/$name"; then
      echo "requirements/$name does not match pyproject.toml: run scripts/lock.sh" >&2
      return 1
    fi
  elif [ "$mode" = --upgrade ]; then
    compile "requirements/$name" --upgrade "$@"
  else
    compile "requirements/$name" "$@"
  fi
}

case $mode in "" | --check | --upgrade) ;; *) echo "usage: $0 [--check|--upgrade]" >&2; exit 2 ;; esac
lock image.txt
lock dev.txt --extra embedded --extra test
