"""Every finding type in one registry: plain Python, read by the compiled kernel and by Spark alike.

The registry is the single source of a finding type: its code, default severity, the error a
partition leader returns, the section of `docs/rules.md` that states the rule (written into
`findings.spec_ref`), one sentence saying what it means, the template of the `detail` sentence,
the names of the replay kernel's facts and how the report draws it. Everything else derives from
it: the configuration's default severities (`config.DEFAULT_SEVERITIES`, checked against
`conf/defaults.toml` by a test), the facts' slots the kernel fills (`FACT_*` below), and the
report's marks. The rows of the findings table are built from it by `sinks.finding_rows`, the one
builder every rule's findings go through. This module imports no Spark: the compiled kernel
reads its codes and slots.

Adding a finding type the kernel raises: a `FindingType` below (and a `FACT_*` constant for each
new fact), its section in `docs/rules.md`, the check in the kernel's module of the Kafka class
that raises it (`replay.kernel` lists them), the oracle and the tests.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # config derives its defaults from this module; no import cycle at run time
    from eos_audit.config import AuditConfig

RULES_DOC = "docs/rules.md"

# The one severity order, worst first: `--fail-on`, the report's sorting and colours, the summary
# tables' `findings_<severity>` columns and the configuration's checks all follow it.
SEVERITY_ORDER = ("CRITICAL", "ERROR", "WARNING", "INFO")


def at_or_above(level: str) -> tuple[str, ...]:
    """The severities at or above `level` (case-insensitive), worst first.

    Args:
        level: a severity, e.g. `--fail-on`'s "error".

    Returns:
        ("CRITICAL", "ERROR") for "error".
    """
    return SEVERITY_ORDER[: SEVERITY_ORDER.index(level.upper()) + 1]


def failing_findings(by_severity: Mapping[str, int], fail_on: str) -> dict[str, int]:
    """The findings that fail a run at the threshold `fail_on` (`--fail-on`), by severity.

    The one fail-on verdict: the CLI's exit code and the report's verdict both read it.

    Args:
        by_severity: the run's findings counted by severity.
        fail_on: critical, error, warning or never.

    Returns:
        The counts of the severities at or above `fail_on` that the run has, worst first; empty
        when the run passes (always for `never`).
    """
    if fail_on == "never":
        return {}
    return {s: by_severity[s] for s in at_or_above(fail_on) if by_severity.get(s, 0)}


def lowered_to(level: str, ceiling: str) -> str:
    """`level`, lowered to `ceiling` when it is worse (a benign cause never raises a severity)."""
    return max(level, ceiling, key=SEVERITY_ORDER.index)


class Cause(IntEnum):
    """Why a finding happened, when the data explains it (docs/rules.md#causes)."""

    NONE = 0
    LOG_START = 1
    PRODUCER_EXPIRY = 2
    COMPACTION = 3
    UNEXPLAINED = 4
    # Not from the replay: a file of the partition was listed and could not be read, so the
    # finding may rest on the hole it left (accounting.findings_beside_unreadable).
    UNREADABLE_INPUT = 5
    # A batch the readers quarantined lies in the hole the finding is about (OFFSET_GAP).
    QUARANTINED_BATCH = 6


UNEXPLAINED = "UNEXPLAINED"
# What a cause does to a finding's severity: the one policy of every rule (docs/rules.md#causes).
# A cause that explains a finding lowers its severity to at most this level, whatever `[severity]`
# says, and never raises it; any other cause (UNEXPLAINED, TRUNCATION) keeps the configured level.
# QUARANTINED_BATCH and UNREADABLE_INPUT are not benign, but no verdict rests on a batch nobody
# could read: its quarantine row or its unreadable file is the evidence. A ListOffsets regression
# across a leader change or a failover (pre-KIP-207) is worth a look: WARNING.
CAUSE_CEILING: dict[str, str] = {
    "LOG_START": "INFO",
    "PRODUCER_EXPIRY": "INFO",
    "COMPACTION": "INFO",
    "QUARANTINED_BATCH": "INFO",
    "UNREADABLE_INPUT": "INFO",
    "LEADER_CHANGE_TRANSIENT": "WARNING",
    "EARLIEST_ACROSS_FAILOVER": "WARNING",
    # Offset rewinds (docs/rules.md#offset-rewind): a plain commit that lowered the offset while
    # its group was still consuming is an error; an operator's reset of an empty group is the
    # tool doing its job; a restart from auto.offset.reset after the offset expired is the
    # retention doing its job, and reprocesses: worth a look.
    "LATE_COMMIT": "ERROR",
    "ADMIN_RESET": "INFO",
    "EXPIRED_RESET": "WARNING",
    # Plain and transactional commits of one key (docs/rules.md#mixed-offset-commits) are a
    # warning unless a plain commit passed an aborted transaction's input.
    "PLAIN_AND_TRANSACTIONAL": "WARNING",
    # A HANGING_TRANSACTION that is an open KIP-939 two-phase-commit transaction: its coordinator
    # never aborts it, it stays open until its external transaction manager decides
    # (docs/rules.md#hanging-transaction). It still pins the last stable offset: INFO, not gone.
    "TWO_PHASE_COMMIT": "INFO",
}


def severity_for(level: str, cause: str | None) -> str:
    """A finding's severity: its configured `level`, lowered by its cause (`CAUSE_CEILING`).

    Args:
        level: the configured severity of the finding's type.
        cause: the finding's cause, or None.

    Returns:
        The severity the finding gets.
    """
    ceiling = CAUSE_CEILING.get(cause or "")
    return level if ceiling is None else lowered_to(level, ceiling)


class KafkaError(IntEnum):
    """The errors a partition leader answers for the batches the replay judges (Errors.java)."""

    NONE = 0
    OUT_OF_ORDER_SEQUENCE_NUMBER = 1
    UNKNOWN_PRODUCER_ID = 2
    INVALID_PRODUCER_EPOCH = 3
    INVALID_TXN_STATE = 4
    TRANSACTION_COORDINATOR_FENCED = 5
    CORRUPT_MESSAGE = 6


# Who raises a type: the compiled replay, the client acknowledgement rules (evidence_rules/acks.py),
# the ListOffsets rules (evidence_rules/list_offsets.py) or the replay of the group coordinator's
# offsets (processing/offset_metadata_manager.py).
REPLAY, ACKS, LIST_OFFSETS, PROCESSING = "replay", "acks", "list_offsets", "processing"
# How the report's producer plot (sequence against offset) draws a finding of a type.
MARK_GAP, MARK_DUPLICATE, MARK_FENCED, MARK_LOST, MARK_OTHER = (
    "gap", "duplicate", "fenced", "lost", "other",
)  # fmt: skip


@dataclass(frozen=True)
class FindingType:
    """One kind of violation.

    Attributes:
        name: UPPER_SNAKE name, the `finding_type` value and the key of `[severity]`.
        code: the integer the replay kernel emits for it.
        severity: default severity (configurable per type), one of SEVERITY_ORDER.
        anchor: its section in docs/rules.md.
        meaning: one sentence: what it means for the people reading the findings.
        detail: template of the `detail` sentence; `{name}` is a findings column, a fact or a
            fact's view (sinks.finding_rows.VIEWS_OF_FACTS).
        facts: names of the kernel's facts for this type, in the kernel's slot order (a name has
            the same slot in every type, `FACT_<NAME>`).
        evidence: the facts (or columns, or views) that go into the `evidence` map.
        kafka_error: the error a leader returns, when it is always the same.
        raised_by: REPLAY (the kernel), ACKS or LIST_OFFSETS.
        mark: how the report's producer plot draws it (MARK_GAP: the sequences below are
            missing; MARK_DUPLICATE: the earlier batch holds the same sequences; ...).
        offsets_in_log: False when its offsets are not a batch of the log (an acknowledgement, a
            failed send), so the report does not draw them as one.
        previous_offset_means: what its `previous_offset` points at, as the report says it.
    """

    name: str
    code: int
    severity: str
    anchor: str
    meaning: str
    detail: str
    facts: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    kafka_error: str | None = None
    raised_by: str = REPLAY
    mark: str = MARK_OTHER
    offsets_in_log: bool = True
    previous_offset_means: str = "the earlier batch"

    @property
    def spec_ref(self) -> str:
        """Where the rule is stated: a section of the repository's rules document."""
        return f"{RULES_DOC}#{self.anchor}"


_TYPES = [
    FindingType(
        "OFFSET_OVERLAP",
        1,
        "CRITICAL",
        "offset-overlap",
        "Two batches claim the same offsets: corruption or a bad export.",
        "Batch {base_offset}-{last_offset} starts at or below offset {previous_offset}, already "
        "covered by an earlier batch of this partition: two batches claim the same offsets.",
        previous_offset_means="the earlier batch claiming these offsets",
    ),
    FindingType(
        "OFFSET_GAP",
        21,
        "CRITICAL",
        "offset-gap",
        "Offsets between two batches are in no batch: records lost, or segments missing from the "
        "export.",
        "Offsets {first_missing_offset}-{last_missing_offset} are in no batch: batch "
        "{base_offset}-{last_offset} follows offset {previous_offset}, and a log that was not "
        "compacted holds every offset.",
        facts=("first_missing_offset", "last_missing_offset"),
        evidence=("first_missing_offset", "last_missing_offset"),
        previous_offset_means="the highest offset of the earlier batches",
    ),
    FindingType(
        "LEADER_EPOCH_REGRESSION",
        2,
        "ERROR",
        "leader-epoch-regression",
        "A batch carries a lower leader epoch than an earlier one: a diverged suffix.",
        "Batch at offset {base_offset} carries leader epoch {leader_epoch}, below leader epoch "
        "{max_leader_epoch} of an earlier batch: the log holds a suffix written by an older "
        "leader.",
        facts=("max_leader_epoch", "leader_epoch"),
        evidence=("max_leader_epoch", "leader_epoch"),
    ),
    FindingType(
        "CORRUPT_BATCH",
        3,
        "ERROR",
        "corrupt-batch",
        "The batch failed CRC-32C verification.",
        "Batch {base_offset}-{last_offset} failed CRC-32C verification: its bytes changed after "
        "it was written.",
        kafka_error="CORRUPT_MESSAGE",
    ),
    FindingType(
        "LEADER_EPOCH_MISMATCH",
        4,
        "ERROR",
        "leader-epoch-mismatch",
        "A batch's leader epoch contradicts the partition's leader-epoch checkpoint.",
        "Batch at offset {base_offset} carries leader epoch {leader_epoch}, but the leader-epoch "
        "checkpoint says epoch {checkpoint_epoch} started at offset {previous_offset} and was "
        "still in force.",
        facts=("checkpoint_epoch", "leader_epoch"),
        evidence=("checkpoint_epoch", "leader_epoch"),
        previous_offset_means="where the checkpoint's epoch starts",
    ),
    FindingType(
        "REPLICA_DIVERGENCE",
        5,
        "CRITICAL",
        "replica-divergence",
        "Another replica holds a different batch below the high watermark.",
        "Replica {replica} holds batch {base_offset}-{last_offset} (producer {producer_id}, "
        "sequence {base_sequence}) where the audited replica holds batch {previous_offset}-"
        "{primary_last_offset} (producer {primary_producer_id}, sequence "
        "{primary_base_sequence}), below the high watermark {high_watermark}.",
        facts=(
            "primary_last_offset",
            "primary_producer_id",
            "primary_base_sequence",
            "high_watermark",
        ),
        evidence=("replica", "high_watermark"),
        previous_offset_means="the audited replica's batch",
    ),
    FindingType(
        "DUPLICATE_BATCH",
        6,
        "CRITICAL",
        "duplicate-batch",
        "The same producer and epoch wrote the same sequence range twice: consumers see those "
        "records twice.",
        "Producer {producer_id} epoch {producer_epoch} wrote sequences {base_sequence}-"
        "{last_sequence} again at offset {base_offset}; they were first written at offset "
        "{previous_offset}, so consumers see these records twice.",
        mark=MARK_DUPLICATE,
    ),
    FindingType(
        "SEQUENCE_GAP",
        7,
        "CRITICAL",
        "sequence-gap",
        "Sequences are missing between two batches of one producer epoch.",
        "Producer {producer_id} epoch {producer_epoch} jumped from sequence {state_last_sequence} "
        "to {base_sequence}: {missing_sequences} sequence(s) are missing from the log.",
        facts=("state_last_sequence", "missing_sequences"),
        evidence=("missing_sequences",),
        kafka_error="OUT_OF_ORDER_SEQUENCE_NUMBER",
        mark=MARK_GAP,
    ),
    FindingType(
        "SEQUENCE_OVERLAP",
        8,
        "ERROR",
        "sequence-overlap",
        "A batch starts at or below the producer's last sequence without repeating a batch.",
        "Producer {producer_id} epoch {producer_epoch} wrote sequences {base_sequence}-"
        "{last_sequence}, overlapping its last sequence {state_last_sequence} without repeating "
        "a batch exactly.",
        facts=("state_last_sequence",),
        kafka_error="OUT_OF_ORDER_SEQUENCE_NUMBER",
    ),
    FindingType(
        "SEQUENCE_RESET",
        9,
        "ERROR",
        "sequence-reset",
        "The sequence went back to 0 without an epoch bump.",
        "Producer {producer_id} epoch {producer_epoch} restarted at sequence 0 after sequence "
        "{state_last_sequence} without an epoch bump.",
        facts=("state_last_sequence",),
        kafka_error="OUT_OF_ORDER_SEQUENCE_NUMBER",
    ),
    FindingType(
        "NEW_EPOCH_NONZERO_SEQUENCE",
        10,
        "ERROR",
        "new-epoch-nonzero-sequence",
        "The first batch of a higher epoch does not start at sequence 0.",
        "Producer {producer_id} moved from epoch {current_epoch} to {producer_epoch} but its "
        "first batch starts at sequence {base_sequence}, not 0.",
        facts=("current_epoch",),
        kafka_error="OUT_OF_ORDER_SEQUENCE_NUMBER",
        # A first batch that should have started at sequence 0: the sequences below it are
        # missing.
        mark=MARK_GAP,
    ),
    FindingType(
        "UNKNOWN_PRODUCER",
        11,
        "CRITICAL",
        "unknown-producer",
        "A producer without state starts at a sequence other than 0.",
        "Producer {producer_id} has no state here (first seen, or expired) and starts at "
        "sequence {base_sequence} instead of 0; the log starts at offset {log_start}.",
        facts=("log_start",),
        # A first batch that should have started at sequence 0: the sequences below it are
        # missing.
        mark=MARK_GAP,
    ),
    FindingType(
        "FENCED_PRODUCER_EPOCH",
        12,
        "CRITICAL",
        "fenced-producer-epoch",
        "A batch or marker below the producer's current epoch: a zombie write.",
        "Producer {producer_id} wrote at epoch {producer_epoch} after epoch {current_epoch}: a "
        "zombie write the leader would have rejected with INVALID_PRODUCER_EPOCH.",
        facts=("current_epoch",),
        evidence=("current_epoch",),
        kafka_error="INVALID_PRODUCER_EPOCH",
        mark=MARK_FENCED,
    ),
    FindingType(
        "COORDINATOR_FENCED",
        13,
        "ERROR",
        "coordinator-fenced",
        "A transaction marker from an older coordinator epoch.",
        "{control_type} marker of producer {producer_id} carries coordinator epoch "
        "{coordinator_epoch}, below the {coordinator_epoch_seen} of an earlier marker.",
        facts=("coordinator_epoch", "coordinator_epoch_seen"),
        evidence=("coordinator_epoch_seen",),
        kafka_error="TRANSACTION_COORDINATOR_FENCED",
        mark=MARK_FENCED,
    ),
    FindingType(
        "INVALID_TXN_STATE",
        14,
        "CRITICAL",
        "invalid-txn-state",
        "A non-transactional batch while the producer's transaction is open.",
        "Producer {producer_id} wrote a non-transactional batch while its transaction opened at "
        "offset {previous_offset} was still open.",
        kafka_error="INVALID_TXN_STATE",
        previous_offset_means="the first batch of the open transaction",
    ),
    FindingType(
        "HANGING_TRANSACTION",
        15,
        "ERROR",
        "hanging-transaction",
        "A transaction still open at the end of the log and older than the transaction timeout "
        "plus the broker's grace: it pins the last stable offset.",
        "Producer {producer_id} (epoch {producer_epoch}) has a transaction open since offset "
        "{first_offset} for {age_ms} ms, past the transaction timeout plus grace: it pins the "
        "last stable offset, so read_committed consumers stall.",
        facts=("age_ms", "first_offset", "measured_at_export"),
        evidence=("age_ms", "first_offset", "age_measured_at"),
    ),
    FindingType(
        "ACKED_WRITE_LOST",
        16,
        "CRITICAL",
        "acked-write-lost",
        "A send acknowledged at an offset inside the exported log is not in the log.",
        "Producer {producer_id} epoch {producer_epoch} was acknowledged sequence {base_sequence} "
        "at offset {base_offset} on {acknowledged_at}, but the log (offsets {log_start_offset} to "
        "{log_last_offset}) holds no batch of that producer, epoch and sequence: an acknowledged "
        "write is lost.",
        facts=("acknowledged_ms", "log_start_offset", "log_end_offset"),
        evidence=("acknowledged_at", "log_start_offset", "log_end_offset"),
        mark=MARK_LOST,
        offsets_in_log=False,
    ),
    FindingType(
        "ACKED_OFFSET_MISMATCH",
        17,
        "CRITICAL",
        "acked-offset-mismatch",
        "The log holds the acknowledged batch at another offset than the one acknowledged.",
        "Producer {producer_id} epoch {producer_epoch} sequence {base_sequence} was acknowledged "
        "at offset {base_offset} on {acknowledged_at}, but the log holds that batch at offset "
        "{previous_offset}: consumers and the application disagree on where the records are.",
        facts=("acknowledged_ms", "log_batches"),
        evidence=("acknowledged_at", "log_batches"),
        mark=MARK_LOST,
        offsets_in_log=False,
        previous_offset_means="where the log holds the acknowledged batch",
    ),
    FindingType(
        "CLIENT_SEQUENCE_ERROR",
        18,
        "CRITICAL",
        "client-sequence-error",
        "A send failed with a sequence error the log does not explain.",
        "{kafka_error} for {topic}-{partition}, producer {producer_id} epoch {producer_epoch} "
        "sequence {base_sequence} at {event_time}{explanation}",
        # Lowered to INFO by a benign cause (LOG_START: the produce response's log start offset
        # shows retention removed the producer's state); UNEXPLAINED keeps this level.
        raised_by=ACKS,
        offsets_in_log=False,
        previous_offset_means="the producer's last acknowledged offset",
    ),
    FindingType(
        "LIST_OFFSETS_REGRESSION",
        19,
        "CRITICAL",
        "list-offsets-regression",
        "An observed offset went below an earlier one.",
        # {asked}: the spec (and isolation) asked; {recovery}: whether and when a later answer was
        # back at the earlier offset, a clause of the rule's own (evidence_rules/list_offsets.py).
        "ListOffsets {asked} of {topic}-{partition} went back from {previous_offset} (leader epoch "
        "{earlier_max_leader_epoch}, {earlier_max_observed_at}) to {base_offset} (leader epoch "
        "{leader_epoch}, {observed_at}){recovery}",
        # Lowered to WARNING by its benign causes (LEADER_CHANGE_TRANSIENT,
        # EARLIEST_ACROSS_FAILOVER); TRUNCATION keeps this level.
        raised_by=LIST_OFFSETS,
        previous_offset_means="the earlier, higher observation",
    ),
    FindingType(
        "ACKED_DATA_MISSING_FROM_LOG",
        20,
        "CRITICAL",
        "acked-data-missing-from-log",
        "A latest offset observed before the export is above the exported log's end.",
        "ListOffsets {asked} of {topic}-{partition} answered {base_offset} at {observed_at} "
        "(highest {max_observed_offset}) but the exported log ends at {exported_log_end_offset}: "
        "offsets {exported_log_end_offset}-{last_missing_offset} were acknowledged and are "
        "missing from the export",
        raised_by=LIST_OFFSETS,
    ),
]
# The processing audit's types: the group coordinator's offsets replayed
# (processing/offset_metadata_manager.py). Their topic and partition are the __consumer_offsets
# partition and their offsets the OffsetCommit record's, where the evidence is in the log.
_TYPES += [
    FindingType(
        "OFFSET_REWIND",
        22,
        "CRITICAL",
        "offset-rewind",
        "A group's committed offset went down: the records between are processed again.",
        "Group {group_id}'s committed offset of {committed_topic}-{committed_partition} went "
        "down from {previous_committed_offset} (record {previous_offset}) to {committed_offset} "
        "(record {base_offset}, {kind}): cause {cause}.",
        evidence=(
            "group_id", "committed_topic", "committed_partition", "committed_offset",
            "previous_committed_offset", "kind", "marker_offset",
        ),
        raised_by=PROCESSING,
        previous_offset_means="the record of the higher offset it replaced",
    ),
    FindingType(
        "MIXED_OFFSET_COMMITS",
        23,
        "CRITICAL",
        "mixed-offset-commits",
        "A group commits one partition's offsets both plainly and in transactions.",
        "Group {group_id} commits {committed_topic}-{committed_partition} both plainly and in "
        "transactions (record {base_offset}, {kind}, offset {committed_offset}): cause "
        "{cause}{aborted_range}.",
        evidence=(
            "group_id", "committed_topic", "committed_partition", "committed_offset", "kind",
            "aborted_from", "aborted_to",
        ),
        raised_by=PROCESSING,
        previous_offset_means="the aborted transactional record",
    ),
    FindingType(
        "CONCURRENT_OFFSET_OWNERS",
        24,
        "CRITICAL",
        "concurrent-offset-owners",
        "Two producers committed one group's offsets of a partition in overlapping transactions.",
        "Producers {other_producer_id} (record {previous_offset}) and {producer_id} (record "
        "{base_offset}) both held a pending offset of group {group_id}'s "
        "{committed_topic}-{committed_partition} at once, and both transactions committed.",
        evidence=(
            "group_id", "committed_topic", "committed_partition", "committed_offset",
            "other_producer_id", "marker_offset",
        ),
        raised_by=PROCESSING,
        previous_offset_means="the other producer's record",
    ),
    FindingType(
        "TORN_TRANSACTION",
        25,
        "CRITICAL",
        "torn-transaction",
        "A partition of a transaction did not get the outcome its coordinator decided.",
        "Transactional id {transactional_id} (producer {producer_id}, epoch {producer_epoch}) was "
        "prepared to {decision} (__transaction_state-{transaction_log_partition} offset "
        "{transaction_log_offset}), but {topic}-{partition} {marker_says}: {consequence}.",
        evidence=(
            "transactional_id", "decision", "marker_type", "marker_offset",
            "transaction_log_partition", "transaction_log_offset", "group_id", "committed_topic",
            "committed_partition", "committed_offset", "offsets_partition",
        ),
        raised_by=PROCESSING,
        # In __consumer_offsets-{offsets_partition}: the finding's own partition, or for an
        # output partition the one where the transaction's marker decided the commit.
        previous_offset_means="the offset commit the transaction's marker decided",
    ),
    FindingType(
        "UNVERIFIABLE",
        26,
        "INFO",
        "unverifiable",
        "The export cannot decide a processing check: it neither passes nor fails.",
        "{check} cannot be decided for {topic}-{partition} ({scope}): {reason}.",
        evidence=(
            "check", "transactional_id", "transactions", "transaction_log_partition",
            "transaction_log_offset", "group_id", "groups",
        ),
        raised_by=PROCESSING,
        offsets_in_log=False,
    ),
    FindingType(
        "READ_PAST_LSO",
        27,
        "WARNING",
        "read-past-lso",
        "A group committed past a transaction that was still open: it read uncommitted records.",
        "Group {group_id} committed {committed_topic}-{committed_partition} at offset "
        "{committed_offset} (record {base_offset}, {kind}), past offset "
        "{transaction_first_offset} where producer {transaction_producer_id}'s transaction was "
        "still open: {transaction_end}.",
        evidence=(
            "group_id", "committed_topic", "committed_partition", "committed_offset", "kind",
            "committed_at", "transaction_producer_id", "transaction_first_offset",
            "transaction_marker_offset", "transaction_outcome",
        ),
        raised_by=PROCESSING,
    ),
    FindingType(
        "ABORTED_READ",
        28,
        "CRITICAL",
        "aborted-read",
        "A group committed past a transaction that was open then and later aborted: it processed "
        "records that were never committed.",
        "Group {group_id} committed {committed_topic}-{committed_partition} at offset "
        "{committed_offset} (record {base_offset}, {kind}), past offset "
        "{transaction_first_offset} where producer {transaction_producer_id}'s transaction was "
        "open and then aborted: {transaction_end}.",
        evidence=(
            "group_id", "committed_topic", "committed_partition", "committed_offset", "kind",
            "committed_at", "transaction_producer_id", "transaction_first_offset",
            "transaction_marker_offset", "transaction_outcome",
        ),
        raised_by=PROCESSING,
    ),
    FindingType(
        "COMMIT_BEYOND_LOG",
        29,
        "CRITICAL",
        "commit-beyond-log",
        "A group committed an offset beyond its partition's log end: progress over records "
        "that were never there.",
        "Group {group_id} committed {committed_topic}-{committed_partition} at offset "
        "{committed_offset} (record {base_offset}, {kind}), beyond the log's end "
        "{log_end_offset}, which the partition had not passed by its last exported batch.",
        evidence=(
            "group_id", "committed_topic", "committed_partition", "committed_offset", "kind",
            "committed_at", "log_end_offset",
        ),
        raised_by=PROCESSING,
    ),
    FindingType(
        "COMMIT_BELOW_LOG_START",
        30,
        "WARNING",
        "commit-below-log-start",
        "A group's committed offset is below its partition's log start: it restarts from "
        "auto.offset.reset.",
        "Group {group_id}'s committed offset of {committed_topic}-{committed_partition} is "
        "{committed_offset} (record {base_offset}, {kind}), below the log start "
        "{log_start_offset}: the records between were deleted unread by it, and it restarts "
        "from auto.offset.reset.",
        evidence=(
            "group_id", "committed_topic", "committed_partition", "committed_offset", "kind",
            "committed_at", "log_start_offset",
        ),
        raised_by=PROCESSING,
    ),
    FindingType(
        "ZOMBIE_COMMIT",
        31,
        "CRITICAL",
        "zombie-commit",
        "A producer the transaction log had already fenced committed a transaction: a zombie's "
        "outputs or offsets became visible.",
        "Producer {producer_id} (epoch {producer_epoch}) of transactional id {transactional_id} "
        "committed a transaction in {topic}-{partition} (COMMIT marker at offset {base_offset}) "
        "after __transaction_state-{transaction_log_partition} (offset "
        "{transaction_log_offset}, {current_state}) had {fenced_by}.",
        evidence=(
            "transactional_id", "current_producer_id", "current_producer_epoch", "current_state",
            "transaction_log_partition", "transaction_log_offset",
        ),
        raised_by=PROCESSING,
        previous_offset_means="the first offset of the committed transaction",
    ),
    FindingType(
        "HANGING_OFFSET_TRANSACTION",
        32,
        "ERROR",
        "hanging-offset-transaction",
        "A transaction's offset commits are pending past the transaction timeout, and no "
        "coordinator will end it: the group's offsets stay unstable.",
        "Producer {producer_id} has held {pending_offsets} offset commit(s) of group {group_id} "
        "pending in {topic}-{partition} since record {base_offset}, for {open_ms} ms, beyond "
        "the maximum transaction timeout, and {why}: no coordinator will write its marker.",
        evidence=(
            "group_id", "pending_offsets", "open_ms", "transactional_id", "current_state",
            "transaction_log_partition", "transaction_log_offset",
        ),
        raised_by=PROCESSING,
    ),
    FindingType(
        "DUPLICATE_PROCESSING",
        33,
        "CRITICAL",
        "duplicate-processing",
        "A one-to-one processor's transaction processed input that another of its committed "
        "transactions had processed already: its outputs hold that input twice.",
        "Transaction of {transactional_id} (producer {producer_id}, epoch {producer_epoch}) "
        "committed group {group_id}'s offset of {committed_topic}-{committed_partition} at "
        "{committed_offset} (record {base_offset}): {processed_twice}.",
        evidence=(
            "group_id", "committed_topic", "committed_partition", "committed_offset",
            "range_start", "range_end", "covered_to", "input_records", "output_records",
            "transactional_id", "marker_offset", "outcome",
        ),
        raised_by=PROCESSING,
    ),
    FindingType(
        "SKIPPED_INPUT",
        34,
        "CRITICAL",
        "skipped-input",
        "A one-to-one processor's committed offsets passed input that none of its committed "
        "transactions turned into output: that input was never processed.",
        "Transaction of {transactional_id} (producer {producer_id}, epoch {producer_epoch}) "
        "committed group {group_id}'s offset of {committed_topic}-{committed_partition} at "
        "{committed_offset} (record {base_offset}): {never_processed}.",
        evidence=(
            "group_id", "committed_topic", "committed_partition", "committed_offset",
            "range_start", "range_end", "covered_to", "input_records", "output_records",
            "transactional_id", "marker_offset", "outcome",
        ),
        raised_by=PROCESSING,
    ),
]  # fmt: skip
REGISTRY: dict[str, FindingType] = {t.name: t for t in _TYPES}
BY_CODE: dict[int, FindingType] = {t.code: t for t in _TYPES}
assert len(BY_CODE) == len(REGISTRY), "finding type codes must be unique"
assert all(t.severity in SEVERITY_ORDER for t in _TYPES), "default severities are SEVERITY_ORDER's"
# The types the replay kernel raises (the others come from the acknowledgements and ListOffsets
# observations alone).
REPLAYED = tuple(t.name for t in _TYPES if t.raised_by == REPLAY)
RAISED_BY_LIST_OFFSETS = tuple(t.name for t in _TYPES if t.raised_by == LIST_OFFSETS)
RAISED_BY_PROCESSING = tuple(t.name for t in _TYPES if t.raised_by == PROCESSING)
DEFAULT_SEVERITIES: dict[str, str] = {t.name: t.severity for t in _TYPES}


# ------------------------------------------------------------------------------------------------
# The kernel's facts: slots named once
# ------------------------------------------------------------------------------------------------
def _fact_slots(types: Sequence[FindingType]) -> dict[str, int]:
    slots: dict[str, int] = {}
    for kind in types:
        for slot, name in enumerate(kind.facts):
            assert slots.setdefault(name, slot) == slot, (
                f"fact {name!r} of {kind.name} is in slot {slot}, elsewhere in {slots[name]}: a "
                "fact name keeps one slot in every type"
            )
    return slots


# A finding's facts are `FACTS_PER_FINDING` int64 slots the kernel fills (`f.facts[slot]`). A fact
# name has one slot in every type that has it, so the kernel writes `f.facts[FACT_CURRENT_EPOCH]`:
# each fact's slot, as a module-level int (numba reads the kernel's imported globals as
# compile-time constants). The registry's `facts` must put each name at its slot (checked below).
FACT_ACKNOWLEDGED_MS = 0
FACT_AGE_MS = 0
FACT_CHECKPOINT_EPOCH = 0
FACT_COORDINATOR_EPOCH = 0
FACT_CURRENT_EPOCH = 0
FACT_FIRST_MISSING_OFFSET = 0
FACT_LOG_START = 0
FACT_MAX_LEADER_EPOCH = 0
FACT_PRIMARY_LAST_OFFSET = 0
FACT_STATE_LAST_SEQUENCE = 0
FACT_COORDINATOR_EPOCH_SEEN = 1
FACT_FIRST_OFFSET = 1
FACT_LAST_MISSING_OFFSET = 1
FACT_LEADER_EPOCH = 1
FACT_LOG_BATCHES = 1
FACT_LOG_START_OFFSET = 1
FACT_MISSING_SEQUENCES = 1
FACT_PRIMARY_PRODUCER_ID = 1
FACT_LOG_END_OFFSET = 2
FACT_MEASURED_AT_EXPORT = 2
FACT_PRIMARY_BASE_SEQUENCE = 2
FACT_HIGH_WATERMARK = 3
# Each fact name's slot, from the constants above.
SLOT_OF_FACT: dict[str, int] = {
    name.removeprefix("FACT_").lower(): slot
    for name, slot in list(globals().items())
    if name.startswith("FACT_")
}
assert _fact_slots(_TYPES) == SLOT_OF_FACT, (
    "each fact of the registry needs a FACT_<NAME> constant equal to its slot, and each constant "
    "a type that has the fact"
)
FACTS_PER_FINDING = max(len(t.facts) for t in _TYPES)


def configured_severity(finding_type: str, config: AuditConfig) -> str:
    """The severity the configuration gives a type, else the registry's default."""
    return (config.severity or {}).get(finding_type, REGISTRY[finding_type].severity)
