"""The statuses of `audit_runs` and how a finished run gets its own (no Spark needed here).

A run is recorded RUNNING before it writes any other table and ends in one of the other statuses;
a RUNNING row that is never replaced is a run that died (killed, machine lost), and the next run on
the warehouse settles it (eos_audit.pipeline).
"""

from __future__ import annotations

RUNNING = "RUNNING"
SUCCEEDED = "SUCCEEDED"
NOTHING_AUDITED = "NOTHING_AUDITED"  # finished, but not one batch was audited
QUARANTINE_EXCEEDED = "QUARANTINE_EXCEEDED"  # finished, above run.max_quarantined_share
FAILED = "FAILED"
# Runs whose tables are complete: what README's queries read.
FINISHED = (SUCCEEDED, NOTHING_AUDITED, QUARANTINE_EXCEEDED)
# Finished, but not a clean night: exit code 4.
UNUSABLE_INPUT = (NOTHING_AUDITED, QUARANTINE_EXCEEDED)


def finished_status(
    audited: int, quarantined: int, max_share: float, skipped: int = 0
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

    Returns:
        (status, explanation or None).
    """
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
    if quarantined > max_share * read:
        return QUARANTINE_EXCEEDED, (
            f"quarantined {quarantined} of {read} record batches ({quarantined / read:.1%}), "
            f"more than run.max_quarantined_share ({max_share:.1%}): see the quarantine table"
        )
    return SUCCEEDED, None
