"""The statuses of `audit_runs` and how a finished run gets its own (no Spark needed here).

A run is recorded RUNNING before it writes any other table and ends in one of the other statuses;
a RUNNING row that is never replaced is a run that died (killed, machine lost), and the next run on
the warehouse settles it (eos_audit.audit.pipeline).
"""

from __future__ import annotations

RUNNING = "RUNNING"
SUCCEEDED = "SUCCEEDED"
NOTHING_AUDITED = "NOTHING_AUDITED"  # finished, but not one batch was audited
QUARANTINE_EXCEEDED = "QUARANTINE_EXCEEDED"  # finished, above run.max_quarantined_share
# Finished, but an executor could not read input files the driver had listed (they became
# unreadable during the run): a partition may be missing, so never a clean night.
INPUT_UNREADABLE = "INPUT_UNREADABLE"
FAILED = "FAILED"
# Runs whose tables are complete: what README's queries read.
FINISHED = (SUCCEEDED, NOTHING_AUDITED, QUARANTINE_EXCEEDED, INPUT_UNREADABLE)
# Finished, but not a clean night: exit code 4.
UNUSABLE_INPUT = (NOTHING_AUDITED, QUARANTINE_EXCEEDED, INPUT_UNREADABLE)


def finished_status(
    audited: int,
    quarantined: int,
    max_share: float,
    skipped: int = 0,
    *,
    bytes_read: int = 0,
    bytes_quarantined: int = 0,
    tolerated: int = 0,
    unreadable: tuple[str, ...] = (),
    seeds_quarantined: int = 0,
    coordinator_records_quarantined: int = 0,
) -> tuple[str, str | None]:
    """The status of a run that went through, and why it is not SUCCEEDED (issue 12, case 7).

    Quarantined batches leave holes the replay cannot see into (a lost batch is a sequence gap),
    so a run that audited nothing, or quarantined more than `max_share` of what it read, must not
    look like a clean night.

    Args:
        audited: record batches audited.
        quarantined: record batches quarantined.
        max_share: run.max_quarantined_share, from 0 to 1.
        skipped: record batches an earlier run's state covers (--since-state): not part of the
            quarantined share, and the reason when nothing else was read.
        bytes_read: bytes of the input files whose batches the run counts.
        bytes_quarantined: bytes of them the run could not audit (an unreadable file, the rest
            of a segment after a batch that cannot be framed): a lost file among many good
            small batches must not hide below the share of rows.
        tolerated: quarantined batches that are not bad input (TRUNCATED_TAIL: the cut batch at
            the end of a copied active segment, which Kafka's recovery truncates too).
        unreadable: input files an executor could not read.
        seeds_quarantined: seeded producer state rows (--producer-state, --since-state, snapshot
            entries) quarantined as impossible: their producers were replayed without the state
            they had, so a seed is input like any other and one lost row is not a clean night.
        coordinator_records_quarantined: records or markers of `__consumer_offsets` and
            `__transaction_state` that could not be decoded: the processing audit replayed the
            coordinator without them.

    Returns:
        (status, explanation or None).
    """
    if unreadable:
        shown = ", ".join(unreadable[:20])
        more = f" and {len(unreadable) - 20} more" if len(unreadable) > 20 else ""
        return INPUT_UNREADABLE, (
            f"could not read {len(unreadable)} input file(s) listed at the start of the run: "
            f"{shown}{more}; their batches are missing from the audit (see input_files)"
        )
    read = audited + quarantined
    if audited == 0 and skipped > 0 and quarantined == 0:
        return NOTHING_AUDITED, (
            f"all {skipped} record batches are below the offsets the seeding run's state covers "
            "(--since-state): that run audited them already, and nothing newer was read"
        )
    if audited == 0:
        return NOTHING_AUDITED, (
            f"no record batch was audited ({quarantined} quarantined): the input holds nothing "
            "usable"
        )
    bad = quarantined - tolerated
    if bad > max_share * read:
        return QUARANTINE_EXCEEDED, (
            f"quarantined {bad} of {read} record batches ({bad / read:.1%}), "
            f"more than run.max_quarantined_share ({max_share:.1%}): see the quarantine table"
        )
    if bytes_read > 0 and bytes_quarantined > max_share * bytes_read:
        return QUARANTINE_EXCEEDED, (
            f"could not audit {bytes_quarantined} of {bytes_read} input bytes "
            f"({bytes_quarantined / bytes_read:.1%}), more than run.max_quarantined_share "
            f"({max_share:.1%}) although only {bad} of {read} record batches are quarantined: "
            "see input_files.bytes_quarantined and the quarantine table"
        )
    if seeds_quarantined > 0:
        return QUARANTINE_EXCEEDED, (
            f"quarantined {seeds_quarantined} seeded producer state row(s) (input producer_state):"
            " their producers were replayed without the state they had before the log, so their "
            "first batches were judged as a new producer's: see the quarantine table"
        )
    if coordinator_records_quarantined > 0:
        return QUARANTINE_EXCEEDED, (
            f"quarantined {coordinator_records_quarantined} record(s) of __consumer_offsets or "
            "__transaction_state that could not be decoded (input coordinator_records): the "
            "group coordinator's offsets were replayed without them: see the quarantine table"
        )
    return SUCCEEDED, None
