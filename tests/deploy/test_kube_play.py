"""`podman kube play` of the rendered dev overlay: its five Deployments come up as pods
from the local image (`imagePullPolicy: Never`), with the overlay's security contexts
(user 10001, read-only root, every capability dropped), its /tmp emptyDirs, its
ConfigMap and its shared documents volume, and make a PDF that is downloaded through the
gateway pod's signed link.

podman 4.3 runs a subset of Kubernetes (docs/deploy.md, "Kubernetes"), so the harness
does what a cluster would: NATS (run with the overlay's own configuration and keys, so
each pod connects as its service's identity, and none is refused anything) and PostgreSQL
are the test's own, on 127.0.0.1; the pods share the host's network (there are no
Services, and podman would publish every container port on the host), each with its own
ports; the overlay's Secret is handed to podman as a ConfigMap (podman 4.3 cannot read a
Secret of the same file by `secretKeyRef`), and the ConfigMap's values as env entries
(podman 4.3 lets `envFrom` override `env`). Everything else is the overlay as kustomize
renders it.
"""

from __future__ import annotations

import base64
import contextlib
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from services.core.runtime.settings import Settings
from tests.conftest import eventually, free_port
from tests.deploy.k8s import nats_files, of_kind, render, running_nats
from tests.deploy.podman import container_logs, needs_podman, podman, postgres_over_tcp

PLAYED = ("ConfigMap", "Secret", "PersistentVolumeClaim", "Deployment")


def for_podman(docs: tuple[Any, ...], env: dict[str, dict[str, str]]) -> list[Any]:
    """The overlay's documents podman plays, adapted as the module docstring says; `env`
    gives each Deployment's container the addresses of this test."""
    (config,) = [d["data"] for d in of_kind(docs, "ConfigMap") if "PRESSROOM_PORT" in d["data"]]
    played = []
    for doc in docs:
        if doc["kind"] not in PLAYED:
            continue
        if doc["kind"] == "Secret":
            values = {k: base64.b64decode(v).decode() for k, v in doc["data"].items()}
            doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc["metadata"],
                   "data": values}  # fmt: skip
        if doc["kind"] == "Deployment":
            pod = doc["spec"]["template"]["spec"]
            pod["hostNetwork"] = True
            (box,) = pod["containers"]
            # podman 4.3 lets envFrom win over env (Kubernetes does the opposite): the
            # ConfigMap's values go in as env entries, before the test's own.
            ours = {**config, **env[doc["metadata"]["name"]]}
            box.pop("envFrom", None)
            kept = [e for e in box.get("env", []) if e["name"] not in ours]
            for var in kept:
                ref = var.get("valueFrom", {}).pop("secretKeyRef", None)
                if ref is not None:
                    var["valueFrom"]["configMapKeyRef"] = ref
            box["env"] = kept + [{"name": k, "value": v} for k, v in ours.items()]
            box.pop("ports", None)  # the host's network: nothing to publish
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                box[probe]["httpGet"]["port"] = int(
                    ours.get("PRESSROOM_PORT") if box[probe]["httpGet"]["port"] == "http"
                    else ours["PRESSROOM_METRICS_PORT"]
                )  # fmt: skip
        played.append(doc)
    return played


@contextlib.asynccontextmanager
async def as_async(manager: contextlib.AbstractContextManager[str]) -> AsyncIterator[str]:
    with manager as value:
        yield value


@pytest.fixture
def played(tmp_path: Path) -> Iterator[Path]:
    """Where the adapted documents go; whatever they started is taken down after."""
    path = tmp_path / "dev.yaml"
    yield path
    if path.exists():
        podman("kube", "down", str(path), check=False, timeout=120)
    podman("volume", "rm", "--force", "pressroom-files", check=False)


@needs_podman
@pytest.mark.skipif(
    shutil.which("catatonit") is None,
    reason="podman kube play needs catatonit (.ci/run installs it)",
)
async def test_the_dev_overlay_comes_up_under_podman_and_makes_a_pdf(
    image: str, settings: Settings, played: Path, tmp_path: Path
) -> None:
    podman("tag", image, "localhost/pressroom:dev")
    docs = render("dev")
    port = free_port()
    conf, nats_env = nats_files("dev", tmp_path / "nats")
    async with (
        postgres_over_tcp(settings.database_url) as database_url,
        as_async(running_nats(conf, nats_env, tmp_path / "nats")) as nats_url,
    ):
        shared = {
            "PRESSROOM_HOST": "127.0.0.1",
            "PRESSROOM_NATS_URL": nats_url,
            "PRESSROOM_DATABASE_URL": database_url,
            "PRESSROOM_PORT": str(port),
            "PRESSROOM_PUBLIC_URL": f"http://127.0.0.1:{port}",
        }
        env = {
            doc["metadata"]["name"]: {**shared, "PRESSROOM_METRICS_PORT": str(free_port())}
            for doc in of_kind(docs, "Deployment")
        }
        played.write_text(yaml.safe_dump_all(for_podman(docs, env)))
        podman("kube", "play", "--replace", str(played), timeout=300)
        base = f"http://127.0.0.1:{port}"
        (secret,) = of_kind(docs, "Secret")
        admin_key = base64.b64decode(secret["data"]["PRESSROOM_ADMIN_KEY"]).decode()
        try:
            await _render_one(base, admin_key, env["renderer"]["PRESSROOM_METRICS_PORT"])
            log = (tmp_path / "nats" / "nats.log").read_text()
            assert "Violation" not in log and "authentication error" not in log, log
        except BaseException:
            print(podman("ps", "--all", "--format", "{{.Names}} {{.Status}}", check=False))
            for name in env:
                print(f"--- {name}")
                print(container_logs(f"{name}-pod-0-{name}"))
            raise


async def _render_one(base: str, admin_key: str, renderer_metrics: str) -> None:
    async with aiohttp.ClientSession() as http:

        async def ready(url: str) -> bool:
            with contextlib.suppress(aiohttp.ClientError):
                async with http.get(url) as answer:
                    return answer.status == 200
            return False

        await eventually(lambda: ready(f"{base}/readyz"), 120, "the gateway pod ready")
        renderer = f"http://127.0.0.1:{renderer_metrics}/readyz"
        await eventually(lambda: ready(renderer), 120, "the renderer pod ready")
        admin = {"Authorization": f"Bearer {admin_key}"}
        async with http.post(f"{base}/admin/tenants", json={"name": "kube"}, headers=admin) as r:
            assert r.status == 201, await r.text()
            tenant = (await r.json())["id"]
        async with http.post(f"{base}/admin/tenants/{tenant}/keys", headers=admin) as r:
            assert r.status == 201, await r.text()
            key = {"Authorization": f"Bearer {(await r.json())['key']}"}
        body = {"template": "<h1>Invoice {{ n }}</h1>", "data": {"n": 7}}
        async with http.post(f"{base}/jobs", json=body, headers=key) as r:
            assert r.status == 202, await r.text()
            job_id = (await r.json())["id"]

        async def finished() -> Any:
            async with http.get(f"{base}/jobs/{job_id}", headers=key) as r:
                job = await r.json()
                return job if job.get("status") in {"done", "failed"} else None

        job = await eventually(finished, 90, "the job finished")
        assert job["status"] == "done", job
        async with http.get(job["url"]) as download:
            pdf = await download.read()
        assert download.status == 200 and pdf.startswith(b"%PDF-"), pdf[:80]
