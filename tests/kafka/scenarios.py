"""What real Kafka brokers wrote in known situations: the logs the real-Kafka tests audit.

`build(folder)` starts a Kafka 4.x and a Kafka 3.9 cluster (`tests/jars.py` pins them), plays
every scenario against them with Kafka's Java producer and librdkafka, copies each broker's
partition folders as an operator exports them, prints the exported segments with that release's
`kafka-dump-log.sh` (default and `--deep-iteration`), writes the same batches as Parquet decoded by
kafka-python (a third, independent reader), records what Kafka's own tools said (find-hanging),
stops the brokers and returns a `Built` manifest of where everything is. It runs once per test
run: in the background from the start of an xdist run (`tests/conftest.py`), or in the first test
that needs it (`tests.run_once.once_per_run`, which this module's `__main__` takes part in).

Each scenario's topic is its own and names the release (`topic_of`: `clean-kafka-4.1.1`), so the
scenarios share two clusters, and one audit can read every export at once:

| scenario | cluster | what happens |
|---|---|---|
| `clean` | both | idempotent and transactional traffic of both clients, commits and aborts, |
| | | a transactional producer restarted with the same transactional.id |
| `retained` | 4.x | short segments and retention move the log start past live producers |
| `crash` | 4.x | the broker is SIGKILLed inside a transaction and restarted: the abort |
| `hanging` | 4.x | a producer dies inside a transaction with a one-day transaction.timeout.ms |
| `zombie` | both | a second producer with the same transactional.id fences the first |
| `compacted` | 4.x | transactions on a compacted topic, after the cleaner ran |
| `failover` | 4.x, two brokers of their own | an unclean leader election (`failover`) |
| `processing` | both (4.x: a broker of its | consume-transform-produce with Kafka's transactional |
| | own; 3.9: after `zombie`) | copier, offset resets, plain consumers (on 4.x also a |
| | | KIP-848 consumer group's), commits outside |
| | | the input's log (`processing.py`): one export per |
| | | release with the coordinator topics, in |
| | | `Built.processing` |

The processing export's dump folders also hold the coordinator partitions printed with
`--offsets-decoder` and `--transaction-log-decoder` (`DUMP_FILES`).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.jars import KAFKA_3_JARS, KAFKA_4_JARS, JarSet
from tests.kafka.clients import (
    CLIENTS,
    ClientError,
    JavaClient,
    compile_client,
    rdkafka_producer,
    rdkafka_send,
)
from tests.kafka.cluster import RUNNING, Cluster, dump_log, dump_logs, export_log_dir
from tests.kafka.processing import (
    COORDINATOR_TOPICS,
    PROCESSING,
    PROCESSING_4,
    PROCESSING_4_SETTINGS,
    Played,
)

RUN_NAME = "real-kafka"


@dataclass
class Export:
    """One scenario's export on one cluster, in the three forms the audit reads."""

    scenario: str
    release: str
    # The scenario's topic on that release's cluster (`topic_of`); `__consumer_offsets` for the
    # processing export, whose facts name each of its scenarios' topics.
    topic: str
    segments: str  # <export>/<node-id>/<topic>-<partition>/ with checkpoints
    # kafka-dump-log.sh of every segment: default output in dump.txt, and the coordinator topics'
    # segments printed by their decoders (`DUMP_FILES`)
    dump: str
    dump_deep: str  # the same with --deep-iteration
    parquet: str  # the batches as decoded by kafka-python, schemas/record_batch.json
    batches: int  # batches in the export (every partition)
    facts: dict = field(default_factory=dict)  # what the brokers and Kafka's tools said


@dataclass
class Built:
    """Every export of the run, by (scenario, release), and the processing exports by release.

    The processing exports (`processing.py`) are apart: each holds its cluster's coordinator
    partitions, and two clusters' `__consumer_offsets-0` read in one audit would be taken for
    one partition.
    """

    exports: dict[tuple[str, str], Export]
    seconds: float
    processing: dict[str, Export] = field(default_factory=dict)


def _wait_for(what: str, check, timeout: float = 60.0, every: float = 0.25):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        time.sleep(every)


def _checkpointed(cluster: Cluster, topic: str) -> bool:
    """Whether every broker's recovery-point checkpoint names `topic`'s partitions."""
    for broker in cluster.brokers:
        if not broker.broker:
            continue
        checkpoint = broker.log_dir / "recovery-point-offset-checkpoint"
        if not checkpoint.exists() or f"{topic} " not in checkpoint.read_text():
            return False
    return True


def _export(cluster: Cluster, into: Path, scenario: str, topic: str, **facts) -> Export:
    """Copy `topic`'s folders once the checkpoints name them, and write their Parquet form.

    The dump-log forms are written for every export at the end of the build (`write_dumps`).
    """
    _wait_for(f"{topic}'s checkpoints", lambda: _checkpointed(cluster, topic))
    time.sleep(1.2)  # one more checkpoint interval: the files hold the log as it is now
    release = cluster.jars.name
    folder = into / f"{scenario}-{release}"
    segments = cluster.export(folder / "segments", topic)
    return new_export(scenario, release, topic, folder, segments, facts)


def topic_of(scenario: str, release: str) -> str:
    """A scenario's topic on a release's cluster: unique in the build, so that one audit can read
    every export at once and tell them apart by topic."""
    return f"{scenario}-{release}"


def new_export(
    scenario: str, release: str, topic: str, folder: Path, segments: Path, facts: dict
) -> Export:
    """The export of `segments` (under `folder`), with its Parquet form written.

    `parquet/`: the batches as kafka-python decodes them. The dump-log forms (`dump/`,
    `dump-deep/`) are named here and written by `write_dumps`. A dump and a table hold one
    replica of each partition: the first broker's folder.
    """
    batches = write_parquet(_first_replica_logs(segments), folder / "parquet")
    return Export(
        scenario, release, topic, str(segments), str(folder / "dump"), str(folder / "dump-deep"),
        str(folder / "parquet"), batches, facts,
    )


def _first_replica_logs(segments: Path) -> list[Path]:
    first = sorted(path.name for path in Path(segments).iterdir() if path.is_dir())[0]
    return sorted((Path(segments) / first).glob("*/*.log"))


# kafka-dump-log.sh's forms of an export: each file of its dump folders (`dump`, `dump_deep`),
# the tool's options for it, and the topics whose segments it prints (None: every topic but the
# coordinator ones). A decoder implies --deep-iteration, so both folders get the same decoder text.
DUMP_FILES = (
    ("dump.txt", ("dump",), (), None),
    ("dump.txt", ("dump_deep",), ("--deep-iteration",), None),
    ("offsets-decoder.txt", ("dump", "dump_deep"), ("--offsets-decoder",),
     ("__consumer_offsets",)),
    ("transaction-log-decoder.txt", ("dump", "dump_deep"), ("--transaction-log-decoder",),
     ("__transaction_state",)),
)  # fmt: skip


def _printed_by(log: Path, topics: tuple[str, ...] | None) -> bool:
    topic = log.parent.name.rpartition("-")[0]
    return topic not in COORDINATOR_TOPICS if topics is None else topic in topics


def write_dumps(jars: JarSet, exports: list[Export], classes: Path | None = None) -> None:
    """Write the `kafka-dump-log.sh` forms of `exports`, all of one release.

    Beside each export's segments, in `dump/` and `dump-deep/` (`DUMP_FILES`): `dump.txt`, what
    that release's DumpLogSegments prints for its first replica's segments (by default, and with
    `--deep-iteration`), and for the coordinator topics' segments, what it prints with the
    decoder of each (`--offsets-decoder`, `--transaction-log-decoder`). All the exports' files at
    once for each file name (a tool's JVM costs about a CPU-second to start), and with `classes`
    (`clients.compile_client`'s, of this release) every file name in one JVM (`dump_logs`); the
    text is cut back into each file's part at the `Dumping <file>` line that starts it.
    """
    logs = {export.dump: _first_replica_logs(Path(export.segments)) for export in exports}
    runs = []
    for name, attributes, options, topics in DUMP_FILES:
        printed = {dump: [log for log in of if _printed_by(log, topics)]
                   for dump, of in logs.items()}  # fmt: skip
        every_log = [log for of_export in printed.values() for log in of_export]
        if every_log:
            runs.append((name, attributes, printed, every_log, options))
    if classes is None:
        texts = [dump_log(jars, every_log, *options) for *_, every_log, options in runs]
    else:
        texts = dump_logs(jars, classes, [(every_log, options) for *_, every_log, options in runs])
    for (name, attributes, printed, _, _), text in zip(runs, texts, strict=True):
        parts = _parts_by_file(text)
        for export in exports:
            if not printed[export.dump]:
                continue  # no partition of that file's topics in this export
            for attribute in attributes:
                target = Path(getattr(export, attribute))
                target.mkdir(parents=True, exist_ok=True)
                part = "".join(parts[str(log)] for log in printed[export.dump])
                (target / name).write_text(part)


def _parts_by_file(text: str) -> dict[str, str]:
    """DumpLogSegments' output for several files, by file (`Dumping <file>` starts each part)."""
    parts: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines(keepends=True):
        if line.startswith("Dumping "):
            current = parts.setdefault(line[len("Dumping ") :].strip(), [])
        if current is None:
            raise ValueError(f"DumpLogSegments printed before its first file: {line!r}")
        current.append(line)
    return {path: "".join(lines) for path, lines in parts.items()}


def write_parquet(logs: list[Path], into: Path) -> int:
    """The batches of `logs` as kafka-python decodes them, in the record_batch contract."""
    from tests.fixtures.segment_builder import kafka_python_view, split_entries

    rows = []
    for log in logs:
        topic, _, partition = log.parent.name.rpartition("-")
        for position, entry in split_entries(log.read_bytes()):
            view = kafka_python_view(entry)
            rows.append(
                {
                    "topic": topic,
                    "partition": int(partition),
                    **{key: view[key] for key in PARQUET_FIELDS},
                    "last_sequence": None,
                    "source": f"{log}:{position}",
                }
            )
    into.mkdir(parents=True)
    # Typed as the contract says: a column that is null in every row (no control batch in a
    # partition) still has its type.
    schema = pa.schema(
        [("topic", pa.string()), ("partition", pa.int32())]
        + [(name, PARQUET_TYPES.get(name, pa.int64())) for name in PARQUET_FIELDS]
        + [("last_sequence", pa.int32()), ("source", pa.string())]
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), into / "batches.parquet")
    return len(rows)


# The contract's types of the columns that are not 64-bit integers (schemas/record_batch.json).
PARQUET_TYPES = {
    "producer_epoch": pa.int32(), "base_sequence": pa.int32(), "record_count": pa.int32(),
    "is_transactional": pa.bool_(), "is_control": pa.bool_(), "control_type": pa.string(),
    "coordinator_epoch": pa.int32(), "partition_leader_epoch": pa.int32(),
    "magic": pa.int32(), "crc_valid": pa.bool_(),
}  # fmt: skip


PARQUET_FIELDS = (
    "base_offset", "last_offset", "producer_id", "producer_epoch", "base_sequence",
    "record_count", "is_transactional", "is_control", "control_type", "coordinator_epoch",
    "partition_leader_epoch", "magic", "max_timestamp", "crc_valid",
)


# --- the scenarios ---------------------------------------------------------------------------


def clean(cluster: Cluster, classes: Path, into: Path) -> Export:
    """Idempotent and transactional traffic of both clients; a transactional producer restarted."""
    topic = topic_of("clean", cluster.jars.name)
    cluster.create_topic(topic, partitions=3)
    java = JavaClient(cluster.jars, classes, cluster.bootstrap)
    java.producer("idem")
    for i in range(9):
        java.send("idem", topic, i % 3, 3)
    java.producer("tx", transactional_id=f"{topic}-java-tx")
    java.do("init tx")
    java.transaction("tx", [(topic, 0, 2), (topic, 1, 2)], "commit")
    java.transaction("tx", [(topic, 1, 1), (topic, 2, 3)], "abort")
    java.transaction("tx", [(topic, 0, 2), (topic, 2, 1)], "commit")
    java.close()
    # The same transactional.id in a new process: initTransactions bumps the epoch.
    java = JavaClient(cluster.jars, classes, cluster.bootstrap)
    java.producer("tx", transactional_id=f"{topic}-java-tx")
    java.do("init tx")
    java.transaction("tx", [(topic, 0, 1), (topic, 1, 2)], "commit")
    java.transaction("tx", [(topic, 2, 2)], "abort")
    java.close()
    idempotent = rdkafka_producer(cluster.bootstrap)
    for i in range(4):
        rdkafka_send(idempotent, topic, i % 3, 2)
    transactional = rdkafka_producer(cluster.bootstrap, transactional_id=f"{topic}-rd-tx")
    transactional.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        transactional.begin_transaction()
        rdkafka_send(transactional, topic, 1, 2)
        rdkafka_send(transactional, topic, 2, 1)
        getattr(transactional, f"{outcome}_transaction")(30)
    del idempotent, transactional
    return _export(cluster, into, "clean", topic)


def retained(cluster: Cluster, classes: Path, into: Path) -> Export:
    """Retention moves the log start past producers that go on writing."""
    topic = topic_of("retained", cluster.jars.name)
    cluster.create_topic(
        topic, partitions=1, segment_ms="500", retention_ms="2500",
        file_delete_delay_ms="0",
    )
    java = JavaClient(cluster.jars, classes, cluster.bootstrap)
    java.producer("idem")
    java.producer("tx", transactional_id=f"{topic}-tx")
    java.do("init tx")

    def log_start() -> int:
        folder = cluster.brokers[0].log_dir / f"{topic}-0"
        return min(int(path.stem) for path in folder.glob("*.log"))

    started = time.monotonic()
    while log_start() == 0 or time.monotonic() - started < 4:
        java.send("idem", topic, 0, 2)
        java.transaction("tx", [(topic, 0, 1)], "commit")
        time.sleep(0.3)
        if time.monotonic() - started > 60:
            raise TimeoutError(f"retention did not move the log start of {topic}-0 in 60 s")
    for _ in range(3):  # the producers go on past the new log start
        java.send("idem", topic, 0, 2)
        java.transaction("tx", [(topic, 0, 1)], "commit")
    java.close()
    return _export(cluster, into, "retained", topic, log_start=log_start())


def crash(cluster: Cluster, classes: Path, into: Path) -> Export:
    """The only broker SIGKILLed inside a transaction; on restart the coordinator aborts it."""
    topic = topic_of("crash", cluster.jars.name)
    cluster.create_topic(topic, partitions=2)
    java = JavaClient(cluster.jars, classes, cluster.bootstrap)
    java.producer("idem")
    java.send("idem", topic, 0, 2)
    # Short, as the wait below is for it, yet long enough that the committed transaction before
    # it never outlives it on a loaded machine.
    java.producer("tx", transactional_id=f"{topic}-tx", transaction_timeout_ms="10000")
    java.do("init tx")
    java.transaction("tx", [(topic, 0, 2), (topic, 1, 2)], "commit")
    java.do("begin tx")
    java.send("tx", topic, 0, 3)
    java.send("tx", topic, 1, 1)
    java.halt()  # the producer dies with its transaction open ...
    broker = cluster.brokers[0]
    broker.kill()  # ... and so does the broker, before anything else happens
    broker.start()
    # The coordinator aborts the transaction once its timeout passes: ABORT markers in both
    # partitions, read back as the last batch of each.
    _wait_for("the coordinator's abort", lambda: _ends_with_marker(cluster, topic, 2), 60)
    return _export(cluster, into, "crash", topic)


def _ends_with_marker(cluster: Cluster, topic: str, partitions: int) -> bool:
    from tests.fixtures.segment_builder import kafka_python_view, split_entries

    for partition in range(partitions):
        folder = cluster.brokers[0].log_dir / f"{topic}-{partition}"
        last = sorted(folder.glob("*.log"))[-1]
        entries = split_entries(last.read_bytes())
        if not entries or not kafka_python_view(entries[-1][1])["is_control"]:
            return False
    return True


def hanging(cluster: Cluster, classes: Path, into: Path) -> Export:
    """A producer dies inside a transaction whose timeout is a day: it stays open."""
    topic = topic_of("hanging", cluster.jars.name)
    cluster.create_topic(topic, partitions=1)
    java = JavaClient(cluster.jars, classes, cluster.bootstrap)
    java.producer("tx", transactional_id=f"{topic}-tx", transaction_timeout_ms="86400000")
    java.do("init tx")
    java.transaction("tx", [(topic, 0, 2)], "commit")
    java.do("begin tx")
    java.send("tx", topic, 0, 2)
    java.halt()
    # Kafka's own tools on the live cluster: the open transaction as the partition leader
    # describes it (its producer and start offset), and what find-hanging concludes about it.
    producers = cluster.tool(
        "org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", cluster.bootstrap,
        "describe-producers", "--topic", topic, "--partition", "0",
    )
    find_hanging = cluster.tool(
        "org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", cluster.bootstrap,
        "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0",
    )
    return _export(
        cluster, into, "hanging", topic,
        describe_producers=producers, find_hanging=find_hanging, exported_at_ms=_now_ms(),
    )


def zombie(cluster: Cluster, classes: Path, into: Path) -> Export:
    """Two producers with one transactional.id: the second's initTransactions fences the first."""
    topic = topic_of("zombie", cluster.jars.name)
    cluster.create_topic(topic, partitions=1)
    old = JavaClient(cluster.jars, classes, cluster.bootstrap)
    old.producer("tx", transactional_id=f"{topic}-tx")
    old.do("init tx")
    old.transaction("tx", [(topic, 0, 2)], "commit")
    old.do("begin tx")
    old.send("tx", topic, 0, 2)
    new = JavaClient(cluster.jars, classes, cluster.bootstrap)
    new.producer("tx", transactional_id=f"{topic}-tx")
    new.do("init tx")  # fences the old producer and aborts its open transaction
    new.transaction("tx", [(topic, 0, 3)], "commit")
    try:
        old.send("tx", topic, 0, 1)
        old.do("commit tx")
        fenced = "accepted"  # the broker took the zombie's writes: the test says so
    except ClientError as error:
        fenced = error.kind
    old.halt()
    new.close()
    return _export(cluster, into, "zombie", topic, zombie_outcome=fenced)


def compacted(cluster: Cluster, classes: Path, into: Path) -> Export:
    """Transactions on a compacted topic, exported after the cleaner ran."""
    topic = topic_of("compacted", cluster.jars.name)
    cluster.create_topic(
        topic, partitions=1, cleanup_policy="compact", segment_ms="300",
        min_cleanable_dirty_ratio="0.01", delete_retention_ms="0", min_compaction_lag_ms="0",
        file_delete_delay_ms="0",
    )
    java = JavaClient(cluster.jars, classes, cluster.bootstrap)
    java.producer("idem")
    java.producer("tx", transactional_id=f"{topic}-tx")
    java.do("init tx")
    for round_ in range(6):
        java.transaction("tx", [(topic, 0, 4)], "abort" if round_ % 3 == 1 else "commit")
        java.send("idem", topic, 0, 3)
        time.sleep(0.35)  # a new segment for each round: the cleaner works on rolled ones
    java.close()

    def cleaned() -> bool:
        checkpoint = cluster.brokers[0].log_dir / "cleaner-offset-checkpoint"
        return checkpoint.exists() and f"{topic} 0 " in checkpoint.read_text()

    _wait_for("the log cleaner", cleaned, 60)
    return _export(cluster, into, "compacted", topic)


def failover(jars: JarSet, classes: Path, root: Path, into: Path) -> Export:
    """An unclean leader election on two brokers; the old leader's folder copied before it rejoins.

    Brokers 2 and 3 (a controller of its own, node 1, so that either broker can die) hold
    `failover-0` with replication factor 2, broker 2 leading. Broker 3 is killed and leaves the
    ISR; broker 2 takes more writes alone, then is killed too, and its folder is copied as it is
    (`2-before-rejoin/`). Broker 3 is elected uncleanly (`kafka-leader-election --election-type
    UNCLEAN`) and takes a new producer's batch at the offsets broker 2 had written; broker 2
    restarts, truncates its diverged suffix and follows. `kafka-get-offsets.sh` polled the latest
    offset all along (`list-offsets.txt`).
    """
    settings = {
        "broker.session.timeout.ms": "2000",
        "broker.heartbeat.interval.ms": "500",
        "replica.lag.time.max.ms": "2000",
        "offsets.topic.replication.factor": "1",
    }
    cluster = Cluster.create(jars, root, size=2, settings=settings, dedicated_controller=True)
    topic = topic_of("failover", jars.name)
    polls: list[str] = []

    def poll() -> int:
        answer = cluster.tool(
            "org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", cluster.bootstrap,
            "--topic", topic, "--time", "-1",
        )
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{_now_ms() % 1000:03d}Z"
        polls.append(f"# observed_at: {stamp}\n{answer}")
        return int(answer.strip().rpartition(":")[2])

    try:
        cluster.create_topic(
            topic, replica_assignment=[[2, 3]], min_insync_replicas="1",
            unclean_leader_election_enable="true",
        )
        leader, follower = cluster.broker(2), cluster.broker(3)
        java = JavaClient(jars, classes, cluster.bootstrap)
        java.producer("first", acks="all")
        for _ in range(3):
            java.send("first", topic, 0, 2)
        _wait_for("both replicas", lambda: _replica_end(follower, f"{topic}-0") == 6)
        acknowledged_before = poll()
        follower.kill()
        time.sleep(3)  # the controller fences broker 3 and shrinks the ISR to broker 2
        for _ in range(3):
            java.send("first", topic, 0, 2)
        high = poll()
        java.halt()
        leader.kill()
        segments = into / f"failover-{jars.name}" / "segments"
        export_log_dir(leader.log_dir, segments, "2-before-rejoin", topic)
        follower.start()
        cluster.tool(
            "org.apache.kafka.tools.LeaderElectionCommand", "--bootstrap-server",
            follower.bootstrap, "--election-type", "UNCLEAN", "--topic", topic,
            "--partition", "0",
        )
        java = JavaClient(jars, classes, follower.bootstrap)
        java.producer("second", acks="all")
        new_offset = java.send("second", topic, 0, 1)
        java.close()
        after = poll()
        leader.start()
        _wait_for("broker 2 to follow", lambda: _replica_end(leader, f"{topic}-0") == after, 60)
        settled = poll()
        listed = into / f"failover-{jars.name}" / "list-offsets.txt"
        export = _export(cluster, into, "failover", topic, list_offsets=str(listed))
        listed.write_text("".join(polls))
    except BaseException as error:
        raise RuntimeError(f"{error}\nbroker logs:\n"
                           + "\n".join(b.log_tail() for b in cluster.brokers)) from error
    finally:
        cluster.stop()
    export.facts.update(
        acknowledged_before=acknowledged_before, high=high, new_offset=new_offset,
        after=after, settled=settled,
    )  # fmt: skip
    return export


def _replica_end(broker, partition: str) -> int:
    """The next offset of a broker's replica of `partition`, read from its segment files."""
    from tests.fixtures.segment_builder import kafka_python_view, split_entries

    logs = sorted((broker.log_dir / partition).glob("*.log"))
    entries = split_entries(logs[-1].read_bytes()) if logs else []
    return kafka_python_view(entries[-1][1])["last_offset"] + 1 if entries else 0


def _now_ms() -> int:
    return int(time.time() * 1000)


def processing(cluster: Cluster, scenarios: tuple, into: Path) -> Export:
    """Play the processing scenarios (`processing.py`) on `cluster` and export them at once.

    One export holds their input and output topics and every partition of the coordinator
    topics, copied once their checkpoints name them all: the cluster's `__consumer_offsets`
    and `__transaction_state` partitions are in no other export. `facts` maps each scenario's
    name to what it did (`processing.Played`).
    """
    played: list[Played] = [scenario(cluster) for scenario in scenarios]
    topics = [topic for p in played for topic in (p.input_topic, p.output_topic)]
    for topic in (*topics, *COORDINATOR_TOPICS):
        _wait_for(f"{topic}'s checkpoints", lambda t=topic: _checkpointed(cluster, t))
    time.sleep(1.2)  # one more checkpoint interval: the files hold the log as it is now
    release = cluster.jars.name
    folder = into / f"processing-{release}"
    segments = cluster.export(folder / "segments", *topics, *COORDINATOR_TOPICS)
    facts = {p.scenario: p for p in played}
    return new_export("processing", release, COORDINATOR_TOPICS[0], folder, segments, facts)


# The scenarios of each release (transactions v2 on 4.x, v1 on 3.9).
SCENARIOS_4 = (clean, retained, hanging, zombie, compacted, crash)
SCENARIOS_3 = (clean, zombie)


def _play(
    jars: JarSet, scenarios: tuple, classes: Path, folder: Path, processed: tuple = (),
    name: str | None = None, settings: dict[str, str] | None = None,
) -> tuple[list[Export], Export | None]:
    """The scenarios one after the other on one single-node cluster of `jars`' release (its
    folder `name`, by default the release's; broker `settings` beyond the suite's), then the
    processing scenarios `processed` in one export (`processing`)."""
    root = folder / "clusters" / (name or jars.name)
    cluster = Cluster.create(jars, root, settings=settings)
    try:
        exports = [scenario(cluster, classes, folder / "exports") for scenario in scenarios]
        played = processing(cluster, processed, folder / "exports") if processed else None
        return exports, played
    except BaseException as error:
        raise RuntimeError(f"{error}\nbroker log:\n{cluster.brokers[0].log_tail()}") from error
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def build(folder: Path) -> Built:
    """Play every scenario on real brokers and export them under `folder`; see the module.

    The four clusters (4.x, 3.9, the two brokers of `failover`, and the 4.x processing
    scenarios') play at once: most of a scenario's time is waiting on a broker (a checkpoint,
    retention, the cleaner, a timeout). A release's dump-log forms are written once its clusters
    are done, while the other's play on.
    """
    from concurrent.futures import ThreadPoolExecutor

    started = time.monotonic()
    for jars in (KAFKA_4_JARS, KAFKA_3_JARS):
        if not jars.present():
            raise FileNotFoundError(f"the jars of {jars.name} are not in {jars.folder}")
    classes = {
        jars.name: compile_client(jars, folder / "classes" / jars.name)
        for jars in (KAFKA_4_JARS, KAFKA_3_JARS)
    }

    def dumps_of(jars: JarSet, *blocks) -> None:
        """Once a release's blocks are done, the dump-log forms of their exports."""
        exports = [e for b in blocks for e in (*b.result()[0], b.result()[1]) if e]
        write_dumps(jars, exports, classes[jars.name])

    # Six threads: two of them wait on the four clusters' blocks (`dumps_of`).
    with ThreadPoolExecutor(6) as pool:
        latest = pool.submit(_play, KAFKA_4_JARS, SCENARIOS_4, classes[KAFKA_4_JARS.name], folder)
        # The 4.x processing scenarios on a cluster of their own: appended to the 4.x scenarios,
        # the longest block, they would add their whole time to the build's.
        processing_4 = pool.submit(
            _play, KAFKA_4_JARS, (), classes[KAFKA_4_JARS.name], folder, PROCESSING_4,
            f"processing-{KAFKA_4_JARS.name}", PROCESSING_4_SETTINGS,
        )  # fmt: skip
        # 3.9's scenarios end early: its processing scenarios follow them on its cluster.
        older = pool.submit(
            _play, KAFKA_3_JARS, SCENARIOS_3, classes[KAFKA_3_JARS.name], folder, PROCESSING
        )
        # The scenario that needs brokers of its own: two, and a controller apart.
        failed_over = pool.submit(
            lambda: ([failover(KAFKA_4_JARS, classes[KAFKA_4_JARS.name],
                               folder / "clusters" / "failover", folder / "exports")], None)
        )  # fmt: skip
        dumps = [
            pool.submit(dumps_of, KAFKA_4_JARS, latest, processing_4, failed_over),
            pool.submit(dumps_of, KAFKA_3_JARS, older),
        ]
        for done in dumps:
            done.result()
    exports = {
        (export.scenario, export.release): export
        for block in (latest, older, failed_over)
        for export in block.result()[0]
    }
    processed = {e.release: e for e in (processing_4.result()[1], older.result()[1])}
    return Built(exports, time.monotonic() - started, processed)


def main(argv: list[str]) -> int:
    """`python -m tests.kafka.scenarios RUN_FOLDER`: build into RUN_FOLDER/real-kafka once.

    Takes part in `once_per_run`'s lock, so a test that asks while this runs waits for it.
    """
    import fcntl
    import pickle
    import signal

    # The run that started this may end first (pytest_unconfigure): its brokers and clients are
    # killed too.
    def stop(*_) -> None:
        for client in list(CLIENTS):
            client.kill()
        for broker in list(RUNNING):
            broker.kill()
        os._exit(143)

    signal.signal(signal.SIGTERM, stop)
    run_folder = Path(argv[0])
    folder = run_folder / RUN_NAME
    with (run_folder / f"{RUN_NAME}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = folder / ".built.pickle"
        if built.exists():
            return 0
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        try:
            value = build(folder)
        except Exception as error:  # noqa: BLE001 - the test that asks builds again and fails
            (run_folder / f"{RUN_NAME}.error").write_text(f"{type(error).__name__}: {error}\n")
            return 1
        built.write_bytes(pickle.dumps(value))
    print(json.dumps({"seconds": value.seconds, "exports": len(value.exports)}))
    return 0


if __name__ == "__main__":
    # The module by its own name, not as __main__: what `build` returns is pickled for the
    # workers, which find its classes in `tests.kafka.scenarios`.
    from tests.kafka.scenarios import main as scenarios_main

    sys.exit(scenarios_main(sys.argv[1:]))
