"""`pressroom <command>`: run one service, or everything on a laptop with `dev`."""

from __future__ import annotations

import importlib
import sys
import textwrap

COMMANDS = {
    "dev": ("services.dev", "run everything with embedded NATS, PostgreSQL and storage"),
    "gateway": ("services.gateway.main", "the HTTP API"),
    "renderer": ("services.renderer.main", "render jobs with Chromium"),
    "projector": ("services.projector.main", "project the log into PostgreSQL"),
    "notifier": ("services.notifier.main", "deliver signed webhooks"),
    "conductor": ("services.conductor.main", "run batches: expand, pause, cancel, pack"),
    "bus-keys": ("services.bus_cli", "make the services' identities on NATS (deploy/k8s)"),
    "backup": ("services.backup.main", "save PostgreSQL, the streams and the files in a folder"),
    "restore": ("services.backup.main", "put a backup back and rebuild the projection"),
    "server-keys": ("services.server_keys_cli", "rotate PRESSROOM_SERVER_KEY: new, status, rotate"),
    "tenants": ("services.admin_cli", "create, list and show tenants (admin API)"),
    "keys": ("services.admin_cli", "create, list and revoke API keys (admin API)"),
    "usage": ("services.admin_cli", "every tenant's usage of a month (admin API)"),
    "render": ("pressroom.cli", "render one document: submit, wait, download"),
    "batch": ("pressroom.cli", "submit a batch and follow it; pause, resume, cancel, status"),
    "jobs": ("pressroom.cli", "list jobs; show one job or its timeline"),
    "templates": ("pressroom.cli", "stored templates: list, show, push, pull, preview, diff"),
    "pdf": ("pressroom.cli", "PDF tools: merge, split, rotate, pdfa, sign, validate…"),
}


EXIT_STATUSES = (
    "exit status of the client and admin commands: 0 ok; 1 the job or batch ended failed "
    "or cancelled; 2 usage (bad arguments, a bad setting, no key); 3 the API refused the "
    "request (4xx); 4 the gateway is unreachable or unavailable (5xx), or a timeout; 130 "
    "interrupted. Data goes to stdout (--json: JSON), messages and errors to stderr. "
    "`pressroom COMMAND --help` says more."
)


def usage() -> str:
    lines = ["usage: pressroom <command>", "", "commands:"]
    lines += [f"  {name:<10} {doc}" for name, (_, doc) in COMMANDS.items()]
    lines += ["", *textwrap.wrap(EXIT_STATUSES, 88)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in {"-h", "--help"}:
        print(usage())  # asked for: it is the answer, on stdout
        raise SystemExit(0)
    if not args or args[0] not in COMMANDS:
        print(usage(), file=sys.stderr)
        raise SystemExit(2)
    module = importlib.import_module(COMMANDS[args[0]][0])
    module.main()


if __name__ == "__main__":
    main()
