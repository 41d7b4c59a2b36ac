"""Reading deploy/k8s/ as a cluster would: each overlay rendered by the real kustomize
(`kubectl kustomize`), its documents parsed, and small lookups over them."""

from __future__ import annotations

import functools
import ipaddress
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import BIN

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
OVERLAYS = ("dev", "production", "single-tenant")
WORKLOADS = ("Deployment", "StatefulSet")

Doc = dict[str, Any]


@functools.cache
def render(overlay: str) -> tuple[Doc, ...]:
    """The documents `kubectl kustomize deploy/k8s/overlays/<overlay>` prints."""
    out = subprocess.run(
        [str(BIN / "kubectl"), "kustomize", str(K8S / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return tuple(doc for doc in yaml.safe_load_all(out.stdout) if doc)


def of_kind(docs: tuple[Doc, ...], *kinds: str) -> list[Doc]:
    return [doc for doc in docs if doc["kind"] in kinds]


def named(docs: tuple[Doc, ...], kind: str, name: str) -> Doc:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def pod_specs(docs: tuple[Doc, ...]) -> Iterator[tuple[Doc, Doc]]:
    """(workload, its pod template) of every Deployment and StatefulSet."""
    for doc in of_kind(docs, *WORKLOADS):
        yield doc, doc["spec"]["template"]


def pod_labels(docs: tuple[Doc, ...]) -> list[dict[str, str]]:
    return [template["metadata"]["labels"] for _, template in pod_specs(docs)]


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def config_data(docs: tuple[Doc, ...], prefix: str) -> dict[str, str]:
    """The data of the one generated ConfigMap whose name starts with `prefix`-."""
    found = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"].startswith(prefix)]
    assert len(found) == 1, [d["metadata"]["name"] for d in found]
    data: dict[str, str] = found[0]["data"]
    return data


def container(workload: Doc) -> Doc:
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, workload["metadata"]["name"]
    first: Doc = containers[0]
    return first


def egress_admits(policy: Doc, address: str, port: int) -> bool:
    """Whether one of `policy`'s egress rules with an ipBlock lets `address`:`port` out."""
    ip = ipaddress.ip_address(address)
    for rule in policy["spec"].get("egress", []):
        ports = {p["port"] for p in rule.get("ports", [])}
        if ports and port not in ports:
            continue
        for peer in rule.get("to", []):
            block = peer.get("ipBlock")
            if block is None:
                continue
            network = ipaddress.ip_network(block["cidr"])
            if ip.version != network.version or ip not in network:
                continue
            if not any(ip in ipaddress.ip_network(e) for e in block.get("except", [])):
                return True
    return False
