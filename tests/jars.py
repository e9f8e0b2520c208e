"""The Java parts the suite runs for real, pinned here and fetched once into `.jars/` (git-ignored).

Each set is a list of Maven coordinates whose runtime dependencies are copied into
`.jars/<set>/`: Apache Kafka's release jars (the broker with its KRaft controller, and the tools:
`DumpLogSegments`, `kafka-transactions`, `GetOffsetShell`, the transactional copier) for a 4.x and
a 3.9 release, delta-spark's jars for Spark's own Delta writer, and hadoop-aws for Spark's `s3a://`
readers. They come through the machine's Maven client (`mvn dependency:copy-dependencies`, which
also fills the local Maven repository that spark-submit's `--packages` looks in first, so
`./spark-submit.sh` then runs offline), or, where there is no `mvn`, through the Ivy that pyspark
ships (`pyspark/jars/ivy-*.jar`). Both use the client's own default repository: no registry host
is written here.

    python -m tests.jars fetch [SET ...]   # every set, or the ones named; quick when present
    python -m tests.jars path SET          # the folder of a fetched set

A set is complete when its folder holds the `.complete` stamp written after the copy, with the
coordinates it was fetched for: a changed pin fetches again, an interrupted fetch is retried.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
JARS = REPO / ".jars"

# The Kafka releases the suite's brokers run. 4.x: transactions v2 (KIP-890, an epoch bump at every
# marker) on a cluster formatted at its release version; 3.9: the last 3.x, transactions v1 and
# ZooKeeper-era tooling output. Their `kafka-dump-log.sh` texts are two generations apart.
KAFKA_4 = "4.1.1"
KAFKA_3 = "3.9.1"
# Spark's Delta writer: delta-spark's jars for the Spark that constraints.txt pins (4.2). The Python
# package is 4.4.1 there, but Maven serves delta-spark_2.13 only up to 4.4.0 (4.4.1's jar and pom
# are not found); the package's Python side only configures a session, the writer is the jars.
DELTA_SPARK = "4.4.0"
# Of its runtime closure only Delta's own jars go on Spark's class path: the rest is Spark's own
# libraries in older versions (hadoop-client 3.4, Parquet 1.16, Jackson 2.13, scala-library, log4j)
# or what Unity Catalog and the Delta kernel need. Measured: delta-spark and delta-storage alone
# write, replace (replaceWhere), merge schemas and read Delta tables on pyspark 4.2. The closure is
# still fetched: it fills the local Maven repository that `./spark-submit.sh`'s `--packages`
# resolves from offline (~/.m2, Ivy's "local-m2-cache").
DELTA_SPARK_CLASSPATH = ("delta-spark_2.13", "delta-storage")
# Spark's s3a:// connector, the version of the Hadoop client pyspark ships (pyspark/jars).
HADOOP_AWS = "3.5.0"
# Kafka 4's broker logs through log4j 2 and 3.9's through reload4j; slf4j's binding for log4j 2 is
# not among Kafka 4's runtime dependencies (the release tarball adds it).
LOG4J_SLF4J = "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3"


@dataclass(frozen=True)
class JarSet:
    """Maven coordinates (group:artifact:version) whose runtime closure is one folder of jars."""

    name: str
    coordinates: tuple[str, ...]
    # The artifacts (by name) whose jars `jars()` and `classpath()` give; empty: every jar.
    on_classpath: tuple[str, ...] = ()

    @property
    def folder(self) -> Path:
        """Where the set's jars are copied."""
        return JARS / self.name

    @property
    def stamp(self) -> str:
        """What `.complete` holds once the set is fetched: its coordinates."""
        return "\n".join(self.coordinates) + "\n"

    def present(self) -> bool:
        """Whether the set was fetched completely, for these coordinates."""
        stamp = self.folder / ".complete"
        return stamp.is_file() and stamp.read_text() == self.stamp

    def classpath(self) -> str:
        """The set as a Java class path (a folder wildcard, or its `on_classpath` jars)."""
        if self.on_classpath:
            return os.pathsep.join(str(jar) for jar in self.jars())
        return str(self.folder / "*")

    def jars(self) -> list[Path]:
        """The set's jar files (only its `on_classpath` artifacts' when it names them)."""
        found = sorted(self.folder.glob("*.jar"))
        if not self.on_classpath:
            return found
        return [jar for jar in found if _artifact(jar.name) in self.on_classpath]


def _artifact(jar_name: str) -> str:
    """The artifact of a copied jar's name, `<artifact>-<version>[-<classifier>].jar`."""
    parts = jar_name.removesuffix(".jar").split("-")
    first_version = next((i for i, part in enumerate(parts) if part[:1].isdigit()), len(parts))
    return "-".join(parts[:first_version])


def in_local_maven_repository(coordinate: str) -> bool:
    """Whether `group:artifact:version`'s pom and jar are in the local Maven repository (~/.m2).

    That is where spark-submit's `--packages` looks first (Ivy's "local-m2-cache"); `mvn` fills it
    when it fetches a set, pyspark's Ivy does not.
    """
    group, artifact, version = coordinate.split(":")
    folder = Path.home() / ".m2" / "repository" / Path(*group.split(".")) / artifact / version
    return all((folder / f"{artifact}-{version}.{ext}").is_file() for ext in ("pom", "jar"))


def _kafka(version: str, *extra: str) -> tuple[str, ...]:
    return (
        f"org.apache.kafka:kafka_2.13:{version}",
        f"org.apache.kafka:kafka-tools:{version}",
        *extra,
    )


SETS = {
    jar_set.name: jar_set
    for jar_set in (
        JarSet(f"kafka-{KAFKA_4}", _kafka(KAFKA_4, LOG4J_SLF4J)),
        JarSet(f"kafka-{KAFKA_3}", _kafka(KAFKA_3)),
        JarSet(
            f"delta-spark-{DELTA_SPARK}",
            (f"io.delta:delta-spark_2.13:{DELTA_SPARK}",),
            on_classpath=DELTA_SPARK_CLASSPATH,
        ),
        JarSet(f"hadoop-aws-{HADOOP_AWS}", (f"org.apache.hadoop:hadoop-aws:{HADOOP_AWS}",)),
    )
}
KAFKA_4_JARS = SETS[f"kafka-{KAFKA_4}"]
KAFKA_3_JARS = SETS[f"kafka-{KAFKA_3}"]
DELTA_SPARK_JARS = SETS[f"delta-spark-{DELTA_SPARK}"]
HADOOP_AWS_JARS = SETS[f"hadoop-aws-{HADOOP_AWS}"]

# What a test says when a set is missing on a contributor's machine (in CI it fails instead).
HOW_TO_FETCH = (
    "fetch it with `.venv/bin/python -m tests.jars fetch` (needs Maven's `mvn`, or Java for "
    "pyspark's Ivy, and access to Maven Central); `./run.sh test` does it"
)


class FetchError(RuntimeError):
    """A set could not be fetched; the message says which and why."""


def _pom(coordinates: tuple[str, ...], artifact: str = "jars", into: Path | None = None) -> str:
    """A pom depending on `coordinates`; with `into`, one whose copy-dependencies copies there."""
    dependencies = "".join(
        "<dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version>"
        "</dependency>".format(*coordinate.split(":"))
        for coordinate in coordinates
    )
    build = (
        "<build><plugins><plugin><groupId>org.apache.maven.plugins</groupId>"
        "<artifactId>maven-dependency-plugin</artifactId>"
        f"<configuration><outputDirectory>{into}</outputDirectory></configuration>"
        "</plugin></plugins></build>"
        if into
        else ""
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        f"<groupId>eos-audit.tests</groupId><artifactId>{artifact}</artifactId><version>0</version>"
        f"<dependencies>{dependencies}</dependencies>{build}</project>"
    )


def _fetch_with_maven(jar_set: JarSet, into: Path, work: Path) -> None:
    (work / "pom.xml").write_text(_pom(jar_set.coordinates))
    command = [
        "mvn", "-q", "-B", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
        "-DincludeScope=runtime", f"-DoutputDirectory={into}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise FetchError(f"mvn could not fetch {jar_set.name}: {_last_lines(done)}")


def _ivy_jar() -> Path:
    import pyspark

    found = sorted(glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "ivy-*.jar")))
    if not found:
        raise FetchError("neither mvn nor pyspark's Ivy (pyspark/jars/ivy-*.jar) was found")
    return Path(found[-1])


def _fetch_with_ivy(jar_set: JarSet, into: Path, work: Path) -> None:
    ivy = _ivy_jar()
    for coordinate in jar_set.coordinates:
        group, artifact, version = coordinate.split(":")
        command = [
            "java", "-jar", str(ivy), "-cache", str(work / "cache"),
            "-dependency", group, artifact, version, "-confs", "default",
            "-retrieve", f"{into}/[artifact]-[revision](-[classifier]).[ext]",
            "-types", "jar", "bundle",  # jackson's modules are OSGi bundles
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise FetchError(f"Ivy could not fetch {coordinate}: {_last_lines(done)}")


def _last_lines(done: subprocess.CompletedProcess[str]) -> str:
    text = (done.stdout + done.stderr).strip().splitlines()
    return " | ".join(line.strip() for line in text[-3:]) or f"exit {done.returncode}"


def fetch(jar_set: JarSet) -> Path:
    """Fetch `jar_set` into its folder unless it is already there; return the folder.

    Raises:
        FetchError: neither client could fetch it.
    """
    if jar_set.present():
        return jar_set.folder
    JARS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=JARS, prefix=f".{jar_set.name}-") as work:
        into = Path(work) / "jars"
        into.mkdir()
        if shutil.which("mvn"):
            _fetch_with_maven(jar_set, into, Path(work))
        else:
            _fetch_with_ivy(jar_set, into, Path(work))
        if not any(into.glob("*.jar")):
            raise FetchError(f"fetching {jar_set.name} gave no jar")
        (into / ".complete").write_text(jar_set.stamp)
        shutil.rmtree(jar_set.folder, ignore_errors=True)
        into.rename(jar_set.folder)  # whole or not at all: a reader never sees half a set
    return jar_set.folder


def fetch_together(jar_sets: list[JarSet]) -> None:
    """Fetch the sets of `jar_sets` that are not there yet with one Maven run for all of them.

    Each `mvn` run starts a JVM and Maven (about 4 CPU-s on 2 cores, whatever it copies: the four
    sets took 17-25 s one after the other from a filled ~/.m2); one reactor of a module per set,
    two at a time (`-T 2`, one Maven resolver for both), copies each set into its own folder. A
    set is installed as `fetch` installs it, whole or not at all. Nothing is raised: without
    `mvn`, or where that run fails, the sets it left missing are for `fetch`, one by one, whose
    error then names the set.
    """
    missing = [jar_set for jar_set in jar_sets if not jar_set.present()]
    if len(missing) > 1 and shutil.which("mvn"):
        JARS.mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory(dir=JARS, prefix=".all-") as work:
            root = Path(work)
            modules = []
            for n, jar_set in enumerate(missing):
                module = root / f"set-{n}"
                (module / "jars").mkdir(parents=True)
                (module / "pom.xml").write_text(
                    _pom(jar_set.coordinates, f"set-{n}", module / "jars")
                )
                modules.append(module)
            (root / "pom.xml").write_text(
                '<project xmlns="http://maven.apache.org/POM/4.0.0">'
                "<modelVersion>4.0.0</modelVersion><groupId>eos-audit.tests</groupId>"
                "<artifactId>all</artifactId><version>0</version><packaging>pom</packaging>"
                "<modules>"
                + "".join(f"<module>{m.name}</module>" for m in modules)
                + "</modules></project>"
            )
            command = ["mvn", "-q", "-B", "-T", "2", "-f", str(root / "pom.xml"),
                       "dependency:copy-dependencies", "-DincludeScope=runtime"]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode == 0:
                for jar_set, module in zip(missing, modules, strict=True):
                    into = module / "jars"
                    if any(into.glob("*.jar")):
                        (into / ".complete").write_text(jar_set.stamp)
                        shutil.rmtree(jar_set.folder, ignore_errors=True)
                        into.rename(jar_set.folder)


def required() -> bool:
    """Whether a missing real part fails the run instead of skipping (in CI, `CI=true`)."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def main(argv: list[str]) -> int:
    """`fetch [SET ...]` or `path SET`; see the module's docstring."""
    if not argv or argv[0] not in ("fetch", "path"):
        print("usage: python -m tests.jars fetch [SET ...] | path SET", file=sys.stderr)
        return 2
    names = argv[1:] or list(SETS)
    unknown = [name for name in names if name not in SETS]
    if unknown:
        print(f"unknown jar set(s) {unknown}; known: {sorted(SETS)}", file=sys.stderr)
        return 2
    if argv[0] == "path":
        print(SETS[names[0]].folder)
        return 0
    fetch_together([SETS[name] for name in names])  # then each is quick, or fails naming itself
    failed = 0
    for name in names:
        try:
            fetch(SETS[name])
        except FetchError as error:
            print(f"tests.jars: {error}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
