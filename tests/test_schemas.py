import json
from pathlib import Path

from eos_audit.schemas import PUBLISHED, RECORD_BATCH, contract_json

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"


def test_every_published_contract_matches_the_code():
    for name, columns in PUBLISHED.items():
        published = json.loads((SCHEMAS / f"{name}.json").read_text())
        assert published == contract_json(columns), (
            f"schemas/{name}.json differs from eos_audit/schemas.py; regenerate it with "
            "`python -m eos_audit.schemas schemas/` if the change is intended"
        )


def test_no_stray_contract_files():
    assert {p.stem for p in SCHEMAS.glob("*.json")} == set(PUBLISHED)


def test_record_batch_contract_is_the_issue_table():
    expected = [
        ("topic", "string", False), ("partition", "int", False), ("base_offset", "bigint", False),
        ("last_offset", "bigint", False), ("producer_id", "bigint", False),
        ("producer_epoch", "int", False), ("base_sequence", "int", False),
        ("last_sequence", "int", True), ("record_count", "int", True),
        ("is_transactional", "boolean", False), ("is_control", "boolean", False),
        ("control_type", "string", True), ("coordinator_epoch", "int", True),
        ("partition_leader_epoch", "int", True), ("magic", "int", True),
        ("max_timestamp", "bigint", True), ("crc_valid", "boolean", True),
        ("source", "string", True),
    ]
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in RECORD_BATCH] == expected
