"""What a batch's webhook says: its outcome, its items' counts, and its archive if any."""

from __future__ import annotations

from services.core.model import events
from services.notifier.consumer import batch_data, batch_webhook_id

COUNTS = {"total": 3, "done": 2, "failed": 1, "cancelled": 0}


def test_a_done_batch_names_its_archive_and_link():
    done = events.BatchDone(batch_id="b1", **COUNTS, object_key="a.zip", bytes=10)
    assert batch_data(done, "https://dl/a.zip") == {
        "id": "b1", "status": "done", **COUNTS, "error": None, "url": "https://dl/a.zip",
        "object_key": "a.zip", "bytes": 10,
    }  # fmt: skip
    assert batch_webhook_id(done) == "msg_b1_done"


def test_a_failed_batch_says_why_and_has_no_link_without_an_archive():
    error = events.ErrorInfo("no_documents", "no item produced a document")
    failed = events.BatchFailed(batch_id="b1", **COUNTS, error=error)
    data = batch_data(failed, None)
    assert data["status"] == "failed"
    assert data["error"] == {"type": "no_documents", "message": "no item produced a document"}
    assert data["url"] is None and "object_key" not in data and "bytes" not in data


def test_a_cancelled_batch_keeps_the_archive_of_what_finished():
    cancelled = events.BatchCancelled(batch_id="b1", **COUNTS, object_key="a.zip", bytes=5)
    data = batch_data(cancelled, "https://dl/a.zip")
    assert (data["status"], data["bytes"], data["error"]) == ("cancelled", 5, None)
    assert batch_webhook_id(cancelled) == "msg_b1_cancelled"
