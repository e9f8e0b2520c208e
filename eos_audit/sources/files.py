"""Former home of the tabular record-batch readers, folded into the one contract reader.

The readers now live in `eos_audit.sources.record_batches` (the record-batch contract),
`eos_audit.sources.contract_reader` (Parquet, JSON lines, CSV and Delta for every contract) and
`eos_audit.sources.formats` (the registry of input formats). These names stay importable for
code outside the package's sources (the benchmark, the Databricks notebook, the report) until
it imports them from there.
"""

from __future__ import annotations

from eos_audit.sources.contract_reader import read_delta
from eos_audit.sources.formats import detect_format
from eos_audit.sources.record_batches import FORMATS as TABULAR_FORMATS
from eos_audit.sources.record_batches import read_tabular

__all__ = ["TABULAR_FORMATS", "detect_format", "read_delta", "read_tabular"]
