"""Pressroom's Grafana dashboard, generated: `python deploy/grafana/build_dashboard.py`
writes deploy/grafana/pressroom.json; `--check` fails if that file differs from what this
code makes (tests/deploy/test_prometheus.py runs it, so the two never drift).

Every panel is a Prometheus query over the metrics of services/core/metrics.py; the same
queries are run against a live stack by the tests (each must parse and return data).
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


def quantile(q: float, histogram: str) -> str:
    return f"histogram_quantile({q}, sum by (le) (rate({histogram}_bucket[{RATE}])))"


FAILED = 'pressroom_jobs_finished_total{status="failed"}'
RETRYING = 'pressroom_render_attempts_total{outcome="retrying"}'

PANELS: list[tuple[str, list[tuple[str, str]], str, str]] = [
    (
        "Throughput",
        [
            (f"sum(rate(pressroom_jobs_submitted_total[{RATE}]))", "accepted"),
            (
                f"sum by (status) (rate(pressroom_jobs_finished_total[{RATE}]))",
                "{{status}}",
            ),
        ],
        "reqps",
        "Jobs accepted (202) and jobs ended, by terminal status, per second.",
    ),
    (
        "Render time",
        [
            (quantile(q, "pressroom_render_seconds"), f"p{round(q * 100)}")
            for q in (0.5, 0.95, 0.99)
        ],
        "s",
        "Template to stored document, per attempt: median, 95th and 99th percentile.",
    ),
    (
        "Backlog",
        [("max by (lane) (pressroom_render_backlog)", "{{lane}}")],
        "short",
        "Jobs the renderers have yet to finish, by lane (the autoscaling signal).",
    ),
    (
        "Oldest waiting job",
        [("max(pressroom_render_oldest_seconds)", "age")],
        "s",
        "How long the oldest job the renderers have not finished has waited.",
    ),
    (
        "Failures by type",
        [
            (f"sum by (error_type) (rate({FAILED}[{RATE}]))", "{{error_type}}"),
            (f"sum(rate({RETRYING}[{RATE}])) or vector(0)", "retries"),
        ],
        "reqps",
        "Jobs that failed, by error type, and render attempts that will be retried.",
    ),
    (
        "Webhooks",
        [
            (
                f"sum by (outcome) (rate(pressroom_webhook_deliveries_total[{RATE}]))",
                "{{outcome}}",
            ),
            ("max(pressroom_webhook_backlog)", "backlog"),
        ],
        "short",
        "Webhook attempts per second by outcome, and terminal events not yet delivered.",
    ),
    (
        "Render load per pod",
        [("sum by (instance) (pressroom_renders_in_flight)", "{{instance}}")],
        "short",
        "Renders running on each renderer (at most PRESSROOM_RENDER_CONCURRENCY).",
    ),
    (
        "Browser launches",
        [
            (
                f"sum by (reason) (increase(pressroom_browser_launches_total[{RATE}]))",
                "{{reason}}",
            )
        ],
        "short",
        "Chromium starts: at start, recycled after PRESSROOM_BROWSER_RECYCLE renders, "
        "or after a crash.",
    ),
    (
        "Projection lag",
        [("max(pressroom_projection_lag)", "events")],
        "short",
        "Events the projector has yet to apply to PostgreSQL (status reads lag by this).",
    ),
    (
        "Document size",
        [(quantile(q, "pressroom_render_bytes"), f"p{round(q * 100)}") for q in (0.5, 0.95)],
        "bytes",
        "Size of the stored documents: median and 95th percentile.",
    ),
]


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
        "description": "Jobs, renders, backlog, failures and webhooks of one installation.",
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
                }
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
