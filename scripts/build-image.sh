#!/usr/bin/env bash
# Build the Pressroom image (Dockerfile) with podman: `scripts/build-image.sh [TAG]`.
# The wheels are built here first (build/wheels/), so the image compiles and downloads
# nothing from PyPI. With no registry to pull a base from, the base is made from
# Debian's packages with mmdebstrap once and cached (PRESSROOM_IMAGE_BASE names another).
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-localhost/pressroom:dev}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/scripts/podman/containers.conf}
python=${PYTHON:-.venv/bin/python}
base=${PRESSROOM_IMAGE_BASE:-localhost/pressroom-base:bookworm}

rm -rf build/wheels
"$python" -m pip wheel --quiet --disable-pip-version-check --wheel-dir build/wheels . 2> >(grep -v "^WARNING: Location" >&2)

if ! podman image exists "$base"; then
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/pressroom
  mkdir -p "$cache"
  if [ ! -s "$cache/bookworm-minbase.tar" ]; then
    echo "Making a Debian bookworm base with mmdebstrap (once, ~1 min)…" >&2
    mmdebstrap --quiet --format=tar --variant=minbase --include=ca-certificates bookworm \
      "$cache/bookworm-minbase.tar.part"
    mv "$cache/bookworm-minbase.tar.part" "$cache/bookworm-minbase.tar"
  fi
  podman import --quiet "$cache/bookworm-minbase.tar" "$base" >/dev/null
fi
podman build --quiet --pull=never --build-arg BASE="$base" --tag "$tag" . >/dev/null
echo "$tag"
