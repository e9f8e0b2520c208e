"""Apache Kafka brokers in KRaft mode, started from the release jars (`tests/jars.py`).

Each `Broker` is one JVM running `kafka.Kafka` as broker and controller (a one-node quorum), or
a broker of a `Cluster` whose first node is also the quorum's controller. Every listener binds to
127.0.0.1 on a free port below the ephemeral range (`free_port`); a broker is stopped by its
process id (SIGTERM for a clean shutdown, which writes its producer snapshots and checkpoints;
SIGKILL for a crash). Kafka's own tools run as their main classes from the same jars:
`DumpLogSegments`, `TransactionsCommand` (`kafka-transactions.sh`), `GetOffsetShell` and the admin
commands.

Intervals that default to minutes are seconds here, so that what a test waits for happens while
it waits: checkpoints every second, retention checked every half second, the transaction
coordinator's abort of expired transactions every second. Each is a broker setting an operator
can set the same way; none changes what the broker writes, only when.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tests.jars import JarSet

# The JVM of a test broker: a small heap, and the quick-starting compiler as the suite's other JVMs
# (tests/conftest.py's JVM_OPTIONS): a broker's work here is a few thousand records.
BROKER_JVM = [
    "-Xms192m", "-Xmx384m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
    "-XX:ReservedCodeCacheSize=96m", "-Djava.awt.headless=true",
]
TOOL_JVM = ["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]

BROKER_SETTINGS = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "2",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    # Checkpoints (recovery point, log start offset, high watermark) are written every second, so
    # that a copy of a live log directory holds them as they are.
    "log.flush.offset.checkpoint.interval.ms": "1000",
    "log.flush.start.offset.checkpoint.interval.ms": "1000",
    "replica.high.watermark.checkpoint.interval.ms": "1000",
    "log.retention.check.interval.ms": "500",
    "log.cleaner.backoff.ms": "500",
    "log.initial.task.delay.ms": "0",
    # A long transaction.timeout.ms is allowed (a hanging transaction is kept open for the test),
    # and expired transactions are aborted within a second of their timeout.
    "transaction.max.timeout.ms": "86400000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3600000",
}


# The export recipe of docs/exporting.md.
EXPORT_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "export-log-dir.sh"

# Brokers whose JVM is running, for a process that must stop them all at once (SIGTERM).
RUNNING: set[Broker] = set()


# The ports handed out in this process (the scenarios start their clusters from threads).
_HANDED_OUT: set[int] = set()
_HANDING_OUT = threading.Lock()


def _ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (Linux's default when it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now, below the ephemeral range.

    A port the OS picks (a bind to port 0) comes from the ephemeral range, from which every
    outgoing connection on the machine takes its local port too: between the pick and the
    broker's bind, or while a killed broker waits for its restart on the same port, a client's
    connection could take it, and the broker failed to start (`BindException` in `failover`'s
    log, once). The kernel never hands out a port below that range on its own.
    """
    high = _ephemeral_start()
    low = max(1024, high - 10_000)
    with _HANDING_OUT:
        for port in random.sample(range(low, high), high - low):
            if port in _HANDED_OUT:
                continue
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _HANDED_OUT.add(port)
            return port
    raise KafkaStartError(f"no free port between {low} and {high} on 127.0.0.1")


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class KafkaStartError(RuntimeError):
    """A broker did not start; the message holds the end of its log."""


@dataclass(eq=False)
class Broker:
    """One Kafka node of a KRaft quorum: its folders, ports and process."""

    jars: JarSet
    root: Path
    node_id: int
    port: int
    controller_port: int
    voters: str
    settings: dict[str, str] = field(default_factory=dict)
    broker: bool = True  # False: a controller only, with no client listener
    process: subprocess.Popen | None = None

    @property
    def log_dir(self) -> Path:
        """The broker's `log.dirs` (one directory)."""
        return self.root / "logs"

    @property
    def bootstrap(self) -> str:
        """`host:port` of its client listener."""
        return f"127.0.0.1:{self.port}"

    @property
    def is_controller(self) -> bool:
        """Whether this node is also a controller of the quorum."""
        return f"{self.node_id}@" in self.voters

    def _properties(self) -> str:
        roles = [role for role, has in (("broker", self.broker), ("controller",
                 self.is_controller)) if has]  # fmt: skip
        listeners = [f"PLAINTEXT://127.0.0.1:{self.port}"] if self.broker else []
        if self.is_controller:
            listeners.append(f"CONTROLLER://127.0.0.1:{self.controller_port}")
        values = {
            "process.roles": ",".join(roles),
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            "listeners": ",".join(listeners),
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            **BROKER_SETTINGS,
            **self.settings,
        }
        if self.broker:
            values["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
            values["inter.broker.listener.name"] = "PLAINTEXT"
        return "".join(f"{key}={value}\n" for key, value in values.items())

    def format(self, cluster_id: str) -> None:
        """Write the configuration and format the log directory (`kafka-storage.sh format`)."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "server.properties").write_text(self._properties())
        (self.root / "log4j.properties").write_text(
            "log4j.rootLogger=WARN, file\nlog4j.appender.file=org.apache.log4j.FileAppender\n"
            f"log4j.appender.file.File={self.root / 'broker.log'}\n"
            "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        )
        (self.root / "log4j2.properties").write_text(
            "rootLogger.level=WARN\nrootLogger.appenderRef.file.ref=FILE\n"
            "appender.file.type=File\nappender.file.name=FILE\n"
            f"appender.file.fileName={self.root / 'broker.log'}\n"
            "appender.file.layout.type=PatternLayout\n"
            "appender.file.layout.pattern=[%d] %p %m (%c)%n\n"
        )
        run_tool(
            self.jars, "kafka.tools.StorageTool",
            "format", "-t", cluster_id, "-c", str(self.root / "server.properties"),
        )

    def start(self, timeout: float = 60.0) -> None:
        """Start the JVM and wait until its client listener accepts connections."""
        log = (self.root / "stdout.log").open("ab")
        command = [
            "java", *BROKER_JVM,
            f"-Dlog4j.configuration=file:{self.root / 'log4j.properties'}",
            f"-Dlog4j2.configurationFile=file:{self.root / 'log4j2.properties'}",
            "-cp", self.jars.classpath(), "kafka.Kafka", str(self.root / "server.properties"),
        ]
        self.process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        RUNNING.add(self)
        deadline = time.monotonic() + timeout
        while not _listening(self.port if self.broker else self.controller_port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise KafkaStartError(
                    f"Kafka {self.jars.name} node {self.node_id} did not start: {self.log_tail()}"
                )
            time.sleep(0.1)

    def log_tail(self, lines: int = 15) -> str:
        """The end of the broker's log and stdout, for a failure's message."""
        text = []
        for name in ("stdout.log", "broker.log"):
            path = self.root / name
            if path.exists():
                text += path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(text)

    def stop(self, timeout: float = 30.0) -> None:
        """A clean shutdown (SIGTERM), which writes producer snapshots and checkpoints."""
        self._signal(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """A crash: SIGKILL, nothing flushed or checkpointed beyond what the broker had."""
        self._signal(signal.SIGKILL, 10.0)

    def _signal(self, signum: int, timeout: float) -> None:
        RUNNING.discard(self)
        if self.process is None or self.process.poll() is not None:
            self.process = None
            return
        os.kill(self.process.pid, signum)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self.process = None
        # The port is free again once the process is gone; a restart reuses it.


@dataclass
class Cluster:
    """KRaft brokers of one Kafka release; node 1 is the quorum's only controller."""

    jars: JarSet
    root: Path
    brokers: list[Broker]
    cluster_id: str

    @classmethod
    def create(
        cls,
        jars: JarSet,
        root: Path,
        size: int = 1,
        settings: dict[str, str] | None = None,
        dedicated_controller: bool = False,
    ) -> Cluster:
        """Format and start `size` brokers under `root` (`root/node-<id>/`).

        Node 1 is the quorum's controller, and a broker too unless `dedicated_controller`: then
        the brokers are nodes 2 to size + 1, and any of them can die without the quorum.
        """
        controller_port = free_port()
        voters = f"1@127.0.0.1:{controller_port}"
        cluster_id = _cluster_id()
        first = 2 if dedicated_controller else 1
        brokers = [
            Broker(
                jars, root / f"node-{node}", node, free_port(),
                controller_port if node == 1 else 0, voters, dict(settings or {}),
            )
            for node in range(first, first + size)
        ]
        if dedicated_controller:
            brokers.insert(0, Broker(
                jars, root / "node-1", 1, 0, controller_port, voters, dict(settings or {}),
                broker=False,
            ))  # fmt: skip
        cluster = cls(jars, root, brokers, cluster_id)
        try:
            for broker in brokers:
                broker.format(cluster_id)
                broker.start()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    @property
    def bootstrap(self) -> str:
        """The client bootstrap list of every running broker."""
        return ",".join(
            b.bootstrap for b in self.brokers if b.broker and b.process is not None
        )

    def broker(self, node_id: int) -> Broker:
        """The broker with this node id."""
        return next(b for b in self.brokers if b.node_id == node_id)

    def stop(self) -> None:
        """Stop every broker (brokers first, the controller last)."""
        for broker in sorted(self.brokers, key=lambda b: b.is_controller):
            broker.stop()

    def tool(self, main_class: str, *args: str, check: bool = True) -> str:
        """Run one of Kafka's tools against this cluster's release; its standard output."""
        return run_tool(self.jars, main_class, *args, check=check)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replicas: int = 1,
        replica_assignment: list[list[int]] | None = None,
        **configs: str,
    ) -> None:
        """Create a topic through the admin API, with topic configs as keyword arguments.

        `replica_assignment` (the brokers of each partition, the leader first) replaces the
        counts. librdkafka's admin client rather than `kafka-topics.sh`: a tool's JVM costs about
        a CPU-second, and the topic's creation is not what the tests look at.
        """
        from confluent_kafka.admin import AdminClient, NewTopic

        config = {key.replace("_", "."): value for key, value in configs.items()}
        topic = (
            NewTopic(name, len(replica_assignment), replica_assignment=replica_assignment,
                     config=config)  # fmt: skip
            if replica_assignment
            else NewTopic(name, partitions, replicas, config=config)
        )
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([topic], operation_timeout=30)[name].result(60)

    def export(self, into: Path, *topics: str, node_ids: tuple[int, ...] | None = None) -> Path:
        """Copy each broker's folders of `topics` as docs/exporting.md tells operators to.

        `into/<node-id>/<topic>-<partition>/` with the log directory's checkpoint files beside
        them, by `scripts/export-log-dir.sh` (the recipe the docs give, so every export the suite
        audits tests it): a live broker's folders as they are, its active segment included.
        """
        for broker in self.brokers:
            if broker.broker and (node_ids is None or broker.node_id in node_ids):
                export_log_dir(broker.log_dir, into, str(broker.node_id), *topics)
        return into


def export_log_dir(log_dir: Path, into: Path, name: str, *topics: str) -> None:
    """`scripts/export-log-dir.sh LOG_DIR INTO NAME [TOPIC ...]`: one log directory's copy."""
    subprocess.run(
        [str(EXPORT_SCRIPT), str(log_dir), str(into), name, *topics],
        check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip


def _cluster_id() -> str:
    # A KRaft cluster id: 16 random bytes in URL-safe base64 without padding, never starting with
    # "-" (Uuid.randomUuid draws again then: a command line would read it as an option).
    import base64

    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def run_tool(
    jars: JarSet, main_class: str, *args: str, check: bool = True, classpath: str | None = None
) -> str:
    """Run a Kafka main class from `jars` (or `classpath`); its standard output (stderr joins it
    on failure)."""
    done = subprocess.run(
        ["java", *TOOL_JVM, "-cp", classpath or jars.classpath(), main_class, *args],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False, timeout=180,
    )
    if check and done.returncode != 0:
        raise RuntimeError(
            f"{main_class} {' '.join(args)} exited {done.returncode}: "
            f"{(done.stdout + done.stderr)[-2000:]}"
        )
    return done.stdout


def dump_log(jars: JarSet, segments: list[Path], *options: str) -> str:
    """`kafka-dump-log.sh --files SEGMENT,... [OPTIONS]` of this release, as it prints it."""
    files = ",".join(str(segment) for segment in segments)
    return run_tool(jars, "kafka.tools.DumpLogSegments", "--files", files, *options)


def dump_logs(
    jars: JarSet, classes: Path, runs: list[tuple[list[Path], tuple[str, ...]]]
) -> list[str]:
    """`dump_log` of each (segments, options) of `runs`, all in one JVM; what each printed.

    `classes` holds `DumpLogSegmentsRuns` compiled for this release (`clients.compile_client`),
    which calls DumpLogSegments' main once per run and prints `#run N` before each.
    """
    arguments: list[str] = []
    for segments, options in runs:
        if arguments:
            arguments.append("--then")
        arguments += ["--files", ",".join(str(segment) for segment in segments), *options]
    classpath = f"{classes}:{jars.classpath()}"
    text = run_tool(jars, "DumpLogSegmentsRuns", *arguments, classpath=classpath)
    parts = re.split(r"^#run \d+\n", text, flags=re.MULTILINE)
    if parts[0] or len(parts) != len(runs) + 1:
        raise RuntimeError(f"DumpLogSegmentsRuns printed {len(parts) - 1} of {len(runs)} runs")
    return parts[1:]
