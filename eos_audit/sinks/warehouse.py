"""Checks on the warehouse that run before anything is read: a bad one costs seconds, not an audit.

A URI (s3a://, abfss://, dbfs:) cannot be checked from the driver and is left to the writer.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from pathlib import Path

from eos_audit.errors import SinkError


def _is_uri(path: str) -> bool:
    return "://" in path or path.startswith("dbfs:")


def _inside(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def check_warehouse(warehouse: str, inputs: Iterable[str]) -> None:
    """Refuse a warehouse that cannot be written or that lies inside an input directory.

    Args:
        warehouse: the `--warehouse` directory (or the staging area in catalog mode).
        inputs: every input path of the run.

    Raises:
        SinkError: the warehouse is a file, cannot be created or written, or is inside (or is) an
            input directory: a later run would read its own output as input.

    """
    if _is_uri(warehouse):
        return
    target = Path(warehouse).expanduser().resolve()
    for path in inputs:
        if _is_uri(path):
            continue
        source = Path(path).expanduser().resolve()
        if source.is_dir() and _inside(target, source):
            raise SinkError(
                f"--warehouse {warehouse} is inside the input directory {path}: a later run would "
                "read the audit's own tables as input; write the warehouse somewhere else"
            )
    if target.exists() and not target.is_dir():
        raise SinkError(f"--warehouse {warehouse} is a file, not a directory; pass a directory")
    try:
        target.mkdir(parents=True, exist_ok=True)
        # os.access is not enough (read-only mounts, ACLs): create and remove a file.
        probe = target / f".eos-audit-write-check-{uuid.uuid4().hex}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise SinkError(
            f"--warehouse {warehouse} is not writable ({exc.strerror or exc}); pass a directory "
            "this user can write"
        ) from exc
