"""eos-audit: replay Kafka's idempotent/transactional producer validation over exported logs.

The package is in layers, lowest first. A module imports from its own layer and the layers below
it, never from one above, at the top of the file, inside a function or under TYPE_CHECKING alike
(tests/test_layers.py reads this list and checks every import against it):

1. base: `errors`, `schemas`, `sql_text`, `instants`, `findings`, `config`, `session`,
   `progress`, `python_workers`, `python_daemon`, `package_data`, `rules_doc`: the vocabulary
   (finding types, contracts, configuration) and the Spark session every layer shares.
2. files: `sources.files`: paths, file systems and the file reading everything else uses.
3. replay: `replay`: the replay kernel, Kafka's rules over replay rows; it knows no input format
   and no table (the segment reader compiles with its `kernel_cache` too).
4. tables: `sinks`: the warehouse's tables, written and read back (a Delta input is read by the
   same reader), the finding rows and the run's own record.
5. readers: `sources`: every input read into the canonical rows, and the evidence beside them.
6. evidence rules: `evidence_rules`, `processing`: the rules over the clients' acknowledgements
   and ListOffsets answers, and the processing audit over the coordinators' records.
7. audit: `audit`: the run's own steps, in the order of one run.
8. report: `report`: the HTML report of what runs wrote.
9. entry points: `cli`, `__main__`, `options`, `demo`, `score`, `generate`: the commands.

A module belongs to the layer of the longest name above that it starts with (`sources.files.x`
is in files, `sources.kafka.x` in readers); the package itself (`__version__`) is base.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("eos-audit")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
