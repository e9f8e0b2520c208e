"""A KIP-939 two-phase-commit participant that prepares a transaction and is never told to end it.

    python -m tests.kafka.two_phase_commit BOOTSTRAP TRANSACTIONAL_ID INPUT OUTPUT GROUP RECORDS

kafka-python's transactional producer, whose InitProducerId asks for two-phase commit
(`Enable2Pc`, InitProducerId version 6). No released Kafka client sends that flag yet: version 6
is marked `latestVersionUnstable` up to Kafka 4.4.0, the Java producer's request builder takes
stable versions only, and nothing in its `TransactionManager` sets the field. So the one request
is replaced here, in this process only; everything else is the client as it is. The broker must
serve unstable versions (`unstable.api.versions.enable`) and allow two-phase commit
(`transaction.two.phase.commit.enable`); its coordinator then gives the transactional id a
timeout of `Integer.MAX_VALUE`, by which Kafka knows such a transaction and never aborts it.

The participant writes RECORDS copies to partition 0 of OUTPUT and adds GROUP's offset after
RECORDS records of partition 0 of INPUT to the transaction, as a consume-transform-produce step
does, prints one JSON line (its producer id and epoch, the offset), and exits at once without
committing or aborting: the external transaction manager that would decide is gone.
A prepared transaction is an Ongoing one to the broker (Kafka 4.4.0's `prepareTransaction` sends
nothing), so what this leaves in the logs is what a prepared one leaves.
"""

from __future__ import annotations

import json
import os
import sys


def _ask_for_two_phase_commit() -> None:
    """Make kafka-python's InitProducerId ask for two-phase commit, at version 6."""
    from kafka.producer import transaction_manager
    from kafka.protocol.producer.transaction import InitProducerIdRequest

    built = transaction_manager.InitProducerIdHandler.__init__

    def two_phase(self, *args, **kwargs) -> None:
        built(self, *args, **kwargs)
        asked = self.request
        self.request = InitProducerIdRequest(
            transactional_id=asked.transactional_id,
            transaction_timeout_ms=asked.transaction_timeout_ms,
            producer_id=asked.producer_id, producer_epoch=asked.producer_epoch,
            enable2_pc=True, min_version=6, max_version=6,
        )  # fmt: skip

    transaction_manager.InitProducerIdHandler.__init__ = two_phase


def main(argv: list[str]) -> None:
    """Copy, add the offsets, print what was done, and leave the transaction open."""
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    bootstrap, transactional_id, input_topic, output_topic, group, records = argv
    _ask_for_two_phase_commit()
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    producer.init_transactions()
    producer.begin_transaction()
    for n in range(int(records)):
        producer.send(output_topic, f"copy of {n}".encode(), partition=0)
    offset = int(records)
    producer.send_offsets_to_transaction(
        {TopicPartition(input_topic, 0): OffsetAndMetadata(offset, "", -1)}, group
    )
    producer.flush()
    ids = producer._transaction_manager.producer_id_and_epoch
    print(json.dumps({"producer_id": ids.producer_id, "producer_epoch": ids.epoch,
                      "offset": offset}), flush=True)  # fmt: skip
    os._exit(0)  # no commit, no abort, no close


if __name__ == "__main__":
    main(sys.argv[1:])
