"""Typed keys for what the gateway application holds."""

from __future__ import annotations

import asyncpg
from aiohttp import web
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from services.core.database.pgwatch import Watch
from services.core.log import bus
from services.core.objectstore.storage import Storage
from services.core.runtime.settings import Settings
from services.gateway.compiles import Compiler, FairJail
from services.gateway.keymirror import Mirror
from services.gateway.logroom import LogRoom

SETTINGS = web.AppKey("settings", Settings)
NATS = web.AppKey("nats", Client)
JS = web.AppKey("js", JetStreamContext)
POOL = web.AppKey("pool", asyncpg.Pool)
PG_WATCH = web.AppKey("pg_watch", Watch)
STORAGE = web.AppKey("storage", Storage)
IDEMPOTENCY = web.AppKey("idempotency", KeyValue)
KEY_MIRROR = web.AppKey("key_mirror", Mirror)
COMPILER = web.AppKey("compiler", Compiler)
VALIDATOR = web.AppKey("validator", FairJail)
LOG_ROOM = web.AppKey("log_room", LogRoom)
SINGLES = web.AppKey("singles", bus.SinglesLanes)
