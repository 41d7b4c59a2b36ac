"""deploy/k8s' NATS as a cluster would run it: who may connect, as whom, and over what.

Verifies: nats-server accepts every overlay's configuration (with the installation's
public keys mounted from the Secret, and production's certificates); the permissions in
the ConfigMap are those `core/log/busaccess` makes (so they cannot drift from the code), and
every overlay's NATS reads them; each service's pod gets its own seed and no other (in
production as a file), the NATS pods the public keys and no seed; the dev overlay's
public keys are its seeds';
its NATS, run for real, refuses a client without credentials and a renderer's submission,
and lets each service in; production speaks TLS from the first byte with the
certificates of the Secret `nats-tls`, its services trusting that CA and holding no key.
"""

from __future__ import annotations

import posixpath
import subprocess
from pathlib import Path
from typing import Any

import nats
import pytest

from services.bus_cli import KEYS, KEYS_INCLUDE, keys_conf, kubernetes_authorization, seed_name
from services.core.log.busaccess import Role
from tests.conftest import BIN, eventually
from tests.deploy.k8s import (
    OVERLAYS,
    TLS_FILES,
    config_data,
    container,
    named,
    nats_files,
    render,
    running_nats,
    secret_values,
)

SERVICES = [role for role in Role if role is not Role.ADMIN]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_nats_server_accepts_the_configuration(overlay: str, tmp_path: Path) -> None:
    conf, env = nats_files(overlay, tmp_path)
    checked = subprocess.run(
        [str(BIN / "nats-server"), "-t", "-c", str(conf)],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_nats_grants_each_service_what_busaccess_says_and_no_more(overlay: str) -> None:
    docs = render(overlay)
    config = config_data(docs, "nats-config")
    assert config["nats-authorization.conf"] == kubernetes_authorization(), (
        "regenerate: pressroom bus-keys --authorization > deploy/k8s/base/nats-authorization.conf"
    )
    assert 'include "nats-authorization.conf"' in config["nats.conf"]
    stateful = named(docs, "StatefulSet", "nats")
    config_dir = next(m for m in container(stateful)["volumeMounts"] if m["name"] == "config")
    keys_at = posixpath.normpath(posixpath.join(config_dir["mountPath"], KEYS_INCLUDE))
    assert secret_items(stateful) == {keys_at: KEYS}, "NATS reads the public keys, no seed"
    for role in SERVICES:
        deployment = named(docs, "Deployment", role)
        read = [k for k in secret_items(deployment).values() if k.startswith("NATS_")]
        read += [k for k in env_secrets(deployment).values() if k.startswith("NATS_")]
        assert read == [seed_name(role)], (role, read)
        env = {e["name"]: e for e in container(deployment).get("env", [])}
        if "PRESSROOM_NATS_NKEY_SEED_FILE" in env:  # production: a file
            path = env["PRESSROOM_NATS_NKEY_SEED_FILE"]["value"]
            assert secret_items(deployment)[path] == seed_name(role), role
            assert "PRESSROOM_NATS_NKEY_SEED" not in env, role
        else:
            assert env_secrets(deployment)["PRESSROOM_NATS_NKEY_SEED"] == seed_name(role)


def secret_items(workload: dict[str, Any]) -> dict[str, str]:
    """Where each key of `pressroom-secrets` the workload mounts is: path -> key."""
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
    found = {}
    for mount in container(workload).get("volumeMounts", []):
        secret = volumes.get(mount["name"], {}).get("secret", {})  # else a claim
        if secret.get("secretName", "").startswith("pressroom-secrets"):
            for item in secret["items"]:
                found[f"{mount['mountPath']}/{item['path']}"] = item["key"]
    return found


def env_secrets(workload: dict[str, Any]) -> dict[str, str]:
    """Each variable the workload's container gets from a Secret: variable -> key."""
    return {
        e["name"]: e["valueFrom"]["secretKeyRef"]["key"]
        for e in container(workload).get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    }


def test_the_dev_overlay_s_public_keys_are_its_seeds() -> None:
    values = secret_values(render("dev"))
    assert values[KEYS] == keys_conf({role: values[seed_name(role)] for role in Role})


async def test_the_dev_overlay_s_nats_refuses_strangers_and_lets_each_service_in(
    tmp_path: Path,
) -> None:
    conf, env = nats_files("dev", tmp_path)
    values = secret_values(render("dev"))
    refused = 'Publish Violation - Subject "jobs.j1.submitted.default"'
    with running_nats(conf, env, tmp_path) as url:
        with pytest.raises(Exception, match="Authorization Violation"):
            await nats.connect(url, allow_reconnect=False, connect_timeout=2)
        for role in SERVICES:
            nc = await nats.connect(url, nkeys_seed_str=values[seed_name(role)])
            if role is Role.RENDERER:
                await nc.publish("jobs.j1.submitted.default", b"{}")
            await nc.flush()
            await nc.close()
        await eventually(lambda: refused in (tmp_path / "nats.log").read_text(), 10)


@pytest.mark.parametrize("overlay", ["production", "single-tenant"])
def test_production_speaks_tls_from_the_first_byte_and_services_trust_its_ca(
    overlay: str,
) -> None:
    docs = render(overlay)
    conf = config_data(docs, "nats-config")
    assert "handshake_first: true" in conf["nats-tls.conf"]
    assert 'include "nats-tls.conf"' in conf["nats.conf"]
    assert f"{TLS_FILES}ca.crt" in conf["nats-route-tls.conf"]
    stateful = named(docs, "StatefulSet", "nats")
    mounts = {m["name"]: m["mountPath"] for m in container(stateful)["volumeMounts"]}
    volumes = {v["name"]: v for v in stateful["spec"]["template"]["spec"]["volumes"]}
    tls = [n for n, v in volumes.items() if v.get("secret", {}).get("secretName") == "nats-tls"]
    assert [mounts[n].rstrip("/") + "/" for n in tls] == [TLS_FILES]
    ca = config_data(docs, "pressroom-config")["PRESSROOM_NATS_TLS_CA"]
    for role in SERVICES:
        deployment = named(docs, "Deployment", role)
        spec = deployment["spec"]["template"]["spec"]
        mounted = {m["name"]: m["mountPath"] for m in container(deployment)["volumeMounts"]}
        secret = [v for v in spec["volumes"] if v.get("secret", {}).get("secretName") == "nats-tls"]
        assert len(secret) == 1, role
        assert secret[0]["secret"]["items"] == [{"key": "ca.crt", "path": "ca.crt"}], "no key"
        assert f"{mounted[secret[0]['name']]}/ca.crt" == ca, role


def test_a_laptop_cluster_runs_nats_plain() -> None:
    docs = render("dev")
    assert "tls {" not in config_data(docs, "nats-config")["nats-tls.conf"]
    assert "PRESSROOM_NATS_TLS_CA" not in config_data(docs, "pressroom-config")
