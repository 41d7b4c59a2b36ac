"""The alerts and the dashboard as an on-call engineer relies on them, read from the files:

- every aggregation of every rule and panel keeps `namespace` (and `job`, or the alert
  names its service itself), so one installation never masks another's failure, and the
  dashboard's panels all filter on its `namespace` and `job` variables;
- every alert has a fixture where it fires, naming its namespace and service, and one
  where it stays silent (promtool runs them: tests/deploy/test_prometheus.py);
- every alert links a section of docs/runbooks.md that exists, and that section says
  what to look at and what to do;
- each SLO's error budget is the same in each of its burn-rate rules and the one
  docs/runbooks.md states; the failures counted against the job-success SLO are the
  installation's error types as services/core/model/errors.py defines them; the time-to-done
  threshold is a bucket of its histogram;
- deploy/prometheus/scrape.yaml is a valid configuration, and a real Prometheus running
  its relabelling over pods as Kubernetes describes them labels them `namespace`, `job`
  and `instance` as the rules expect, and scrapes no other pod.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from services.core.model import errors
from services.core.runtime import metrics
from tests.conftest import wait_until
from tests.deploy.k8s import REPO
from tests.deploy.test_prometheus import (
    GRAFANA,
    PROMETHEUS,
    alert_rules,
    all_rules,
    needs_prometheus,
    panel_queries,
    prometheus_server,
    query,
    recording_rules,
)

RUNBOOKS = REPO / "docs" / "runbooks.md"
AGGREGATION = re.compile(
    r"\b(sum|min|max|count|avg|stddev|topk|bottomk|quantile)\s*(by\s*\(([^)]*)\))?\s*\("
)


def aggregations(expr: str) -> list[set[str] | None]:
    """The labels each aggregation of `expr` groups by; None for one without `by`."""
    return [
        {label.strip() for label in found[3].split(",")} if found[2] else None
        for found in AGGREGATION.finditer(expr)
    ]


def test_every_rule_aggregates_within_a_namespace_and_alerts_name_their_service() -> None:
    for rule in all_rules():
        name = rule.get("alert", rule.get("record"))
        for grouping in aggregations(rule["expr"]):
            assert grouping is not None, f"{name}: an aggregation across namespaces"
            assert "namespace" in grouping, (name, grouping)
            assert "job" in grouping or "on (namespace)" in rule["expr"], (name, grouping)
    for rule in alert_rules():
        groupings = aggregations(rule["expr"])
        keeps_job = all(g is not None and "job" in g for g in groupings[:1])
        assert keeps_job or "job" in rule.get("labels", {}), rule["alert"]


def test_every_panel_groups_and_filters_by_namespace_and_job() -> None:
    board = json.loads((GRAFANA / "pressroom.json").read_text())
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert {"namespace", "job"} <= variables.keys()
    assert all(variables[v]["includeAll"] and variables[v]["multi"] for v in ("namespace", "job"))
    for title, expr in panel_queries():
        selectors = re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\{([^}]*)\}", expr)
        assert selectors, (title, expr)
        for selector in selectors:
            assert 'namespace=~"$namespace"' in selector and 'job=~"$job"' in selector, (
                title, expr
            )  # fmt: skip
        for grouping in aggregations(expr):
            assert grouping is not None and {"namespace", "job"} <= grouping, (title, expr)


def fixtures() -> list[dict[str, Any]]:
    tests: list[dict[str, Any]] = yaml.safe_load((PROMETHEUS / "alerts.test.yaml").read_text())[
        "tests"
    ]
    return [case for test in tests for case in test.get("alert_rule_test", [])]


def test_every_alert_has_a_fixture_firing_for_its_namespace_and_one_silent() -> None:
    cases = fixtures()
    for rule in alert_rules():
        mine = [case for case in cases if case["alertname"] == rule["alert"]]
        fired = [alert for case in mine for alert in case["exp_alerts"]]
        assert fired, f"{rule['alert']} never fires in a fixture"
        assert all({"namespace", "job"} <= alert["exp_labels"].keys() for alert in fired)
        assert any(not case["exp_alerts"] for case in mine), f"{rule['alert']} never silent"
    namespaces = {
        alert["exp_labels"]["namespace"] for case in cases for alert in case["exp_alerts"]
    }
    assert "staging" not in namespaces, "the healthy installation is named by an alert"


def github_anchor(heading: str) -> str:
    """The anchor GitHub (and most Markdown renderers) give a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def runbook_sections() -> dict[str, str]:
    """Each heading's anchor in docs/runbooks.md, with the text under it."""
    text = RUNBOOKS.read_text()
    parts = re.split(r"^#{1,4} (.+)$", text, flags=re.M)
    return {github_anchor(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}


def test_every_alert_links_a_runbook_section_that_says_what_to_look_at_and_do() -> None:
    sections = runbook_sections()
    for rule in alert_rules():
        url = rule["annotations"]["runbook_url"]
        path, _, anchor = url.partition("#")
        assert path == "docs/runbooks.md" and anchor in sections, (rule["alert"], url)
        body = sections[anchor]
        assert "**Look at**" in body and "**Do**" in body, (rule["alert"], body[:200])
        assert "runbook" not in rule["annotations"], "the old annotation is gone"


BUDGET = re.compile(r"\)\s*/\s*([0-9.]+)\s*$")


def budgets(slo: str) -> set[float]:
    return {
        float(BUDGET.search(rule["expr"])[1])  # type: ignore[index]
        for rule in recording_rules()
        if rule["record"].startswith(f"namespace_job:pressroom_{slo}:burnrate")
    }


def test_each_slo_has_one_budget_the_runbook_states() -> None:
    text = RUNBOOKS.read_text()
    assert budgets("job_success") == {0.005} and "99.5 %" in text
    assert budgets("time_to_done") == {0.01} and "99 % of single jobs" in text
    assert len([r for r in recording_rules() if "burnrate" in r["record"]]) == 8
    # The threshold is a bucket: the histogram's exposition has an `le="30.0"` sample.
    metrics.TIME_TO_DONE.labels(lane="singles")
    (family,) = metrics.TIME_TO_DONE.collect()
    assert any(sample.labels.get("le") == "30.0" for sample in family.samples)


def _kinds(cls: type[errors.PressroomError]) -> set[str]:
    return {cls.kind}.union(*(_kinds(sub) for sub in cls.__subclasses__()))


def test_the_job_success_slo_counts_the_installation_s_failures_only() -> None:
    # A page that crashes its tab and an unreachable URL source are the client's, though
    # retried; worker_lost (finalizer) and stalled (reconciler) are the projector's ends.
    installation = (_kinds(errors.TransientError) - {"page_crashed", "source_unreachable"}) | {
        "internal", "worker_lost", "stalled"
    }  # fmt: skip
    for rule in recording_rules():
        if rule["record"].startswith("namespace_job:pressroom_job_success:"):
            (counted,) = set(re.findall(r'status="failed", error_type=~"([^"]+)"', rule["expr"]))
            assert set(counted.split("|")) == installation, rule["record"]
            assert f'error_type=~"none|{counted}"' in rule["expr"], rule["record"]


@needs_prometheus
def test_the_scrape_configuration_labels_pods_as_the_rules_expect(tmp_path: Path) -> None:
    """Debian's Prometheus is built without Kubernetes discovery: pods are described to
    it in a file, with the labels that discovery gives them; the rest runs as written."""
    config = yaml.safe_load((PROMETHEUS / "scrape.yaml").read_text())
    (job,) = config["scrape_configs"]
    del job["kubernetes_sd_configs"]  # pods as Kubernetes discovery describes them:
    pods = tmp_path / "pods.json"
    job["file_sd_configs"] = [{"files": [str(pods)], "refresh_interval": "1s"}]
    job["scrape_interval"] = "1s"
    config["rule_files"] = [str(PROMETHEUS / "alerts.yaml")]
    checked = tmp_path / "prometheus.yml"
    checked.write_text(yaml.safe_dump(config))
    done = subprocess.run(
        ["promtool", "check", "config", str(checked)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    pods.write_text(json.dumps([
        _pod("prod", "gateway-7d9f", "gateway"),
        _pod("prod", "renderer-5c4b", "renderer"),
        _pod("staging", "renderer-81aa", "renderer"),
        _pod("prod", "postgres-0", "database", name="postgresql"),
        _pod("prod", "nats-0", "nats", scrape="false"),
    ]))  # fmt: skip
    with prometheus_server(tmp_path, checked) as url:

        def scraped() -> list[dict[str, str]] | None:
            found = [r["metric"] for r in query(url, "up")]
            return found if len(found) >= 3 else None

        up = wait_until(scraped, 30, "the pods scraped")
    assert sorted((m["namespace"], m["job"], m["instance"]) for m in up) == [
        ("prod", "gateway", "gateway-7d9f"),
        ("prod", "renderer", "renderer-5c4b"),
        ("staging", "renderer", "renderer-81aa"),
    ], up


def _pod(
    namespace: str, pod: str, component: str, name: str = "pressroom", scrape: str = "true"
) -> dict[str, Any]:
    """A pod as Kubernetes discovery labels it (its address: a port nothing listens on;
    `up` is 0 but labelled all the same)."""
    return {
        "targets": ["127.0.0.1:1"],
        "labels": {
            "__meta_kubernetes_namespace": namespace,
            "__meta_kubernetes_pod_name": pod,
            "__meta_kubernetes_pod_label_app_kubernetes_io_name": name,
            "__meta_kubernetes_pod_label_app_kubernetes_io_component": component,
            "__meta_kubernetes_pod_annotation_prometheus_io_scrape": scrape,
            "__meta_kubernetes_pod_annotation_prometheus_io_port": "9",
        },
    }
