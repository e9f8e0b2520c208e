"""Hypothesis strategies for realistic random partition histories.

A history is built by *simulating* producers on one topic-partition (idempotent producers,
transactional producers of transaction version 1 and 2, coordinator writers), appending batches at
increasing offsets, and injecting the faults an audit must find: retried duplicates, lost batches,
zombies, coordinator-epoch regressions, non-transactional writes inside a transaction, sequence
resets, long pauses, corrupt or overlapping batches, leader-epoch regressions, ... Rows are never
drawn at random field by field, so most batches are legal and the faults stand out, as in real logs.

`histories(faults=False)` produces clean histories only: the model must find nothing in them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from tests.oracle.broker_model import MAX_SEQUENCE, Batch, Seed, SeedBatch, increment_sequence

EXPIRATION_MS = 86_400_000  # the model's default expiration_ms
T0 = 1_700_000_000_000  # 2023-11-14, ms
MAX_EPOCH = 32767  # int16
MAX_BATCHES = 40

COORDINATOR_TOPICS = ("__consumer_offsets", "__transaction_state")


@dataclass
class History:
    """One topic-partition's exported log, optional seeded producer state and log start offset."""

    batches: list[Batch]
    seeds: list[Seed]
    log_start_offsets: dict[tuple[str, int], int] | None
    topic: str
    partition: int


@dataclass
class _Producer:
    """What the simulated client (and its coordinator) knows about one producer id."""

    pid: int
    kind: str  # "idempotent", "tv1", "tv2" (transactional) or "coordinator" (seq -1 appends)
    epoch: int
    next_seq: int
    coordinator_epoch: int
    skew_ms: int  # the client's clock offset
    txn_open: bool = False
    # Its first rows lay in segments retention deleted: its first retained row is a marker.
    marker_first: bool = False
    # Every data batch written so far: (epoch, base_sequence, span, transactional).
    written: list[tuple[int, int, int, bool]] = field(default_factory=list)

    @property
    def transactional(self) -> bool:
        return self.kind in ("tv1", "tv2", "coordinator")


class _Simulator:
    """Appends batches to one partition the way a leader would, driven by hypothesis draws."""

    def __init__(self, draw, topic: str, partition: int, faults: bool) -> None:
        self.draw = draw
        self.topic = topic
        self.partition = partition
        self.faults = faults
        self.batches: list[Batch] = []
        self.seeds: list[Seed] = []
        self.producers: list[_Producer] = []
        self.time = T0
        self.leader_epoch = draw(st.integers(0, 5))
        self.base0 = 0  # first offset of the exported log
        self.offset = 0  # the log end offset
        self.pre_offset = 0  # offsets of seeded batches: below the exported log
        self.next_pid_index = 0
        self.pids = draw(st.lists(st.integers(0, 2**62), min_size=6, max_size=6, unique=True))
        self.coordinator_topic = topic in COORDINATOR_TOPICS

    # -- helpers ----------------------------------------------------------------------------------
    def chance(self, percent: int) -> bool:
        return self.draw(st.integers(0, 99)) < percent

    def tick(self) -> None:
        self.time += self.draw(st.integers(0, 3_000))

    def emit(
        self,
        *,
        span: int = 1,
        producer: _Producer | None = None,
        epoch: int | None = None,
        base_seq: int = -1,
        transactional: bool = False,
        control_type: str | None = None,
        control: bool = False,
        coordinator_epoch: int | None = None,
        record_count: int | None = None,
        magic: int | None = 2,
        crc_valid: bool | None = None,
        leader_epoch: int | None = None,
    ) -> Batch:
        """Append one batch at the current end offset; the end offset moves past it."""
        self.tick()
        # One draw for the incidental variations of the row (fewer draws = faster generation);
        # 0, where hypothesis shrinks to, is the plainest row.
        variation = self.draw(st.integers(0, 9_999))
        control = control or control_type is not None
        pid = producer.pid if producer is not None else -1
        if epoch is None:
            epoch = producer.epoch if producer is not None else -1
        base = self.offset
        last = base + span - 1
        last_seq: int | None = -1 if base_seq == -1 else increment_sequence(base_seq, span - 1)
        if variation % 5 == 4:
            last_seq = None  # left for the reader to derive (canonical input allows it)
        if record_count is None and (variation // 5) % 10 != 9:
            record_count = span
            if not control and (variation // 50) % 20 == 19:
                record_count = variation % (span + 1)  # compacted records
        if crc_valid is None and (variation // 1000) % 2 == 1:
            crc_valid = True
        timestamp: int | None = self.time + (producer.skew_ms if producer is not None else 0)
        if (variation // 2000) == 4 and variation % 3 == 2:
            timestamp = None
        if leader_epoch is None and magic is not None and magic >= 2:
            leader_epoch = self.leader_epoch
        batch = Batch(
            topic=self.topic,
            partition=self.partition,
            base_offset=base,
            last_offset=last,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=base_seq,
            last_sequence=last_seq,
            record_count=record_count,
            is_transactional=transactional,
            is_control=control,
            control_type=control_type,
            coordinator_epoch=coordinator_epoch,
            partition_leader_epoch=leader_epoch,
            magic=magic,
            max_timestamp=timestamp,
            crc_valid=crc_valid,
            source=f"{self.topic}-{self.partition}/00000000000000000000.log:{len(self.batches)}",
        )
        self.batches.append(batch)
        self.offset = last + 1
        return batch

    # -- producers --------------------------------------------------------------------------------
    def new_producer(self, *, seeded_allowed: bool) -> _Producer:
        kinds = ["idempotent", "tv1", "tv2", "coordinator"]
        if self.coordinator_topic:
            kind = self.draw(st.sampled_from(["coordinator", "coordinator", "tv1", "tv2"]))
        else:
            kind = kinds[self.draw(st.integers(0, 9)) % 3] if not self.chance(5) else "coordinator"
        epoch = self.draw(st.integers(0, 5))
        if kind == "idempotent" and self.chance(5):
            epoch = self.draw(st.integers(MAX_EPOCH - 3, MAX_EPOCH))
        producer = _Producer(
            pid=self.pids[self.next_pid_index],
            kind=kind,
            epoch=epoch,
            next_seq=0,
            coordinator_epoch=self.draw(st.integers(0, 40)) if kind != "idempotent" else 0,
            skew_ms=self.draw(st.integers(-2_000, 2_000)),
        )
        self.next_pid_index += 1
        if seeded_allowed and self.chance(35):
            self.seed(producer)
        elif seeded_allowed and self.faults and kind in ("tv1", "tv2") and self.chance(12):
            # Retention deleted its first transaction's data; its first retained row is the marker
            # (written as the log starts, in run()), and its sequences continue after it.
            producer.marker_first = True
            producer.next_seq = self.draw(st.integers(1, 50))
            producer.txn_open = True
            self.pre_offset += producer.next_seq + 1  # the deleted batches' offsets
        elif self.faults and kind != "coordinator" and self.chance(8):
            # A first batch with a non-zero sequence (first-write loss, or history before the log);
            # sometimes just below the wraparound.
            producer.next_seq = self.draw(
                st.one_of(st.integers(1, 50), st.integers(MAX_SEQUENCE - 10, MAX_SEQUENCE))
            )
        self.producers.append(producer)
        return producer

    def seed(self, producer: _Producer) -> None:
        """State the producer had before the exported log starts (snapshot / previous run)."""
        seq = 0
        if self.chance(25):
            seq = self.draw(st.integers(MAX_SEQUENCE - 12, MAX_SEQUENCE))  # cross the wrap later
        seed_batches = []
        if producer.kind != "coordinator":
            for _ in range(self.draw(st.integers(0, 5))):
                span = self.draw(st.integers(1, 3))
                base_offset = self.pre_offset
                self.pre_offset += span + self.draw(st.integers(0, 2))
                last_seq = increment_sequence(seq, span - 1)
                seed_batches.append(SeedBatch(seq, last_seq, base_offset, base_offset + span - 1))
                producer.written.append((producer.epoch, seq, span, False))
                seq = increment_sequence(last_seq, 1)
        producer.next_seq = seq if seed_batches else 0
        txn_first_offset = None
        if producer.transactional and self.chance(40):
            txn_first_offset = self.pre_offset
            self.pre_offset += 1
            producer.txn_open = True
        last_timestamp: int | None = T0 - self.draw(st.integers(0, 60_000))
        if self.faults and self.chance(20):
            last_timestamp = T0 - EXPIRATION_MS - self.draw(st.integers(0, 10 * EXPIRATION_MS))
        elif self.chance(5):
            last_timestamp = None
        self.seeds.append(
            Seed(
                topic=self.topic,
                partition=self.partition,
                producer_id=producer.pid,
                producer_epoch=producer.epoch,
                coordinator_epoch=producer.coordinator_epoch if producer.transactional else None,
                txn_first_offset=txn_first_offset,
                last_timestamp=last_timestamp,
                batches=tuple(seed_batches),
                # Usually unknown (right before the log); sometimes a snapshot at a known offset,
                # below the log start when retention removed the batches in between.
                state_offset=self.draw(
                    st.one_of(st.none(), st.just(self.pre_offset), st.integers(0, self.pre_offset))
                ),
            )
        )

    # -- legal writes -----------------------------------------------------------------------------
    def write_data(
        self,
        producer: _Producer,
        *,
        transactional: bool | None = None,
        crc_valid: bool | None = None,
        leader_epoch: int | None = None,
    ) -> None:
        """The next data batch of a producer, in sequence."""
        if transactional is None:
            transactional = producer.transactional
        span = self.draw(st.integers(1, 4))
        if producer.kind == "coordinator" and not self.chance(10):
            base_seq = -1  # coordinator append (§7 rule 8)
        else:
            base_seq = producer.next_seq
        self.emit(
            span=span,
            producer=producer,
            base_seq=base_seq,
            transactional=transactional,
            crc_valid=crc_valid,
            leader_epoch=leader_epoch,
        )
        if base_seq >= 0:
            producer.written.append((producer.epoch, base_seq, span, transactional))
            producer.next_seq = increment_sequence(base_seq, span)
        if transactional:
            producer.txn_open = True

    def end_txn(self, producer: _Producer, *, coordinator_epoch: int | None = None) -> None:
        """A COMMIT/ABORT marker: TV1 at the data epoch, TV2 at epoch + 1 (KIP-890 part 2)."""
        if self.chance(15):
            producer.coordinator_epoch += 1  # coordinator moved
        if coordinator_epoch is None:
            coordinator_epoch = producer.coordinator_epoch
        bump = producer.kind == "tv2" and producer.epoch < MAX_EPOCH
        marker_epoch = producer.epoch + 1 if bump else producer.epoch
        if self.chance(10):
            # As kafka-dump-log.sh without --deep-iteration shows it: no type, no coordinator epoch.
            control_type, coordinator_epoch = None, None
        else:
            control_type = self.draw(st.sampled_from(["COMMIT", "ABORT"]))
        self.emit(
            producer=producer,
            epoch=marker_epoch,
            transactional=True,
            control_type=control_type,
            control=True,
            coordinator_epoch=coordinator_epoch,
        )
        if bump:
            producer.epoch = marker_epoch
            producer.next_seq = 0
        producer.txn_open = False

    def normal(self, producer: _Producer) -> None:
        """What a healthy client does next."""
        if not producer.transactional or not producer.txn_open or self.chance(55):
            self.write_data(producer)
        else:
            self.end_txn(producer)

    def epoch_bump(self, producer: _Producer) -> None:
        """Idempotent: client-side bump (KIP-360); transactional: abort at epoch + 1 (timeout)."""
        if producer.epoch >= MAX_EPOCH:
            self.normal(producer)
            return
        producer.epoch += 1
        producer.next_seq = 0
        if producer.transactional:
            self.emit(
                producer=producer,
                transactional=True,
                control_type="ABORT",
                coordinator_epoch=producer.coordinator_epoch,
            )
            producer.txn_open = False
        else:
            self.write_data(producer)

    def empty_transaction_marker(self, producer: _Producer) -> None:
        """A marker for a producer with no open transaction (empty txn, TV2 marker retry)."""
        if not producer.transactional or producer.txn_open:
            self.normal(producer)
            return
        self.emit(
            producer=producer,
            transactional=True,
            control_type=self.draw(st.sampled_from(["COMMIT", "ABORT"])),
            coordinator_epoch=producer.coordinator_epoch,
        )

    def empty_control(self) -> None:
        """A control batch whose records were all cleaned (record_count 0): a no-op (§1.7)."""
        producer = self.pick()
        self.emit(
            producer=producer,
            epoch=self.draw(st.integers(0, MAX_EPOCH)) if self.chance(30) else None,
            transactional=True,
            control_type="COMMIT",
            coordinator_epoch=self.draw(st.integers(0, 100)),
            record_count=0,
        )

    def no_producer_id(self) -> None:
        self.emit(span=self.draw(st.integers(1, 5)))

    def magic_one(self) -> None:
        self.emit(span=self.draw(st.integers(1, 3)), magic=1, crc_valid=True)

    # -- faults -----------------------------------------------------------------------------------
    def retry_duplicate(self, producer: _Producer) -> None:
        """The same range re-appended: within the last 5 batches, or further back."""
        if not producer.written:
            self.normal(producer)
            return
        if len(producer.written) > 5 and self.chance(30):
            # Right at the edge of the leader's 5-batch cache: the 5th or the 6th batch back.
            index = len(producer.written) - self.draw(st.sampled_from([5, 6]))
        elif len(producer.written) > 5 and self.chance(40):
            index = self.draw(st.integers(0, len(producer.written) - 6))
        else:
            index = self.draw(
                st.integers(max(0, len(producer.written) - 5), len(producer.written) - 1)
            )
        epoch, base_seq, span, transactional = producer.written[index]
        self.emit(
            span=span,
            producer=producer,
            epoch=epoch,
            base_seq=base_seq,
            transactional=transactional,
        )

    def lost_batch(self, producer: _Producer) -> None:
        producer.next_seq = increment_sequence(producer.next_seq, self.draw(st.integers(1, 6)))
        self.write_data(producer)

    def lost_after_bump(self, producer: _Producer) -> None:
        """An epoch bump whose first batches are lost: the new epoch starts above 0."""
        if producer.transactional or producer.epoch >= MAX_EPOCH:
            self.lost_batch(producer)
            return
        producer.epoch += 1
        producer.next_seq = self.draw(st.integers(1, 6))
        self.write_data(producer)

    def sequence_reset(self, producer: _Producer) -> None:
        producer.next_seq = 0
        self.write_data(producer)

    def zombie(self, producer: _Producer) -> None:
        """A write from a fenced incarnation: lower epoch, data or marker."""
        if producer.epoch == 0:
            self.normal(producer)
            return
        epoch = self.draw(st.integers(0, producer.epoch - 1))
        if producer.transactional and self.chance(40):
            self.emit(
                producer=producer,
                epoch=epoch,
                transactional=True,
                control_type="ABORT",
                coordinator_epoch=producer.coordinator_epoch,
            )
        else:
            self.emit(
                span=self.draw(st.integers(1, 3)),
                producer=producer,
                epoch=epoch,
                base_seq=self.draw(st.integers(0, 20)),
                transactional=producer.transactional,
            )

    def coordinator_regression(self, producer: _Producer) -> None:
        """A marker from a coordinator with an older coordinator epoch."""
        if not producer.transactional or producer.coordinator_epoch == 0:
            self.normal(producer)
            return
        lower = self.draw(st.integers(0, producer.coordinator_epoch - 1))
        self.end_txn(producer, coordinator_epoch=lower)

    def non_transactional_in_txn(self, producer: _Producer) -> None:
        """Non-transactional data while the producer's transaction is open."""
        if not producer.transactional or producer.kind == "coordinator":
            self.normal(producer)
            return
        if not producer.txn_open:
            self.write_data(producer)
        self.write_data(producer, transactional=False)

    def long_pause(self, producer: _Producer) -> None:
        """Nothing is written for at least the expiration time, then the producer writes."""
        self.time += EXPIRATION_MS + self.draw(st.integers(0, 5 * EXPIRATION_MS))
        self.normal(producer)

    def corrupt(self, producer: _Producer) -> None:
        """A batch that fails its CRC (the producer's range is lost behind it)."""
        self.write_data(producer, crc_valid=False)

    def exported_twice(self) -> None:
        """A bad export: one of the rows so far written again, unchanged (same offsets)."""
        if not self.batches:
            return
        self.batches.append(self.batches[self.draw(st.integers(0, len(self.batches) - 1))])

    def overlap(self, producer: _Producer) -> None:
        """One batch written at offsets already used; the log end offset does not go back."""
        end = self.offset
        self.offset = max(self.base0, self.offset - self.draw(st.integers(1, 5)))
        self.normal(producer)
        self.offset = max(end, self.offset)

    def leader_epoch_regression(self, producer: _Producer) -> None:
        if self.leader_epoch == 0:
            self.normal(producer)
            return
        self.write_data(producer, leader_epoch=self.draw(st.integers(0, self.leader_epoch - 1)))

    # -- driver -----------------------------------------------------------------------------------
    def pick(self) -> _Producer:
        return self.producers[self.draw(st.integers(0, len(self.producers) - 1))]

    def step(self) -> None:
        roll = self.draw(st.integers(0, 99))
        if roll < 50 or roll > 96:  # hypothesis likes boundary values: both ends are healthy writes
            self.normal(self.pick())
        elif roll < 54:
            if self.faults:
                # A hole in the offsets: records lost, a segment missing, or the cleaner's work.
                self.offset += self.draw(st.integers(1, 50))
            self.normal(self.pick())
        elif roll < 57:
            self.leader_epoch += 1
            self.normal(self.pick())
        elif roll < 60:
            self.epoch_bump(self.pick())
        elif roll < 62:
            self.empty_transaction_marker(self.pick())
        elif roll < 64:
            self.empty_control()
        elif roll < 66:
            self.no_producer_id()
        elif roll < 67:
            self.magic_one()
        elif roll < 69 and len(self.producers) < len(self.pids):
            self.normal(self.new_producer(seeded_allowed=False))
        elif not self.faults:
            self.normal(self.pick())
        elif roll < 74:
            self.retry_duplicate(self.pick())
        elif roll < 77:
            self.lost_batch(self.pick())
        elif roll < 78:
            self.lost_after_bump(self.pick())
        elif roll < 81:
            self.zombie(self.pick())
        elif roll < 83:
            self.coordinator_regression(self.pick())
        elif roll < 86:
            self.non_transactional_in_txn(self.pick())
        elif roll < 88:
            self.sequence_reset(self.pick())
        elif roll < 91:
            self.long_pause(self.pick())
        elif roll < 93:
            self.corrupt(self.pick())
        elif roll < 95:
            self.overlap(self.pick())
        elif roll < 96:
            self.exported_twice()
        else:
            self.leader_epoch_regression(self.pick())

    def run(self) -> History:
        n_producers = self.draw(st.integers(1, 4))
        for _ in range(n_producers):
            self.new_producer(seeded_allowed=True)
        if self.pre_offset > 0 or self.chance(40):
            self.base0 = max(self.pre_offset + 10, self.draw(st.sampled_from([0, 100, 5_000])))
        self.offset = self.base0
        for producer in self.producers:
            if producer.marker_first:
                self.end_txn(producer)
        n_steps = self.draw(st.integers(3, 30))
        for _ in range(n_steps):
            if len(self.batches) >= MAX_BATCHES - 2:
                break
            self.step()

        log_start_offsets = None
        choice = self.draw(st.integers(0, 3))
        key = (self.topic, self.partition)
        if choice == 1:
            log_start_offsets = {key: self.base0}
        elif choice == 2:
            log_start_offsets = {key: self.base0 + self.draw(st.integers(1, 20))}  # DeleteRecords
        elif choice == 3 and not self.faults:
            log_start_offsets = {key: 0}

        batches = list(self.batches)
        if self.chance(30):
            self.draw(st.randoms(use_true_random=False)).shuffle(batches)  # input order is free
        return History(
            batches=batches,
            seeds=list(self.seeds),
            log_start_offsets=log_start_offsets,
            topic=self.topic,
            partition=self.partition,
        )


@st.composite
def histories(
    draw, topic: str | None = None, partition: int | None = None, faults: bool = True
) -> History:
    """One topic-partition history (at most 40 batches).

    `topic` fixes the topic name (e.g. a compacted or coordinator topic); `partition` the partition.
    `faults=False` produces histories a leader would have written without any error.
    """
    if topic is None:
        topic = draw(st.sampled_from(["orders", "payments", "audit.events"]))
    if partition is None:
        partition = draw(st.integers(0, 3))
    return _Simulator(draw, topic, partition, faults).run()


@st.composite
def many_histories(draw, n: int, faults: bool = True) -> list[History]:
    """`n` histories, each on its own topic-partition (topic f"t{i}", partition i % 3)."""
    return [draw(histories(topic=f"t{i}", partition=i % 3, faults=faults)) for i in range(n)]
