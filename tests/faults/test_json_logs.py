"""`PRESSROOM_LOG_FORMAT=json`, as a log store and an operator read it: every service, run
as a process, writes nothing on stderr but JSON objects, one per line, each with its
`trace_id` and `span_id` (null only for lines that belong to no work);

- the gateway writes one access line per request: method, the route's pattern, status,
  latency, tenant, the job it created or addressed, and the client's own trace id (from
  its `traceparent`, traces being off);
- the renderer writes one line per job end: `done` with pages, bytes and times; `failed`
  with its error type; each naming the job, its tenant and the attempt, and every line
  about one delivery shares one trace id.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from tests.faults.harness import Cluster, assert_no_job_left_behind

Lines = dict[str, list[dict[str, Any]]]


def read_lines(cluster: Cluster) -> Lines:
    """Every service's stderr, parsed; a line that is no JSON fails the test."""
    lines: Lines = {}
    for service in cluster.services:
        for line in service.log.read_text(errors="replace").splitlines():
            try:
                parsed = json.loads(line)
            except ValueError:
                raise AssertionError(
                    f"{service.name} wrote a line that is no JSON: {line!r}"
                ) from None
            assert {"time", "level", "service", "logger", "message"} <= parsed.keys(), parsed
            assert {"trace_id", "span_id"} <= parsed.keys(), parsed
            assert parsed["service"] == service.name, parsed
            lines.setdefault(service.name, []).append(parsed)
    return lines


async def test_every_line_is_json_with_its_trace_and_says_what_it_is_about(
    cluster: Cluster,
) -> None:
    await cluster.up(renderers=1, PRESSROOM_LOG_FORMAT="json")
    bad = await cluster.post_job(
        {"template": "<p>{{ customer.name }}</p>", "data": {}}, expect="failed"
    )
    client_trace = secrets.token_hex(16)
    good = await cluster.post_job(
        {"template": "<p>{{ n }}</p>", "data": {"n": 1}},
        headers={"traceparent": f"00-{client_trace}-{secrets.token_hex(8)}-01"},
    )
    assert bad.status == good.status == 202
    await assert_no_job_left_behind(cluster, "json_logs", timeout=60)
    lines = read_lines(cluster)
    tenant = cluster.tenant.id

    (posted,) = [
        line for line in lines["gateway"]
        if line.get("route") == "/jobs" and line.get("job_id") == good.body["id"]
    ]  # fmt: skip
    assert posted["method"] == "POST" and posted["status"] == 202, posted
    assert posted["tenant"] == tenant and posted["trace_id"] == client_trace, posted
    assert isinstance(posted["duration_ms"], float) and posted["duration_ms"] >= 0, posted
    assert posted["message"].startswith("POST /jobs 202 "), posted
    reads = [line for line in lines["gateway"] if line.get("route") == "/jobs/{job_id}"]
    assert reads and all(line["status"] == 200 and line["job_id"] for line in reads), reads
    assert len({line["trace_id"] for line in reads}) == len(reads), "requests share a trace"

    renderer = lines.get("renderer", [])
    about_good = [line for line in renderer if line.get("job_id") == good.body["id"]]
    (done,) = [line for line in about_good if line.get("status") == "done"]
    assert done["tenant"] == tenant and done["attempt"] == 1 and done["level"] == "INFO"
    assert done["pages"] == 1 and done["bytes"] > 1000, done
    assert done["duration_ms"] >= 0 and done["since_submitted_ms"] >= 0, done
    assert len({line["trace_id"] for line in about_good}) == 1, about_good
    assert all(line["trace_id"] and line["span_id"] for line in about_good), about_good

    about_bad = [line for line in renderer if line.get("job_id") == bad.body["id"]]
    (failed,) = [line for line in about_bad if "failed" in line["message"]]
    assert failed["tenant"] == tenant
    assert failed["attempt"] == 1
    assert failed["level"] == "INFO"
    assert failed["status"] == "failed" and failed["error_type"] == "template", failed
