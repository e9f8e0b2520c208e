"""Checks on the warehouse that run before anything is read: a bad one costs seconds, not an audit.

A URI (s3a://, abfss://, dbfs:) cannot be checked from the driver and is left to the writer.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from pathlib import Path

from eos_audit.errors import SinkError


def _is_uri(path: str) -> bool:
    return "://" in path or path.startswith("dbfs:")


def _inside(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def check_warehouse(warehouse: str, inputs: Iterable[str], *, create: bool = True) -> None:
    """Refuse a warehouse that cannot be written or that lies inside an input directory.

    Args:
        warehouse: the `--warehouse` directory (or the staging area in catalog mode).
        inputs: every input path of the run.
        create: create the directory and prove it writable by writing a file in it; without,
            only what can be seen without writing is checked (the CLI's check before Spark).

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
    if not create:
        existing = next(p for p in (target, *target.parents) if p.exists())
        if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            raise SinkError(
                f"--warehouse {warehouse} is not writable ({existing} cannot be written); pass a "
                "directory this user can write"
            )
        return
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
