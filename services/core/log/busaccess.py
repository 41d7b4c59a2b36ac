"""Who may do what on NATS: one identity per service, each granted only the subjects its
code publishes and subscribes to, and the nats-server `authorization` block made from this
one table (`pressroom dev`, the tests, `pressroom bus-keys` for Kubernetes).

    identity   publishes (besides JetStream's API for what it reads, below)
    gateway    single jobs' submissions, cancels, deletions, webhook redeliveries; batches'
               submissions, pauses, resumes, cancels; lane bells; its Idempotency-Key bucket
               and its copy of the API keys (`KV_KEY_DIRECTORY`, no one else's to read);
               key notices (`subjects.KEY_NEWS`), which only gateways may send or hear
    renderer   its jobs' and items' lifecycle: started, retrying, done, failed
    projector  failed (deliveries ran out, stalled), re-driven submissions, batches'
               complete and progress, usage; the one that updates the streams' settings
    notifier   webhook attempts
    conductor  items' submissions and cancels, batches' ends, the batch-state bucket

JetStream's API is subjects too (`$JS.API.…`), and each identity gets the calls it makes:
reading the log (stream info, message and direct gets) for all; pulling from and acking
its own durables only (a renderer can never take the projector's messages); creating the
shared streams if missing (a create of an existing stream with another configuration is
refused by JetStream, so it changes nothing); creating only the durables it owns, which
`topology` names so that the create subject carries the durable's filter. Replies come to
an inbox prefix of the identity's own (`inbox`), which no other identity may read. The
`admin` identity may do anything: it is for operators' tools, never given to a service.

Subject permissions say which subjects a service may publish on, not what it publishes;
readers check that an event stands on its own job's subject, of its own kind
(`events.belongs`), so together they bound what each identity can make the system believe.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from services.core.log import topology
from services.core.model import events, subjects

API = "$JS.API"
ANY = "*"
ITEM = f"{ANY}.{ANY}"
"""Any batch item's job id (`subjects.item_job_id`: `<batch_id>.<index>`)."""


class Role(StrEnum):
    """An identity on NATS: each service's, and the operators'."""

    GATEWAY = "gateway"
    RENDERER = "renderer"
    PROJECTOR = "projector"
    NOTIFIER = "notifier"
    CONDUCTOR = "conductor"
    ADMIN = "admin"


SERVICES = tuple(role for role in Role if role is not Role.ADMIN)

FIXED_DURABLES = (subjects.RENDERER, subjects.PROJECTOR, subjects.NOTIFIER, subjects.CONDUCTOR)
"""The JOBS stream's durables every installation has (`topology.consumer_configs`), each
read by the service of its name; the others are tenants' `singles-…` and batches' `bulk-…`."""

SHARED_STREAMS = (
    subjects.STREAM,
    topology.ADVISORY_STREAM,
    subjects.USAGE_STREAM,
    f"KV_{subjects.BATCH_STATE}",
)
"""The streams `bus.ensure_stream` makes; every service may create them where missing."""

IDEMPOTENCY_STREAM = "KV_IDEMPOTENCY"
"""The gateway's own bucket (`gateway/idempotency.py`)."""
KEY_DIRECTORY_STREAM = f"KV_{subjects.KEY_DIRECTORY}"
"""The gateways' copy of the API keys (`gateway/keymirror.py`): whoever writes it could
grant itself a key, so no other identity may even read it."""


def inbox(role: Role) -> str:
    """The prefix of `role`'s reply subjects: JetStream answers there, and only `role` may
    subscribe to it (a shared `_INBOX.>` would let one service read another's answers)."""
    return "_INBOX" if role is Role.ADMIN else f"_INBOX_{role}"


@dataclass(frozen=True)
class Grants:
    """What one identity may publish (unless `deny` also matches) and subscribe to."""

    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    deny: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("publish", "subscribe", "deny"):  # each subject once, in order
            object.__setattr__(self, name, tuple(dict.fromkeys(getattr(self, name))))

    def may_publish(self, subject: str) -> bool:
        return matches_any(self.publish, subject) and not matches_any(self.deny, subject)

    def may_subscribe(self, subject: str) -> bool:
        return matches_any(self.subscribe, subject)

    def permissions(self) -> dict[str, Any]:
        """As nats-server's `permissions` block of a user."""
        publish: dict[str, Any] = {"allow": list(self.publish)}
        if self.deny:
            publish["deny"] = list(self.deny)
        return {"publish": publish, "subscribe": {"allow": list(self.subscribe)}}


def matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: `*` is any one token, a final `>` one or more."""
    want, got = pattern.split("."), subject.split(".")
    for index, token in enumerate(want):
        if token == ">":
            return len(got) > index
        if index >= len(got) or (token != ANY and token != got[index]):
            return False
    return len(want) == len(got)


def matches_any(patterns: Iterable[str], subject: str) -> bool:
    return any(matches(pattern, subject) for pattern in patterns)


# What the table is made of: subjects built by the modules that publish on them.


def job_events(*tags: str, quiet: bool = False, items: bool = True) -> list[str]:
    """Single jobs' events `tags` (and their webhook-less ends `….quiet`), and items'."""
    found = [subjects.subject(ANY, tag) for tag in tags]
    if quiet:
        found += [subjects.quiet_ends(ANY, tag) for tag in tags]
    if items:
        found += [subjects.subject(ITEM, tag) for tag in tags]
    return found


def batch_events(*names: str) -> list[str]:
    return [subjects.batch_subject(ANY, name) for name in names]


def reads_log() -> list[str]:
    """Stream info, message gets and direct gets on JOBS (`timeline`, `logroom`,
    `backlog`), and the listing of its durables."""
    return [
        f"{API}.STREAM.INFO.{subjects.STREAM}",
        f"{API}.STREAM.MSG.GET.{subjects.STREAM}",
        f"{API}.DIRECT.GET.{subjects.STREAM}",
        f"{API}.DIRECT.GET.{subjects.STREAM}.>",
        f"{API}.CONSUMER.LIST.{subjects.STREAM}",
    ]


def makes_streams(*, update: bool = False) -> list[str]:
    """Create (and read) the shared streams; `update` them too for their keeper."""
    verbs = ("CREATE", "INFO", "UPDATE") if update else ("CREATE", "INFO")
    return [f"{API}.STREAM.{verb}.{stream}" for stream in SHARED_STREAMS for verb in verbs]


def takes(stream: str, durable: str) -> list[str]:
    """Pull from `durable` and ack (nak, term, in-progress) what it delivered."""
    return [f"{API}.CONSUMER.MSG.NEXT.{stream}.{durable}", f"$JS.ACK.{stream}.{durable}.>"]


def consumer_create(stream: str, name: str, filter_subject: str | None = None) -> str:
    """The subject nats-py creates (or updates) a consumer with `name` on: the filter is
    part of it when there is one filter (`topology.consumer_configs`)."""
    base = f"{API}.CONSUMER.CREATE.{stream}.{name}"
    return f"{base}.{filter_subject}" if filter_subject and filter_subject != ">" else base


def owns(stream: str, name: str, filter_subject: str | None = None) -> list[str]:
    """Make (or update) the durable `name` and take from it."""
    return [consumer_create(stream, name, filter_subject), *takes(stream, name)]


def others(durables: Iterable[str], mine: str = "") -> list[str]:
    """The API calls on the fixed durables other than `mine` that a service granted a
    wildcard over the JOBS stream's durables must still not make."""
    refused = []
    for durable in durables:
        if durable == mine:
            continue
        create = consumer_create(subjects.STREAM, durable)
        refused += [create, f"{create}.>", f"{API}.CONSUMER.DELETE.{subjects.STREAM}.{durable}"]
        refused += takes(subjects.STREAM, durable)
    return refused


def bucket(stream: str, *, write: bool) -> list[str]:
    """Read a key-value bucket (by its stream `KV_<bucket>`), and write it if `write`."""
    name = stream.removeprefix("KV_")
    found = [
        f"{API}.STREAM.INFO.{stream}",
        f"{API}.STREAM.MSG.GET.{stream}",
        f"{API}.DIRECT.GET.{stream}",
        f"{API}.DIRECT.GET.{stream}.>",
    ]
    return [*found, f"$KV.{name}.>"] if write else found


LANES = consumer_create(subjects.STREAM, ANY, subjects.submissions())
"""Make a tenant's `singles-…` durable (its filter: that tenant's submissions), as the
gateway does before the tenant's first job and the reconciler before a re-drive."""


def _gateway() -> Grants:
    return Grants(
        publish=(
            subjects.submissions(),
            *job_events("cancelled", quiet=True),
            *job_events("deleted"),
            *job_events("redeliver", items=False),
            *batch_events("submitted", "paused", "resumed", "cancel"),
            f"{subjects.LANE_BELL}.{ANY}",
            subjects.KEY_NEWS,
            LANES,
            *bucket(IDEMPOTENCY_STREAM, write=True),
            f"{API}.STREAM.CREATE.{IDEMPOTENCY_STREAM}",
            f"{API}.STREAM.UPDATE.{IDEMPOTENCY_STREAM}",  # a changed TTL
            *bucket(KEY_DIRECTORY_STREAM, write=True),
            f"{API}.STREAM.CREATE.{KEY_DIRECTORY_STREAM}",
            # reading the whole copy at start: an ordered consumer, and its flow control
            f"{API}.CONSUMER.CREATE.{KEY_DIRECTORY_STREAM}",
            f"{API}.CONSUMER.INFO.{KEY_DIRECTORY_STREAM}.{ANY}",
            f"{API}.CONSUMER.DELETE.{KEY_DIRECTORY_STREAM}.{ANY}",
            f"$JS.FC.{KEY_DIRECTORY_STREAM}.>",
            *reads_log(),
            *makes_streams(),
        ),
        deny=tuple(others(FIXED_DURABLES)),
        # SSE: a bell on the subjects of the job or batch a client follows
        subscribe=("jobs.>", "batches.>", subjects.KEY_NEWS, f"{inbox(Role.GATEWAY)}.>"),
    )


def _renderer() -> Grants:
    state = f"KV_{subjects.BATCH_STATE}"
    return Grants(
        publish=(
            *job_events("started", "retrying"),
            *job_events("done", "failed", quiet=True),
            *owns(subjects.STREAM, subjects.RENDERER, subjects.subject(ANY, "submitted")),
            # every tenant's `singles-…` and every batch's `bulk-…`
            *takes(subjects.STREAM, ANY),
            *bucket(state, write=False),
            # the watch of batches' states: an ordered consumer, and its flow control
            f"{API}.CONSUMER.CREATE.{state}",
            f"{API}.CONSUMER.INFO.{state}.{ANY}",
            f"{API}.CONSUMER.DELETE.{state}.{ANY}",
            f"$JS.FC.{state}.>",
            *reads_log(),
            *makes_streams(),
        ),
        # `jobs.*.*.done` (an item's) would also be `jobs.<id>.submitted.done`, a single
        # job's submission in the lane `done`: never a renderer's.
        deny=(subjects.submissions(), *others(FIXED_DURABLES, subjects.RENDERER)),
        subscribe=(f"{subjects.LANE_BELL}.{ANY}", f"{inbox(Role.RENDERER)}.>"),
    )


def _projector() -> Grants:
    return Grants(
        publish=(
            *job_events("failed", quiet=True),  # worker_lost (finalizer), stalled (reconciler)
            # the reconciler re-drives a stalled job, or item
            subjects.submissions(),
            subjects.bulk_filter(ANY),
            LANES,
            *batch_events("complete", "progress"),
            events.usage_subject(ANY),
            *owns(subjects.STREAM, subjects.PROJECTOR),
            f"{API}.CONSUMER.DELETE.{subjects.STREAM}.{subjects.PROJECTOR}",  # --rebuild
            f"{API}.CONSUMER.INFO.{subjects.STREAM}.{ANY}",  # the reconciler's look at lanes
            *owns(topology.ADVISORY_STREAM, topology.FINALIZER),
            *reads_log(),
            *makes_streams(update=True),
        ),
        deny=tuple(others(FIXED_DURABLES, subjects.PROJECTOR)),
        subscribe=(f"{inbox(Role.PROJECTOR)}.>",),
    )


def _notifier() -> Grants:
    return Grants(
        publish=(
            *job_events("webhook", items=False),
            *owns(subjects.STREAM, subjects.NOTIFIER),
            f"{API}.CONSUMER.INFO.{subjects.STREAM}.{subjects.NOTIFIER}",
            *reads_log(),
            *makes_streams(),
        ),
        subscribe=(f"{inbox(Role.NOTIFIER)}.>",),
    )


def _conductor() -> Grants:
    bulk = subjects.bulk_filter(ANY)
    return Grants(
        publish=(
            bulk,  # its items' submissions: `jobs.<batch_id>.<index>.submitted`
            subjects.subject(ITEM, "cancelled"),  # a cancelled batch's items
            *batch_events("done", "failed", "cancelled"),
            *owns(subjects.STREAM, subjects.CONDUCTOR),
            consumer_create(subjects.STREAM, ANY, bulk),  # each batch's `bulk-…` durable
            f"{API}.CONSUMER.DELETE.{subjects.STREAM}.{ANY}",  # …deleted when it ends
            *bucket(f"KV_{subjects.BATCH_STATE}", write=True),
            *reads_log(),
            *makes_streams(),
        ),
        # `jobs.*.*.submitted` would also be `jobs.<id>.submitted.submitted`
        deny=(
            subjects.submissions(),
            *others(FIXED_DURABLES, subjects.CONDUCTOR),
            f"{API}.CONSUMER.DELETE.{subjects.STREAM}.{subjects.CONDUCTOR}",
        ),
        subscribe=(f"{inbox(Role.CONDUCTOR)}.>",),
    )


GRANTS: Mapping[Role, Grants] = {
    Role.GATEWAY: _gateway(),
    Role.RENDERER: _renderer(),
    Role.PROJECTOR: _projector(),
    Role.NOTIFIER: _notifier(),
    Role.CONDUCTOR: _conductor(),
    Role.ADMIN: Grants(publish=(">",), subscribe=(">",)),
}


@dataclass(frozen=True)
class Variable:
    """A value nats-server takes from its configuration's variables (or its environment)
    where the configuration says `$name`: deploy/k8s defines each service's public key in
    a file of the Secret that the authorization (in the ConfigMap) includes, so an
    installation's keys and the code's permissions stay apart."""

    name: str


def public_key_variable(role: Role) -> Variable:
    """`$NATS_NKEY_<ROLE>`: the variable of `role`'s public key in deploy/k8s."""
    return Variable(f"NATS_NKEY_{role.upper()}")


User = Mapping[str, "str | Variable | Mapping[str, Any]"]


def user(role: Role, **credentials: str | Variable) -> User:
    """One entry of nats-server's `authorization.users`: `credentials` is `nkey=<public
    key>` (or `user=…, password=…`), with `role`'s permissions."""
    return {**credentials, "permissions": GRANTS[role].permissions()}


def authorization(users: Sequence[User]) -> str:
    """nats-server's `authorization` block for `users` (`user`). Every subject is a
    quoted string (`$JS…` unquoted would be a variable); a `Variable` is not."""
    entries = []
    for entry in users:
        lines = [f"{key}: {_value(value)}" for key, value in entry.items() if key != "permissions"]
        permissions = json.dumps(entry["permissions"], indent=2)
        lines.append(f"permissions: {permissions}")
        body = "\n".join(lines).replace("\n", "\n      ")
        entries.append(f"    {{\n      {body}\n    }}")
    return "authorization {\n  users = [\n" + "\n".join(entries) + "\n  ]\n}\n"


def _value(value: object) -> str:
    return f"${value.name}" if isinstance(value, Variable) else json.dumps(value)
