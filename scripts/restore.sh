#!/bin/sh
# Restore the newest complete backup under BACKUP_ROOT (or the backup folder given) into
# the installation the environment names, then rebuild the projection from the restored
# log (docs/operations.md, "Restoring"). Stop every service first; start them after.
#
#   scripts/restore.sh BACKUP_ROOT|BACKUP_FOLDER [--replace] [--no-files] [--pg-bin DIR]
#
# PRESSROOM_SERVER_KEY must hold the key(s) the backed-up installation sealed its
# secrets with (the restore names any it lacks). $PRESSROOM names the command.
set -eu

where="${1:?usage: scripts/restore.sh BACKUP_ROOT|BACKUP_FOLDER [pressroom restore options]}"
shift
pressroom="${PRESSROOM:-pressroom}"

if [ -f "$where/manifest.json" ]; then
    folder="$where"
else
    newest=$(ls -1d "$where"/*/manifest.json 2>/dev/null | sort -r | head -n 1)
    [ -n "$newest" ] || { echo "no complete backup under $where" >&2; exit 1; }
    folder=$(dirname "$newest")
fi
echo "restoring $folder" >&2
exec "$pressroom" restore "$folder" "$@"
