"""Consume-transform-produce on real brokers: the logs an exactly-once processing audit reads.

The processor is Kafka's own `TransactionalMessageCopier` (kafka-tools of each release, the one
Kafka's `transactions_test.py` bounces): it reads an input partition at read_committed and, per
poll, begins a transaction, copies the records to the same partition of an output topic, adds the
consumer's position for its group to the transaction (`sendOffsetsToTransaction`: a
TxnOffsetCommit, an OffsetCommit record in a transactional batch of `__consumer_offsets`) and
commits, or with `--enable-random-aborts` aborts one transaction in three and seeks back to the
group's committed offset. Its standard output is one JSON line per poll (`totalProcessed`).

| scenario | what happens |
|---|---|
| `copier` | an idempotent producer's input copied by a copier bounced as |
| | transactions_test.py does: stopped (SIGTERM) once and killed (SIGKILL) once inside a |
| | transaction, restarted with the same transactional.id (once the coordinator aborted the |
| | killed one's transaction at its timeout) until the group committed the input's end |
| `admin_reset` | a copier in group mode copies its input to the end and leaves the group |
| | (Empty); `kafka-consumer-groups --reset-offsets --to-earliest --execute` commits 0 |
| `auto_commit` | a copier commits half the input in transactions, then a librdkafka |
| | consumer of the same group reads the rest with enable.auto.commit: plain commits |
| `aborted_read` | a librdkafka consumer at read_uncommitted commits past a transaction |
| | still open, which then commits, and past one which then aborts |
| `two_owners` | two librdkafka processors with different transactional ids copy one input |
| | partition's records at once for one group; both add its offset, then both commit |
| `skipped_owner` | as `two_owners`, the second one committing first: the coordinator skips |
| | the first one's offset commit, the older record, at its marker (KAFKA-14505) |
| `commit_beyond_log` | a librdkafka consumer reads its input to the end and commits an offset |
| | 1000 beyond it (the coordinator does not check); more input is written after |
| `commit_below_log_start` | a librdkafka consumer commits 10; delete_records moves the input's |
| | log start past it, to a segment's base, and retention deletes the segments before |
| `forward_reset` | a copier in group mode copies its input to the end and leaves; more input |
| | comes; `kafka-consumer-groups --reset-offsets --shift-by 20 --execute` skips part of it; |
| | a copier with the same transactional.id copies the rest |
| `rewind_reprocess` | a copier in group mode copies its input to the end and leaves; |
| | `kafka-consumer-groups --reset-offsets --to-earliest --execute`; a copier with the same |
| | transactional.id copies the whole input again |
| `late_commit` | a librdkafka consumer, the group's member, commits its input's end, then |
| | half of it |
| `transactional_rewind` | a librdkafka processor commits half its input in a transaction, is |
| | put back to a quarter and commits a transaction from there |
| `aborted_range` | a librdkafka processor commits a transaction; inside the next, its |
| | consumer commits that one's input plainly; that one aborts |
| `expired_reset` | a librdkafka consumer commits its input's end and leaves; the group is |
| | deleted (deleteConsumerGroups); a new consumer starts from the earliest offset and commits |
| `compacted_input` | the cleaner compacts an input; a copier copies it from offset 0 (what |
| | the cleaner left), then the input written since |
| `unowned_commit` | a raw TxnOffsetCommit (kafka-python's protocol classes) with an |
| | idempotent producer's id, which no transactional.id owns, is accepted while the brokers' |
| | transaction.partition.verification.enable is off: no coordinator will end it |
| `two_phase_commit` | 4.x only: a KIP-939 two-phase-commit participant (kafka-python, its |
| | InitProducerId asking for Enable2Pc) copies its input and adds its offsets, and exits: the |
| | transaction stays open, with the timeout Integer.MAX_VALUE its coordinator gave it |
| `consumer_protocol_reset` | 4.x only: a librdkafka consumer of a KIP-848 group |
| | (group.protocol=consumer) reads its input to the end, commits and leaves (Empty); |
| | `kafka-consumer-groups --reset-offsets --to-earliest --execute` commits 0 |

Each scenario has its own topics, group and transactional.id, named after it and the release (one
that only consumes has its input and no transactional.id). A cluster's `__consumer_offsets` and
`__transaction_state` are shared by everything on it, so a release's scenarios play on one
cluster and one export holds them all (`processing-<release>`): their input and output topics and
every partition of the two coordinator topics, copied once at the end; no other export holds a
coordinator partition. Its `facts` say which group, ids and
topics belong to which scenario (`Played`), and what Kafka answered at the end of each.

`two_phase_commit` plays on 4.x only (`PROCESSING_4`, on a cluster with
`TWO_PHASE_COMMIT_SETTINGS`): 3.9 has no InitProducerId version 6. That cluster's group
coordinator compresses `__consumer_offsets` with zstd (`PROCESSING_4_SETTINGS`).
`consumer_protocol_reset` plays on 4.x only (`PROCESSING_4`): librdkafka's consumer protocol
needs ConsumerGroupHeartbeat version 1 (Kafka 4.0's), and 3.9's KIP-848 preview
(`group.coordinator.rebalance.protocols=classic,consumer`) has only version 0: librdkafka says
"ConsumerGroupHeartbeatRequest not supported by broker" and never joins.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eos_audit.processing.hanging_offsets import TWO_PHASE_COMMIT_TIMEOUT_MS
from tests.fixtures.segment_builder import kafka_python_view, split_entries
from tests.jars import JarSet
from tests.kafka.clients import CLIENTS, rdkafka_producer, rdkafka_send
from tests.kafka.cluster import TOOL_JVM, Cluster

COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"
GROUPS_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
COORDINATOR_TOPICS = ("__consumer_offsets", "__transaction_state")
# Records per transaction (the copier's max.poll.records too): a few hundred input records make
# some thirty transactions, enough for random aborts and for a bounce to land mid-copy.
TRANSACTION_SIZE = 10
# The copier's transaction.timeout.ms, a minute by default: a killed copier's transaction stays
# open until the coordinator aborts it at this timeout, which the scenario waits for. Each of the
# copier's transactions lasts milliseconds, but a loaded machine can stall one for seconds, and
# one that outlives its timeout while its copier lives meets a race in Kafka 4.1.1's coordinator:
# an EndTxn arriving while the coordinator's own timeout abort is pending (PREPARE_EPOCH_FENCE)
# fails with IllegalStateException, and the copier commits nothing more. So the timeout is kept
# well above any stall seen on a loaded 2-core machine (5 s was not).
TRANSACTION_TIMEOUT_MS = 20_000


@dataclass
class Played:
    """What one processing scenario did and what Kafka's tools said at its end.

    `events` are (time in ms, what happened, details) in the order they happened; `committed` and
    `log_end` map "topic:partition" to the group's committed offset (the admin API's
    listConsumerGroupOffsets, as Kafka materialized it) and to the input's log end offset.
    """

    scenario: str
    group: str
    transactional_ids: list[str]
    input_topic: str
    output_topic: str
    partitions: int
    input_records: int
    events: list[tuple[int, str, dict]] = field(default_factory=list)
    committed: dict[str, int] = field(default_factory=dict)
    log_end: dict[str, int] = field(default_factory=dict)
    tool_output: dict[str, str] = field(default_factory=dict)
    transaction_timeout_ms: int = TRANSACTION_TIMEOUT_MS  # what its producers asked for

    def event(self, what: str, **details: object) -> None:
        """Note that `what` happened now."""
        self.events.append((_now_ms(), what, details))


def names(scenario: str, release: str) -> dict[str, str]:
    """A scenario's input and output topics, group and transactional.id on a release's cluster."""
    return {
        "input_topic": f"{scenario}-in-{release}",
        "output_topic": f"{scenario}-out-{release}",
        "group": f"{scenario}-group-{release}",
        "transactional_id": f"{scenario}-tx-{release}",
    }


class Copier:
    """One TransactionalMessageCopier JVM, its JSON progress lines read as they come."""

    def __init__(
        self,
        jars: JarSet,
        bootstrap: str,
        played: Played,
        transactional_id: str,
        *,
        group_mode: bool = False,
        max_messages: int = -1,
    ) -> None:
        # Every copier aborts one transaction in three at random, as in transactions_test.py.
        options = [
            "--input-topic", played.input_topic, "--input-partition", "0",
            "--output-topic", played.output_topic, "--broker-list", bootstrap,
            "--consumer-group", played.group, "--transactional-id", transactional_id,
            "--transaction-size", str(TRANSACTION_SIZE),
            "--transaction-timeout", str(TRANSACTION_TIMEOUT_MS),
            "--max-messages", str(max_messages), "--enable-random-aborts",
        ]  # fmt: skip
        if group_mode:
            # Subscribed (the group's member, every partition of the input) rather than assigned
            # one partition; the offsets go with the consumer's group metadata (KIP-447).
            options += ["--group-mode", "--use-group-metadata"]
        self.progress: list[dict] = []
        self.process = subprocess.Popen(
            ["java", *TOOL_JVM, "-cp", jars.classpath(), COPIER, *options],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            text=True,
        )  # fmt: skip
        CLIENTS.add(self.process)
        self.played = played
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        played.event("copier started", transactional_id=transactional_id, pid=self.process.pid)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            # Only the JSON lines: a release without a logging configuration prints log4j's
            # warnings there too.
            if line.startswith("{"):
                self.progress.append(json.loads(line))

    @property
    def processed(self) -> int:
        """Records this process copied in committed transactions (its last progress line)."""
        return self.progress[-1].get("totalProcessed", 0) if self.progress else 0

    def wait_for(self, records: int, timeout: float = 60.0) -> None:
        """Wait until this process has committed the copies of `records` input records.

        Raises:
            RuntimeError: the copier ended first (it copied everything, or failed).
            TimeoutError: not within `timeout` seconds.
        """
        deadline = time.monotonic() + timeout
        while self.processed < records:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the copier ended (exit {self.process.returncode}) after {self.processed} "
                    f"records, before {records}: nothing left to bounce it in"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(f"the copier copied {self.processed} of {records} records")
            time.sleep(0.02)

    def stop(self, signum: int, then: int | None = None) -> int:
        """SIGTERM (its shutdown hook closes the producer and consumer) or SIGKILL, and the
        signal `then` if any (SIGCONT for a stopped process); its exit code."""
        processed = self.processed
        os.kill(self.process.pid, signum)
        if then is not None and self.process.poll() is None:
            os.kill(self.process.pid, then)
        code = self._end(30)
        self.played.event(
            "copier " + ("stopped" if signum == signal.SIGTERM else "killed"),
            signal=signal.Signals(signum).name, processed=processed, exit=code,
        )  # fmt: skip
        return code

    def finish(self, timeout: float = 120.0, check: bool = True) -> int:
        """Wait for the copier to end by itself (it copied everything); its exit code.

        Raises:
            RuntimeError: it failed (unless not `check`).
        """
        code = self._end(timeout)
        self.played.event("copier finished", processed=self.processed, exit=code)
        if check and code != 0:
            raise RuntimeError(f"the copier exited {code} after {self.processed} records")
        return code

    def _end(self, timeout: float) -> int:
        try:
            self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(10)
            CLIENTS.discard(self.process)
            self._reader.join(10)
        return self.process.returncode


def _now_ms() -> int:
    return int(time.time() * 1000)


def _start(
    cluster: Cluster, scenario: str, partitions: int, records: int, output: bool = True,
    **input_configs: str,
) -> Played:  # fmt: skip
    """The scenario's topics (the input's with topic configs `input_configs`), and its input
    written by an idempotent producer (librdkafka).

    Without `output` the scenario only consumes: its input is its one topic (an empty output
    topic would be a partition folder with no batch in the export) and it has no
    transactional.id.
    """
    named = names(scenario, cluster.jars.name)
    transactional_id = named.pop("transactional_id")
    if not output:
        named["output_topic"] = named["input_topic"]
    played = Played(scenario, transactional_ids=[transactional_id] if output else [],
                    partitions=partitions, input_records=records, **named)  # fmt: skip
    # The copier writes each record to its input partition's number in the output topic.
    cluster.create_topic(played.input_topic, partitions=partitions, **input_configs)
    if output:
        cluster.create_topic(played.output_topic, partitions=partitions)
    producer = rdkafka_producer(cluster.bootstrap)
    per_partition, per_batch = records // partitions, 30
    for partition in range(partitions):
        for start in range(0, per_partition, per_batch):
            rdkafka_send(producer, played.input_topic, partition,
                         min(per_batch, per_partition - start))  # fmt: skip
    played.event("input written", records=per_partition * partitions)
    return played


def _admin(cluster: Cluster):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def committed_offsets(cluster: Cluster, group: str) -> dict[str, int]:
    """The group's committed offsets as the broker answers listConsumerGroupOffsets."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    # The client is kept until its answer came: a dropped client never completes its futures.
    admin = _admin(cluster)
    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    listed = answer[group].result(30).topic_partitions
    return {f"{tp.topic}:{tp.partition}": tp.offset for tp in listed if tp.offset >= 0}


def log_ends(cluster: Cluster, topic: str, partitions: int) -> dict[str, int]:
    """Each partition's log end offset (ListOffsets latest, at read_uncommitted: every record and
    marker)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    wanted = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    admin = _admin(cluster)
    answers = admin.list_offsets(wanted, request_timeout=30)
    return {f"{tp.topic}:{tp.partition}": done.result(30).offset for tp, done in answers.items()}


def _settle(cluster: Cluster, played: Played) -> Played:
    """Record the group's committed offsets and the input's log end as Kafka reports them."""
    played.committed = committed_offsets(cluster, played.group)
    played.log_end = log_ends(cluster, played.input_topic, played.partitions)
    played.event("offsets listed", committed=played.committed, log_end=played.log_end)
    return played


def _reset_offsets(cluster: Cluster, played: Played, *how: str, within_s: float = 60) -> None:
    """`kafka-consumer-groups --reset-offsets <how> --execute` on the scenario's group and input
    (the group must be empty); what the tool printed, the offsets it committed, is kept.

    The tool commits only once the coordinator holds the group Empty, and otherwise prints why
    and exits 0 ("can only be reset if the group ... is inactive"): a consumer's LeaveGroup may
    still be on its way. It is asked again until it prints the offsets it committed.
    """
    deadline = time.monotonic() + within_s
    while True:
        printed = cluster.tool(
            GROUPS_COMMAND, "--bootstrap-server", cluster.bootstrap, "--group", played.group,
            "--topic", played.input_topic, "--reset-offsets", *how, "--execute",
        )  # fmt: skip
        if printed.split()[:4] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]:
            played.tool_output["reset"] = printed
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"kafka-consumer-groups reset nothing of {played.group}: {printed}")
        time.sleep(1)


# --- the scenarios ---------------------------------------------------------------------------


# The v2 batch header's attributes (docs/formats.md#record-batch-v2) and their two flags.
ATTRIBUTES_AT, TRANSACTIONAL, CONTROL = 21, 0x10, 0x20


def in_transaction(cluster: Cluster, partition: str) -> bool:
    """Whether the last batch of `partition` (`topic-N`) on the broker is transactional data:
    a transaction wrote there and its marker is not written yet."""
    logs = sorted((cluster.brokers[0].log_dir / partition).glob("*.log"))
    entries = split_entries(logs[-1].read_bytes()) if logs else []
    if not entries:
        return False
    attributes = struct.unpack_from(">h", entries[-1][1], ATTRIBUTES_AT)[0]
    return bool(attributes & TRANSACTIONAL) and not attributes & CONTROL


def _stop_inside_a_transaction(cluster: Cluster, running: Copier, signum: int) -> None:
    """Send `signum` while a transaction of the copier is open: it wrote to the output, and no
    marker ended it.

    The copier prints its progress between two transactions, so a signal sent on a progress line
    would find none open, and one sent when the output shows a transaction's records may come
    after its EndTxn: a transaction lasts milliseconds. So the copier is frozen (SIGSTOP) once its
    transaction shows, and signalled only if the transaction is still open a moment later, when
    whatever it had sent is done; else it goes on (SIGCONT) to its next transaction.
    """
    partition = f"{running.played.output_topic}-0"
    deadline = time.monotonic() + 60
    while True:
        if running.process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"no transaction of the copier was seen open in {partition}")
        if not in_transaction(cluster, partition):
            time.sleep(0.002)
            continue
        os.kill(running.process.pid, signal.SIGSTOP)
        time.sleep(1.0)
        if in_transaction(cluster, partition):
            break
        os.kill(running.process.pid, signal.SIGCONT)
    # A stopped JVM handles SIGTERM (its shutdown hook) once continued; SIGKILL ends it as it is.
    running.stop(signum, then=signal.SIGCONT)
    # Whether the copier's end left the transaction open: after SIGKILL always, until the
    # coordinator aborts it at its timeout; after SIGTERM as the shutdown hook's close left it.
    running.played.events[-1][2]["left_open"] = in_transaction(cluster, partition)


def copier(cluster: Cluster) -> Played:
    """An input copied by a copier stopped once and killed once inside a transaction, restarted
    with the same transactional.id until the group has committed the input's end."""
    played = _start(cluster, "copier", partitions=1, records=300)
    (transactional_id,) = played.transactional_ids
    # As transactions_test.py's bounce: the same transactional.id each time, so the new
    # producer's initTransactions fences the last one. A quarter of the input copied each time.
    for signum in (signal.SIGTERM, signal.SIGKILL):
        running = Copier(cluster.jars, cluster.bootstrap, played, transactional_id)
        running.wait_for(played.input_records // 4)
        _stop_inside_a_transaction(cluster, running, signum)
    # The killed copier's transaction is left to the coordinator, which aborts it once its
    # timeout passes. A copier started at once could instead abort it sooner by its
    # initTransactions when no offsets were added yet (none to wait for): which one wins would
    # depend on how fast its JVM starts.
    output = f"{played.output_topic}-0"
    deadline = time.monotonic() + TRANSACTION_TIMEOUT_MS / 1000 + 30
    if played.events[-1][2]["left_open"]:
        while in_transaction(cluster, output):
            if time.monotonic() > deadline:
                raise TimeoutError("the coordinator did not abort the killed copier's transaction")
            time.sleep(0.05)
        played.event("transaction aborted", partition=output)
    # Restarted as transactions_test.py restarts a copier that failed: one whose transaction
    # outlived its timeout on a loaded machine is fenced, and exits.
    for _ in range(3):
        Copier(cluster.jars, cluster.bootstrap, played, transactional_id).finish(check=False)
        _settle(cluster, played)
        if played.committed == played.log_end:
            return played
    raise RuntimeError(f"the copier left {played.committed}, the input ends at {played.log_end}")


def admin_reset(cluster: Cluster) -> Played:
    """A copier in group mode copies to the end and leaves; an operator resets the group to 0."""
    played = _start(cluster, "admin_reset", partitions=2, records=100)
    (transactional_id,) = played.transactional_ids
    Copier(cluster.jars, cluster.bootstrap, played, transactional_id, group_mode=True).finish()
    copied = committed_offsets(cluster, played.group)
    played.event("copied", committed=copied)
    # kafka-consumer-groups.sh: the group is Empty (the copier's consumer left it), so the
    # command may commit; it prints the new offsets it committed.
    _reset_offsets(cluster, played, "--to-earliest")
    played.event("offsets reset", to="earliest")
    return _settle(cluster, played)


def auto_commit(cluster: Cluster) -> Played:
    """Transactional commits, then a plain consumer of the same group auto-committing."""
    from confluent_kafka import Consumer

    played = _start(cluster, "auto_commit", partitions=1, records=200)
    (transactional_id,) = played.transactional_ids
    half = played.input_records // 2
    Copier(cluster.jars, cluster.bootstrap, played, transactional_id, max_messages=half).finish()
    played.event("copied", committed=committed_offsets(cluster, played.group))
    end = log_ends(cluster, played.input_topic, 1)[f"{played.input_topic}:0"]
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap, "group.id": played.group,
        "enable.auto.commit": True, "auto.commit.interval.ms": 200,
        "auto.offset.reset": "earliest", "isolation.level": "read_committed",
    })  # fmt: skip
    consumer.subscribe([played.input_topic])
    played.event("consumer subscribed", client="librdkafka", enable_auto_commit=True)
    consumed, position, deadline = 0, -1, time.monotonic() + 60
    try:
        while position < end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the consumer read to {position} of {end} in 60 s")
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                consumed, position = consumed + 1, message.offset() + 1
    finally:
        # close() commits the offsets consumed since the last auto-commit, then leaves the group.
        consumer.close()
    played.event("consumer closed", consumed=consumed, position=position)
    return _settle(cluster, played)


# How long the downstream consumer's commit precedes the marker of the transaction it read
# into: well beyond the audit's default clock skew (processing.clock_skew_ms, 1 s).
OPEN_AFTER_COMMIT_S = 2.5


def _transactional_producer(cluster: Cluster, played: Played, transactional_id: str):
    """A librdkafka transactional producer, its transactions initialised."""
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id,
        "transaction.timeout.ms": played.transaction_timeout_ms, "linger.ms": 0,
    })  # fmt: skip
    producer.init_transactions(30)
    return producer


def _assigned_consumer(cluster: Cluster, played: Played, topic: str, isolation: str):
    """A librdkafka consumer of the scenario's group, assigned `topic`'s partition 0 from 0,
    committing only when told to."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap, "group.id": played.group,
        "isolation.level": isolation, "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    return consumer


def aborted_read(cluster: Cluster) -> Played:
    """A downstream group commits past open transactions, read at read_uncommitted: one that
    then commits, one that then aborts.

    A librdkafka transactional producer writes a transaction of five records to the output
    topic and keeps it open; a librdkafka consumer of the group, at read_uncommitted, reads them
    and commits the position after them (a plain, synchronous commit); the transaction commits
    a moment later. The same again with a transaction that aborts. A read_committed consumer
    could not have read either before its marker.
    """
    from confluent_kafka import TopicPartition

    named = names("aborted_read", cluster.jars.name)
    transactional_id = named.pop("transactional_id")
    # The group's input is the topic the transactions write: one topic, both roles.
    named["input_topic"] = named["output_topic"]
    played = Played("aborted_read", transactional_ids=[transactional_id], partitions=1,
                    input_records=0, **named)  # fmt: skip
    cluster.create_topic(played.output_topic, partitions=1)
    # A minute: its transactions stay open on purpose, a loaded machine must not time them out.
    played.transaction_timeout_ms = 60_000
    producer = _transactional_producer(cluster, played, transactional_id)
    consumer = _assigned_consumer(cluster, played, played.output_topic, "read_uncommitted")
    position = 0
    try:
        for outcome in ("commit", "abort"):
            producer.begin_transaction()
            for i in range(5):
                producer.produce(played.output_topic, value=f"v{i}".encode(), partition=0)
            if producer.flush(30) != 0:
                raise RuntimeError("librdkafka did not deliver the transaction's records")
            read, deadline = 0, time.monotonic() + 30
            while read < 5:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the read_uncommitted consumer read {read} of 5 records")
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    read, position = read + 1, message.offset() + 1
            consumer.commit(
                offsets=[TopicPartition(played.output_topic, 0, position)], asynchronous=False
            )
            played.event("committed past an open transaction", offset=position)
            time.sleep(OPEN_AFTER_COMMIT_S)
            if outcome == "commit":
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
            played.event("transaction " + ("committed" if outcome == "commit" else "aborted"))
    finally:
        consumer.close()
    played.input_records = 10  # two transactions of five: one committed, one aborted
    played.committed = committed_offsets(cluster, played.group)
    played.log_end = log_ends(cluster, played.input_topic, 1)  # the records and two markers
    played.event("offsets listed", committed=played.committed, log_end=played.log_end)
    return played


def _copy_and_add_offsets(producer, consumer, played: Played, records: int) -> int:
    """Begin a transaction, copy `records` input records read by `consumer` to the output, and
    add the position after them for the group (sendOffsetsToTransaction); the transaction is
    left open. The offset it added."""
    from confluent_kafka import TopicPartition

    producer.begin_transaction()
    read, position, deadline = 0, -1, time.monotonic() + 30
    while read < records:
        if time.monotonic() > deadline:
            raise TimeoutError(f"read {read} of {records} records")
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            producer.produce(played.output_topic, value=message.value(), partition=0)
            read, position = read + 1, message.offset() + 1
    producer.send_offsets_to_transaction(
        [TopicPartition(played.input_topic, 0, position)], consumer.consumer_group_metadata(), 30
    )
    return position


def two_owners(cluster: Cluster) -> Played:
    """Two processors with different transactional ids own one input partition at once: each
    reads the same records, copies them and adds the position after them to its transaction
    for the one group, and both commit, in that order.

    Each is a librdkafka consumer (assigned the partition, read_committed) and transactional
    producer doing consume-transform-produce by hand, so that the two transactions' offset
    commits are both pending before either commits, as two copiers' may be, every time.
    """
    return _two_owners(cluster, "two_owners", first_commits_first=True)


def skipped_owner(cluster: Cluster) -> Played:
    """As `two_owners`, but the second owner's transaction commits first: the first one's
    offset commit, the older record of the key, is skipped at its marker (KAFKA-14505), while
    its outputs are committed."""
    return _two_owners(cluster, "skipped_owner", first_commits_first=False)


def _two_owners(cluster: Cluster, scenario: str, first_commits_first: bool) -> Played:
    """Two owners' transactions, both offset commits pending, committed in the order asked."""
    played = _start(cluster, scenario, partitions=1, records=60)
    first = played.transactional_ids[0]
    played.transactional_ids.append(first.replace("-tx-", "-tx2-"))
    played.transaction_timeout_ms = 60_000
    owners = []
    for transactional_id in played.transactional_ids:
        producer = _transactional_producer(cluster, played, transactional_id)
        consumer = _assigned_consumer(cluster, played, played.input_topic, "read_committed")
        owners.append((producer, consumer))
    wanted = played.input_records // 2
    key = f"{played.input_topic}:0"
    try:
        added = []
        for producer, consumer in owners:
            added.append(_copy_and_add_offsets(producer, consumer, played, wanted))
            played.event("offsets added to the transaction", offset=added[-1])
        # EndTxn is answered once the commit is prepared; the coordinator writes the markers
        # after. The second EndTxn waits until the first one's offsets are applied (its marker
        # is in `__consumer_offsets`), so the markers land in the order of the commits.
        order = (0, 1) if first_commits_first else (1, 0)
        earlier, later = (owners[i][0] for i in order)
        earlier.commit_transaction(30)
        deadline = time.monotonic() + 30
        while committed_offsets(cluster, played.group).get(key) != added[order[0]]:
            if time.monotonic() > deadline:
                raise TimeoutError("the earlier commit's offsets were not applied")
            time.sleep(0.05)
        later.commit_transaction(30)
        played.event("both committed", order=[played.transactional_ids[i] for i in order])
    finally:
        for _, consumer in owners:
            consumer.close()
    return _settle(cluster, played)


def _consume_until(consumer, position: int, timeout: float = 30.0) -> int:
    """Poll `consumer` until its position reaches `position`; the records it read."""
    read, at, deadline = 0, -1, time.monotonic() + timeout
    while at < position:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the consumer read to {at} of {position} in {timeout:.0f} s")
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            read, at = read + 1, message.offset() + 1
    return read


def _commit(consumer, topic: str, offset: int) -> None:
    """A plain, synchronous OffsetCommit of `offset` for `topic`'s partition 0."""
    from confluent_kafka import TopicPartition

    consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)


# How far beyond the input's log end `commit_beyond_log` commits: the records that later take
# those offsets are the ones its group would skip.
BEYOND_BY = 1000
# How long after a commit a scenario writes again: beyond the audit's default clock skew
# (processing.clock_skew_ms, 1 s), so that the batch shows the partition written after it.
WRITTEN_AFTER_COMMIT_S = 2.0


def commit_beyond_log(cluster: Cluster) -> Played:
    """A consumer of the group reads its input to the end and commits an offset far beyond it;
    more input is written after.

    The group coordinator stores an OffsetCommit without looking at the partition's log (only
    the leader of the partition knows its end), so librdkafka's commit of an explicit offset
    is accepted as it is. The later input shows that the export of the partition was taken
    after the commit.
    """
    played = _start(cluster, "commit_beyond_log", partitions=1, records=40, output=False)
    key = f"{played.input_topic}:0"
    end = log_ends(cluster, played.input_topic, 1)[key]
    consumer = _assigned_consumer(cluster, played, played.input_topic, "read_committed")
    try:
        consumed = _consume_until(consumer, end)
        _commit(consumer, played.input_topic, end + BEYOND_BY)
    finally:
        consumer.close()
    played.event("committed beyond the log end", consumed=consumed, offset=end + BEYOND_BY,
                 log_end=end)  # fmt: skip
    time.sleep(WRITTEN_AFTER_COMMIT_S)
    more = 20
    rdkafka_send(rdkafka_producer(cluster.bootstrap), played.input_topic, 0, more)
    played.input_records += more
    played.event("input written", records=more)
    return _settle(cluster, played)


# The input's segment.ms in `commit_below_log_start`: its second write, this much later, starts
# a segment, which lets retention delete the first one whole once the log start passes it.
SEGMENT_MS = 1000


def _segment_bases(cluster: Cluster, partition: str) -> list[int]:
    """The base offsets of the segments of `partition` (`topic-N`) on the first broker."""
    folder = cluster.brokers[0].log_dir / partition
    return sorted(int(path.stem) for path in folder.glob("*.log"))


def commit_below_log_start(cluster: Cluster) -> Played:
    """A group commits an offset, then the records below a higher offset are deleted
    (DeleteRecords), and retention deletes the segment they were in.

    The input is written in two parts a segment.ms apart, so that the second starts a
    segment. A librdkafka consumer of the group reads the first records and commits the
    position after them; the admin API's delete_records then moves the log start to the base
    offset of the second part's segment, and the broker's retention check deletes the segments
    before it (every offset of them is below the log start:
    `UnifiedLog.deleteLogStartOffsetBreachedSegments`). The export copies the partition's folder
    as it is then: its first batch is at the new log start. The log-start-offset checkpoint
    beside it does not name the partition: a broker checkpoints a log start only above the
    first segment's base offset.
    """
    from confluent_kafka import TopicPartition

    played = _start(cluster, "commit_below_log_start", partitions=1, records=40, output=False,
                    segment_ms=str(SEGMENT_MS), file_delete_delay_ms="0")  # fmt: skip
    partition = f"{played.input_topic}-0"
    # Where the second write starts, and so its segment.
    second = log_ends(cluster, played.input_topic, 1)[f"{played.input_topic}:0"]
    time.sleep(SEGMENT_MS / 1000 + 0.5)
    more = 40
    rdkafka_send(rdkafka_producer(cluster.bootstrap), played.input_topic, 0, more)
    played.input_records += more
    bases = _segment_bases(cluster, partition)
    played.event("input written", records=more, segments=bases)
    if second not in bases:
        raise RuntimeError(f"the second write did not start a segment of {partition}: {bases}")
    consumer = _assigned_consumer(cluster, played, played.input_topic, "read_committed")
    committed = 10
    try:
        _consume_until(consumer, committed)
        _commit(consumer, played.input_topic, committed)
    finally:
        consumer.close()
    played.event("committed", offset=committed)
    # Every record of the first write deleted: the log start at the second write's segment.
    deleted_before = second
    admin = _admin(cluster)
    answers = admin.delete_records(
        [TopicPartition(played.input_topic, 0, deleted_before)], request_timeout=30
    )
    (answer,) = answers.values()
    low_watermark = answer.result(30).low_watermark
    played.event("records deleted", before=deleted_before, low_watermark=low_watermark)
    deadline = time.monotonic() + 30
    while _segment_bases(cluster, partition)[0] < deleted_before:
        if time.monotonic() > deadline:
            raise TimeoutError(f"retention did not delete the first segment of {partition}")
        time.sleep(0.1)
    played.event("segment deleted", segments=_segment_bases(cluster, partition))
    return _settle(cluster, played)


# How far `forward_reset`'s operator moves the group's offset forward (--shift-by).
SHIFT_BY = 20


def forward_reset(cluster: Cluster) -> Played:
    """A copier in group mode copies its input to the end and leaves; more input comes; an
    operator shifts the group's offset forward, past input nobody copied; a copier with the same
    transactional.id copies from there to the end.

    The records between the offset the first copier committed and the reset one are never
    copied: the "offsets reset" event holds that range for each partition (`skipped`:
    "topic:partition" -> [first, end)).
    """
    played = _start(cluster, "forward_reset", partitions=1, records=50)
    (transactional_id,) = played.transactional_ids
    # The first copier copies what the input holds when it is assigned the partition (in group
    # mode the copier counts the records to copy then, whatever --max-messages says).
    Copier(cluster.jars, cluster.bootstrap, played, transactional_id, group_mode=True).finish()
    copied = committed_offsets(cluster, played.group)
    played.event("copied", committed=copied)
    more = 50
    rdkafka_send(rdkafka_producer(cluster.bootstrap), played.input_topic, 0, more)
    played.input_records += more
    played.event("input written", records=more)
    # kafka-consumer-groups.sh on the Empty group (the copier's consumer left it): it commits
    # each partition's offset plus SHIFT_BY and prints the new offsets.
    # Once in a suite's run the group's offset did not move (3.9.1: [50, 50)): the tool refuses a
    # group its copier's consumer has not left yet, or shifts against an end the new records
    # have not reached. Asked again until the offset moved, as an operator would.
    deadline = time.monotonic() + 60
    while True:
        _reset_offsets(cluster, played, "--shift-by", str(SHIFT_BY))
        reset = committed_offsets(cluster, played.group)
        if all(reset.get(k, -1) > v for k, v in copied.items()) or time.monotonic() > deadline:
            break
        time.sleep(1)
    skipped = {key: [copied[key], offset] for key, offset in reset.items()}
    played.event("offsets reset", shift_by=SHIFT_BY, committed=reset, skipped=skipped)
    Copier(cluster.jars, cluster.bootstrap, played, transactional_id, group_mode=True).finish()
    return _settle(cluster, played)


def rewind_reprocess(cluster: Cluster) -> Played:
    """A copier in group mode copies its input to the end and leaves; an operator resets the
    emptied group to the earliest offset; a copier with the same transactional.id copies the
    whole input again (what an offset reset after expiry does to a live pipeline).
    """
    played = _start(cluster, "rewind_reprocess", partitions=1, records=60)
    (transactional_id,) = played.transactional_ids
    Copier(cluster.jars, cluster.bootstrap, played, transactional_id, group_mode=True).finish()
    copied = committed_offsets(cluster, played.group)
    played.event("copied", committed=copied)
    _reset_offsets(cluster, played, "--to-earliest")
    played.event("offsets reset", to="earliest", reprocessed={k: [0, v] for k, v in copied.items()})
    Copier(cluster.jars, cluster.bootstrap, played, transactional_id, group_mode=True).finish()
    return _settle(cluster, played)


def late_commit(cluster: Cluster) -> Played:
    """A member of the group commits its input's end, then a lower offset, still a member.

    A librdkafka consumer subscribes (the classic group's member: the coordinator stores a
    GroupMetadata record that lists it), reads the input to its end and commits it, then
    commits the offset half-way down, as a member that lost the partition and commits late
    would. The coordinator stores an OffsetCommit as it comes: the group's offset goes down.
    """
    played = _start(cluster, "late_commit", partitions=1, records=40, output=False)
    consumer = _subscribed_consumer(cluster, played)
    try:
        _consume_until(consumer, played.input_records)
        _commit(consumer, played.input_topic, played.input_records)
        _commit(consumer, played.input_topic, played.input_records // 2)
    finally:
        consumer.close()
    played.event("committed lower while a member", offset=played.input_records // 2)
    return _settle(cluster, played)


def _subscribed_consumer(cluster: Cluster, played: Played):
    """A librdkafka consumer of the scenario's (classic) group, subscribed to its input from the
    earliest offset, committing only when told to."""
    from confluent_kafka import Consumer

    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap, "group.id": played.group,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })  # fmt: skip
    consumer.subscribe([played.input_topic])
    return consumer


def expired_reset(cluster: Cluster) -> Played:
    """A group's offsets are deleted, and a new member starts again from the earliest offset.

    A librdkafka consumer reads the input to its end, commits it and leaves; the admin API's
    deleteConsumerGroups removes the emptied group (the coordinator writes a tombstone for each
    offset, as expiry after `offsets.retention.minutes` would); a new consumer of the group
    finds no offset, starts at the earliest one (auto.offset.reset) and commits half-way.
    """
    played = _start(cluster, "expired_reset", partitions=1, records=40, output=False)
    consumer = _subscribed_consumer(cluster, played)
    try:
        _consume_until(consumer, played.input_records)
        _commit(consumer, played.input_topic, played.input_records)
    finally:
        consumer.close()
    admin = _admin(cluster)  # kept until its answer came
    (deleted,) = admin.delete_consumer_groups([played.group], request_timeout=30).values()
    deleted.result(30)
    played.event("group deleted", committed=played.input_records)
    consumer = _subscribed_consumer(cluster, played)
    try:
        _consume_until(consumer, played.input_records // 2)
        _commit(consumer, played.input_topic, played.input_records // 2)
    finally:
        consumer.close()
    played.event("committed from the earliest offset", offset=played.input_records // 2)
    return _settle(cluster, played)


def _end_transaction(producer, played: Played, outcome: str, offset: int) -> None:
    """Commit or abort (`outcome`) the producer's transaction, which added `offset`."""
    if outcome == "commit":
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)
    played.event("transaction committed" if outcome == "commit" else "transaction aborted",
                 offset=offset)  # fmt: skip


def _copy_in_transaction(producer, consumer, played: Played, records: int, outcome: str) -> int:
    """One consume-transform-produce transaction by hand (`_copy_and_add_offsets`), ended with
    `outcome` (commit or abort). The offset it added."""
    position = _copy_and_add_offsets(producer, consumer, played, records)
    _end_transaction(producer, played, outcome, position)
    return position


def transactional_rewind(cluster: Cluster) -> Played:
    """A processor commits half its input in a transaction, then is put back a quarter (as one
    restored from an older checkpoint) and commits a transaction that processed from there: its
    offset goes down with a COMMIT.

    A librdkafka consumer (assigned the partition, read_committed) and transactional producer
    copying by hand, as `two_owners`' processors do. The second transaction is held open
    `OPEN_AFTER_COMMIT_S` once its offsets are added: its transaction log records come well
    before its markers (a forged copy of the export changes the last of them).
    """
    from confluent_kafka import TopicPartition

    played = _start(cluster, "transactional_rewind", partitions=1, records=40)
    played.transaction_timeout_ms = 60_000  # held open on purpose: never timed out, even loaded
    producer = _transactional_producer(cluster, played, played.transactional_ids[0])
    consumer = _assigned_consumer(cluster, played, played.input_topic, "read_committed")
    half, quarter = played.input_records // 2, played.input_records // 4
    try:
        _copy_in_transaction(producer, consumer, played, half, "commit")
        consumer.seek(TopicPartition(played.input_topic, 0, quarter))
        played.event("put back", offset=quarter)
        position = _copy_and_add_offsets(producer, consumer, played, quarter // 2)
        time.sleep(OPEN_AFTER_COMMIT_S)
        _end_transaction(producer, played, "commit", position)
    finally:
        consumer.close()
    return _settle(cluster, played)


def aborted_range(cluster: Cluster) -> Played:
    """A plain commit of a processor's group passes the input its open transaction read, and
    that transaction aborts.

    A librdkafka processor (as `transactional_rewind`'s) commits the first quarter of its input
    in a transaction; in the next, it reads and copies the second quarter, adds its offset, and
    before the transaction ends its consumer commits that position plainly (as an auto-commit
    left on would); then the transaction aborts. The second quarter's outputs were never
    written, and the group's offset has passed its input.
    """
    played = _start(cluster, "aborted_range", partitions=1, records=40)
    producer = _transactional_producer(cluster, played, played.transactional_ids[0])
    consumer = _assigned_consumer(cluster, played, played.input_topic, "read_committed")
    quarter = played.input_records // 4

    try:
        _copy_in_transaction(producer, consumer, played, quarter, "commit")
        position = _copy_and_add_offsets(producer, consumer, played, quarter)
        _commit(consumer, played.input_topic, position)
        played.event("committed plainly inside the transaction", offset=position)
        _end_transaction(producer, played, "abort", position)
    finally:
        consumer.close()
    return _settle(cluster, played)


def consumer_protocol_reset(cluster: Cluster) -> Played:
    """A KIP-848 consumer group's member reads its input to the end, commits and leaves; an
    operator resets the emptied group to the earliest offset.

    The group writes no GroupMetadata record: its membership is its members' records
    (ConsumerGroupMemberMetadata), and the member's leaving is their tombstones.
    """
    from confluent_kafka import Consumer

    played = _start(cluster, "consumer_protocol_reset", partitions=2, records=40, output=False)
    ends = log_ends(cluster, played.input_topic, played.partitions)
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap, "group.id": played.group,
        "group.protocol": "consumer", "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })  # fmt: skip
    consumer.subscribe([played.input_topic])
    positions = dict.fromkeys(ends, 0)
    deadline = time.monotonic() + 30
    try:
        while positions != ends:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the consumer read to {positions} of {ends} in 30 s")
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                positions[f"{message.topic()}:{message.partition()}"] = message.offset() + 1
        # A plain, synchronous commit of the positions read; close() then leaves the group.
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    played.event("consumer closed", client="librdkafka", group_protocol="consumer",
                 committed=positions)  # fmt: skip
    _reset_offsets(cluster, played, "--to-earliest")
    played.event("offsets reset", to="earliest")
    return _settle(cluster, played)


# `compacted_input`'s topic configs: short segments, and a cleaner that takes a rolled segment at
# once and keeps no tombstone (the cluster's log.cleaner.backoff.ms is short: cluster.py).
COMPACTED = {
    "cleanup_policy": "compact", "segment_ms": "300", "min_cleanable_dirty_ratio": "0.01",
    "min_compaction_lag_ms": "0", "delete_retention_ms": "0", "file_delete_delay_ms": "0",
}  # fmt: skip


def cleaned_to(log_dir: Path, partition: str) -> int:
    """Where the cleaner's last pass over `partition` (`topic-N`) ended: its entry in the
    cleaner-offset-checkpoint of `log_dir` (a broker's, or its exported copy), or -1 before any."""
    checkpoint = log_dir / "cleaner-offset-checkpoint"
    topic, number = partition.rsplit("-", 1)
    lines = checkpoint.read_text().splitlines()[2:] if checkpoint.exists() else []
    ends = [int(f[2]) for f in map(str.split, lines) if f[:2] == [topic, number]]
    return max(ends, default=-1)


def _records_held(cluster: Cluster, partition: str) -> int:
    """The records the broker's log of `partition` (`topic-N`) holds now (no markers: an
    idempotent producer's input)."""
    logs = sorted((cluster.brokers[0].log_dir / partition).glob("*.log"))
    entries = [entry for log in logs for _, entry in split_entries(log.read_bytes())]
    return sum(kafka_python_view(entry)["record_count"] for entry in entries)


def compacted_input(cluster: Cluster) -> Played:
    """A copier copies a compacted input from its start after the cleaner removed most of it,
    then the input written since.

    The input's keys repeat (seven per batch): of its first segment, rolled by the next write,
    the cleaner keeps the last record of each key, in a batch that keeps its base and last
    offsets, and removes the batches whose every record a later one replaced. The copier reads
    from offset 0 what is left, its position jumping the removed offsets. More input comes in
    one segment the cleaner does not reach (the active one), and the copier, restarted with the
    same transactional.id, copies it. Each transaction wrote one output per input record it read.

    The copier counts what is left to copy in offsets (the log's end less its position) and
    what it copied in records, so on a compacted input it never ends by itself: each copier is
    told to copy the records the log holds (`--max-messages`).
    """
    played = _start(cluster, "compacted_input", partitions=1, records=90, **COMPACTED)
    (transactional_id,) = played.transactional_ids
    partition = f"{played.input_topic}-0"
    log_dir = cluster.brokers[0].log_dir
    producer = rdkafka_producer(cluster.bootstrap)
    time.sleep(0.4)  # past segment.ms: the next write rolls the first segment
    rdkafka_send(producer, played.input_topic, 0, 30)
    played.input_records += 30
    deadline = time.monotonic() + 60
    while cleaned_to(log_dir, partition) < 90:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the cleaner did not clean the first segment of {partition}")
        time.sleep(0.1)
    held = _records_held(cluster, partition)
    played.event("input cleaned", to=cleaned_to(log_dir, partition), records=held)
    Copier(cluster.jars, cluster.bootstrap, played, transactional_id, max_messages=held).finish()
    played.event("copied", committed=committed_offsets(cluster, played.group))
    time.sleep(0.4)  # the last input in a segment of its own, after the cleaned ones
    more = 60
    rdkafka_send(producer, played.input_topic, 0, more)
    played.input_records += more
    played.event("input written", records=more)
    Copier(cluster.jars, cluster.bootstrap, played, transactional_id, max_messages=more).finish()
    return _settle(cluster, played)


# The TxnOffsetCommit version `unowned_commit` sends: KIP-447's (member id and generation), the
# highest that both releases take without KIP-890's implicit add (version 5 has the broker add the
# partition to the transaction itself).
TXN_OFFSET_COMMIT_VERSION = 3
# Kafka's retriable coordinator errors (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
# NOT_COORDINATOR): `__consumer_offsets` and the producer id block are made on first use.
_COORDINATOR_RETRIABLE = (14, 15, 16)


def _partition_verification(cluster: Cluster, enabled: bool) -> None:
    """Set every broker's `transaction.partition.verification.enable` (a dynamic broker config,
    KIP-890 part 1): whether a transactional write must be in its transactional id's current
    transaction."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entry = ConfigEntry("transaction.partition.verification.enable", str(enabled).lower(),
                        incremental_operation=AlterConfigOpType.SET)  # fmt: skip
    resources = [
        ConfigResource(ResourceType.BROKER, str(b.node_id), incremental_configs=[entry])
        for b in cluster.brokers if b.broker
    ]  # fmt: skip
    admin = _admin(cluster)  # kept until its answers came (see `committed_offsets`)
    for done in admin.incremental_alter_configs(resources).values():
        done.result(30)
    # The controller took the change; each broker applies it when it replays the metadata log, a
    # moment later: a request sent before then meets the old setting (a TxnOffsetCommit refused
    # with INVALID_PRODUCER_ID_MAPPING). Each broker answers DescribeConfigs from what it applied.
    deadline = time.monotonic() + 30
    for resource in resources:
        while True:
            plain = ConfigResource(ResourceType.BROKER, resource.name)
            (described,) = admin.describe_configs([plain]).values()
            if described.result(30)[entry.name].value == entry.value:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker {resource.name} kept {entry.name} unchanged")
            time.sleep(0.1)


def _until_not_retriable(send: Callable[[], object], error: Callable[[object], int]) -> object:
    """`send()`'s answer, sent again while its error is a retriable coordinator error (30 s)."""
    deadline = time.monotonic() + 30
    while True:
        answer = send()
        if error(answer) not in _COORDINATOR_RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def unowned_commit(cluster: Cluster) -> Played:
    """A transactional offset commit whose producer id no transactional.id owns.

    A client asks for a producer id without a transactional.id (InitProducerId, as an
    idempotent producer does) and sends the group coordinator a TxnOffsetCommit with it, under
    a transactional.id no coordinator knows, with no AddOffsetsToTxn before: kafka-python's
    protocol classes send both requests as they are. While the brokers' partition verification
    (KIP-890) is on, the coordinator refuses the commit; with it off, as on a broker without
    it, it writes the commit into `__consumer_offsets` in a transactional batch of that producer id,
    pending until a marker no transaction coordinator will ever write: what `kafka-transactions.sh
    find-hanging` calls hanging for want of a transactional id. The verification is on again
    for the scenarios after.
    """
    from kafka.net.compat import KafkaNetClient
    from kafka.protocol.metadata import FindCoordinatorRequest
    from kafka.protocol.producer.transaction import InitProducerIdRequest, TxnOffsetCommitRequest

    played = _start(cluster, "unowned_commit", partitions=1, records=10, output=False)
    # The scenario's transactional.id (`names`), which it never registers: known to no coordinator.
    unowned = names(played.scenario, cluster.jars.name)["transactional_id"]
    client = KafkaNetClient(bootstrap_servers=cluster.bootstrap)
    _partition_verification(cluster, enabled=False)
    try:
        client.check_version(timeout_ms=30_000)
        found = _until_not_retriable(
            lambda: client.send_and_receive(cluster.brokers[0].node_id, FindCoordinatorRequest(
                key_type=0, coordinator_keys=[played.group], min_version=4, max_version=4)),
            lambda answer: answer.coordinators[0].error_code,
        )  # fmt: skip
        coordinator = found.coordinators[0].node_id
        producer = _until_not_retriable(
            lambda: client.send_and_receive(coordinator, InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=TRANSACTION_TIMEOUT_MS)),
            lambda answer: answer.error_code,
        )  # fmt: skip
        if producer.error_code:
            raise RuntimeError(f"InitProducerId answered error {producer.error_code}")
        played.event("producer id", producer_id=producer.producer_id,
                     producer_epoch=producer.producer_epoch)  # fmt: skip
        topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        offset = played.input_records // 2
        partition = topic.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata="",
        )
        commit = TxnOffsetCommitRequest(
            transactional_id=unowned, group_id=played.group,
            producer_id=producer.producer_id, producer_epoch=producer.producer_epoch,
            generation_id=-1, member_id="", group_instance_id=None,
            topics=[topic(name=played.input_topic, partitions=[partition])],
            min_version=TXN_OFFSET_COMMIT_VERSION, max_version=TXN_OFFSET_COMMIT_VERSION,
        )  # fmt: skip
        answer = _until_not_retriable(
            lambda: client.send_and_receive(coordinator, commit),
            lambda answer: answer.topics[0].partitions[0].error_code,
        )
        error = answer.topics[0].partitions[0].error_code
        if error:
            raise RuntimeError(f"TxnOffsetCommit answered error {error}")
        played.event("committed in no transaction", offset=offset, transactional_id=unowned)
    finally:
        client.close()
        _partition_verification(cluster, enabled=True)
    return _settle(cluster, played)


# What a 4.x broker needs to give a producer a two-phase-commit transaction: InitProducerId
# version 6 served (marked unstable up to Kafka 4.4.0), and two-phase commit allowed.
TWO_PHASE_COMMIT_SETTINGS = {
    "unstable.api.versions.enable": "true",
    "transaction.two.phase.commit.enable": "true",
}
# The 4.x processing cluster's settings: two-phase commit, and its group coordinator writing
# `__consumer_offsets` in zstd batches (CompressionType 4), so that the audit of that export reads
# records a broker compressed; the 3.9 cluster writes them uncompressed, Kafka's default.
PROCESSING_4_SETTINGS = {**TWO_PHASE_COMMIT_SETTINGS, "offsets.topic.compression.codec": "4"}

def two_phase_commit(cluster: Cluster) -> Played:
    """A two-phase-commit participant copies its input, adds its offsets, and exits without
    ending the transaction (`tests/kafka/two_phase_commit.py`): its output's records and its
    offset commit stay open, and its coordinator, which never aborts such a transaction, leaves
    them so."""
    played = _start(cluster, "two_phase_commit", partitions=1, records=10)
    # Whatever it asks for, the coordinator gives it Integer.MAX_VALUE.
    played.transaction_timeout_ms = TWO_PHASE_COMMIT_TIMEOUT_MS
    (transactional_id,) = played.transactional_ids
    done = subprocess.run(
        [sys.executable, "-m", "tests.kafka.two_phase_commit", cluster.bootstrap,
         transactional_id, played.input_topic, played.output_topic, played.group,
         str(played.input_records)],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the two-phase-commit participant failed: {done.stderr[-2000:]}")
    played.event("prepared and left", **json.loads(done.stdout.splitlines()[-1]))
    return _settle(cluster, played)


# The processing scenarios, played on each release (transactions v2 on 4.x, v1 on 3.9), and
# those of 4.x only (see the module's docstring).
PROCESSING: tuple[Callable[[Cluster], Played], ...] = (
    copier, admin_reset, auto_commit, aborted_read, two_owners, skipped_owner, commit_beyond_log,
    commit_below_log_start, forward_reset, rewind_reprocess, late_commit, transactional_rewind,
    aborted_range, expired_reset, compacted_input, unowned_commit,
)  # fmt: skip
PROCESSING_4 = (*PROCESSING, two_phase_commit, consumer_protocol_reset)
# The scenarios whose processors write one output record per input record, in the transaction
# that commits its offset: the audit declares their groups one-to-one.
ONE_TO_ONE = ("copier", "admin_reset", "auto_commit", "two_owners", "skipped_owner",
              "forward_reset", "rewind_reprocess", "compacted_input")  # fmt: skip
