"""PostgreSQL saved with `pg_dump` (one consistent snapshot, custom format) and put back
with `pg_restore`.

The binaries must be at least as new as the server: `--pg-bin` names their folder; by
default the ones shipped in the `pgserver` wheel (PostgreSQL 16, what `pressroom dev`
runs) when it is installed, else the first on PATH. The password never reaches a command
line (where `ps` would show it): it goes to the child in `PGPASSWORD`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import urllib.parse
from pathlib import Path

import asyncpg

from services.core.database.db import map_db_errors
from services.core.model.errors import Unavailable
from services.core.runtime.settings import SettingsError

DUMP = "postgres.dump"


def binary(name: str, folder: str | None) -> str:
    """The path of `pg_dump` or `pg_restore`; `SettingsError` if there is none."""
    if folder:
        found = shutil.which(name, path=folder)
    else:
        found = shutil.which(name, path=_pgserver_bin()) or shutil.which(name)
    if found is None:
        raise SettingsError(f"{name} not found (install PostgreSQL's client, or give --pg-bin)")
    return found


def _pgserver_bin() -> str | None:
    try:
        import pgserver
    except ImportError:
        return None
    return str(Path(pgserver.__file__).parent / "pginstall" / "bin")


def _without_password(url: str) -> tuple[str, dict[str, str]]:
    """The URL with its password taken out, and the environment that carries it."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url, {}
    user = urllib.parse.quote(urllib.parse.unquote(parts.username or ""), safe="")
    host = parts.netloc.rpartition("@")[2]
    bare = parts._replace(netloc=f"{user}@{host}" if user else host)
    return urllib.parse.urlunsplit(bare), {"PGPASSWORD": urllib.parse.unquote(parts.password)}


async def _run(command: list[str], url: str) -> None:
    bare, secret = _without_password(url)
    env = {**os.environ, **secret}
    proc = await asyncio.create_subprocess_exec(
        *command, f"--dbname={bare}", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await proc.communicate()
    if proc.returncode != 0:
        text = output.decode(errors="replace").strip()
        raise Unavailable(f"{Path(command[0]).name} failed ({proc.returncode}): {text}")


async def dump(url: str, folder: Path, pg_bin: str | None) -> Path:
    """`pg_dump` of the whole database into `folder/postgres.dump`."""
    path = folder / DUMP
    await _run([binary("pg_dump", pg_bin), "--format=custom", "--no-owner", f"--file={path}"], url)
    return path


@map_db_errors("the database to restore into")
async def _has_schema(url: str) -> bool:
    conn = await asyncpg.connect(url, timeout=10)
    try:
        return bool(
            await conn.fetchval("SELECT to_regclass('public.schema_migrations') IS NOT NULL")
        )
    finally:
        await conn.close()


async def restore(url: str, folder: Path, pg_bin: str | None, *, replace: bool) -> None:
    """`pg_restore` into the database at `url`: it must exist, and hold no Pressroom
    schema unless `replace` (then its objects are dropped first)."""
    if await _has_schema(url) and not replace:
        raise Unavailable(
            "the database holds a Pressroom schema already; restore with --replace to drop it"
        )
    command = [binary("pg_restore", pg_bin), "--no-owner", "--no-privileges", "--exit-on-error"]
    if replace:
        command += ["--clean", "--if-exists"]
    await _run([*command, "--single-transaction", str(folder / DUMP)], url)
