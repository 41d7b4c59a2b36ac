"""The backup and restore commands.

    pressroom backup DIR  [--no-files] [--pg-bin DIR]
    pressroom restore DIR [--replace] [--no-files] [--no-rebuild] [--pg-bin DIR]

Both read the services' settings (`PRESSROOM_DATABASE_URL`, `PRESSROOM_NATS_URL` with
the operators' identity in `PRESSROOM_NATS_NKEY_SEED`, the storage settings), so they run
wherever a service runs.

A backup saves PostgreSQL first, then the streams, then the files, and writes
`manifest.json` last (a folder without one is not a backup). That order makes the parts
agree: the log is at least as new as the database (the restore's rebuild then only adds),
and every file the log names was stored before its event. A restore puts the database
back, then the streams (consumers and their positions with them), then the files, and
rebuilds the projection from the restored log, keeping what precedes the log's first
message: the database may be older than the log, or newer (restored to another point in
time), and only the log says which rows are true. Stop every service first, and start
them after.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import msgspec

from services.backup import files, postgres, streams
from services.core.database import db, sealed
from services.core.database.schema import MIGRATIONS
from services.core.log import bus
from services.core.model.errors import PressroomError
from services.core.objectstore.storage import open_storage
from services.core.runtime import lifecycle
from services.core.runtime.settings import Settings, SettingsError
from services.projector import rebuild

log = logging.getLogger("backup")

MANIFEST = "manifest.json"


class Manifest(msgspec.Struct, kw_only=True):
    """What a backup holds, and what restoring it needs."""

    version: int = 1
    made_at: str
    schema_version: int
    server_key_ids: list[str]
    """The keys that sealed the secrets in the database: `PRESSROOM_SERVER_KEY` must hold
    each when the restored services start."""
    postgres: str
    streams: list[streams.Saved]
    files: files.Copied | None


async def backup(settings: Settings, folder: Path, *, with_files: bool, pg_bin: str | None) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    if any(folder.iterdir()):
        raise SettingsError(f"{folder} is not empty: a backup goes into a folder of its own")
    dump = await postgres.dump(settings.database_url, folder, pg_bin)
    async with db.open_pool(settings, size=1, migrate_schema=False) as pool:
        needed = sorted(await sealed.needed(pool))
    nc = await bus.connect(settings, name="backup")
    try:
        saved = [await streams.save(nc, name, folder) for name in await streams.names(nc)]
    finally:
        await nc.close()
    copied = None
    if with_files:
        async with open_storage(settings) as storage:
            copied = await files.save(storage, folder)
    manifest = Manifest(
        made_at=dt.datetime.now(dt.UTC).isoformat(), schema_version=len(MIGRATIONS),
        server_key_ids=needed, postgres=dump.name, streams=saved, files=copied,
    )  # fmt: skip
    (folder / MANIFEST).write_bytes(msgspec.json.format(msgspec.json.encode(manifest)))
    return _summary("backed up", manifest)


async def restore(
    settings: Settings, folder: Path, *, replace: bool, with_files: bool, pg_bin: str | None
) -> str:
    manifest = read_manifest(folder)
    missing = set(manifest.server_key_ids) - {*settings.server_keys().ids, sealed.BEFORE_KEY_IDS}
    if missing:
        raise SettingsError(
            f"PRESSROOM_SERVER_KEY lacks the key(s) {', '.join(sorted(missing))} that sealed "
            "the secrets in this backup: give the key the backed-up installation had"
        )
    nc = await bus.connect(settings, name="restore")
    try:
        taken = {s.name for s in manifest.streams} & set(await streams.names(nc))
        if taken and not replace:  # refused before the database is touched
            raise SettingsError(
                f"NATS holds the streams {', '.join(sorted(taken))}; restore with --replace "
                "to drop them"
            )
        await postgres.restore(settings.database_url, folder, pg_bin, replace=replace)
        for saved in manifest.streams:
            await streams.restore(nc, saved, folder, replace=replace)
    finally:
        await nc.close()
    if with_files and manifest.files is not None:
        async with open_storage(settings) as storage:
            await files.restore(storage, folder, manifest.files)
    return _summary("restored", manifest)


def read_manifest(folder: Path) -> Manifest:
    try:
        return msgspec.json.decode((folder / MANIFEST).read_bytes(), type=Manifest)
    except FileNotFoundError:
        raise SettingsError(f"{folder} holds no {MANIFEST}: not a complete backup") from None
    except msgspec.DecodeError as exc:
        raise SettingsError(f"{folder / MANIFEST} is damaged: {exc}") from None


def _summary(done: str, manifest: Manifest) -> str:
    logged = {s.name: s.messages for s in manifest.streams}
    stored = len(manifest.files.objects) if manifest.files is not None else "not"
    streams_text = ", ".join(f"{name} {n}" for name, n in logged.items())
    return f"{done}: PostgreSQL; streams (messages): {streams_text}; files: {stored}"


def parse_args(command: str, argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"pressroom {command}", description=__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--no-files", action="store_true", help="leave the stored files out")
    parser.add_argument("--pg-bin", help="folder of pg_dump and pg_restore")
    if command == "restore":
        parser.add_argument(
            "--replace", action="store_true", help="drop what the database and NATS hold first"
        )
        parser.add_argument(
            "--no-rebuild", action="store_true", help="do not rebuild the projection after"
        )
    return parser.parse_args(argv)


async def run(command: str, args: argparse.Namespace, settings: Settings) -> None:
    with_files = not args.no_files
    if command == "backup":
        print(await backup(settings, args.folder, with_files=with_files, pg_bin=args.pg_bin))
        return
    done = await restore(
        settings, args.folder, replace=args.replace, with_files=with_files, pg_bin=args.pg_bin
    )
    print(done, flush=True)
    if not args.no_rebuild:
        summary = await rebuild.rebuild(settings, asyncio.Event(), keep_history=True)
        print(summary.line())


def main() -> None:
    command = sys.argv[1]
    args = parse_args(command, sys.argv[2:])
    settings = lifecycle.load_settings()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(run(command, args, settings))
    except (PressroomError, SettingsError) as exc:
        print(f"pressroom {command}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
