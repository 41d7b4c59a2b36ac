"""`PRESSROOM_LOG_FORMAT=json`, as a log store reads it: every service, run as a process,
writes nothing on stderr but JSON objects, one per line, and the renderer's line about a
job that failed names the job, its tenant and the attempt."""

from __future__ import annotations

import json
from typing import Any

from tests.faults.harness import Cluster, assert_no_job_left_behind


async def test_every_line_is_json_and_says_which_job_it_is_about(cluster: Cluster) -> None:
    await cluster.up(renderers=1, PRESSROOM_LOG_FORMAT="json")
    bad = await cluster.post_job(
        {"template": "<p>{{ customer.name }}</p>", "data": {}}, expect="failed"
    )
    good = await cluster.post_job({"template": "<p>{{ n }}</p>", "data": {"n": 1}})
    assert bad.status == good.status == 202
    await assert_no_job_left_behind(cluster, "json_logs", timeout=60)
    lines: dict[str, list[dict[str, Any]]] = {}
    for service in cluster.services:
        text = service.log.read_text(errors="replace")
        for line in text.splitlines():
            try:
                parsed = json.loads(line)
            except ValueError:
                raise AssertionError(
                    f"{service.name} wrote a line that is no JSON: {line!r}"
                ) from None
            assert {"time", "level", "service", "logger", "message"} <= parsed.keys(), parsed
            assert parsed["service"] == service.name, parsed
            lines.setdefault(service.name, []).append(parsed)
    about_bad = [line for line in lines["renderer"] if line.get("job_id") == bad.body["id"]]
    assert about_bad, lines["renderer"]
    (failed,) = [line for line in about_bad if "failed" in line["message"]]
    assert failed["tenant"] == cluster.tenant.id
    assert failed["attempt"] == 1
    assert failed["level"] == "INFO"
