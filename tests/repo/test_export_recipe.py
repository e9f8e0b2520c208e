"""docs/exporting.md's recipe, `scripts/export-log-dir.sh`, on a log directory's layout.

The real brokers' exports the suite audits are all made by it (`tests/kafka/cluster.py`); here its
choices: what is copied, what is left, which topics.
"""

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "export-log-dir.sh"


def _log_dir(root: Path) -> Path:
    log_dir = root / "data"
    files = {
        "meta.properties": "node.id=1\n",
        "bootstrap.checkpoint": "x",
        "log-start-offset-checkpoint": "0\n1\norders 0 0\n",
        "replication-offset-checkpoint": "0\n1\norders 0 5\n",
        "recovery-point-offset-checkpoint": "0\n1\norders 0 5\n",
        "orders-0/00000000000000000000.log": "batches",
        "orders-0/00000000000000000000.index": "",
        "orders-0/00000000000000000005.snapshot": "snapshot",
        "orders-0/leader-epoch-checkpoint": "0\n1\n0 0\n",
        "orders-12/00000000000000000000.log": "batches",
        "orders-1.0c3e4b5f6a7d8e9f-delete/00000000000000000000.log": "deleted topic",
        "orders-2.0c3e4b5f6a7d8e9f-future/00000000000000000000.log": "moving",
        "payments-0/00000000000000000000.log": "batches",
        "__transaction_state-0/00000000000000000000.log": "coordinator",
    }
    for name, text in files.items():
        (log_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (log_dir / name).write_text(text)
    return log_dir


def _export(log_dir: Path, export: Path, *topics: str) -> set[str]:
    subprocess.run([str(SCRIPT), str(log_dir), str(export), "1", *topics], check=True)
    return {str(p.relative_to(export)) for p in export.rglob("*") if p.is_file()}


def test_checkpoints_and_partition_folders_of_every_topic(tmp_path):
    copied = _export(_log_dir(tmp_path), tmp_path / "export")
    assert copied == {
        "1/log-start-offset-checkpoint",
        "1/replication-offset-checkpoint",
        "1/recovery-point-offset-checkpoint",
        "1/orders-0/00000000000000000000.log",
        "1/orders-0/00000000000000000000.index",
        "1/orders-0/00000000000000000005.snapshot",
        "1/orders-0/leader-epoch-checkpoint",
        "1/orders-12/00000000000000000000.log",
        "1/payments-0/00000000000000000000.log",
        "1/__transaction_state-0/00000000000000000000.log",
    }


def test_only_the_topics_named(tmp_path):
    copied = _export(_log_dir(tmp_path), tmp_path / "export", "orders")
    folders = {Path(name).parent.name for name in copied if name.count("/") == 2}
    assert folders == {"orders-0", "orders-12"}


def test_without_its_arguments_it_says_how_to_call_it(tmp_path):
    done = subprocess.run([str(SCRIPT), str(tmp_path)], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "usage:" in done.stderr
    missing = subprocess.run(
        [str(SCRIPT), str(tmp_path / "none"), str(tmp_path / "x"), "1"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert missing.returncode == 2 and "is not a directory" in missing.stderr
