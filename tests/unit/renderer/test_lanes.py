"""The renderer's choice of the next render: single jobs first (how many items a turn may
take), and the batches' states it reads. Which batch's item comes next is shown through the
real `Lanes` on NATS: tests/integration/test_lane_turns.py."""

from __future__ import annotations

import msgspec

from services.core.model import events
from services.renderer.lanes import bulk_room
from services.renderer.states import BatchStates, parse


def test_single_jobs_take_the_free_slots_first_and_items_are_never_hoarded() -> None:
    assert bulk_room(free=4, taken=2, singles_in_hand=2, bulk_in_hand=0, pages=2) == 0
    assert bulk_room(free=4, taken=1, singles_in_hand=1, bulk_in_hand=0, pages=2) == 1
    assert bulk_room(free=4, taken=0, singles_in_hand=0, bulk_in_hand=0, pages=2) == 2
    assert bulk_room(free=2, taken=0, singles_in_hand=0, bulk_in_hand=2, pages=2) == 0
    assert bulk_room(free=1, taken=0, singles_in_hand=0, bulk_in_hand=0, pages=2) == 1


def test_a_single_job_in_hand_keeps_its_page_from_the_next_item() -> None:
    """A single job taken on an earlier turn, still on its way to a page, leaves the
    items one page of two: the item that just ended is not replaced."""
    assert bulk_room(free=2, taken=0, singles_in_hand=1, bulk_in_hand=1, pages=2) == 0
    assert bulk_room(free=3, taken=0, singles_in_hand=1, bulk_in_hand=0, pages=2) == 1


def test_the_bucket_entries_give_states_and_deletions_remove_batches() -> None:
    value = msgspec.json.encode(events.BatchState(tenant="ana", state="paused"))
    assert parse("b1", value, None) == events.BatchState(tenant="ana", state="paused")
    assert parse("b1", value, "DEL") is None
    assert parse("b1", value, "PURGE") is None
    assert parse("b1", None, None) is None
    assert parse("b1", b"not json", None) is None
    assert parse("b1", b'{"tenant": "ana", "state": "exploded"}', None) is None


def test_every_change_of_the_states_is_heard() -> None:
    known = BatchStates()
    heard: list[dict[str, str]] = []
    known.listen(lambda: heard.append(known.running()))
    known.set("b1", events.BatchState(tenant="ana", state="running"))
    known.set("b1", events.BatchState(tenant="ana", state="paused"))
    known.replace({"b2": events.BatchState(tenant="bob", state="running")})
    known.set("b2", None)
    assert heard == [{"b1": "ana"}, {}, {"b2": "bob"}, {}]
    assert known.state("b2") is None
