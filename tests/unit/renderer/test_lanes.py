"""The renderer's choice of the next render: single jobs first, then batches' items round
robin over tenants and then over each tenant's batches; paused batches wait."""

from __future__ import annotations

import msgspec

from services.core.model import events
from services.renderer.lanes import Rotation, bulk_room
from services.renderer.states import BatchStates, parse


def states(**batches: tuple[str, str]) -> BatchStates:
    """Batch id -> (tenant, state), as the bucket would say."""
    found = BatchStates()
    for batch_id, (tenant, state) in batches.items():
        found.set(batch_id, events.BatchState(tenant=tenant, state=state))
    return found


def picks(rotation: Rotation, known: BatchStates, items: dict[str, int], slots: int) -> list[str]:
    """The batches `slots` free slots take an item from, one at a time, as the renderer
    does: the first batch in turn that still has an item (`items`: what each holds)."""
    taken = []
    for _ in range(slots):
        running = known.running()
        batch_id = next((b for b in rotation.order(running) if items.get(b, 0) > 0), None)
        if batch_id is None:
            break
        items[batch_id] -= 1
        rotation.served(batch_id, running[batch_id])
        taken.append(batch_id)
    return taken


def test_tenants_alternate_and_a_tenants_batches_share_its_turns() -> None:
    known = states(
        a1=("ana", "running"), b1=("bob", "running"), b2=("bob", "running"), b3=("bob", "running")
    )
    taken = picks(Rotation(), known, {"a1": 99, "b1": 99, "b2": 99, "b3": 99}, 8)
    assert taken == ["a1", "b1", "a1", "b2", "a1", "b3", "a1", "b1"]


def test_a_tenant_whose_batches_are_empty_passes_its_turn() -> None:
    known = states(a1=("ana", "running"), a2=("ana", "running"), b1=("bob", "running"))
    # a1 is empty: ana's turn goes to a2; once ana has nothing, bob takes every slot.
    taken = picks(Rotation(), known, {"a1": 0, "a2": 1, "b1": 5}, 5)
    assert taken == ["a2", "b1", "b1", "b1", "b1"]


def test_paused_and_cancelled_batches_are_skipped_from_the_next_slot_on() -> None:
    known = states(a1=("ana", "running"), b1=("bob", "running"), c1=("cy", "running"))
    rotation = Rotation()
    items = {"a1": 99, "b1": 99, "c1": 99}
    assert picks(rotation, known, items, 3) == ["a1", "b1", "c1"]
    known.set("b1", events.BatchState(tenant="bob", state="paused"))
    known.set("c1", events.BatchState(tenant="cy", state="cancelled"))
    assert picks(rotation, known, items, 3) == ["a1", "a1", "a1"]
    known.set("b1", events.BatchState(tenant="bob", state="running"))  # resumed
    assert picks(rotation, known, items, 2) == ["b1", "a1"]


def test_a_batch_joining_takes_its_place_without_resetting_turns() -> None:
    known = states(a1=("ana", "running"), b1=("bob", "running"))
    rotation = Rotation()
    items = {"a1": 99, "b1": 99, "b2": 99, "c1": 99}
    assert picks(rotation, known, items, 1) == ["a1"]
    known.set("c1", events.BatchState(tenant="cy", state="running"))
    known.set("b2", events.BatchState(tenant="bob", state="running"))
    assert picks(rotation, known, items, 6) == ["b1", "c1", "a1", "b2", "c1", "a1"]


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
