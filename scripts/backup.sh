#!/bin/sh
# Back up a running Pressroom into a folder of its own under BACKUP_ROOT, and keep the
# newest $KEEP complete backups there (default 14): what a nightly cron or a Kubernetes
# CronJob runs (docs/operations.md, "Backup, restore and disaster recovery").
#
#   scripts/backup.sh BACKUP_ROOT [--no-files] [--pg-bin DIR]
#
# It needs the services' settings in its environment (PRESSROOM_DATABASE_URL,
# PRESSROOM_NATS_URL, the storage settings), the operators' NATS identity in
# PRESSROOM_NATS_NKEY_SEED (`pressroom bus-keys`' admin seed; `nats_seed_admin` in
# `pressroom dev`'s secrets.json) and pg_dump as new as the server. Give --no-files when
# the bucket is versioned and replicated instead. $PRESSROOM names the command
# (default: pressroom on PATH). Copy each backup off the machine it was made on.
set -eu

root="${1:?usage: scripts/backup.sh BACKUP_ROOT [pressroom backup options]}"
shift
keep="${KEEP:-14}"
pressroom="${PRESSROOM:-pressroom}"

folder="$root/$(date -u +%Y%m%dT%H%M%SZ)"
"$pressroom" backup "$folder" "$@"

# Only complete backups (with their manifest) count; an interrupted one is removed.
for partial in "$root"/*/; do
    [ -f "${partial}manifest.json" ] || [ "$partial" = "$folder/" ] || rm -rf "$partial"
done
complete=$(ls -1d "$root"/*/manifest.json | sort -r)
count=0
for manifest in $complete; do
    count=$((count + 1))
    [ "$count" -le "$keep" ] || rm -rf "$(dirname "$manifest")"
done
echo "$folder"
