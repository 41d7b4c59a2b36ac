"""Events on the wire: dedup ids, subjects, and tolerance of fields a newer producer adds."""

from __future__ import annotations

import msgspec
import pytest

from services.core.model import events, pageoptions, subjects


def test_terminal_events_share_one_dedup_id():
    error = events.ErrorInfo(type="template", message="x")
    done = events.JobDone(job_id="j", attempt=1, object_key="k", bytes=1, pages=1, render_ms=1)
    failed = events.JobFailed(job_id="j", attempt=2, error=error)
    assert events.msg_id(done) == events.msg_id(failed) == "j.terminal"


def test_an_end_without_a_webhook_has_a_subject_the_notifier_does_not_take():
    done = events.JobDone(job_id="j", attempt=1, object_key="k", bytes=1, pages=1, render_ms=1)
    hooked = msgspec.structs.replace(done, webhook_url="https://example.com/hook")
    item = msgspec.structs.replace(done, job_id=subjects.item_job_id("b", 3))
    cancelled = events.JobCancelled(job_id="j", reason="x")
    assert events.subject_of(done) == "jobs.j.done.quiet"
    assert events.subject_of(cancelled) == "jobs.j.cancelled.quiet"
    assert events.subject_of(hooked) == "jobs.j.done"
    assert events.subject_of(item) == "jobs.b.3.done"  # an item never reaches the notifier
    assert events.subject_of(events.JobStarted(job_id="j", attempt=1, worker="w")) == (
        "jobs.j.started"
    )
    for event in (done, cancelled, hooked, item):
        assert subjects.kind_of(events.subject_of(event)) == events.event_name(event)
    assert subjects.kind_of("jobs.j.submitted.lane") == "submitted"


def test_events_round_trip_and_tolerate_unknown_fields():
    event = events.JobSubmitted(job_id="j", template="t", data={"a": 1})
    subject = events.subject_of(event)
    assert events.decode(events.encode(event), subject=subject) == event
    newer = events.encode(event)[:-1] + b',"added_later":true}'
    assert events.decode(newer, subject=subject).job_id == "j"


def test_a_job_with_options_this_version_does_not_know_still_decodes():
    """A gateway newer than the renderer: the job renders, without the unknown option."""
    newer = (
        b'{"type":"submitted","job_id":"j","template":"t","options":{"format":"A5",'
        b'"hologram":"DRAFT","margin":{"top":"1cm","gutter":"2mm"},'
        b'"metadata":{"title":"T","language":"en"},"wait_for":{"selector":"#x","poll":1}}}'
    )
    job = events.decode(newer, subject="jobs.j.submitted.default")
    assert isinstance(job, events.JobSubmitted)
    assert job.options.format == "A5"
    assert job.options.margin == pageoptions.Margin(top="1cm")
    assert job.options.metadata == pageoptions.Metadata(title="T")
    assert job.options.wait_for == pageoptions.WaitFor(selector="#x")


def test_a_single_job_s_submission_carries_its_tenant_s_lane_and_an_item_s_does_not():
    single = events.JobSubmitted(job_id="j1", tenant="ten_ab12", template="t")
    item = events.JobSubmitted(job_id="b1.7", tenant="ten_ab12", batch_id="b1", template="")
    assert events.subject_of(single) == "jobs.j1.submitted.ten_ab12"
    assert events.subject_of(item) == "jobs.b1.7.submitted"
    assert subjects.singles_durable("ten_ab12") == "singles-ten_ab12"
    # An id that could not be one subject token gets a digest of itself, stable.
    odd = subjects.lane_token("a.b *>")
    assert odd == subjects.lane_token("a.b *>") and odd.isalnum() and odd != "a.b *>"
    assert subjects.kind_of(events.subject_of(single)) == "submitted"
    assert subjects.kind_of(events.subject_of(item)) == "submitted"
    assert subjects.kind_of("jobs.j1.done") == "done"
    assert subjects.kind_of("jobs.b1.7.done") == "done"


def test_an_event_stands_only_on_its_own_job_s_subject_of_its_own_kind():
    """Subject permissions say who may publish on which subject; an event's payload may
    not claim another kind or job than its subject (`events.belongs`)."""
    submitted = events.JobSubmitted(job_id="j", tenant="t1")
    done = events.JobDone(job_id="j", attempt=1, object_key="k", bytes=1, pages=1, render_ms=1)
    item = events.JobDone(job_id="b.3", attempt=1, object_key="k", bytes=1, pages=1, render_ms=1)
    batch = events.BatchPaused(batch_id="b")
    for event in (submitted, done, item):
        subject = events.subject_of(event)
        assert events.decode(events.encode(event), subject=subject) == event
    assert events.decode_log(events.encode_batch(batch), subject="batches.b.paused") == batch
    assert events.decode(events.encode(submitted), subject="jobs.j.submitted") == submitted
    assert events.decode(events.encode(done), subject="jobs.j.done") == done
    refused = [
        (submitted, "jobs.j.done.quiet"),  # a submission passed off as a result
        (submitted, "jobs.k.submitted.t1"),  # another job's subject
        (submitted, "jobs.j.submitted.t2"),  # another tenant's lane
        (done, "jobs.j.failed"),
        (done, "jobs.b.3.done"),  # the item's subject, the batch's job id
        (item, "jobs.b.done"),
        (item, "jobs.b.x3.done"),  # no item's index
    ]
    for event, subject in refused:
        with pytest.raises(msgspec.ValidationError, match="cannot stand on"):
            events.decode(events.encode(event), subject=subject)
    with pytest.raises(msgspec.ValidationError, match="cannot stand on"):
        events.decode_log(events.encode_batch(batch), subject="batches.b.resumed")
    with pytest.raises(msgspec.ValidationError, match="cannot stand on"):
        events.decode_log(events.encode(done), subject="batches.j.done")


def test_a_single_jobs_end_is_told_from_a_batch_items_and_other_events() -> None:
    """The projector applies at once a batch of events holding a single job's end (a
    client may be waiting for its row); a batch item's end lingers with the rest."""
    assert subjects.single_job_end("jobs.abc.done")
    assert subjects.single_job_end(f"jobs.abc.failed.{subjects.QUIET}")
    assert subjects.single_job_end("jobs.abc.cancelled")
    assert not subjects.single_job_end("jobs.b1.3.done")  # an item of batch b1
    assert not subjects.single_job_end("jobs.abc.started")
    assert not subjects.single_job_end(subjects.submitted_subject("abc", "t"))
    assert not subjects.single_job_end("batches.b1.done")
