"""Pressroom's Grafana dashboard, generated: `python deploy/grafana/build_dashboard.py`
writes deploy/grafana/pressroom.json; `--check` fails if that file differs from what this
code makes (tests/deploy/test_prometheus.py runs it, so the two never drift).

Every panel is a Prometheus query over the metrics of services/core/runtime/metrics.py (and the
SLO recording rules of deploy/prometheus/alerts.yaml), grouped by `namespace` and `job`
and filtered on the dashboard's `namespace` and `job` variables; the same queries are run
against a live stack by the tests (each must parse and return data).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("pressroom.json")
UID = "pressroom-overview"


def panel(
    title: str, targets: list[tuple[str, str]], unit: str, x: int, y: int, description: str
) -> dict[str, Any]:
    """A time series panel, half a row wide, of `targets` (query, legend)."""
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [
            {"refId": chr(ord("A") + n), "expr": expr, "legendFormat": legend}
            for n, (expr, legend) in enumerate(targets)
        ],
    }


RATE = "$__rate_interval"

BY = "namespace, job"
"""Every panel's grouping: one installation (namespace) and service (job) never hides
another's; the template variables choose which are shown."""

LEGEND = "{{namespace}} {{job}}"


def sel(metric: str, **matchers: str) -> str:
    """`metric` of the chosen namespaces and jobs, with `matchers` (label="value")."""
    labels = ['namespace=~"$namespace"', 'job=~"$job"']
    labels += [f'{name}="{value}"' for name, value in matchers.items()]
    return f"{metric}{{{', '.join(labels)}}}"


def rate(metric: str, **matchers: str) -> str:
    return f"rate({sel(metric, **matchers)}[{RATE}])"


def quantile(q: float, histogram: str, **matchers: str) -> str:
    buckets = rate(f"{histogram}_bucket", **matchers)
    return f"histogram_quantile({q}, sum by ({BY}, le) ({buckets}))"


PANELS: list[tuple[str, list[tuple[str, str]], str, str]] = [
    (
        "Services up",
        [(f"sum by ({BY}) ({sel('up')})", LEGEND)],
        "short",
        "Targets of each service answering their scrape (0: the service is down).",
    ),
    (
        "Throughput",
        [
            (f"sum by ({BY}) ({rate('pressroom_jobs_submitted_total')})", f"{LEGEND} accepted"),
            (
                f"sum by ({BY}, status) ({rate('pressroom_jobs_finished_total')})",
                f"{LEGEND} {{{{status}}}}",
            ),
        ],
        "reqps",
        "Jobs accepted (202) and jobs ended, by terminal status, per second.",
    ),
    (
        "Job success SLO: burn rate",
        [
            (sel(f"namespace_job:pressroom_job_success:burnrate{w}"), f"{LEGEND} {w}")
            for w in ("5m", "1h", "6h")
        ],
        "short",
        "The installation's failures over the error budget (SLO 99.5 %): 1 spends the "
        "month's budget in a month; the alerts page at 14.4 (1 h and 5 min) and 6 (6 h "
        'and 30 min). docs/runbooks.md, "Service level objectives".',
    ),
    (
        "Time-to-done SLO: burn rate",
        [
            (sel(f"namespace_job:pressroom_time_to_done:burnrate{w}"), f"{LEGEND} {w}")
            for w in ("5m", "1h", "6h")
        ],
        "short",
        "Single jobs done later than 30 s over the error budget (SLO 99 % within 30 s).",
    ),
    (
        "Time to done (single jobs)",
        [
            (
                quantile(q, "pressroom_time_to_done_seconds", lane="singles"),
                f"{LEGEND} p{round(q * 100)}",
            )
            for q in (0.5, 0.95, 0.99)
        ],
        "s",
        "From the submission stored in the log to `done` stored: median, 95th and 99th percentile.",
    ),
    (
        "Render time",
        [
            (quantile(q, "pressroom_render_seconds"), f"{LEGEND} p{round(q * 100)}")
            for q in (0.5, 0.95, 0.99)
        ],
        "s",
        "Template to stored document, per attempt: median, 95th and 99th percentile.",
    ),
    (
        "Backlog",
        [(f"max by ({BY}, lane) ({sel('pressroom_render_backlog')})", f"{LEGEND} {{{{lane}}}}")],
        "short",
        "Jobs the renderers have yet to finish, by lane (the autoscaling signal).",
    ),
    (
        "Oldest waiting job",
        [(f"max by ({BY}) ({sel('pressroom_render_oldest_seconds')})", LEGEND)],
        "s",
        "How long the oldest job the renderers have not finished has waited.",
    ),
    (
        "Failures by type",
        [
            (
                f"sum by ({BY}, error_type) "
                f"({rate('pressroom_jobs_finished_total', status='failed')})",
                f"{LEGEND} {{{{error_type}}}}",
            ),
            (
                f"sum by ({BY}) ({rate('pressroom_render_attempts_total', outcome='retrying')})"
                f" or sum by ({BY}) ({sel('pressroom_renderer_taking_work')}) * 0",
                f"{LEGEND} retries",
            ),
        ],
        "reqps",
        "Jobs that failed, by error type, and render attempts that will be retried.",
    ),
    (
        "Webhooks",
        [
            (
                f"sum by ({BY}, outcome) ({rate('pressroom_webhook_deliveries_total')})",
                f"{LEGEND} {{{{outcome}}}}",
            ),
            (f"max by ({BY}) ({sel('pressroom_webhook_backlog')})", f"{LEGEND} backlog"),
        ],
        "short",
        "Webhook attempts per second by outcome, and terminal events not yet delivered.",
    ),
    (
        "Render load per pod",
        [
            (
                f"sum by ({BY}, instance) ({sel('pressroom_renders_in_flight')})",
                f"{LEGEND} {{{{instance}}}}",
            )
        ],
        "short",
        "Renders running on each renderer (at most PRESSROOM_RENDER_CONCURRENCY).",
    ),
    (
        "Browser launches",
        [
            (
                f"sum by ({BY}, reason) "
                f"(increase({sel('pressroom_browser_launches_total')}[{RATE}]))",
                f"{LEGEND} {{{{reason}}}}",
            )
        ],
        "short",
        "Chromium starts: at start, recycled after PRESSROOM_BROWSER_RECYCLE renders, "
        "or after a crash.",
    ),
    (
        "Projection lag",
        [(f"max by ({BY}) ({sel('pressroom_projection_lag')})", LEGEND)],
        "short",
        "Events the projector has yet to apply to PostgreSQL (status reads lag by this).",
    ),
    (
        "Document size",
        [
            (quantile(q, "pressroom_render_bytes"), f"{LEGEND} p{round(q * 100)}")
            for q in (0.5, 0.95)
        ],
        "bytes",
        "Size of the stored documents: median and 95th percentile.",
    ),
]


def variable(name: str, label: str, query: str) -> dict[str, Any]:
    """A query variable, several values at once, "All" by default (any value)."""
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": query, "refId": name},
        "definition": query,
        "refresh": 2,
        "multi": True,
        "includeAll": True,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "sort": 1,
    }


def dashboard() -> dict[str, Any]:
    panels = [
        panel(title, targets, unit, 12 * (n % 2), 8 * (n // 2), description)
        for n, (title, targets, unit, description) in enumerate(PANELS)
    ]
    for number, item in enumerate(panels, 1):
        item["id"] = number
    return {
        "uid": UID,
        "title": "Pressroom",
        "description": "Services, SLOs, jobs, renders, backlog, failures and webhooks, by "
        "installation (namespace) and service (job).",
        "tags": ["pressroom"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                },
                variable(
                    "namespace", "Namespace", "label_values(pressroom_nats_connected, namespace)"
                ),
                variable(
                    "job",
                    "Service",
                    'label_values(pressroom_nats_connected{namespace=~"$namespace"}, job)',
                ),
            ]
        },
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        if OUT.read_text() != render():
            print(f"{OUT} is stale: run python {__file__}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
