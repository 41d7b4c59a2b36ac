#!/usr/bin/env bash
# Build the Pressroom image (Dockerfile) with podman and write its SBOM:
# `make image` runs `scripts/build-image.sh [TAG]` (default localhost/pressroom:dev) with
# the project's virtualenv (.venv, made by `make`), which brings pip and cyclonedx-py.
#
#   1. the wheels of requirements/image.txt, for the image's Python (3.11) and glibc
#      (bookworm's 2.36), each checked against the lock's sha256 (build/wheels/), and the
#      project's own wheel (build/project/): the image downloads and compiles nothing;
#   2. the base, pinned by digest (PRESSROOM_IMAGE_BASE):
#        local   (the default) a bookworm base made from Debian's packages with mmdebstrap
#                once (cached in ~/.cache/pressroom/), imported into podman and pinned by
#                the digest podman gives it: for machines that reach no registry
#        pinned  the Dockerfile's own BASE, Docker Hub's debian:bookworm-slim by digest
#        NAME@sha256:…  any other bookworm base, by digest (a tag alone is refused)
#   3. `podman build`, then build/sbom.cdx.json (scripts/sbom.py): CycloneDX of the Python
#      packages the image holds (checked equal to the lock) and of its Debian packages.
#
# Needs: python3 with pip (the venv), podman, and mmdebstrap for the local base
# (`apt-get install podman runc mmdebstrap`). podman on machines like this project's needs
# runc and rlimits it may set: scripts/podman/containers.conf, unless CONTAINERS_CONF
# names another.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-localhost/pressroom:dev}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/scripts/podman/containers.conf}
python=${PYTHON:-.venv/bin/python}
base=${PRESSROOM_IMAGE_BASE:-local}
local_base=localhost/pressroom-base:bookworm

need() {  # need COMMAND WHAT
  command -v "$1" >/dev/null || { echo "build-image: $1 is missing: $2" >&2; exit 1; }
}
case $base in
  local | pinned | *@sha256:*) ;;
  *) echo "build-image: PRESSROOM_IMAGE_BASE=$base: pin it by digest (NAME@sha256:…)" >&2; exit 1 ;;
esac
need podman "apt-get install podman runc (docs/deploy.md, \"Building the image\")"
[ -x "$python" ] || { echo "build-image: no $python: run \`make image\` (it makes .venv)" >&2; exit 1; }

wheels() {  # the lock's wheels for the image's Python and glibc, and the project's
  local arch platforms=() v
  arch=$(uname -m)
  for v in $(seq 36 -1 17); do platforms+=(--platform "manylinux_2_${v}_$arch"); done
  platforms+=(--platform "manylinux2014_$arch" --platform "manylinux2010_$arch" --platform "manylinux1_$arch")
  rm -rf build/wheels build/project build/built
  # --prefer-binary, not --only-binary: a few pure-Python releases (nkeys) are published
  # as source only. Their source, checked against the lock's sha256 here, is built into a
  # wheel on this host (`pure_wheels`), never in the image.
  "$python" -m pip download --quiet --disable-pip-version-check --dest build/wheels \
    --require-hashes --no-deps --prefer-binary --implementation cp --python-version 3.11 \
    --abi cp311 "${platforms[@]}" --requirement requirements/image.txt \
    2> >(grep -v "^WARNING: Location" >&2)
  pure_wheels
  "$python" -m pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir build/project . \
    2> >(grep -v "^WARNING: Location" >&2)
}

pure_wheels() {  # each downloaded source release built into a pure-Python wheel
  mkdir -p build/built
  local sdist
  for sdist in build/wheels/*.tar.gz build/wheels/*.zip; do
    [ -e "$sdist" ] || continue
    "$python" -m pip wheel --quiet --disable-pip-version-check --no-deps \
      --wheel-dir build/built "$sdist" 2> >(grep -v "^WARNING: Location" >&2)
    rm "$sdist"
  done
  if ls build/built/*.whl >/dev/null 2>&1 && ls build/built/*.whl | grep -qv -- '-none-any\.whl$'; then
    echo "build-image: a source release built a platform wheel: $(ls build/built)" >&2
    exit 1
  fi
  # The image installs the lock's other releases by hash, these by the host's check.
  "$python" scripts/lock_without.py requirements/image.txt build/built > build/wheels/requirements.txt
}

local_base() {  # prints the local base, by digest, made and imported once
  if ! podman image exists "$local_base"; then
    need mmdebstrap "apt-get install mmdebstrap, or set PRESSROOM_IMAGE_BASE (docs/deploy.md)"
    local cache=${XDG_CACHE_HOME:-$HOME/.cache}/pressroom
    mkdir -p "$cache"
    if [ ! -s "$cache/bookworm-minbase.tar" ]; then
      echo "Making a Debian bookworm base with mmdebstrap (once, ~1 min)…" >&2
      mmdebstrap --quiet --format=tar --variant=minbase --include=ca-certificates bookworm \
        "$cache/bookworm-minbase.tar.part"
      mv "$cache/bookworm-minbase.tar.part" "$cache/bookworm-minbase.tar"
    fi
    podman import --quiet "$cache/bookworm-minbase.tar" "$local_base" >/dev/null
  fi
  echo "localhost/pressroom-base@$(podman image inspect --format '{{.Digest}}' "$local_base")"
}

case $base in
  local) base=$(local_base); pull=never ;;
  pinned) base=$(sed -n 's/^ARG BASE=//p' Dockerfile); pull=missing ;;
  *) pull=missing ;;
esac
wheels
podman build --quiet --pull="$pull" --build-arg BASE="$base" --tag "$tag" . >/dev/null
"$python" scripts/sbom.py --image "$tag" --base "$base" --output build/sbom.cdx.json
echo "$tag"
