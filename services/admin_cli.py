"""`pressroom tenants|keys|usage`: the admin API from the command line.

    pressroom tenants create NAME [--rate PER_SECOND --burst N] [--quota N]
    pressroom tenants update ID_OR_NAME [--rate PER_SECOND --burst N | --default-rate]
                                        [--quota N | --default-quota]
    pressroom tenants list | show ID_OR_NAME
    pressroom keys create TENANT [--scopes jobs:read,jobs:write,…]
    pressroom keys list TENANT | revoke KEY_ID
    pressroom usage [--month YYYY-MM]

It talks HTTP to the gateway at `Settings.base_url` (`PRESSROOM_PUBLIC_URL`, else
`PRESSROOM_HOST` and `PRESSROOM_PORT`) with the admin key from `PRESSROOM_ADMIN_KEY`, else
from `<PRESSROOM_DATA_DIR>/admin-key` (written by `pressroom dev`), so it works against the
stack `make up` runs from the same folder with no settings. `--json` prints the API's JSON
on stdout; messages and errors go to stderr (with `--json`, an error is one line of JSON).
The exit statuses are the client commands' (`pressroom.cli`): 0 ok, 2 usage (bad
arguments, a bad setting, no admin key, nothing to change), 3 the API refused the request,
4 the gateway is unreachable or did not answer JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from services.core.runtime.settings import Settings, SettingsError

TIMEOUT = 30.0
OK, USAGE, API_ERROR, UNAVAILABLE = 0, 2, 3, 4
"""Exit statuses, as `pressroom.cli` has them (1, a job that failed, has no admin case)."""
EXIT_TEXT = (
    "exit status: 0 ok; 2 usage (bad arguments, a bad setting, no admin key); 3 the API "
    "refused the request (4xx); 4 the gateway is unreachable or unavailable. Data goes to "
    "stdout (--json: JSON), messages and errors to stderr."
)


class CliError(Exception):
    """Ends the command with `pressroom: <message>` on stderr and exit status `status`;
    `type` names the cause for `--json` (the API's `error.type`, or the CLI's own)."""

    def __init__(self, message: str, status: int = API_ERROR, type: str = "api") -> None:
        super().__init__(message)
        self.message, self.status, self.type = message, status, type


class Admin:
    """The admin API of one gateway, as its admin."""

    def __init__(self, base_url: str, admin_key: str) -> None:
        self.base_url, self.admin_key = base_url.rstrip("/"), admin_key

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """The answer's JSON (None if empty); `CliError` for an error answer (status 3) or
        a gateway that cannot be reached (status 4)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.admin_key}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            status = UNAVAILABLE if exc.code >= 500 else API_ERROR
            message, kind = error_message(exc.code, exc.read())
            raise CliError(message, status, kind) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            said = f"cannot reach the gateway at {self.base_url}: {reason}"
            raise CliError(said, UNAVAILABLE, "unavailable") from None
        return decode(raw, self.base_url)


def decode(raw: bytes, base_url: str) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        said = f"{base_url} did not answer JSON; is it a Pressroom gateway?"
        raise CliError(said, UNAVAILABLE, "protocol") from None


def error_message(status: int, raw: bytes) -> tuple[str, str]:
    """The `error.message` of an error answer (else its HTTP status), and its type."""
    try:
        error = json.loads(raw)["error"]
        message, kind = str(error["message"]), str(error["type"])
    except (ValueError, KeyError, TypeError):
        return f"the gateway answered HTTP {status}", "http"
    field = error.get("field")
    return (f"{message} (field {field})" if field and field not in message else message), kind


def admin_key(settings: Settings) -> str:
    """`PRESSROOM_ADMIN_KEY` (its first key) if set, else `<data dir>/admin-key`."""
    if settings.admin_keys:
        return settings.admin_keys[0]
    path = Path(settings.data_dir) / "admin-key"
    try:
        key = path.read_text().strip()
    except OSError:
        key = ""
    if not key:
        raise CliError(
            f"no admin key: {path} is missing; set PRESSROOM_ADMIN_KEY, or PRESSROOM_DATA_DIR "
            "to the data folder of `pressroom dev` (which writes admin-key there)",
            USAGE,
            "usage",
        )
    return key.split()[0]


def find_tenant(admin: Admin, ref: str) -> dict[str, Any]:
    """The tenant whose id or name is `ref`."""
    tenants: list[dict[str, Any]] = admin.call("GET", "/admin/tenants")["tenants"]
    for tenant in tenants:
        if ref in (tenant["id"], tenant["name"]):
            return tenant
    raise CliError(f"no tenant with the id or name {ref!r}", API_ERROR, "not_found")


def table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> str:
    """Left-aligned columns, two spaces apart; `-` for a missing value."""
    cells = [list(header)] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def rate_text(tenant: Mapping[str, Any]) -> str:
    rate = tenant.get("rate_limit")
    return f"{rate['per_second']:g}/s, burst {rate['burst']}" if rate else "default"


def quota_text(tenant: Mapping[str, Any]) -> str:
    quota = tenant.get("monthly_quota")
    return "default" if quota is None else str(quota)


def tenant_lines(tenant: Mapping[str, Any]) -> list[str]:
    return [
        f"id:            {tenant['id']}",
        f"name:          {tenant['name']}",
        f"rate limit:    {rate_text(tenant)}",
        f"monthly quota: {quota_text(tenant)}",
        f"created at:    {tenant['created_at']}",
    ]


# Each command: (admin, args) -> (the JSON for --json, the readable text).
Result = tuple[Any, str]


def tenants_create(admin: Admin, args: argparse.Namespace) -> Result:
    body: dict[str, Any] = {"name": args.name}
    if args.rate is not None:
        body["rate_limit"] = {"per_second": args.rate, "burst": args.burst}
    if args.quota is not None:
        body["monthly_quota"] = args.quota
    tenant = admin.call("POST", "/admin/tenants", body)
    secret = tenant["webhook_secret"]
    lines = [f"Tenant {tenant['name']} created.", *tenant_lines(tenant)]
    lines += [
        f"webhook secret: {secret['secret']}  (id {secret['id']}; shown only this once)",
        f"Next: pressroom keys create {tenant['name']}",
    ]
    return tenant, "\n".join(lines)


def tenants_update(admin: Admin, args: argparse.Namespace) -> Result:
    tenant = find_tenant(admin, args.tenant)
    body: dict[str, Any] = {}
    if args.rate is not None:
        body["rate_limit"] = {"per_second": args.rate, "burst": args.burst}
    elif args.default_rate:
        body["rate_limit"] = None
    if args.quota is not None:
        body["monthly_quota"] = args.quota
    elif args.default_quota:
        body["monthly_quota"] = None
    if not body:
        raise CliError(
            "nothing to change: give --rate/--burst, --quota or --default-…", USAGE, "usage"
        )
    changed = admin.call("PATCH", f"/admin/tenants/{quote(tenant['id'])}", body)
    return changed, "\n".join([f"Tenant {changed['name']} changed.", *tenant_lines(changed)])


def tenants_list(admin: Admin, args: argparse.Namespace) -> Result:
    answer = admin.call("GET", "/admin/tenants")
    rows = [
        (t["id"], t["name"], rate_text(t), quota_text(t), t["created_at"])
        for t in answer["tenants"]
    ]
    text = table(rows, ("ID", "NAME", "RATE LIMIT", "QUOTA", "CREATED")) if rows else "no tenants"
    return answer, text


def tenants_show(admin: Admin, args: argparse.Namespace) -> Result:
    tenant = find_tenant(admin, args.tenant)
    return tenant, "\n".join(tenant_lines(tenant))


def keys_create(admin: Admin, args: argparse.Namespace) -> Result:
    tenant = find_tenant(admin, args.tenant)
    body = {} if args.scopes is None else {"scopes": args.scopes}
    key = admin.call("POST", f"/admin/tenants/{quote(tenant['id'])}/keys", body)
    lines = [
        f"API key {key['id']} of tenant {tenant['name']} ({tenant['id']}), shown only this once:",
        key["key"],
        f"scopes: {', '.join(key['scopes'])}",
    ]
    return key, "\n".join(lines)


def keys_list(admin: Admin, args: argparse.Namespace) -> Result:
    tenant = find_tenant(admin, args.tenant)
    answer = admin.call("GET", f"/admin/tenants/{quote(tenant['id'])}/keys")
    rows = [
        (k["id"], k["prefix"] + "…", ",".join(k["scopes"]), k["created_at"], k["last_used_at"],
         k["revoked_at"])
        for k in answer["keys"]
    ]  # fmt: skip
    header = ("ID", "PREFIX", "SCOPES", "CREATED", "LAST USED", "REVOKED")
    return answer, table(rows, header) if rows else f"tenant {tenant['name']} has no keys"


def keys_revoke(admin: Admin, args: argparse.Namespace) -> Result:
    admin.call("DELETE", f"/admin/keys/{quote(args.key_id)}")
    return {"id": args.key_id, "revoked": True}, f"Key {args.key_id} revoked."


def usage(admin: Admin, args: argparse.Namespace) -> Result:
    query = "" if args.month is None else "?" + urllib.parse.urlencode({"month": args.month})
    answer = admin.call("GET", f"/admin/usage{query}")
    columns = ("succeeded", "failed", "cancelled", "pages", "bytes", "render_seconds", "billable",
               "held", "quota_left")  # fmt: skip
    rows = [(u["name"], u["tenant_id"], *(u[c] for c in columns)) for u in answer["tenants"]]
    header = ("NAME", "ID", *(c.upper().replace("_", " ") for c in columns))
    body = table(rows, header) if rows else "no usage"
    return answer, f"Usage of {answer['month']}:\n{body}"


def quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def scopes(raw: str) -> list[str]:
    """`--scopes a,b`: the list of scopes, blanks dropped."""
    listed = [part.strip() for part in raw.split(",") if part.strip()]
    if not listed:
        raise argparse.ArgumentTypeError("give at least one scope, such as jobs:read")
    return listed


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print the API's JSON answer")
    return common


def _add(
    parent: Any, name: str, run: Callable[[Admin, argparse.Namespace], Result], doc: str
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = parent.add_parser(
        name, parents=[_common()], help=doc, description=doc, epilog=EXIT_TEXT
    )
    parser.set_defaults(run=run, parser=parser)
    return parser


def _tenant_parsers(commands: Any) -> None:
    tenants = commands.add_parser(
        "tenants",
        help="create, list and show tenants",
        description="Manage tenants.",
        epilog=EXIT_TEXT,
    ).add_subparsers(dest="action", required=True, metavar="ACTION")
    create = _add(tenants, "create", tenants_create, "create a tenant")
    create.add_argument("name", metavar="NAME", help="letters, digits, '.', '_', '-'")
    create.add_argument("--rate", type=float, metavar="PER_SECOND", help="job submissions/s")
    create.add_argument("--burst", type=int, metavar="N", help="submissions at once (with --rate)")
    create.add_argument("--quota", type=int, metavar="N", help="successful documents a month")
    update = _add(tenants, "update", tenants_update, "change a tenant's limits")
    update.add_argument("tenant", metavar="ID_OR_NAME")
    update.add_argument("--rate", type=float, metavar="PER_SECOND", help="job submissions/s")
    update.add_argument("--burst", type=int, metavar="N", help="submissions at once (with --rate)")
    update.add_argument("--quota", type=int, metavar="N", help="successful documents a month")
    update.add_argument("--default-rate", action="store_true", help="the installation's rate")
    update.add_argument("--default-quota", action="store_true", help="the installation's quota")
    _add(tenants, "list", tenants_list, "list every tenant")
    show = _add(tenants, "show", tenants_show, "show one tenant")
    show.add_argument("tenant", metavar="ID_OR_NAME")


def _key_parsers(commands: Any) -> None:
    keys = commands.add_parser(
        "keys",
        help="create, list and revoke API keys",
        description="Manage API keys.",
        epilog=EXIT_TEXT,
    ).add_subparsers(dest="action", required=True, metavar="ACTION")
    create = _add(keys, "create", keys_create, "create an API key (shown once)")
    create.add_argument("tenant", metavar="TENANT_ID_OR_NAME")
    create.add_argument(
        "--scopes", type=scopes, metavar="SCOPE,…", help="comma-separated (default: every scope)"
    )
    listing = _add(keys, "list", keys_list, "list a tenant's keys (never the keys themselves)")
    listing.add_argument("tenant", metavar="TENANT_ID_OR_NAME")
    revoke = _add(keys, "revoke", keys_revoke, "revoke a key: it is refused from now on")
    revoke.add_argument("key_id", metavar="KEY_ID")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pressroom",
        description="Administer Pressroom through its gateway's admin API.",
        epilog=EXIT_TEXT,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _tenant_parsers(commands)
    _key_parsers(commands)
    use = _add(commands, "usage", usage, "every tenant's usage of a month")
    use.add_argument("--month", metavar="YYYY-MM", help="default: this month (UTC)")
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """`argv` starts with the command (`tenants`, `keys` or `usage`)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    paired = args.run in (tenants_create, tenants_update)
    if paired and (args.rate is None) != (args.burst is None):
        args.parser.error("--rate and --burst go together")
    return args


def run(argv: Sequence[str], environ: Mapping[str, str]) -> int:
    """Run one command; its exit status."""
    args = parse_args(argv)
    try:
        settings = Settings.from_env(environ)
        admin = Admin(settings.base_url, admin_key(settings))
        answer, text = args.run(admin, args)
    except SettingsError as exc:
        return fail(args, CliError(str(exc), USAGE, "usage"))
    except CliError as exc:
        return fail(args, exc)
    print(json.dumps(answer, indent=2) if args.json else text)
    return OK


def fail(args: argparse.Namespace, error: CliError) -> int:
    """The error on stderr: one line for people, or one line of JSON with `--json`."""
    if args.json:
        said = {"type": error.type, "message": error.message}
        print(json.dumps({"error": said}), file=sys.stderr)
    else:
        print(f"pressroom: {error.message}", file=sys.stderr)
    return error.status


def main() -> None:
    # `pressroom tenants …`: the CLI leaves sys.argv as it was; the command is argv[1].
    raise SystemExit(run(sys.argv[1:], os.environ))
