"""Settings: read from the environment once, validated, frozen.

`Settings.from_env(environ)` is the only place that reads `PRESSROOM_*` variables. A bad
value raises `SettingsError` naming the variable and the value, and each service turns that
into a one-line message and exit status 2.

Any variable `PRESSROOM_X` may instead be given as `PRESSROOM_X_FILE`, the path of a file
that holds the value (trailing line breaks dropped): secrets then come from files (a
Kubernetes Secret volume) and stay out of every process's environment. Both at once is an
error, as is a file that cannot be read; a bad value read from a file is reported without
the value (`valuefiles`).

Size: one field per `PRESSROOM_*` variable outside the groups that are mixins of their own
(browser, PDF, assets, Gotenberg, previews), each with its default, check and description;
the template compiling fields (`template_*`) would be the next group to move out.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.core.runtime.assetsettings import AssetSettings
from services.core.runtime.browsersettings import BrowserSettings
from services.core.runtime.gotenbergsettings import GotenbergSettings
from services.core.runtime.pdfsettings import PdfSettings
from services.core.runtime.previewsettings import PreviewSettings
from services.core.runtime.settingvalues import boolean as _bool
from services.core.runtime.settingvalues import choice as _choice
from services.core.runtime.settingvalues import float_in as _float
from services.core.runtime.settingvalues import int_in as _int
from services.core.runtime.settingvalues import nkey_seed as _nkey_seed
from services.core.runtime.settingvalues import schedule as _schedule
from services.core.runtime.settingvalues import server_key as _server_key
from services.core.runtime.settingvalues import var as _var
from services.core.runtime.valuefiles import SettingsError as SettingsError
from services.core.runtime.valuefiles import raw_value
from services.core.secrets.crypto import ServerKeys, read_keyring


@dataclass(frozen=True)
class Settings(AssetSettings, BrowserSettings, PdfSettings, GotenbergSettings, PreviewSettings):
    """Every setting of every service; each field is one `PRESSROOM_*` variable."""

    host: str = _var("PRESSROOM_HOST", "127.0.0.1", doc="address the gateway listens on")
    port: int = _var("PRESSROOM_PORT", 8080, _int(0, 65535), "gateway HTTP port")
    public_url: str = _var(
        "PRESSROOM_PUBLIC_URL", "", doc="base URL clients use for the gateway (download links)"
    )
    metrics_port: int = _var(
        "PRESSROOM_METRICS_PORT", 9100, _int(0, 65535), "Prometheus port of every service"
    )
    data_dir: str = _var("PRESSROOM_DATA_DIR", ".pressroom", doc="where `pressroom dev` keeps data")
    nats_url: str = _var(
        "PRESSROOM_NATS_URL",
        "nats://127.0.0.1:4222",
        doc="NATS server URL(s), comma-separated (`tls://…` for TLS with the system's CAs)",
    )
    nats_nkey_seed: str = _var(
        "PRESSROOM_NATS_NKEY_SEED",
        "",
        _nkey_seed,
        "this service's NKey seed (SU…), its identity on NATS (`pressroom bus-keys` makes "
        "them; dev generates them); empty: connect without credentials",
    )
    nats_tls_ca: str = _var(
        "PRESSROOM_NATS_TLS_CA",
        "",
        doc="PEM file of the CA that signs NATS' certificate: connect over TLS and verify it",
    )
    nats_tls_cert: str = _var(
        "PRESSROOM_NATS_TLS_CERT",
        "",
        doc="PEM file of this service's client certificate, for a NATS that verifies clients",
    )
    nats_tls_key: str = _var(
        "PRESSROOM_NATS_TLS_KEY", "", doc="PEM file of that client certificate's private key"
    )
    stream_replicas: int = _var(
        "PRESSROOM_STREAM_REPLICAS", 1, _int(1, 5), "replicas of the JOBS stream"
    )
    stream_max_age: float = _var(
        "PRESSROOM_STREAM_MAX_AGE", 7 * 86400.0, _float(60, 10 * 365 * 86400), "log retention, s"
    )
    stream_max_bytes: int = _var(
        "PRESSROOM_STREAM_MAX_BYTES",
        4 * 2**30,
        _int(64 * 1024, 2**50),
        "size of the JOBS log, bytes; new jobs get 503 when it is nearly full",
    )
    stream_max_msg_size: int = _var(
        "PRESSROOM_STREAM_MAX_MSG_SIZE",
        2**20,
        _int(4096, 64 * 2**20),
        "largest event on the log (a job with its input), bytes; at most NATS max_payload",
    )
    database_url: str = _var(
        "PRESSROOM_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/pressroom", doc="Postgres"
    )
    database_pool_min: int = _var(
        "PRESSROOM_DATABASE_POOL_MIN", 1, _int(0, 1000), "PostgreSQL connections a process keeps"
    )
    database_pool_max: int = _var(
        "PRESSROOM_DATABASE_POOL_MAX",
        0,
        _int(0, 1000),
        "PostgreSQL connections a process opens at most (0: the service's own, gateway 8, "
        "projector 4, others 2); each opens one more to watch PostgreSQL",
    )
    database_timeout: float = _var(
        "PRESSROOM_DATABASE_TIMEOUT",
        10.0,
        _float(0.5, 600),
        "seconds to connect to PostgreSQL, wait for a pooled connection, or run a statement",
    )
    storage: str = _var("PRESSROOM_STORAGE", "local", _choice("local", "s3"), "storage backend")
    storage_dir: str = _var(
        "PRESSROOM_STORAGE_DIR", ".pressroom/files", doc="folder of the local storage backend"
    )
    url_secret: str = _var(
        "PRESSROOM_URL_SECRET",
        "",
        doc="HMAC key(s) for local download URLs, space-separated: the first signs, every one "
        "verifies (dev generates one)",
    )
    url_ttl: int = _var(
        "PRESSROOM_URL_TTL", 900, _int(10, 7 * 86400), "lifetime of download URLs, s"
    )
    s3_endpoint: str = _var("PRESSROOM_S3_ENDPOINT", "", doc="S3 endpoint URL (empty: AWS)")
    s3_bucket: str = _var("PRESSROOM_S3_BUCKET", "pressroom", doc="S3 bucket")
    s3_access_key: str = _var("PRESSROOM_S3_ACCESS_KEY", "", doc="S3 access key id")
    s3_secret_key: str = _var("PRESSROOM_S3_SECRET_KEY", "", doc="S3 secret access key")
    s3_region: str = _var("PRESSROOM_S3_REGION", "us-east-1", doc="S3 region")
    render_concurrency: int = _var(
        "PRESSROOM_RENDER_CONCURRENCY", 2, _int(1, 64), "pages rendering at once per renderer"
    )
    render_prefetch: int = _var(
        "PRESSROOM_RENDER_PREFETCH",
        2,
        _int(0, 64),
        "jobs held beyond the busy pages, so a page never waits for the next job",
    )
    browser_recycle: int = _var(
        "PRESSROOM_BROWSER_RECYCLE",
        1000,
        _int(1, 10_000_000),
        "renders after which a browser is replaced by a fresh one",
    )
    render_timeout: float = _var(
        "PRESSROOM_RENDER_TIMEOUT", 30.0, _float(1, 600), "per-render time limit, s"
    )
    max_attempts: int = _var(
        "PRESSROOM_MAX_ATTEMPTS", 5, _int(1, 100), "render deliveries before a job fails"
    )
    retry_base: float = _var(
        "PRESSROOM_RETRY_BASE", 2.0, _float(0, 3600), "first retry delay of transient errors, s"
    )
    retry_cap: float = _var("PRESSROOM_RETRY_CAP", 60.0, _float(0, 86400), "longest retry delay, s")
    ack_wait: float = _var(
        "PRESSROOM_ACK_WAIT", 30.0, _float(1, 3600), "redelivery after a silent worker, s"
    )
    shutdown_grace: float = _var(
        "PRESSROOM_SHUTDOWN_GRACE", 20.0, _float(0, 3600), "time to finish renders on SIGTERM, s"
    )
    max_body_bytes: int = _var(
        "PRESSROOM_MAX_BODY_BYTES", 1024 * 1024, _int(1024, 64 * 1024 * 1024), "request limit"
    )
    max_batch_bytes: int = _var(
        "PRESSROOM_MAX_BATCH_BYTES",
        64 * 1024 * 1024,
        _int(1024, 1024 * 1024 * 1024),
        "request limit of POST /batches",
    )
    max_batch_items: int = _var(
        "PRESSROOM_MAX_BATCH_ITEMS", 10_000, _int(1, 1_000_000), "most items in one batch"
    )
    max_pages: int = _var("PRESSROOM_MAX_PAGES", 500, _int(1, 100_000), "most pages a PDF may have")
    max_output_bytes: int = _var(
        "PRESSROOM_MAX_OUTPUT_BYTES", 50 * 1024 * 1024, _int(1024, 2**31), "largest PDF, bytes"
    )
    max_dom_nodes: int = _var(
        "PRESSROOM_MAX_DOM_NODES",
        50_000,
        _int(100, 10_000_000),
        "most nodes (elements, text) a loaded document may have; a tagged PDF's cost grows "
        "with their square",
    )
    max_header_bytes: int = _var(
        "PRESSROOM_MAX_HEADER_BYTES",
        64 * 1024,
        _int(1024, 64 * 1024 * 1024),
        "largest header or footer template, bytes (Chromium lays it out on every page)",
    )
    max_toc_entries: int = _var(
        "PRESSROOM_MAX_TOC_ENTRIES",
        2_000,
        _int(1, 1_000_000),
        "most headings a table of contents (`options.toc`) may list",
    )
    webhook_secret: str = _var(
        "PRESSROOM_WEBHOOK_SECRET", "", doc="whsec_… signing secret (dev generates one)"
    )
    webhook_schedule: tuple[float, ...] = _var(
        "PRESSROOM_WEBHOOK_SCHEDULE",
        (0.0, 5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0),
        _schedule,
        "delays before each webhook attempt, s",
    )
    webhook_timeout: float = _var(
        "PRESSROOM_WEBHOOK_TIMEOUT", 10.0, _float(0.1, 300), "per-delivery timeout, s"
    )
    webhook_concurrency: int = _var(
        "PRESSROOM_WEBHOOK_CONCURRENCY", 32, _int(1, 1024), "webhook deliveries at once"
    )
    allow_private_networks: bool = _var(
        "PRESSROOM_ALLOW_PRIVATE_NETWORKS",
        False,
        _bool,
        "allow webhooks, url sources and page requests to private and loopback addresses",
    )
    reconcile_interval: float = _var(
        "PRESSROOM_RECONCILE_INTERVAL",
        30.0,
        _float(0.1, 86400),
        "time between the projector's sweeps for stalled jobs, s",
    )
    stale_after: float = _var(
        "PRESSROOM_STALE_AFTER",
        900.0,
        _float(1, 30 * 86400),
        "a queued or running job without news for this long is re-driven, s",
    )
    max_redrives: int = _var(
        "PRESSROOM_MAX_REDRIVES",
        3,
        _int(0, 100),
        "re-drives of a stalled job before it is failed as `stalled`",
    )
    auth: str = _var(
        "PRESSROOM_AUTH",
        "enabled",
        _choice("enabled", "disabled"),
        "`disabled`: no API keys, one implicit tenant (only on a trusted network)",
    )
    admin_key: str = _var(
        "PRESSROOM_ADMIN_KEY", "", doc="admin API key(s), space-separated (dev generates one)"
    )
    server_key: str = _var(
        "PRESSROOM_SERVER_KEY",
        "",
        _server_key,
        "32 random bytes, base64: encrypts secrets at rest and derives idempotent ids; "
        "several, space-separated, while rotating: the first seals, every one opens "
        "(dev generates one)",
    )
    auth_refresh: float = _var(
        "PRESSROOM_AUTH_REFRESH",
        1.0,
        _float(0.1, 60),
        "how often a gateway reloads changed keys and tenants, s",
    )
    rate_limit: float = _var(
        "PRESSROOM_RATE_LIMIT",
        100.0,
        _float(0.01, 1_000_000),
        "job submissions per second per tenant, unless the tenant has its own",
    )
    rate_burst: int = _var(
        "PRESSROOM_RATE_BURST",
        1000,
        _int(1, 10_000_000),
        "submissions a tenant may make at once above its rate",
    )
    monthly_quota: int = _var(
        "PRESSROOM_MONTHLY_QUOTA",
        0,
        _int(0, 2**62),
        "documents per tenant and month, unless the tenant has its own (0: none): succeeded"
        " ones and those of accepted work not finished yet count",
    )
    free_tier: int = _var(
        "PRESSROOM_FREE_TIER",
        150,
        _int(0, 2**62),
        "successful documents per tenant and month that are not billable",
    )
    dedup_window: float = _var(
        "PRESSROOM_DEDUP_WINDOW",
        3600.0,
        _float(1, 86400),
        "how long the log drops a second copy of the same event (Nats-Msg-Id), s",
    )
    idempotency_ttl: float = _var(
        "PRESSROOM_IDEMPOTENCY_TTL",
        86400.0,
        _float(60, 30 * 86400),
        "how long an Idempotency-Key keeps returning its first job, s",
    )
    template_memory: int = _var(
        "PRESSROOM_TEMPLATE_MEMORY",
        512 * 2**20,
        _int(64 * 2**20, 64 * 2**30),
        "memory limit of a template worker process, bytes",
    )
    header_timeout: float = _var(
        "PRESSROOM_HEADER_TIMEOUT",
        15.0,
        _float(0.1, 3600),
        "gateway: seconds a client has to send a request's head, and to keep an idle"
        " connection open between requests",
    )
    body_timeout: float = _var(
        "PRESSROOM_BODY_TIMEOUT",
        30.0,
        _float(0.1, 3600),
        "gateway: seconds a client has to send a request's body (else 408)",
    )
    max_connections: int = _var(
        "PRESSROOM_MAX_CONNECTIONS",
        4096,
        _int(1, 1_000_000),
        "gateway: open client connections at most; more are closed at once",
    )
    max_streams: int = _var(
        "PRESSROOM_MAX_STREAMS",
        20,
        _int(1, 100_000),
        "gateway: open live-update streams (SSE) per tenant at most; more get 429",
    )
    template_timeout: float = _var(
        "PRESSROOM_TEMPLATE_TIMEOUT",
        10.0,
        _float(0.1, 600),
        "time limit to render (renderer) or compile (gateway) one template, s",
    )
    template_workers: int = _var(
        "PRESSROOM_TEMPLATE_WORKERS",
        2,
        _int(1, 64),
        "gateway: worker processes that compile stored templates, shared by every tenant",
    )
    template_concurrency: int = _var(
        "PRESSROOM_TEMPLATE_CONCURRENCY",
        1,
        _int(1, 64),
        "gateway: template compiles one tenant may have in flight at once; more get 429",
    )
    template_rate: float = _var(
        "PRESSROOM_TEMPLATE_RATE",
        2.0,
        _float(0.01, 10_000),
        "gateway: template compiles per second per tenant (POST /templates); more get 429",
    )
    template_burst: int = _var(
        "PRESSROOM_TEMPLATE_BURST",
        20,
        _int(1, 100_000),
        "gateway: template compiles a tenant may make at once above its template rate",
    )
    template_queue: int = _var(
        "PRESSROOM_TEMPLATE_QUEUE",
        16,
        _int(0, 10_000),
        "gateway: template compiles waiting for a worker at most, every tenant's; more get 503",
    )
    template_max_output: int = _var(
        "PRESSROOM_TEMPLATE_MAX_OUTPUT",
        16 * 2**20,
        _int(1024, 2**31),
        "most characters a template may produce",
    )
    log_level: str = _var(
        "PRESSROOM_LOG_LEVEL", "INFO", _choice("DEBUG", "INFO", "WARNING", "ERROR"), "log level"
    )
    otlp_endpoint: str = _var(
        "PRESSROOM_OTLP_ENDPOINT",
        "",
        doc="OpenTelemetry collector (OTLP over HTTP, e.g. http://otel-collector:4318): "
        "traces are exported there; empty: none",
    )
    log_format: str = _var(
        "PRESSROOM_LOG_FORMAT",
        "text",
        _choice("text", "json"),
        "log lines: text, or json (one object per line, with job, batch, tenant and attempt)",
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Build settings from `environ`, raising `SettingsError` on the first bad value."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            found = raw_value(environ, f.metadata["env"])
            if found is None:
                continue
            raw, source = found
            try:
                values[f.name] = f.metadata["parse"](raw)
            except ValueError as exc:  # a value from a file is not shown: it may be a secret
                raise SettingsError(f"{source} is invalid: {exc}") from None
        return cls(**values)

    def __post_init__(self) -> None:
        if bool(self.nats_tls_cert) != bool(self.nats_tls_key):
            raise SettingsError(
                "PRESSROOM_NATS_TLS_CERT and PRESSROOM_NATS_TLS_KEY go together: set both "
                "(a client certificate and its key) or neither"
            )
        if self.idempotency_ttl > self.stream_max_age:
            raise SettingsError(
                f"PRESSROOM_IDEMPOTENCY_TTL={self.idempotency_ttl:g} is invalid: it must not "
                f"exceed PRESSROOM_STREAM_MAX_AGE ({self.stream_max_age:g}), since a repeated "
                "key finds its first job in the log"
            )

    @property
    def admin_keys(self) -> tuple[str, ...]:
        """Every admin key in `PRESSROOM_ADMIN_KEY` (space- or comma-separated)."""
        return tuple(part for part in re.split(r"[\s,]+", self.admin_key) if part)

    @property
    def auth_enabled(self) -> bool:
        return self.auth == "enabled"

    def server_keys(self) -> ServerKeys:
        """The server keyring; `SettingsError` naming the variable when it is not set."""
        keys = read_keyring(self.server_key)
        if keys is None:
            raise SettingsError(
                "PRESSROOM_SERVER_KEY must be set: 32 random bytes in base64 "
                "(openssl rand -base64 32); it encrypts secrets at rest"
            )
        return keys

    def server_key_bytes(self) -> bytes:
        """The keyring's primary key (`server_keys().primary`)."""
        return self.server_keys().primary

    @property
    def base_url(self) -> str:
        """Where clients reach the gateway; used in download links."""
        if self.public_url:
            return self.public_url.rstrip("/")
        host = "127.0.0.1" if self.host in {"0.0.0.0", "::", ""} else self.host
        return f"http://{host}:{self.port}"


def describe() -> list[tuple[str, str, str]]:
    """(variable, default, meaning) for every setting, for docs/configuration.md's table."""
    rows = []
    for f in dataclasses.fields(Settings):
        default = f.default
        shown = ",".join(f"{v:g}" for v in default) if isinstance(default, tuple) else default
        rows.append((f.metadata["env"], str(shown), f.metadata["doc"]))
    return rows
