"""Reading deploy/k8s/ as a cluster would: each overlay rendered by the real kustomize
(`kubectl kustomize`), its documents parsed, and small lookups over them."""

from __future__ import annotations

import base64
import contextlib
import functools
import ipaddress
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from services.bus_cli import KEYS, KEYS_INCLUDE, keys_conf
from services.core.log import buskeys
from services.core.log.busaccess import Role
from tests.conftest import BIN, nats_port, reported_port
from tests.pki import CLIENT, SERVER, new_pki

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
OVERLAYS = ("dev", "production", "single-tenant")
WORKLOADS = ("Deployment", "StatefulSet")
TLS_FILES = "/etc/nats-tls/"
"""Where components/nats-tls mounts NATS' certificates."""

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


def secret_values(docs: tuple[Any, ...]) -> dict[str, str]:
    (secret,) = of_kind(docs, "Secret")
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def installation_keys(overlay: str) -> str:
    """The `nats-keys.conf` the NATS pods mount from the Secret: the dev overlay's own,
    else a fresh installation's (`pressroom bus-keys`)."""
    if overlay == "dev":
        return secret_values(render("dev"))[KEYS]
    return keys_conf({role: buskeys.new_seed() for role in Role})


def nats_files(overlay: str, folder: Path) -> tuple[Path, dict[str, str]]:
    """The overlay's NATS configuration written out as its pod sees it (the ConfigMap in
    `folder/nats`, the Secret's keys beside it in `folder/nats-keys`; storage and
    certificates moved into `folder`), and the pod's environment."""
    tls = new_pki(folder / "tls")
    cert, key = tls.issue("nats", SERVER, CLIENT)
    moved = {
        "/data/jetstream": str(folder / "js"),
        "/var/run/nats/": f"{folder}/",
        f"{TLS_FILES}tls.crt": str(cert),
        f"{TLS_FILES}tls.key": str(key),
        f"{TLS_FILES}ca.crt": str(tls.ca_file),
    }
    config = folder / "nats"
    config.mkdir(parents=True, exist_ok=True)
    for name, text in config_data(render(overlay), "nats-config").items():
        for old, new in moved.items():
            text = text.replace(old, new)
        (config / name).write_text(text)
    keys = config / KEYS_INCLUDE
    keys.parent.mkdir(parents=True, exist_ok=True)
    keys.write_text(installation_keys(overlay))
    return config / "nats.conf", {"POD_NAME": "nats-0", "PATH": "/usr/bin:/bin"}


@contextlib.contextmanager
def running_nats(conf: Path, env: dict[str, str], folder: Path) -> Iterator[str]:
    """nats-server with `conf` on a free port of 127.0.0.1: its URL (log: `nats.log`)."""
    with (folder / "nats.log").open("wb") as out:
        proc = subprocess.Popen(
            [str(BIN / "nats-server"), "-c", str(conf), "-a", "127.0.0.1", "-p", "-1",
             "-m", "0", "--ports_file_dir", str(folder)],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        port = reported_port(proc, lambda: nats_port(folder, proc.pid), 15, "nats")
        yield f"nats://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(15)
