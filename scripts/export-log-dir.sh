#!/usr/bin/env bash
# Copy one Kafka broker's log directory the way eos-audit reads it (docs/exporting.md):
#
#   scripts/export-log-dir.sh LOG_DIR EXPORT BROKER_ID [TOPIC ...]
#
# writes EXPORT/BROKER_ID/ with the log directory's checkpoint files and, below them, every
# partition folder (`<topic>-<partition>/`: segments, the active one included, producer
# snapshots, leader-epoch-checkpoint) of the TOPICs given, or of every topic. It runs on a live
# broker: nothing is stopped or locked.
set -euo pipefail

if [ $# -lt 3 ]; then
    echo "usage: $0 LOG_DIR EXPORT BROKER_ID [TOPIC ...]" >&2
    exit 2
fi
log_dir=${1%/} export=$2 broker_id=$3
shift 3
[ -d "$log_dir" ] || { echo "$0: $log_dir is not a directory" >&2; exit 2; }
target="$export/$broker_id"
mkdir -p "$target"

# A file the broker deletes between the listing and its copy (retention, the cleaner, a rolled
# index) is left out, as it is gone from the log too; any other failed copy stops the export.
copy() {
    cp -p "$1" "$2" 2>/dev/null && return
    [ ! -e "$1" ] && return
    echo "$0: could not copy $1" >&2
    exit 1
}

# The checkpoints first: the high watermarks and log start offsets they hold are then at or below
# what the segments copied after them hold (a broker only moves them forward).
for checkpoint in "$log_dir"/*-checkpoint; do
    [ -f "$checkpoint" ] && copy "$checkpoint" "$target/"
done

wanted() {
    [ $# -eq 1 ] && return 0
    local topic=$1 name
    shift
    for name in "$@"; do [ "$name" = "$topic" ] && return 0; done
    return 1
}

for folder in "$log_dir"/*/; do
    name=$(basename "$folder")
    # Partition folders only: `-delete`, `-future` and `-stray` folders are not the partition's
    # log (a deleted topic, a move between log dirs in progress, a replica the broker dropped).
    [[ "$name" =~ ^(.+)-([0-9]+)$ ]] || continue
    wanted "${BASH_REMATCH[1]}" "$@" || continue
    mkdir -p "$target/$name"
    for file in "$folder"*; do
        [ -f "$file" ] || [ ! -e "$file" ] || continue
        copy "$file" "$target/$name/"
    done
done
