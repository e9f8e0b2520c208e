"""Each output of the replay has one name, the table it becomes, from the kernel to the sinks."""

from __future__ import annotations

from eos_audit.audit import output_records
from eos_audit.replay.runner import OUTPUT_ARROW
from eos_audit.replay.state import OUTPUTS
from eos_audit.sinks.run_record import TABLE_SCHEMAS


def test_every_output_is_named_after_a_table_the_run_writes():
    assert set(output_records.OUTPUTS) <= set(TABLE_SCHEMAS)
    assert set(OUTPUTS) <= set(output_records.OUTPUTS)


def test_the_runner_and_the_output_records_carry_each_output_under_its_name():
    runner_structs = [f.name for f in OUTPUT_ARROW if f.type.num_fields > 0]
    assert runner_structs == list(output_records.OUTPUTS)
    assert output_records.OUTPUT_RECORD.fieldNames() == ["kind", *output_records.OUTPUTS]
