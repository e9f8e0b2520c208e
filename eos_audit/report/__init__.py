"""The HTML report of an audit run: `write_report(spark, warehouse)` (see docs/report.md)."""

from eos_audit.report.build import report_path, run_overview, write_report
from eos_audit.report.limits import ReportLimits

__all__ = ["ReportLimits", "report_path", "run_overview", "write_report"]
