"""deploy/k8s/ as a cluster would take it, checked offline with the real tools:

- every overlay renders with kustomize (`kubectl kustomize`) and every built-in object
  validates `--strict` (unknown fields refused) against two Kubernetes minor versions;
- the ScaledObject validates against the schema the project writes for the KEDA fields
  it uses (deploy/k8s/schemas/), since no Kubernetes schema knows it;
- and what no schema can see: selectors match the pods' labels, probes ask paths and
  ports the code serves, every `PRESSROOM_*` variable exists and parses, the commands are
  `pressroom` commands, the autoscaling signal names what the code creates, the
  renderer's egress never reaches the metadata address, the cluster's ranges or the
  database (NATS' configuration, identities and TLS: test_k8s_nats.py);
- in production no secret is in a container's environment: each service reads the
  Secret's keys it needs as files of a read-only Secret volume named by `PRESSROOM_X_FILE`;
- the pods keep to the restricted Pod Security profile, the renderer in production with
  the Localhost seccomp profile deploy/k8s/seccomp/chromium.json (which lets Chromium's
  sandbox make its namespaces and `chroot`, and refuses mount, bpf, ptrace and the rest of
  the administrative calls) and `PRESSROOM_CHROMIUM_SANDBOX=require`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

import aiohttp
import jsonschema
import kubernetes_validate
import pytest
import yaml

from services import cli
from services.bus_cli import seed_name
from services.core.log.busaccess import Role
from services.core.model import subjects
from services.core.runtime import metrics
from services.core.runtime.settings import Settings
from services.core.runtime.valuefiles import FILE_SUFFIX
from services.gateway.app import init_app
from tests.conftest import free_port
from tests.deploy.k8s import (
    K8S,
    OVERLAYS,
    config_data,
    container,
    egress_admits,
    named,
    of_kind,
    pod_labels,
    pod_specs,
    render,
)

KUBERNETES = ("1.30.0", "1.37.0")
"""The oldest minor still maintained by most providers, and the newest the validator knows."""

CUSTOM = {("keda.sh/v1alpha1", "ScaledObject")}
"""Kinds no Kubernetes schema covers: checked against the project's own schema."""

SETTINGS = {f.metadata["env"] for f in dataclasses.fields(Settings)}
CHROMIUM_PROFILE = "pressroom/chromium.json"
"""The renderer's Localhost seccomp profile in production, as nodes install
deploy/k8s/seccomp/chromium.json."""
SERVICES = ("gateway", "renderer", "projector", "notifier", "conductor")
SEED_FILE = "PRESSROOM_NATS_NKEY_SEED" + FILE_SUFFIX


@pytest.mark.parametrize("version", KUBERNETES)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_validates_strictly(overlay: str, version: str) -> None:
    checked = 0
    for doc in render(overlay):
        if (doc["apiVersion"], doc["kind"]) in CUSTOM:
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} ({version}): {exc}")
        checked += 1
    assert checked >= 20


@pytest.mark.parametrize("overlay", ["production", "single-tenant"])
def test_the_scaled_object_validates_against_keda_s_fields(overlay: str) -> None:
    schema = json.loads((K8S / "schemas" / "scaledobject.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    (scaled,) = of_kind(render(overlay), "ScaledObject")
    jsonschema.Draft202012Validator(schema).validate(scaled)
    bad = {**scaled, "spec": {**scaled["spec"], "minReplicas": 1}}  # an HPA's field
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(bad)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_selectors_find_the_pods_they_mean(overlay: str) -> None:
    docs = render(overlay)
    labels = pod_labels(docs)
    for workload, template in pod_specs(docs):
        selector = workload["spec"]["selector"]["matchLabels"]
        assert selector.items() <= template["metadata"]["labels"].items(), workload["metadata"]
    for service in of_kind(docs, "Service"):
        chosen = [pods for pods in labels if _matches(service["spec"]["selector"], pods)]
        assert chosen, f"Service {service['metadata']['name']} selects no pod"
    for budget in of_kind(docs, "PodDisruptionBudget"):
        chosen = [p for p in labels if _matches(budget["spec"]["selector"]["matchLabels"], p)]
        assert len(chosen) == 1, f"PodDisruptionBudget {budget['metadata']['name']}"
    for policy in of_kind(docs, "NetworkPolicy"):
        selector = policy["spec"]["podSelector"].get("matchLabels", {})
        assert [p for p in labels if _matches(selector, p)], policy["metadata"]["name"]
    stateful = named(docs, "StatefulSet", "nats")
    headless = named(docs, "Service", stateful["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_everything_lives_in_the_pressroom_namespace(overlay: str) -> None:
    """An object an overlay adds outside the namespace would be made elsewhere, and a
    generated Secret there would not even be renamed where the pods refer to it."""
    for doc in render(overlay):
        where = doc["metadata"].get("namespace")
        assert where == (None if doc["kind"] == "Namespace" else "pressroom"), doc["metadata"]


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_setting_exists_and_parses(overlay: str) -> None:
    docs = render(overlay)
    config = config_data(docs, "pressroom-config")
    assert set(config) <= SETTINGS, set(config) - SETTINGS
    Settings.from_env(config)  # every value parses (a bad one raises naming it)
    for workload, _ in pod_specs(docs):
        for var in container(workload).get("env", []):
            if var["name"].startswith("PRESSROOM_"):
                assert var["name"].removesuffix(FILE_SUFFIX) in SETTINGS, var


def test_the_secret_example_names_every_secret_a_pod_reads_and_holds_none() -> None:
    example = yaml.safe_load((K8S / "secret.example.yaml").read_text())
    assert set(example["stringData"].values()) == {""}, "the example holds no secret"
    for overlay in ("production", "single-tenant"):  # dev generates its own
        for workload, _ in pod_specs(render(overlay)):
            for item in secret_files(workload).values():
                assert item["secretName"] == example["metadata"]["name"], workload
                assert item["key"] in example["stringData"], item


def secret_files(workload: Any) -> dict[str, dict[str, str]]:
    """`PRESSROOM_X_FILE` -> the Secret volume item its path names (secret, key), for
    every such variable of the workload's container; fails on a path no Secret gives."""
    pod = workload["spec"]["template"]["spec"]
    box = container(workload)
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounted = {}
    for mount in box.get("volumeMounts", []):
        secret = volumes.get(mount["name"], {}).get("secret")
        if secret is not None:
            assert mount.get("readOnly") is True, mount
            assert secret["defaultMode"] == 0o400, secret
            for item in secret["items"]:
                where = f"{mount['mountPath']}/{item['path']}"
                mounted[where] = {"secretName": secret["secretName"], "key": item["key"]}
    found = {}
    for var in box.get("env", []):
        if var["name"].endswith(FILE_SUFFIX):
            assert var["value"] in mounted, (workload["metadata"]["name"], var)
            found[var["name"]] = mounted[var["value"]]
    return found


@pytest.mark.parametrize("overlay", ["production", "single-tenant"])
def test_production_gives_secrets_as_files_and_never_in_the_environment(overlay: str) -> None:
    docs = render(overlay)
    for workload, _ in pod_specs(docs):
        name = workload["metadata"]["name"]
        box = container(workload)
        refs = [v for v in box.get("env", []) if "secretKeyRef" in v.get("valueFrom", {})]
        assert not refs, f"{name} has secrets in its environment: {refs}"
        assert "secretRef" not in str(box.get("envFrom", [])), name
        for variable, item in secret_files(workload).items():
            # A key of the Secret is named after its variable, but for the NATS seed,
            # which each service has its own of (`pressroom bus-keys`).
            own = variable == SEED_FILE
            expected = seed_name(Role(name)) if own else variable.removesuffix(FILE_SUFFIX)
            assert item["key"] == expected, (name, variable, item)
    base = {
        workload["metadata"]["name"]: {
            v["valueFrom"]["secretKeyRef"]["key"]
            for v in container(workload).get("env", [])
            if "secretKeyRef" in v.get("valueFrom", {})
        }
        for workload, _ in pod_specs(render("dev"))
    }
    for name in SERVICES:  # every secret a service reads (in dev), and no other
        given = {i["key"] for i in secret_files(named(docs, "Deployment", name)).values()}
        assert given == base[name], name


def test_the_dev_overlay_has_every_secret_its_pods_need_and_they_parse() -> None:
    docs = render("dev")
    (secret,) = of_kind(docs, "Secret")
    values = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    for workload, _ in pod_specs(docs):
        for var in container(workload).get("env", []):
            ref = var.get("valueFrom", {}).get("secretKeyRef")
            if ref is not None and not ref.get("optional"):
                assert secret["metadata"]["name"] == ref["name"], var
                assert ref["key"] in values, var
    settings = Settings.from_env({**config_data(docs, "pressroom-config"), **values})
    assert len(settings.server_key_bytes()) == 32
    assert settings.storage == "local"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pods_run_unprivileged_on_a_read_only_root(overlay: str) -> None:
    for workload, template in pod_specs(render(overlay)):
        name = workload["metadata"]["name"]
        pod = template["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] > 0, name
        seccomp = pod["securityContext"]["seccompProfile"]
        if overlay != "dev" and name == "renderer":  # Chromium's sandbox needs more
            assert seccomp == {"type": "Localhost", "localhostProfile": CHROMIUM_PROFILE}
        else:
            assert seccomp == {"type": "RuntimeDefault"}, name
        assert pod["automountServiceAccountToken"] is False, name
        box = container(workload)
        assert box["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }, name
        mounts = {m["mountPath"] for m in box["volumeMounts"]}
        assert mounts & {"/tmp", "/data"}, f"{name} has nowhere to write"
        resources = box["resources"]
        assert {"cpu", "memory"} <= resources["requests"].keys(), name
        assert "memory" in resources["limits"], name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_service_runs_its_pressroom_command(overlay: str) -> None:
    docs = render(overlay)
    for name in SERVICES:
        box = container(named(docs, "Deployment", name))
        assert box["args"] == [name], box["args"]
        assert box["args"][0] in cli.COMMANDS
        assert box["image"].split("/")[-1].startswith("pressroom:"), box["image"]


async def test_probes_ask_paths_and_ports_the_services_serve() -> None:
    docs = render("production")
    config = config_data(docs, "pressroom-config")
    ports = {
        "http": int(config["PRESSROOM_PORT"]),
        "metrics": int(config["PRESSROOM_METRICS_PORT"]),
    }
    key = base64.b64encode(b"k" * 32).decode()
    gateway_routes = {
        resource.canonical for resource in init_app(Settings(server_key=key)).router.resources()
    }
    port = free_port()
    async with metrics.serve("127.0.0.1", port), aiohttp.ClientSession() as http:
        for name in SERVICES:
            box = container(named(docs, "Deployment", name))
            declared = {p["name"]: p["containerPort"] for p in box["ports"]}
            assert declared.items() <= ports.items(), (name, declared)
            for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
                probe = box[kind]["httpGet"]
                assert probe["port"] in declared, (name, kind)
                if probe["port"] == "http":
                    assert probe["path"] in gateway_routes, (name, kind, probe)
                else:
                    async with http.get(f"http://127.0.0.1:{port}{probe['path']}") as answer:
                        assert answer.status in (200, 503), (name, kind, probe)
    renderer = named(docs, "Deployment", "renderer")
    grace = renderer["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > float(config["PRESSROOM_SHUTDOWN_GRACE"]) + 5


def test_renderers_scale_on_what_the_code_creates_and_exports() -> None:
    (scaled,) = of_kind(render("production"), "ScaledObject")
    assert scaled["spec"]["scaleTargetRef"]["name"] == "renderer"
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    assert "pressroom_render_backlog" in trigger["metadata"]["query"]
    assert [m.name for m in metrics.RENDER_BACKLOG.describe()] == ["pressroom_render_backlog"]
    docs = render("single-tenant")
    (scaled,) = of_kind(docs, "ScaledObject")
    nats = [t for t in scaled["spec"]["triggers"] if t["type"] == "nats-jetstream"]
    assert len(nats) == 1
    meta = nats[0]["metadata"]
    assert config_data(docs, "pressroom-config")["PRESSROOM_AUTH"] == "disabled"
    assert meta["stream"] == subjects.STREAM
    assert meta["consumer"] == subjects.singles_durable(subjects.DEFAULT_TENANT)
    assert meta["account"] == "$G"
    host = meta["natsServerMonitoringEndpoint"].split(":")[0]
    stateful = named(docs, "StatefulSet", "nats")
    assert host.split(".")[:2] == [stateful["spec"]["serviceName"], "pressroom"], host
    monitor = {p["name"]: p["containerPort"] for p in container(stateful)["ports"]}["monitor"]
    assert meta["natsServerMonitoringEndpoint"].endswith(f":{monitor}")
    for overlay in ("production", "single-tenant"):
        for name in ("renderer", "gateway"):
            assert "replicas" not in named(render(overlay), "Deployment", name)["spec"]


def test_production_keeps_three_fsynced_copies_and_lists_every_server() -> None:
    docs = render("production")
    stateful = named(docs, "StatefulSet", "nats")
    assert stateful["spec"]["replicas"] == 3
    conf = config_data(docs, "nats-config")["nats.conf"]
    assert "sync_interval: always" in conf
    config = config_data(docs, "pressroom-config")
    assert config["PRESSROOM_STREAM_REPLICAS"] == "3"
    servers = [f"nats://nats-{n}.{stateful['spec']['serviceName']}:4222" for n in range(3)]
    assert Settings.from_env(config).nats_url.split(",") == servers
    for n in range(3):
        assert f"nats://nats-{n}.{stateful['spec']['serviceName']}:6222" in conf


REFUSED = [
    "169.254.169.254",  # the cloud metadata address
    "10.96.0.1",  # a cluster's service range
    "10.244.1.7",  # a cluster's pod range
    "172.20.0.5",
    "192.168.1.10",
    "100.100.100.200",  # Alibaba's metadata, in the carrier-grade NAT range
    "127.0.0.1",
    "fd00:ec2::254",  # AWS' IPv6 metadata address
    "64:ff9b::a9fe:a9fe",  # the metadata address through NAT64
    "::ffff:169.254.169.254",
    "fe80::1",
]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_renderer_reaches_the_internet_but_not_the_cluster_or_metadata(
    overlay: str,
) -> None:
    docs = render(overlay)
    policies = [
        p
        for p in of_kind(docs, "NetworkPolicy")
        if "Egress" in p["spec"]["policyTypes"]
        and p["spec"]["podSelector"]["matchLabels"].get("app.kubernetes.io/component") == "renderer"
    ]
    assert len(policies) == 1
    (policy,) = policies
    for address in REFUSED:
        for port in (80, 443, 5432):
            assert not egress_admits(policy, address, port), (address, port)
    assert egress_admits(policy, "93.184.216.34", 443)
    assert egress_admits(policy, "2606:2800:220:1::1", 443)
    assert not egress_admits(policy, "93.184.216.34", 5432), "no database port outside"
    peers = [peer for rule in policy["spec"]["egress"] for peer in rule.get("to", [])]
    selected = [peer["podSelector"]["matchLabels"] for peer in peers if "podSelector" in peer]
    assert {"app.kubernetes.io/name": "nats"} in selected
    assert not [s for s in selected if s.get("app.kubernetes.io/name") == "pressroom"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_gateway_takes_traffic_from_outside(overlay: str) -> None:
    docs = render(overlay)
    deny = named(docs, "NetworkPolicy", "default-deny-ingress")
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    open_to_all = [
        p["spec"]["podSelector"]["matchLabels"]
        for p in of_kind(docs, "NetworkPolicy")
        if "Ingress" in p["spec"]["policyTypes"]
        and any("from" not in rule for rule in p["spec"].get("ingress", []))
    ]
    assert open_to_all == [
        {"app.kubernetes.io/name": "pressroom", "app.kubernetes.io/component": "gateway"}
    ]
