#!/usr/bin/env bash
# `make bench` measures the gateway with wrk when it can: a C load generator leaves the
# CPU to what it measures. Install it with apt when we can; never fail the bench over it.
command -v wrk >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing wrk with apt-get…"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends wrk; } >/dev/null 2>&1 \
    && exit 0
fi
echo "wrk is not installed: the gateway is measured with the Python client only" >&2
