"""A sample of the seeds' and the warehouse's fuzz corpus (issue 27), small enough for every run.

`bench/fuzz_corpus.py --corpus trust` runs the same checks over 10,000+ inputs each; the
invariants are in `tests/fuzz/trust_corpus.py`.
"""

import random
from pathlib import Path

import pytest

from tests.fuzz import trust_corpus


@pytest.mark.parametrize("seed", range(3))
def test_damaged_tables_seed_files_and_schemas(seed):
    rng = random.Random(seed)
    for number in range(50):
        kind, check = trust_corpus.generate(random.Random(rng.random() + number))
        assert check() == [], (kind, seed, number)


def test_a_cut_latest_commit_and_a_cut_data_file_are_refused(tmp_path):
    """The two damages the corpus draws most, once each by hand: refused, not passed."""
    import shutil

    from deltalake import DeltaTable

    from eos_audit.sinks.warehouse import DamagedTableError, check_table

    for damage in ("commit", "file"):
        root = tmp_path / damage
        shutil.copytree(trust_corpus.template_table(), root)
        # A data file of the table's latest version: a file an older commit removed is no longer
        # the table's, and its glob order is the file system's.
        target = (
            max((root / "_delta_log").glob("*.json"))
            if damage == "commit"
            else Path(DeltaTable(str(root)).file_uris()[0])
        )
        target.write_bytes(target.read_bytes()[:-10])
        with pytest.raises(DamagedTableError, match=target.name):
            check_table(str(root), "warehouse table")


def test_random_seed_values_agree_with_kafkas_ranges(spark):
    assert trust_corpus.check_seed_values(spark, random.Random(5), 2_000) == []


def test_random_seed_json_lines_are_each_a_seed_or_quarantined(spark):
    assert trust_corpus.check_seed_json(spark, random.Random(6), 300) == []


def test_a_seed_file_of_binary_garbage_is_quarantined_line_by_line(spark, tmp_path):
    from eos_audit.sources.tabular.producer_state import check_seeds, read_seed_files

    path = tmp_path / "state.json"
    path.write_bytes(random.Random(8).randbytes(3000).replace(b"\n", b"\xff") + b"\n\x00\x81{\n")
    read = check_seeds(read_seed_files(spark, str(path), "json"))
    assert read.seeds.count() == 0
    reasons = [r["reason"] for r in read.problems.collect()]
    assert len(reasons) == 2 and all(reasons), reasons
