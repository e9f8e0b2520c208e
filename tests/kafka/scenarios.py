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
from tests.kafka.cluster import RUNNING, Cluster, dump_log, export_log_dir

RUN_NAME = "real-kafka"


@dataclass
class Export:
    """One scenario's export on one cluster, in the three forms the audit reads."""

    scenario: str
    release: str
    topic: str  # the scenario's topic on that release's cluster (`topic_of`)
    segments: str  # <export>/<node-id>/<topic>-<partition>/ with checkpoints
    dump: str  # kafka-dump-log.sh of every segment, default output
    dump_deep: str  # the same with --deep-iteration
    parquet: str  # the batches as decoded by kafka-python, schemas/record_batch.json
    batches: int  # batches in the export (every partition)
    facts: dict = field(default_factory=dict)  # what the brokers and Kafka's tools said


@dataclass
class Built:
    """Every export of the run, by (scenario, release)."""

    exports: dict[tuple[str, str], Export]
    seconds: float


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


def write_dumps(jars: JarSet, exports: list[Export]) -> None:
    """Write the `kafka-dump-log.sh` forms of `exports`, all of one release.

    `dump/dump.txt` and `dump-deep/dump.txt` (`--deep-iteration`) beside each export's segments:
    what that release's DumpLogSegments prints for its first replica's segments. One JVM per
    output for all the exports (a tool's JVM costs about a CPU-second to start): its text is cut
    back into each file's part at the `Dumping <file>` line that starts it.
    """
    logs = {export.dump: _first_replica_logs(Path(export.segments)) for export in exports}
    every_log = [log for of_export in logs.values() for log in of_export]
    for attribute, options in (("dump", ()), ("dump_deep", ("--deep-iteration",))):
        parts = _parts_by_file(dump_log(jars, every_log, *options))
        for export in exports:
            target = Path(getattr(export, attribute))
            target.mkdir(parents=True, exist_ok=True)
            text = "".join(parts[str(log)] for log in logs[export.dump])
            (target / "dump.txt").write_text(text)


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
    java.producer("tx", transactional_id=f"{topic}-tx", transaction_timeout_ms="4000")
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


# The scenarios of each release (transactions v2 on 4.x, v1 on 3.9).
SCENARIOS_4 = (clean, retained, hanging, zombie, compacted, crash)
SCENARIOS_3 = (clean, zombie)


def _play(jars: JarSet, scenarios: tuple, classes: Path, folder: Path) -> list[Export]:
    """The scenarios one after the other on one single-node cluster of `jars`' release."""
    cluster = Cluster.create(jars, folder / "clusters" / jars.name)
    try:
        return [scenario(cluster, classes, folder / "exports") for scenario in scenarios]
    except BaseException as error:
        raise RuntimeError(f"{error}\nbroker log:\n{cluster.brokers[0].log_tail()}") from error
    finally:
        cluster.stop()
        shutil.rmtree(folder / "clusters" / jars.name, ignore_errors=True)


def build(folder: Path) -> Built:
    """Play every scenario on real brokers and export them under `folder`; see the module.

    The three clusters (4.x, 3.9, and the two brokers of `failover`) play at once: most of a
    scenario's time is waiting on a broker (a checkpoint, retention, the cleaner, a timeout).
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
    with ThreadPoolExecutor(3) as pool:
        blocks = [
            pool.submit(_play, jars, scenarios, classes[jars.name], folder)
            for jars, scenarios in ((KAFKA_4_JARS, SCENARIOS_4), (KAFKA_3_JARS, SCENARIOS_3))
        ]
        # The scenario that needs brokers of its own: two, and a controller apart.
        blocks.append(pool.submit(
            lambda: [failover(KAFKA_4_JARS, classes[KAFKA_4_JARS.name],
                              folder / "clusters" / "failover", folder / "exports")]
        ))  # fmt: skip
        exports = {
            (export.scenario, export.release): export
            for block in blocks
            for export in block.result()
        }
        # The dump-log forms last, each release's exports at once (`write_dumps`).
        dumps = [
            pool.submit(write_dumps, jars, [e for e in exports.values() if e.release == jars.name])
            for jars in (KAFKA_4_JARS, KAFKA_3_JARS)
        ]
        for done in dumps:
            done.result()
    return Built(exports, time.monotonic() - started)


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
