"""A collector that is away is said once: `QuietExporter` over a real exporter that
fails (a `SpanExporter` whose exports the test decides), one warning when exports start
failing, whatever the library says meanwhile, and one line when they work again."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from services.core.runtime.tracing import Muffler, QuietExporter


class Collector(SpanExporter):
    """Exports succeed while `up`; a failing one complains as the OTLP exporter does."""

    def __init__(self) -> None:
        self.up = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.up:
            return SpanExportResult.SUCCESS
        logging.getLogger("opentelemetry.exporter.otlp.common.http").error(
            "Failed to export spans batch code: None, reason: Connection refused"
        )
        return SpanExportResult.FAILURE


def test_away_is_said_once_and_back_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    collector = Collector()
    exporter = QuietExporter(collector, "http://collector:4318")
    try:
        for _ in range(5):
            assert exporter.export([]) == SpanExportResult.FAILURE
        collector.up = True
        for _ in range(3):
            assert exporter.export([]) == SpanExportResult.SUCCESS
        collector.up = False
        exporter.export([])
    finally:
        logging.getLogger(Muffler.LOGGER).removeHandler(exporter.muffler)
        logging.getLogger(Muffler.LOGGER).propagate = True
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in said] == ["WARNING", "INFO", "WARNING"], said
    assert "do not reach the collector at http://collector:4318" in said[0][1]
    assert "Connection refused" in said[0][1]  # the library's own words, quoted once
    assert said[1][1] == "traces reach the collector at http://collector:4318 again"
