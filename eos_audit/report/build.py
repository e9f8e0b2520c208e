"""Writing the report of a run next to its tables."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from pyspark.sql import SparkSession

from eos_audit.errors import ConfigError, SinkError
from eos_audit.report.data import collect_report_data
from eos_audit.report.limits import ReportLimits
from eos_audit.report.overview import RunOverview, build_overview, query_overview
from eos_audit.report.page import render_report
from eos_audit.report.tables import TableLocation, resolve_run_id, run_tables
from eos_audit.sources.files import filesystems as fsys

log = logging.getLogger(__name__)


def report_path(warehouse: str | Path, run_id: str) -> Path | str:
    """Where a run's report goes by default: `<warehouse>/reports/<run_id>.html`.

    A local path, or on an object store (s3://, s3a://, gs://, abfss://...) the object's URI,
    written there through pyarrow's filesystems as the tables are by delta-rs.

    Raises:
        ConfigError: the warehouse is a URI only Spark's connectors know (dbfs:...): give
            `output` (a local, DBFS /dbfs/... or /Volumes/... path) instead.
    """
    text = str(warehouse)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)
    if text.startswith("file:"):
        text = re.sub(r"^file:/*", "/", text)
    elif fsys.is_remote(text):
        return fsys.join(text, "reports", f"{safe}.html")
    elif fsys.is_uri(text):
        raise ConfigError(
            f"cannot write the report under {text}: it is not a local path; pass an output "
            "path (on Databricks a /Volumes/... or /dbfs/... path)"
        )
    return Path(text) / "reports" / f"{safe}.html"


def write_report(
    spark: SparkSession,
    warehouse: str | Path,
    run_id: str | None = None,
    output: Path | None = None,
    *,
    catalog_schema: str = "",
    limits: ReportLimits | None = None,
) -> Path | str:
    """Write one self-contained HTML report of a run and return its path.

    Args:
        spark: the session (the tables are read on its executors with bounded queries).
        warehouse: the `--warehouse` of the run: its tables are `<warehouse>/<table>` unless
            `catalog_schema` is given; the report goes to `<warehouse>/reports/<run_id>.html`.
        run_id: the run; default: the latest finished run.
        output: where to write the report instead.
        catalog_schema: read the tables from this catalog schema (Databricks).
        limits: how much the report shows (default `ReportLimits()`).

    Returns:
        The path of the written report (the object's URI on an object store).

    Raises:
        InputNotFoundError: no such run, or no finished run.
        ConfigError: no place to write the report (see `report_path`).
        SinkError: the report cannot be written there (permission, a full disk).
    """
    where = TableLocation(str(warehouse), catalog_schema)
    run_id = resolve_run_id(spark, where, run_id)
    path = Path(output) if output is not None else report_path(warehouse, run_id)
    html = render_report(collect_report_data(spark, where, run_id, limits))
    try:
        if isinstance(path, str):  # an object: a PUT shows it whole or not at all
            fsys.write_bytes(path, html.encode("utf-8"))
        else:
            # Written whole, then renamed: a reader never sees half a report.
            partial = path.with_name(path.name + ".partial")
            path.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(html, encoding="utf-8")
            partial.replace(path)
    except OSError as exc:  # a warehouse the user may read but not write, a full disk
        hint = "" if output is not None else "; pass --output FILE to write it elsewhere"
        first = (str(exc.strerror or exc).strip().splitlines() or [type(exc).__name__])[0]
        raise SinkError(f"cannot write the report to {path}: {first}{hint}") from exc
    log.info("run %s: report written to %s (%d kB)", run_id, path, len(html) // 1024)
    return path


def run_overview(
    spark: SparkSession,
    warehouse: str | Path,
    run_id: str | None = None,
    *,
    catalog_schema: str = "",
) -> RunOverview:
    """A recorded run's status, counts per severity and reconciliation checks (a few rows read).

    What a scheduler's last step needs to decide whether the night failed, without the report.

    Args:
        spark: the session.
        warehouse: the run's `--warehouse` (its tables, unless `catalog_schema` is given).
        run_id: the run; default: the latest finished run.
        catalog_schema: read the tables from this catalog schema (Databricks).

    Raises:
        InputNotFoundError: no such run, or no finished run.
    """
    where = TableLocation(str(warehouse), catalog_schema)
    run_id = resolve_run_id(spark, where, run_id)
    limits = ReportLimits()
    return build_overview(query_overview(run_tables(spark, where, run_id), limits), run_id)
