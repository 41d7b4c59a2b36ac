#!/usr/bin/env bash
# gotenberg-client's own test suite against Pressroom's Gotenberg-compatible routes.
#
#   scripts/gotenberg_client_suite.sh CHECKOUT [pytest args…]
#
# CHECKOUT is a git checkout of github.com/stumpylog/gotenberg-client (its tests/ and
# samples, at the release tests/integration/test_gotenberg_clients.py pins). A whole
# Pressroom runs under `pressroom dev` (auth off, private networks allowed, its own data
# folder and ports), a static server plays the suite's nginx container, and the suite's
# fixtures for the two hosts are pointed at them (appended to a copy of its conftest.py,
# nothing else changed). LibreOffice tests are left out: Pressroom converts no office
# files. Needs pytest-httpx, which the suite's mocked tests import.
set -euo pipefail
checkout=$(realpath "${1:?usage: $0 CHECKOUT [pytest args…]}")
shift
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill $dev $web 2>/dev/null || true; wait $dev $web 2>/dev/null || true; rm -rf "$work"' EXIT
git -C "$checkout" archive HEAD tests pyproject.toml | tar -x -C "$work"
port() { "$root/.venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
api=$(port)
static=$(port)
cat >>"$work/tests/conftest.py" <<PY


# --- Pressroom: the two hosts the suite's containers would be ---
@pytest.fixture(scope="session")
def gotenberg_host() -> str:
    return "http://127.0.0.1:$api"


@pytest.fixture(scope="session")
def web_server_host() -> str:
    return "http://127.0.0.1:$static"


@pytest.fixture(scope="session")
def webserver_docker_internal_url() -> str:
    return "http://127.0.0.1:$static"
PY
PRESSROOM_DATA_DIR="$work/data" PRESSROOM_PORT=$api PRESSROOM_METRICS_PORT=0 \
  PRESSROOM_AUTH=disabled PRESSROOM_ALLOW_PRIVATE_NETWORKS=true \
  "$root/.venv/bin/pressroom" dev >"$work/dev.log" 2>&1 &
dev=$!
"$root/.venv/bin/python" -m http.server "$static" --bind 127.0.0.1 \
  --directory "$work/tests/docker/content" >/dev/null 2>&1 &
web=$!
for _ in $(seq 120); do
  curl -fsS "http://127.0.0.1:$api/health" >/dev/null 2>&1 && break
  sleep 1
done
cd "$work"
"$root/.venv/bin/python" -m pytest -q -p no:cacheprovider -p no:randomly \
  --ignore=tests/test_convert_libre_office.py -k "not libre_office" "$@" tests || status=$?
[ "${status:-0}" = 0 ] || tail -20 "$work/dev.log"
exit "${status:-0}"
