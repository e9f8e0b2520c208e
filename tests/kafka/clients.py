"""Two independent producer implementations the real-Kafka tests write with.

- `JavaClient`: Kafka's own Java producer (`EosClient.java` beside this file, compiled once per
  Kafka release with `javac` against that release's `kafka-clients`), driven line by line.
- `rdkafka_producer`: librdkafka, the C client, through `confluent-kafka`.

`DumpLogSegmentsRuns.java`, compiled with it, is no client: it runs Kafka's DumpLogSegments
several times in one JVM (`cluster.dump_logs`). Nor is `RecompressedSegments.java`: it writes
segments again with another codec, by Kafka's record writer (`tamper.recompress`).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.jars import JarSet

SOURCE = Path(__file__).with_name("EosClient.java")
# The Java classes compiled with it, from the files of the same names beside this one.
CLASSES = ("EosClient", "DumpLogSegmentsRuns", "RecompressedSegments")


class ClientError(RuntimeError):
    """A command the Java client answered with an error: the exception's class and message."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def compile_client(jars: JarSet, into: Path) -> Path:
    """`EosClient.java` (and the other `CLASSES`) compiled against `jars` into `into`, once per
    folder, in one `javac`."""
    if not all((into / f"{name}.class").exists() for name in CLASSES):
        into.mkdir(parents=True, exist_ok=True)
        sources = [str(SOURCE.with_name(f"{name}.java")) for name in CLASSES]
        with tempfile.TemporaryDirectory(dir=into) as work:
            subprocess.run(
                ["javac", "-nowarn", "-d", work, "-cp", jars.classpath(), *sources],
                check=True, capture_output=True, text=True,
            )
            for name in CLASSES:
                shutil.move(str(Path(work) / f"{name}.class"), into / f"{name}.class")
    return into


# Client JVMs still running, for a process that must stop them all at once (SIGTERM): a client
# left behind by a stopped scenario waits for ever to close its producers on brokers that are gone.
CLIENTS: set[subprocess.Popen] = set()


class JavaClient:
    """One JVM of `EosClient`: producers by name, each command answered before the next."""

    def __init__(self, jars: JarSet, classes: Path, bootstrap: str) -> None:
        self.process = subprocess.Popen(
            [
                "java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                "-cp", f"{classes}:{jars.classpath()}", "EosClient", bootstrap,
            ],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, bufsize=1,
        )
        CLIENTS.add(self.process)

    def do(self, command: str) -> str:
        """Run one command; what follows its `ok`.

        Raises:
            ClientError: the producer raised (ProducerFencedException...).
        """
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()
        if answer.startswith("ok"):
            return answer[2:].strip()
        if answer.startswith("error "):
            kind, _, message = answer[6:].partition(" ")
            raise ClientError(kind, message)
        raise RuntimeError(f"EosClient ended on {command!r} (exit {self.process.poll()})")

    def producer(self, name: str, **settings: str) -> None:
        """A producer named `name`; settings with `_` for `.` (transactional_id=...)."""
        pairs = " ".join(f"{key.replace('_', '.')}={value}" for key, value in settings.items())
        self.do(f"producer {name} {pairs}")

    def send(self, name: str, topic: str, partition: int, count: int) -> int:
        """`count` records in one batch; the offset of its first record."""
        return int(self.do(f"send {name} {topic} {partition} {count}"))

    def transaction(self, name: str, writes: list[tuple[str, int, int]], outcome: str) -> None:
        """begin, each (topic, partition, count) write, then `commit` or `abort`."""
        self.do(f"begin {name}")
        for topic, partition, count in writes:
            self.send(name, topic, partition, count)
        self.do(f"{outcome} {name}")

    def halt(self) -> None:
        """The JVM dies at once, as under SIGKILL: nothing flushed, no transaction ended."""
        assert self.process.stdin is not None
        self.process.stdin.write("halt\n")
        self.process.stdin.flush()
        self.process.wait(30)
        CLIENTS.discard(self.process)

    def close(self) -> None:
        """Close every producer (a clean end) and the JVM."""
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        CLIENTS.discard(self.process)


def rdkafka_producer(bootstrap: str, **settings: object):
    """A librdkafka producer (idempotent, acks=all) with settings in librdkafka's names."""
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 0,
            **{key.replace("_", "."): value for key, value in settings.items()},
        }
    )


def rdkafka_send(producer, topic: str, partition: int, count: int) -> None:
    """`count` records to one partition, then a flush: one batch, as `JavaClient.send`."""
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), key=f"k{i % 7}".encode(),
                         partition=partition)
    if producer.flush(30) != 0:
        raise RuntimeError("librdkafka did not deliver every record within 30 s")
