"""The database schema: every migration, in order, applied once each by `db.migrate`.

Append only: a migration that has run anywhere is never edited; a change is a new one.
"""

from __future__ import annotations

MIGRATIONS: list[str] = [
    """
    CREATE TABLE jobs (
        id              text PRIMARY KEY,
        status          text NOT NULL,
        attempts        integer NOT NULL DEFAULT 0,
        error_type      text,
        error_message   text,
        object_key      text,
        bytes           bigint,
        pages           integer,
        render_ms       integer,
        webhook_url     text,
        idempotency_key text,
        input           jsonb,
        created_at      timestamptz NOT NULL,
        started_at      timestamptz,
        finished_at     timestamptz,
        updated_at      timestamptz NOT NULL DEFAULT now(),
        last_seq        bigint NOT NULL DEFAULT 0
    );
    CREATE INDEX jobs_unfinished ON jobs (status, updated_at)
        WHERE status IN ('queued', 'running');
    CREATE TABLE job_events (
        stream_seq  bigint PRIMARY KEY,
        job_id      text NOT NULL,
        type        text NOT NULL,
        at          timestamptz NOT NULL,
        body        jsonb NOT NULL
    );
    CREATE INDEX job_events_job ON job_events (job_id, stream_seq);
    CREATE TABLE webhook_deliveries (
        stream_seq   bigint PRIMARY KEY,
        job_id       text NOT NULL,
        webhook_id   text NOT NULL,
        attempt      integer NOT NULL,
        url          text NOT NULL,
        outcome      text NOT NULL,
        status_code  integer,
        error        text,
        latency_ms   integer NOT NULL,
        at           timestamptz NOT NULL
    );
    CREATE INDEX webhook_deliveries_job ON webhook_deliveries (job_id, stream_seq);
    """,
    # 2: how often the reconciler re-published a stalled job. Not derivable from the log:
    # a rebuild of the projection starts it again at 0.
    """
    ALTER TABLE jobs ADD COLUMN redrives integer NOT NULL DEFAULT 0;
    """,
    # 3: stored templates, written by the gateway (configuration, not a projection). Every
    # version is kept, so a job that names version N renders the same thing forever.
    """
    CREATE TABLE templates (
        id              text PRIMARY KEY,
        name            text NOT NULL UNIQUE CHECK (char_length(name) BETWEEN 1 AND 200),
        latest_version  integer NOT NULL,
        created_at      timestamptz NOT NULL,
        updated_at      timestamptz NOT NULL
    );
    CREATE INDEX templates_recent ON templates (updated_at DESC, id);
    CREATE TABLE template_versions (
        template_id  text NOT NULL REFERENCES templates (id),
        version      integer NOT NULL CHECK (version >= 1),
        body         text NOT NULL,
        header       text,
        footer       text,
        created_at   timestamptz NOT NULL,
        PRIMARY KEY (template_id, version)
    );
    """,
    # 4: tenants, their API keys and webhook signing secrets (configuration, written by
    # the gateway's admin API); every job and template belongs to a tenant ('default'
    # for rows from before tenants, and with PRESSROOM_AUTH=disabled); usage per job
    # (exactly once, by job id) and per tenant and month.
    """
    CREATE TABLE tenants (
        id              text PRIMARY KEY,
        name            text NOT NULL UNIQUE CHECK (char_length(name) BETWEEN 1 AND 100),
        rate_per_second double precision,
        rate_burst      integer,
        monthly_quota   bigint,
        created_at      timestamptz NOT NULL DEFAULT now(),
        updated_at      timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE INDEX tenants_changed ON tenants (updated_at);
    CREATE TABLE api_keys (
        id            text PRIMARY KEY,
        tenant_id     text NOT NULL REFERENCES tenants (id),
        hash          bytea NOT NULL UNIQUE,
        prefix        text NOT NULL,
        scopes        text[] NOT NULL,
        created_at    timestamptz NOT NULL DEFAULT now(),
        revoked_at    timestamptz,
        last_used_at  timestamptz,
        updated_at    timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE INDEX api_keys_changed ON api_keys (updated_at);
    CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_at);
    CREATE TABLE webhook_secrets (
        id          text PRIMARY KEY,
        tenant_id   text NOT NULL REFERENCES tenants (id),
        secret      text NOT NULL,
        created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE INDEX webhook_secrets_tenant ON webhook_secrets (tenant_id, created_at);
    ALTER TABLE jobs ADD COLUMN tenant_id text NOT NULL DEFAULT 'default';
    ALTER TABLE job_events ADD COLUMN tenant_id text NOT NULL DEFAULT 'default';
    ALTER TABLE templates ADD COLUMN tenant_id text NOT NULL DEFAULT 'default';
    ALTER TABLE templates DROP CONSTRAINT templates_name_key;
    ALTER TABLE templates ADD CONSTRAINT templates_tenant_name UNIQUE (tenant_id, name);
    DROP INDEX templates_recent;
    CREATE INDEX templates_recent ON templates (tenant_id, updated_at DESC, id);
    CREATE TABLE usage_documents (
        job_id      text PRIMARY KEY,
        tenant_id   text NOT NULL,
        month       date NOT NULL,
        outcome     text NOT NULL,
        pages       integer NOT NULL,
        bytes       bigint NOT NULL,
        render_ms   bigint NOT NULL,
        at          timestamptz NOT NULL
    );
    CREATE TABLE usage_months (
        tenant_id   text NOT NULL,
        month       date NOT NULL,
        succeeded   bigint NOT NULL DEFAULT 0,
        failed      bigint NOT NULL DEFAULT 0,
        cancelled   bigint NOT NULL DEFAULT 0,
        pages       bigint NOT NULL DEFAULT 0,
        bytes       bigint NOT NULL DEFAULT 0,
        render_ms   bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (tenant_id, month)
    );
    """,
    # 5: bulk runs. A batch's row is projected from its `batches.<id>.*` events; its
    # counters move in the same transaction as an item's terminal event. Items are jobs
    # (`<batch_id>.<index>`) with their batch and index in two columns, for listing.
    """
    CREATE TABLE batches (
        id              text PRIMARY KEY,
        tenant_id       text NOT NULL,
        status          text NOT NULL,
        total           integer NOT NULL,
        done            integer NOT NULL DEFAULT 0,
        failed          integer NOT NULL DEFAULT 0,
        cancelled       integer NOT NULL DEFAULT 0,
        output          text NOT NULL DEFAULT 'zip',
        object_key      text,
        bytes           bigint,
        error_type      text,
        error_message   text,
        webhook_url     text,
        idempotency_key text,
        template_id     text,
        template_version integer,
        created_at      timestamptz NOT NULL,
        started_at      timestamptz,
        finished_at     timestamptz,
        updated_at      timestamptz NOT NULL DEFAULT now(),
        last_seq        bigint NOT NULL DEFAULT 0
    );
    CREATE INDEX batches_tenant ON batches (tenant_id, created_at DESC, id);
    CREATE INDEX batches_unfinished ON batches (status, updated_at)
        WHERE status IN ('queued', 'running', 'paused');
    CREATE TABLE batch_events (
        stream_seq  bigint PRIMARY KEY,
        batch_id    text NOT NULL,
        tenant_id   text NOT NULL,
        type        text NOT NULL,
        at          timestamptz NOT NULL,
        body        jsonb NOT NULL
    );
    CREATE INDEX batch_events_batch ON batch_events (batch_id, stream_seq);
    ALTER TABLE jobs ADD COLUMN batch_id text;
    ALTER TABLE jobs ADD COLUMN item_index integer;
    CREATE INDEX jobs_batch_items ON jobs (batch_id, item_index) WHERE batch_id IS NOT NULL;
    """,
    # 6: whether a batch asked for `batch.progress` webhooks.
    """
    ALTER TABLE batches ADD COLUMN progress_webhooks boolean NOT NULL DEFAULT false;
    """,
    # 7: attempts of batches' webhooks, written by the notifier itself (not a projection:
    # no log event carries them, so a rebuild leaves them alone). `webhook_deliveries` does
    # not fit them: its key is the stream sequence of a job's `webhook` event. Times are
    # PostgreSQL's clock.
    """
    CREATE TABLE batch_webhook_deliveries (
        id           bigserial PRIMARY KEY,
        batch_id     text NOT NULL,
        tenant_id    text NOT NULL,
        webhook_id   text NOT NULL,
        event        text NOT NULL,
        attempt      integer NOT NULL,
        url          text NOT NULL,
        outcome      text NOT NULL,
        status_code  integer,
        error        text,
        latency_ms   integer NOT NULL,
        at           timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE INDEX batch_webhook_deliveries_batch ON batch_webhook_deliveries (batch_id, id);
    """,
    # 8: a tenant's single jobs, newest first (`GET /jobs`); batch items are listed by
    # their batch (`jobs_batch_items`), never here.
    """
    CREATE INDEX jobs_tenant_recent ON jobs (tenant_id, created_at DESC, id)
        WHERE batch_id IS NULL;
    """,
    # 9: quota holds (`core/database/holds.py`): work a gateway accepted for a tenant with a monthly
    # quota and that has not ended, in units (documents). Written by the gateway before it
    # publishes the submission, released by the projector as the work ends. Not a
    # projection: a rebuild leaves it alone (the replay releases nothing twice).
    # `quota_held` is each tenant's sum of units, kept by a trigger on every change of
    # `quota_holds` (whoever makes it), so the quota check reads one row, not a sum over
    # the tenant's open work.
    """
    CREATE TYPE quota_hold_kind AS ENUM ('job', 'batch');
    CREATE TYPE quota_hold_state AS ENUM ('pending', 'logged');
    CREATE TABLE quota_holds (
        id          text PRIMARY KEY,
        tenant_id   text NOT NULL,
        kind        quota_hold_kind NOT NULL,
        units       integer NOT NULL CHECK (units >= 0),
        state       quota_hold_state NOT NULL DEFAULT 'pending',
        created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE INDEX quota_holds_pending ON quota_holds (created_at) WHERE state = 'pending';
    CREATE TABLE quota_held (
        tenant_id   text PRIMARY KEY,
        units       bigint NOT NULL DEFAULT 0
    );
    CREATE FUNCTION quota_held_follow() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            UPDATE quota_held SET units = units - OLD.units WHERE tenant_id = OLD.tenant_id;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO quota_held AS q (tenant_id, units) VALUES (NEW.tenant_id, NEW.units)
            ON CONFLICT (tenant_id) DO UPDATE SET units = q.units + EXCLUDED.units;
        END IF;
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER quota_holds_follow AFTER INSERT OR DELETE OR UPDATE OF units, tenant_id
        ON quota_holds FOR EACH ROW EXECUTE FUNCTION quota_held_follow();
    """,
    # 10: a tenant's webhook secret retired by a rotation signs until `expires_at`, beside
    # its successor, so receivers can switch keys without missing a webhook.
    """
    ALTER TABLE webhook_secrets ADD COLUMN expires_at timestamptz;
    """,
    # 11: statuses and error types as enum types, as they are in the code (`JobStatus`,
    # `BatchStatus`, `ErrorType`): a value no member has cannot be stored. Error types the
    # code adds later are added to the type by `db.migrate` (`ENUM_TYPES`); a value stored
    # before this migration that no member has is kept as `internal`, as answers show it.
    # The partial indexes name statuses, so they are made again over the new types.
    """
    CREATE TYPE job_status AS ENUM ('queued', 'running', 'done', 'failed', 'cancelled');
    CREATE TYPE batch_status AS ENUM
        ('queued', 'running', 'paused', 'done', 'failed', 'cancelled');
    CREATE TYPE error_type AS ENUM (
        'internal', 'deterministic', 'validation', 'too_large', 'request_timeout',
        'not_found', 'no_diagnosis', 'unauthorized', 'forbidden', 'idempotency_conflict',
        'rate_limited', 'too_many_streams', 'quota_exceeded', 'compile_limited',
        'conflict', 'range_not_satisfiable', 'template', 'limit_exceeded',
        'output_too_large', 'dom_too_large', 'header_too_large', 'toc_too_large',
        'invalid_event', 'wait_timeout', 'source', 'finishing', 'signing_not_configured',
        'page_crashed', 'transient', 'unavailable', 'log_full', 'secret_unreadable',
        'refused', 'storage', 'browser', 'timeout', 'timestamp_unavailable',
        'source_unreachable', 'pdf_invalid', 'pdf_encrypted', 'pdf_active_content',
        'too_many_pages', 'pdfa_not_possible', 'pdfua_not_possible', 'facturx_invalid',
        'http', 'worker_lost', 'stalled', 'no_documents', 'document_missing', 'cancelled'
    );
    DROP INDEX jobs_unfinished;
    DROP INDEX batches_unfinished;
    ALTER TABLE jobs
        ALTER COLUMN status TYPE job_status USING status::job_status,
        ALTER COLUMN error_type TYPE error_type USING CASE
            WHEN error_type = ANY (enum_range(NULL::error_type)::text[])
            THEN error_type::error_type
            WHEN error_type IS NOT NULL THEN 'internal'
        END;
    ALTER TABLE batches
        ALTER COLUMN status TYPE batch_status USING status::batch_status,
        ALTER COLUMN error_type TYPE error_type USING CASE
            WHEN error_type = ANY (enum_range(NULL::error_type)::text[])
            THEN error_type::error_type
            WHEN error_type IS NOT NULL THEN 'internal'
        END;
    ALTER TABLE usage_documents ALTER COLUMN outcome TYPE job_status USING outcome::job_status;
    CREATE INDEX jobs_unfinished ON jobs (status, updated_at)
        WHERE status IN ('queued', 'running');
    CREATE INDEX batches_unfinished ON batches (status, updated_at)
        WHERE status IN ('queued', 'running', 'paused');
    """,
    # 12: stored assets (`POST /assets`): every version of a tenant's file by name, its
    # bytes in storage under the tenant and digest (`core/model/files.blob_key`); and the files
    # a stored template version bundles. Configuration written by the gateway, not a
    # projection. A name stored again with the same bytes is the same version.
    """
    CREATE TABLE assets (
        tenant_id     text NOT NULL,
        name          text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 2048),
        version       integer NOT NULL CHECK (version >= 1),
        digest        text NOT NULL,
        size          bigint NOT NULL CHECK (size >= 0),
        content_type  text NOT NULL,
        created_at    timestamptz NOT NULL,
        PRIMARY KEY (tenant_id, name, version)
    );
    CREATE INDEX assets_digest ON assets (tenant_id, digest);
    CREATE TABLE template_files (
        tenant_id     text NOT NULL,
        template_id   text NOT NULL,
        version       integer NOT NULL,
        name          text NOT NULL,
        digest        text NOT NULL,
        size          bigint NOT NULL CHECK (size >= 0),
        content_type  text NOT NULL,
        PRIMARY KEY (template_id, version, name),
        FOREIGN KEY (template_id, version) REFERENCES template_versions (template_id, version)
    );
    CREATE INDEX template_files_digest ON template_files (tenant_id, digest);
    """,
    # 13: a preview job's supersede key (`gateway/previews.py`; NULL for any other job),
    # in its own column so listing, counting usage and finding the unfinished previews
    # never read a job's input.
    """
    ALTER TABLE jobs ADD COLUMN preview text;
    CREATE INDEX jobs_unfinished_previews ON jobs (tenant_id, preview)
        WHERE preview IS NOT NULL AND status IN ('queued', 'running');
    """,
    # 14: who still needs a stored file (`core/database/fileclaims.py`): a job, a batch, a store
    # of assets or a template version in the making, or a deleted asset's digest waiting
    # for the conductor's sweep. Written by the gateway before any bytes (configuration,
    # not a projection: a rebuild leaves it). The files of jobs already recorded are
    # claimed by their jobs, so the first sweep keeps what unfinished jobs still need.
    """
    CREATE TABLE file_claims (
        tenant_id   text NOT NULL,
        digest      text NOT NULL,
        kind        text NOT NULL CHECK (kind IN ('job', 'batch', 'store', 'release')),
        owner       text NOT NULL,
        created_at  timestamptz NOT NULL,
        PRIMARY KEY (tenant_id, digest, kind, owner)
    );
    INSERT INTO file_claims (tenant_id, digest, kind, owner, created_at)
    SELECT DISTINCT j.tenant_id, f ->> 'digest', 'job', j.id, j.created_at
    FROM jobs j, jsonb_array_elements(
        CASE WHEN jsonb_typeof(j.input -> 'files') = 'array' THEN j.input -> 'files'
             ELSE '[]'::jsonb END
    ) AS f
    WHERE f ->> 'digest' IS NOT NULL
    ON CONFLICT DO NOTHING;
    """,
    # 15: previews admitted by a gateway whose jobs have no row yet (`gateway/previews.py`),
    # so a burst of previews is counted against `PRESSROOM_PREVIEW_LIMIT` before the
    # projector writes their rows. Written by the gateway, not a projection; a row is
    # cleared once its job's row exists or after a short bound.
    """
    CREATE TABLE preview_admissions (
        job_id       text PRIMARY KEY,
        tenant_id    text NOT NULL,
        preview      text NOT NULL,
        admitted_at  timestamptz NOT NULL
    );
    CREATE INDEX preview_admissions_tenant ON preview_admissions (tenant_id, admitted_at);
    """,
]
