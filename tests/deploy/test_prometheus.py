"""deploy/prometheus/ and deploy/grafana/, checked by the real tools:

- `promtool check rules` accepts the rules and `promtool test rules` passes their unit
  tests (deploy/prometheus/alerts.test.yaml), which test every alert;
- the Grafana dashboard is what deploy/grafana/build_dashboard.py makes (no drift), and
  every metric a panel or an alert names is one the services export;
- a real Prometheus scrapes a real `pressroom dev` (what `make up` runs) through the
  targets file it writes, jobs run (one of them fails, one sends a webhook), and every
  panel's and every alert's expression is evaluated: each parses, every panel returns
  data, and Prometheus evaluates every alert rule without error.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil
import pytest
import requests
import yaml
from prometheus_client import REGISTRY

import services.core.runtime.metrics  # noqa: F401  (registers every metric)
from services.dev import TARGETS
from tests.conftest import free_port, wait_until
from tests.deploy.k8s import REPO
from tests.integration.test_dev import Dev

PROMETHEUS = REPO / "deploy" / "prometheus"
FAILED = 'pressroom_jobs_finished_total{status="failed"}'
GRAFANA = REPO / "deploy" / "grafana"

needs_prometheus = pytest.mark.skipif(
    shutil.which("promtool") is None or shutil.which("prometheus") is None,
    reason="needs Debian's prometheus package (.ci/run installs it)",
)


def all_rules() -> list[dict[str, Any]]:
    """Every rule of alerts.yaml, recording rules and alerts."""
    groups = yaml.safe_load((PROMETHEUS / "alerts.yaml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def alert_rules() -> list[dict[str, Any]]:
    return [rule for rule in all_rules() if "alert" in rule]


def recording_rules() -> list[dict[str, Any]]:
    return [rule for rule in all_rules() if "record" in rule]


def panel_queries() -> list[tuple[str, str]]:
    """(panel title, expression) of every query of the committed dashboard."""
    board = json.loads((GRAFANA / "pressroom.json").read_text())
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p["targets"]]


def for_prometheus(expr: str) -> str:
    """A panel's query as Prometheus itself takes it (Grafana fills these variables in;
    "All" namespaces and jobs is `.*`)."""
    for variable, value in (("$__rate_interval", "1m"), ("$__range", "5m"),
                            ("$namespace", ".*"), ("$job", ".*")):  # fmt: skip
        expr = expr.replace(variable, value)
    return expr


@needs_prometheus
def test_promtool_accepts_the_rules_and_passes_their_unit_tests() -> None:
    for args in (["check", "rules", "alerts.yaml"], ["test", "rules", "alerts.test.yaml"]):
        done = subprocess.run(
            ["promtool", *args], cwd=PROMETHEUS, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stdout + done.stderr
    tested = set(re.findall(r"alertname: (\w+)", (PROMETHEUS / "alerts.test.yaml").read_text()))
    assert tested == {rule["alert"] for rule in alert_rules()}, "an alert without a test"


def test_the_dashboard_is_the_one_its_code_makes() -> None:
    done = subprocess.run(
        [sys.executable, str(GRAFANA / "build_dashboard.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_every_metric_named_is_one_the_services_export() -> None:
    exported = {
        sample_name
        for metric in REGISTRY.collect()
        if metric.name.startswith("pressroom_")
        for sample_name in _sample_names(metric.name, metric.type)
    }
    expressions = [rule["expr"] for rule in all_rules()] + [e for _, e in panel_queries()]
    named = {  # not the recording rules' own names (namespace_job:pressroom_…:…)
        name for expr in expressions for name in re.findall(r"(?<![:\w])pressroom_\w+", expr)
    }
    assert named, "no metric named at all"
    assert named <= exported, named - exported


def _sample_names(name: str, kind: str) -> list[str]:
    if kind == "counter":
        return [f"{name}_total"]
    if kind == "histogram":
        return [f"{name}_bucket", f"{name}_sum", f"{name}_count"]
    return [name]


class Receiver(BaseHTTPRequestHandler):
    """A webhook endpoint that answers 204 to everything."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def receiver() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()


class MonitoredDev(Dev):
    @property
    def env(self) -> dict[str, str]:
        return {**super().env, "PRESSROOM_ALLOW_PRIVATE_NETWORKS": "1"}  # the local webhook


@contextlib.contextmanager
def prometheus(root: Path, targets: Path) -> Iterator[str]:
    """A Prometheus scraping `targets` every second and evaluating the alert rules."""
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(PROMETHEUS / "alerts.yaml")],
        "scrape_configs": [
            {
                "job_name": "pressroom",
                "file_sd_configs": [{"files": [str(targets)], "refresh_interval": "1s"}],
            }
        ],
    }
    (root / "prometheus.yml").write_text(yaml.safe_dump(config))
    with prometheus_server(root, root / "prometheus.yml") as url:
        yield url


@contextlib.contextmanager
def prometheus_server(root: Path, config: Path) -> Iterator[str]:
    """A real Prometheus running `config`, its data and log under `root`; its URL."""
    port = free_port()
    log = (root / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={config}",
         f"--storage.tsdb.path={root / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=log,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(f"{url}/-/ready"), 30, "prometheus ready")
        yield url
    finally:
        proc.terminate()
        proc.wait(15)
        log.close()


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


def query(url: str, expr: str) -> list[Any]:
    answer = requests.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert answer["status"] == "success", (expr, answer)
    result: list[Any] = answer["data"]["result"]
    return result


@needs_prometheus
def test_a_live_prometheus_runs_every_panel_and_alert_against_make_up(
    tmp_path: Path,
) -> None:
    stack = MonitoredDev(tmp_path / "data", free_port())
    try:
        stack.start()
        targets = stack.data / "run" / TARGETS
        listed = json.loads(targets.read_text())
        assert sorted(t["labels"]["job"] for t in listed) == [
            "conductor", "gateway", "notifier", "projector", "renderer"
        ]  # fmt: skip
        assert {t["labels"]["namespace"] for t in listed} == {"local"}
        with receiver() as hook, prometheus(tmp_path, targets) as url:
            jobs = [
                {"template": "<p>{{ n }}</p>", "data": {"n": 1}, "webhook_url": hook},
                {"template": "<p>{{ n }}</p>", "data": {"n": 2}},
                {"template": "<p>{{ missing.field }}</p>", "data": {}},  # fails: template
            ]
            ids = []
            for body in jobs:
                answer = requests.post(f"{stack.url}/jobs", json=body, headers=stack.auth)
                assert answer.status_code == 202, answer.text
                ids.append(answer.json()["id"])
            wait_until(lambda: all(_ended(stack, i) for i in ids), 90, "the jobs ended")

            def scraped() -> bool:
                delivered = query(url, "sum(pressroom_webhook_deliveries_total)")
                finished = query(url, "sum(pressroom_jobs_finished_total)")
                return bool(delivered and finished and float(finished[0]["value"][1]) >= 3)

            wait_until(scraped, 60, "prometheus scraped the finished jobs and the webhook")

            def panels_without_data() -> list[tuple[str, str]]:
                return [
                    (title, expr)
                    for title, expr in panel_queries()
                    if not query(url, for_prometheus(expr))
                ]

            # rate() needs two samples after the events: poll, do not sleep
            with contextlib.suppress(TimeoutError):
                wait_until(lambda: not panels_without_data(), 30, "every panel has data")
            empty = panels_without_data()
            assert not empty, f"panels without data: {empty}"
            failed = query(url, f"sum by (error_type) ({FAILED})")
            assert [r["metric"]["error_type"] for r in failed] == ["template"], failed
            for rule in all_rules():
                query(url, rule["expr"])  # parses and evaluates
            up = query(url, 'up{namespace="local"}')
            assert sorted(r["metric"]["job"] for r in up) == [
                "conductor", "gateway", "notifier", "projector", "renderer"
            ], up  # fmt: skip

            def evaluated() -> list[Any] | None:
                groups = requests.get(f"{url}/api/v1/rules", timeout=10).json()["data"]["groups"]
                rules = [r for g in groups for r in g["rules"]]
                done = [r for r in rules if r.get("lastEvaluation", "").startswith("2")]
                return rules if rules and len(done) == len(rules) else None

            rules = wait_until(evaluated, 30, "every rule evaluated")
            assert {r["name"] for r in rules} == {
                r.get("alert", r.get("record")) for r in all_rules()
            }
            unhealthy = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
            assert not unhealthy, unhealthy

            def active() -> list[tuple[str, str]]:
                rules = evaluated() or []
                return [
                    (r["name"], r["state"])
                    for r in rules
                    if r.get("state", "inactive") != "inactive"
                ]

            # A rule evaluated before its series' first scrape (the projector's backlog
            # reading) is pending until its next evaluation: poll, do not sleep.
            with contextlib.suppress(TimeoutError):
                wait_until(lambda: not active(), 30, "no alert pending or firing")
            assert not active(), f"alerts pending or firing on a healthy stack: {active()}"
    finally:
        stop(stack)


def stop(stack: Dev) -> None:
    """Ctrl-C, as a user stops it; whatever is left after a minute is killed."""
    if stack.proc is None or stack.proc.poll() is not None:
        return
    tree = stack.tree()
    stack.proc.send_signal(signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        stack.proc.wait(60)
    for proc in tree:
        with contextlib.suppress(psutil.Error):
            proc.kill()


def _ended(stack: Dev, job_id: str) -> bool:
    return stack.job(job_id)["status"] in {"done", "failed"}


def test_docs_list_every_metric() -> None:
    docs = (REPO / "docs" / "deploy.md").read_text()
    table = set(re.findall(r"^\| `(pressroom_\w+)` \|", docs, re.M))
    exported = {
        _sample_names(m.name, m.type)[0].removesuffix("_bucket")
        for m in REGISTRY.collect()
        if m.name.startswith("pressroom_")
    }
    assert table == exported, (exported - table, table - exported)
