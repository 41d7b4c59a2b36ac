"""The image (Dockerfile), built here by scripts/build-image.sh with podman and run:

- hadolint finds nothing to say about the Dockerfile;
- the image holds exactly the Python packages of its lock (requirements/image.txt), and
  the SBOM the build wrote (build/sbom.cdx.json, CycloneDX) lists each of them with the
  lock's version and hashes, every Debian package the image holds, and the base by digest;
- the image runs as a numeric non-root user, has `pressroom` as its command, no
  HEALTHCHECK, no compiler, pip or package build tools, and writes no bytecode;
- a gateway container answers `/healthz` over 127.0.0.1, and a renderer container, on a
  read-only root with every capability dropped (as deploy/k8s runs it), renders a job end
  to end against the test's NATS and PostgreSQL and a real S3 server: the PDF is
  downloaded through the gateway container's signed link.

The containers share the host's network (`--network host`), so what the test starts on
127.0.0.1 is reachable from them as it would be through Services in a cluster.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from services.core.runtime.settings import Settings
from tests.conftest import BIN, Stack, eventually, free_port, make_tenant
from tests.deploy.k8s import REPO
from tests.deploy.podman import container_logs, needs_podman, podman, postgres_over_tcp
from tests.deploy.test_lock import pins


def test_hadolint_passes_the_dockerfile() -> None:
    linted = subprocess.run(
        [str(BIN / "hadolint"), str(REPO / "Dockerfile")], capture_output=True, text=True
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr


@needs_podman
def test_the_image_is_slim_and_runs_as_a_numeric_non_root_user(image: str) -> None:
    (inspected,) = json.loads(podman("image", "inspect", image))
    config = inspected["Config"]
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"][-1] == "pressroom"
    assert "Healthcheck" not in config or not config["Healthcheck"]
    assert "PYTHONDONTWRITEBYTECODE=1" in config["Env"]
    tools = podman(
        "run", "--rm", "--entrypoint", "sh", image, "-c",
        "for t in gcc cc make pip pip3 apt-get; do command -v $t; done; "
        "find /opt/pressroom -name '*.pyc' | head -1",
        check=False,
    )  # fmt: skip
    assert tools.split() == ["/usr/bin/apt-get"], tools
    size = inspected["Size"] / 2**20
    print(f"[image] {image}: {size:.0f} MiB")


INSTALLED = (
    "import importlib.metadata as m, json; "
    "print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))"
)


def lock_for_the_image() -> dict[str, tuple[str, list[str]]]:
    """The image lock's releases that apply to the image (Linux, CPython 3.11: the host's
    kind), by canonical name: (version, hashes)."""
    text = (REPO / "requirements" / "image.txt").read_text()
    markers = dict(re.findall(r"^([A-Za-z0-9._-]+)==[^ ;]+ ; (.+?) \\$", text, re.M))
    applies = {}
    for pin, hashes in pins("image.txt").items():
        name, version = pin.split("==")
        marker = markers.get(name)
        if marker is None or Requirement(f"{name}; {marker}").marker.evaluate():  # type: ignore[union-attr]
            applies[canonicalize_name(name)] = (version, hashes)
    return applies


@needs_podman
def test_the_image_holds_its_lock_and_its_sbom_says_what_it_holds(image: str) -> None:
    listed = podman(
        "run", "--rm", "--entrypoint", "/opt/pressroom/bin/python", image, "-c", INSTALLED
    )
    installed = {canonicalize_name(name): version for name, version in json.loads(listed).items()}
    locked = lock_for_the_image()
    assert installed.pop("pressroom") == "0.1.0"
    assert installed == {name: version for name, (version, _) in locked.items()}

    sbom = json.loads((REPO / "build" / "sbom.cdx.json").read_text())
    assert sbom["bomFormat"] == "CycloneDX" and sbom["metadata"]["component"]["name"] == "pressroom"
    python = {c["name"].lower(): c for c in sbom["components"] if c["purl"].startswith("pkg:pypi/")}
    assert {name: c["version"] for name, c in python.items()} == installed
    for name, component in python.items():
        hashes = {h["content"] for r in component["externalReferences"] for h in r["hashes"]}
        assert hashes == set(locked[name][1]), name
    debian = {
        c["name"]: c["version"] for c in sbom["components"] if c["purl"].startswith("pkg:deb/")
    }
    packages = podman("run", "--rm", "--entrypoint", "dpkg-query", image, "-W", "-f",
                      "${Package} ${Version}\n")  # fmt: skip
    assert debian == dict(line.split(" ") for line in packages.splitlines())
    assert "chromium-headless-shell" in debian and "python3.11" in debian
    properties = {p["name"]: p["value"] for p in sbom["metadata"]["component"]["properties"]}
    assert re.fullmatch(r"\S+@sha256:[0-9a-f]{64}", properties["pressroom:base"])


def container_env(settings: Settings, **overrides: str) -> list[str]:
    """`-e` options of every setting in `settings`, then `overrides`."""
    env: dict[str, str] = {}
    for f in dataclasses.fields(Settings):
        value = getattr(settings, f.name)
        if isinstance(value, bool):
            value = "1" if value else "0"
        elif isinstance(value, tuple):
            value = ",".join(f"{v:g}" for v in value)
        env[f.metadata["env"]] = str(value)
    env.update(overrides)
    return [option for name, value in env.items() for option in ("-e", f"{name}={value}")]


@pytest.fixture
def containers() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        podman("rm", "--force", "--time", "5", name, check=False)


def run_container(image: str, names: list[str], env: list[str], *args: str) -> str:
    name = f"pressroom-test-{uuid.uuid4().hex[:8]}"
    names.append(name)
    podman(
        "run", "--detach", "--name", name, "--network", "host",
        "--read-only", "--tmpfs", "/tmp:rw,size=512m", "--cap-drop", "ALL",
        "--security-opt", "no-new-privileges", *env, image, *args,
    )  # fmt: skip
    return name


@needs_podman
async def test_containers_serve_and_render_a_job_end_to_end(
    image: str, s3_settings: Settings, containers: list[str]
) -> None:
    settings = replace(s3_settings, allow_private_networks=False)
    env = container_env(
        settings,
        PRESSROOM_CHROMIUM="",  # the image's default
        PRESSROOM_HOST="127.0.0.1",
    )
    async with postgres_over_tcp(settings.database_url) as database_url:
        env += ["-e", f"PRESSROOM_DATABASE_URL={database_url}"]
        await _serve_and_render(image, settings, env, containers)


async def _serve_and_render(
    image: str, settings: Settings, env: list[str], containers: list[str]
) -> None:
    gateway = run_container(
        image, containers, [*env, "-e", f"PRESSROOM_METRICS_PORT={free_port()}"], "gateway"
    )
    renderer_metrics = free_port()
    renderer = run_container(
        image, containers, [*env, "-e", f"PRESSROOM_METRICS_PORT={renderer_metrics}"],
        "renderer",
    )  # fmt: skip
    stack = Stack(replace(settings, metrics_port=0))
    await stack.start("projector")  # the status reads' projection, in this process
    try:
        async with aiohttp.ClientSession() as http:

            async def answers(url: str) -> Any:
                try:
                    async with http.get(url) as response:
                        return response.status == 200 and await response.json()
                except aiohttp.ClientError:
                    return None

            health = await eventually(
                lambda: answers(f"{settings.base_url}/healthz"), 60, "the gateway's /healthz"
            )
            assert health == {"status": "ok"}
            ready = f"http://127.0.0.1:{renderer_metrics}/readyz"
            await eventually(lambda: answers(ready), 90, "the renderer container ready")
            tenant = await make_tenant(http, settings.base_url)
            try:
                body = {"template": "<h1>Invoice {{ n }}</h1>", "data": {"n": 42}}
                async with tenant.http.post(f"{settings.base_url}/jobs", json=body) as answer:
                    assert answer.status == 202, await answer.text()
                    job_id = (await answer.json())["id"]

                async def finished() -> Any:
                    async with tenant.http.get(f"{settings.base_url}/jobs/{job_id}") as answer:
                        job = await answer.json()
                        return job if job["status"] in {"done", "failed"} else None

                job = await eventually(finished, 90, "the job finished")
                assert job["status"] == "done", job
                async with http.get(job["url"]) as download:
                    pdf = await download.read()
                assert download.status == 200 and pdf.startswith(b"%PDF-"), pdf[:100]
            finally:
                await tenant.http.close()
    except BaseException:
        for name in (gateway, renderer):
            print(f"--- {name}\n{container_logs(name)}")
        raise
    finally:
        await stack.close()
